"""The provider seam: the one small async protocol the sampler talks to.

    class Provider(Protocol):
        model: str                       # as the user wrote it (part of the store key)
        endpoint: tuple[str, str, str]   # (provider, api_base, key fingerprint): its limits
        identity: str | None             # where samples come from (part of the store key)
        async def start(self) -> None
        async def complete(self, messages, params, *, n, headers, timeout) -> Completion
        async def aclose(self) -> None

Four implementations: `OpenAIProvider` (`ensemble.sampling.openai_sdk`: `openai/...` models
through the official SDK, the fast path), `LiteLLMProvider` (`ensemble.sampling.client`: every
provider litellm knows, the default for the rest), `LocalProvider` (`ensemble.local`: the
embedded llama.cpp server, kept up until its owner closes it or the process exits) and
`FakeExpertProvider` (`ensemble.testing`: a planted expert in-process, no port, for users' unit
tests as for ours). `complete` raises only
`ensemble.errors.ProviderError` subclasses, already translated; retries, limits and storage
are the sampler's business, not the provider's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from .options import ProviderOptions
from .types import Choice, Completion, SamplingParams, provider_of

__all__ = ["Choice", "Completion", "Provider", "is_local_model", "make_provider", "provider_of"]


@runtime_checkable
class Provider(Protocol):
    """What the sampler needs from a provider. See the module docstring."""

    model: str
    endpoint: tuple[str, str, str]
    # Where the samples come from, part of the store key: the normalised api_base, a local
    # model's weights checksum; None for the provider's own public endpoint (see request_key)
    identity: str | None
    api_base: str | None
    supports_n: bool | None  # None: unknown, find out; False: one request per sample
    # optional: `max_concurrency: int`, requests the provider can serve at once (a cap on the
    # endpoint's limiter, e.g. 1 for the local llama.cpp server)

    async def start(self) -> None:
        """Get ready (start a local server, ...). Idempotent."""
        ...

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int, headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        """One request for `n` choices; raises a translated `ProviderError` on failure."""
        ...

    async def aclose(self) -> None:
        """Release what `start` acquired. Idempotent."""
        ...


def is_local_model(model: str) -> bool:
    """`local`, `local/<path>` or `local:<path>`: the embedded llama.cpp model."""
    return model == "local" or model.startswith(("local/", "local:"))


def make_provider(model: str, options: ProviderOptions) -> Provider:
    """The provider for a model string: the embedded local model, the official openai SDK for
    `openai/...` (unless ENSEMBLE_PROVIDER=litellm), or litellm for everything else."""
    if is_local_model(model):
        from ..local import LocalProvider

        return LocalProvider(model, options)
    from .openai_sdk import OpenAIProvider, serves

    if serves(model):
        return OpenAIProvider(model, options)
    from .client import LiteLLMProvider

    return LiteLLMProvider(model, options)
