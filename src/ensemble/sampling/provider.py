"""The provider seam lives in `ensemble.providers`; its names are re-exported here for code
that imports them from their old home."""

from ..providers.base import (
    INDEX_HEADER,
    Capabilities,
    Choice,
    Completion,
    Provider,
    is_local_model,
    provider_of,
)
from ..providers.registry import provider_for as make_provider

__all__ = ["INDEX_HEADER", "Capabilities", "Choice", "Completion", "Provider", "is_local_model",
           "make_provider", "provider_of"]
