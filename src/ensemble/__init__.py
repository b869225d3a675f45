"""ensemble: LLM ensemble voting under quantal response.

λ is always in the units of ψ_λ(p) = 1/(1+exp(2λ(1−2p))); utility and regret in ±1 units.

The public names below are imported lazily, so `import ensemble` stays fast and never imports
litellm (which is only loaded when a request is actually sent). Type checkers and editors see
them through the `TYPE_CHECKING` imports at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

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
    "SamplingParams": ".providers.params",
    "SampleRequest": ".sampling.types",
    "Sample": ".sampling.types",
    "JobStats": ".sampling.types",
    "extract_answer": ".sampling.parsing",
    "ProviderOptions": ".providers.options",
    "Provider": ".providers.base",
    "Completion": ".providers.base",
    "Choice": ".providers.base",
    "Sampler": ".sampling.sampler",
    "SampleResult": ".sampling.results",
    "SampleFailure": ".sampling.results",
    "SampleStore": ".sampling.store",
    # aggregation and the Python API
    "get_aggregator": ".aggregators",
    "aggregator_names": ".aggregators",
    "aggregator_info": ".aggregators",
    "RuleBase": ".aggregators",
    "RuleInfo": ".rules",
    "register_rule": ".rules",
    "Ensemble": ".api",
    "Decision": ".decision",
    "vote": ".vote",
    "Member": ".members",
    "resolve_members": ".members",
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
    "register_stop_rule": ".stopping",
    "stop_rule_names": ".stopping",
    "prior_from_calibration": ".stopping",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - the `X as X` form marks each name as re-exported
    from .aggregators import (
        RuleBase as RuleBase,
        aggregator_info as aggregator_info,
        aggregator_names as aggregator_names,
        get_aggregator as get_aggregator,
    )
    from .api import (
        Ensemble as Ensemble,
    )
    from .calibration import (
        LambdaFit as LambdaFit,
        fit_lambda as fit_lambda,
    )
    from .decision import (
        Decision as Decision,
    )
    from .errors import (
        AuthenticationError as AuthenticationError,
        BadRequestError as BadRequestError,
        ContentRefusedError as ContentRefusedError,
        DataError as DataError,
        EndpointNotFoundError as EndpointNotFoundError,
        EndpointUnreachable as EndpointUnreachable,
        EnsembleError as EnsembleError,
        InputError as InputError,
        LocalModelError as LocalModelError,
        MalformedResponseError as MalformedResponseError,
        ModelNotFoundError as ModelNotFoundError,
        OverloadedError as OverloadedError,
        ProviderConnectionError as ProviderConnectionError,
        ProviderError as ProviderError,
        ProviderTimeoutError as ProviderTimeoutError,
        RateLimitError as RateLimitError,
        RetryBudgetExceeded as RetryBudgetExceeded,
        RunStopped as RunStopped,
        SamplingFailed as SamplingFailed,
        ServerError as ServerError,
        StoreError as StoreError,
    )
    from .members import (
        Member as Member,
        resolve_members as resolve_members,
    )
    from .profile import (
        CalibrationProfile as CalibrationProfile,
    )
    from .providers.base import (
        Choice as Choice,
        Completion as Completion,
        Provider as Provider,
    )
    from .providers.options import (
        ProviderOptions as ProviderOptions,
    )
    from .providers.params import (
        SamplingParams as SamplingParams,
    )
    from .qr import (
        lam_at_temperature as lam_at_temperature,
        psi as psi,
        psi_inverse as psi_inverse,
        temperature_for_lam as temperature_for_lam,
    )
    from .rules import RuleInfo as RuleInfo, register_rule as register_rule
    from .sampling.parsing import (
        extract_answer as extract_answer,
    )
    from .sampling.results import (
        SampleFailure as SampleFailure,
        SampleResult as SampleResult,
    )
    from .sampling.sampler import (
        Sampler as Sampler,
    )
    from .sampling.store import (
        SampleStore as SampleStore,
    )
    from .sampling.types import (
        JobStats as JobStats,
        Sample as Sample,
        SampleRequest as SampleRequest,
    )
    from .stopping import (
        BayesRule as BayesRule,
        BetaPrior as BetaPrior,
        BetaRule as BetaRule,
        FixedRule as FixedRule,
        GridPrior as GridPrior,
        StoppingRule as StoppingRule,
        StopSpec as StopSpec,
        expected_performance as expected_performance,
        fit_prior as fit_prior,
        get_stopping_rule as get_stopping_rule,
        prior_from_calibration as prior_from_calibration,
        register_stop_rule as register_stop_rule,
        stop_rule_names as stop_rule_names,
    )
    from .vote import (
        vote as vote,
    )
