"""Providers behind one protocol and a registry: which provider serves a model string, and
what each declares it can do.

    from ensemble.providers import Provider, Capabilities, register_provider, provider_for

Built in: litellm (the default: every provider litellm knows, and any OpenAI-compatible
`api_base`), the embedded llama.cpp model (`local...`), litellm's Router
(`RouterProvider`, from a config file), and the in-process fake (`fake/...`,
`ensemble.testing.FakeExpertProvider`); `providers.builtin` registers them. Concrete providers
are imported only when a model asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

# re-exported lazily, as `ensemble` does: importing one module of the package (the options'
# declaration, which every command's flags are made from when `ensemble --help` runs) does
# not import the others (the registry, the retry policy, asyncio)
_EXPORTS = {
    "INDEX_HEADER": ".base", "Capabilities": ".base", "Choice": ".base",
    "Completion": ".base", "Provider": ".base", "provider_of": ".base",
    "ProviderOptions": ".options",
    "ProviderFactory": ".registry", "provider_for": ".registry",
    "register_provider": ".registry", "registered_providers": ".registry",
    "RetryPolicy": ".retry",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - the `X as X` form marks each name as re-exported
    from .base import (
        INDEX_HEADER as INDEX_HEADER,
        Capabilities as Capabilities,
        Choice as Choice,
        Completion as Completion,
        Provider as Provider,
        provider_of as provider_of,
    )
    from .options import ProviderOptions as ProviderOptions
    from .registry import (
        ProviderFactory as ProviderFactory,
        provider_for as provider_for,
        register_provider as register_provider,
        registered_providers as registered_providers,
    )
    from .retry import RetryPolicy as RetryPolicy
