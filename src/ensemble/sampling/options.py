"""`ProviderOptions` lives in `ensemble.providers.options`; re-exported here, where users and
the evals import it."""

from ..providers.options import ProviderKwargs, ProviderOptions, check_keywords, validate_api_base

__all__ = ["ProviderKwargs", "ProviderOptions", "check_keywords", "validate_api_base"]
