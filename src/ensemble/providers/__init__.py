"""Providers behind one protocol and a registry: which provider serves a model string, and
what each declares it can do.

    from ensemble.providers import Provider, Capabilities, register_provider, provider_for

Built in: litellm (the default: every provider litellm knows, and any OpenAI-compatible
`api_base`), the embedded llama.cpp model (`local...`), litellm's Router
(`RouterProvider`, from a config file), and the in-process fake (`fake/...`,
`ensemble.testing.FakeExpertProvider`); `providers.builtin` registers them. Concrete providers
are imported only when a model asks for them.
"""

from .base import INDEX_HEADER, Capabilities, Choice, Completion, Provider, provider_of
from .options import ProviderOptions
from .registry import ProviderFactory, provider_for, register_provider, registered_providers
from .retry import RetryPolicy

__all__ = ["INDEX_HEADER", "Capabilities", "Choice", "Completion", "Provider", "ProviderFactory",
           "ProviderOptions", "RetryPolicy", "provider_for", "provider_of", "register_provider",
           "registered_providers"]
