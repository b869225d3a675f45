"""The litellm provider lives in `ensemble.providers.litellm` and the error translation in
`ensemble.providers.translate`; their names are re-exported here, where tests and users
import them."""

from ..providers.litellm import (
    LOCAL_PLACEHOLDER_KEY,
    LiteLLMProvider,
    litellm,
    pool_capacity,
)
from ..providers.translate import NUnsupported, env_key_name, is_loopback, translate_error

__all__ = ["LOCAL_PLACEHOLDER_KEY", "LiteLLMProvider", "NUnsupported", "env_key_name",
           "is_loopback", "litellm", "pool_capacity", "translate_error"]
