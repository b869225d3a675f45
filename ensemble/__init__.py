"""ensemble: LLM ensemble voting under quantal response.

λ is always in the units of ψ_λ(p) = 1/(1+exp(2λ(1−2p))); utility and regret in ±1 units.

The public names below are imported lazily, so `import ensemble` stays fast and never imports
litellm (which is only loaded when a request is actually sent).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # errors
    "EnsembleError": ".errors",
    "InputError": ".errors",
    "DataError": ".errors",
    "ProviderError": ".errors",
    "AuthenticationError": ".errors",
    "ModelNotFoundError": ".errors",
    "BadRequestError": ".errors",
    "RateLimitError": ".errors",
    "ServerError": ".errors",
    "ProviderTimeoutError": ".errors",
    "ProviderConnectionError": ".errors",
    "MalformedResponseError": ".errors",
    "RetryBudgetExceeded": ".errors",
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
    "Sampler": ".sampling.sampler",
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
    # adaptive stopping (ensemble.stopping)
    "StoppingRule": ".stopping",
    "StopSpec": ".stopping",
    "FixedRule": ".stopping",
    "BetaRule": ".stopping",
    "BayesRule": ".stopping",
    "BetaPrior": ".stopping",
    "GridPrior": ".stopping",
    "fit_prior": ".stopping",
    "prior_from_calibration": ".stopping",
    "expected_performance": ".stopping",
    "get_stopping_rule": ".stopping",
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
    from .errors import *
    from .qr import lam_at_temperature, psi, psi_inverse, temperature_for_lam  # noqa: F401
    from .sampling.parsing import extract_answer  # noqa: F401
    from .sampling.types import JobStats, Sample, SampleRequest, SamplingParams  # noqa: F401
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
