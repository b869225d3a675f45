"""ensemble: LLM ensemble voting under quantal response.

λ is always in the units of ψ_λ(p) = 1/(1+exp(2λ(1−2p))); utility and regret in ±1 units.

The public names below are imported lazily, so `import ensemble` stays fast and never imports
litellm (which is only loaded when a request is actually sent). Type checkers and editors see
them through the `TYPE_CHECKING` imports at the end.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # errors
    "EnsembleError": ".errors",
    "InputError": ".errors",
    "DataError": ".errors",
    "ProviderError": ".errors",
    "AuthenticationError": ".errors",
    "ModelNotFoundError": ".errors",
    "EndpointNotFoundError": ".errors",
    "EndpointUnreachable": ".errors",
    "BadRequestError": ".errors",
    "ContentRefusedError": ".errors",
    "RateLimitError": ".errors",
    "OverloadedError": ".errors",
    "ServerError": ".errors",
    "ProviderTimeoutError": ".errors",
    "ProviderConnectionError": ".errors",
    "MalformedResponseError": ".errors",
    "RetryBudgetExceeded": ".errors",
    "SamplingFailed": ".errors",
    "RunStopped": ".errors",
    "StoreError": ".errors",
    "LocalModelError": ".errors",
    # quantal response
    "psi": ".qr",
    "psi_inverse": ".qr",
    "lam_at_temperature": ".qr",
    "temperature_for_lam": ".qr",
    # sampling
    "SamplingParams": ".sampling.types",
    "SampleRequest": ".sampling.types",
    "Sample": ".sampling.types",
    "JobStats": ".sampling.types",
    "extract_answer": ".sampling.parsing",
    "ProviderOptions": ".sampling.options",
    "Provider": ".sampling.provider",
    "Completion": ".sampling.provider",
    "Choice": ".sampling.provider",
    "Sampler": ".sampling.sampler",
    "SampleResult": ".sampling.sampler",
    "SampleFailure": ".sampling.sampler",
    "SampleStore": ".sampling.store",
    # aggregation and the Python API
    "get_aggregator": ".aggregators",
    "aggregator_names": ".aggregators",
    "Ensemble": ".api",
    "Decision": ".api",
    "vote": ".api",
    # calibration
    "fit_lambda": ".calibration",
    "LambdaFit": ".calibration",
    "CalibrationProfile": ".profile",
    # adaptive sampling
    "StoppingRule": ".stopping",
    "FixedRule": ".stopping",
    "BetaRule": ".stopping",
    "BayesRule": ".stopping",
    "BetaPrior": ".stopping",
    "GridPrior": ".stopping",
    "StopSpec": ".stopping",
    "expected_performance": ".stopping",
    "fit_prior": ".stopping",
    "get_stopping_rule": ".stopping",
    "prior_from_calibration": ".stopping",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ensemble' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # pragma: no cover
    from .aggregators import (  # noqa: F401
        aggregator_names,
        get_aggregator,
    )
    from .api import (  # noqa: F401
        Decision,
        Ensemble,
        vote,
    )
    from .calibration import (  # noqa: F401
        LambdaFit,
        fit_lambda,
    )
    from .errors import (  # noqa: F401
        AuthenticationError,
        BadRequestError,
        ContentRefusedError,
        DataError,
        EndpointNotFoundError,
        EndpointUnreachable,
        EnsembleError,
        InputError,
        LocalModelError,
        MalformedResponseError,
        ModelNotFoundError,
        OverloadedError,
        ProviderConnectionError,
        ProviderError,
        ProviderTimeoutError,
        RateLimitError,
        RetryBudgetExceeded,
        RunStopped,
        SamplingFailed,
        ServerError,
        StoreError,
    )
    from .profile import (  # noqa: F401
        CalibrationProfile,
    )
    from .qr import (  # noqa: F401
        lam_at_temperature,
        psi,
        psi_inverse,
        temperature_for_lam,
    )
    from .sampling.options import (  # noqa: F401
        ProviderOptions,
    )
    from .sampling.parsing import (  # noqa: F401
        extract_answer,
    )
    from .sampling.provider import (  # noqa: F401
        Choice,
        Completion,
        Provider,
    )
    from .sampling.sampler import (  # noqa: F401
        SampleFailure,
        Sampler,
        SampleResult,
    )
    from .sampling.store import (  # noqa: F401
        SampleStore,
    )
    from .sampling.types import (  # noqa: F401
        JobStats,
        Sample,
        SampleRequest,
        SamplingParams,
    )
    from .stopping import (  # noqa: F401
        BayesRule,
        BetaPrior,
        BetaRule,
        FixedRule,
        GridPrior,
        StoppingRule,
        StopSpec,
        expected_performance,
        fit_prior,
        get_stopping_rule,
        prior_from_calibration,
    )
