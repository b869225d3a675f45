"""The provider seam: the one small async protocol the sampler talks to, and what a provider
declares about itself.

    class Provider(Protocol):
        name: str                        # which provider it is: "openai", "litellm", "local"
        model: str                       # as the user wrote it (part of the store key)
        endpoint: tuple[str, str, str]   # (provider, api_base, key fingerprint): its limits
        identity: str | None             # where samples come from (part of the store key)
        api_base: str | None
        capabilities: Capabilities       # declared, never discovered with getattr
        async def start(self) -> None
        async def complete(self, messages, params, *, n, first_index, headers, timeout)
        def price(self, prompt_tokens, completion_tokens, *, batch=False) -> float | None
        def count_tokens(self, messages) -> int | None
        async def aclose(self) -> None

`complete` raises only `ensemble.errors.ProviderError` subclasses, already translated; retries,
limits and storage are the sampler's business, not the provider's. The first sample index of
a request is the `first_index` argument; a provider that talks HTTP sends it as the
`INDEX_HEADER` header (the simulated server makes draws reproducible with it): the index
travels in this one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .params import SamplingParams

__all__ = ["INDEX_HEADER", "Capabilities", "Choice", "Completion", "Provider", "is_local_model",
           "provider_of"]

INDEX_HEADER = "x-ensemble-sample-index"


@dataclass(frozen=True)
class Choice:
    """One choice of a completion."""

    text: str | None
    finish_reason: str | None
    logprobs: Any = None
    tokens: int | None = None  # its own completion tokens, where the provider knows them
    # logprobs already compact (`ensemble.sampling.logprobs`), as a replay recorded them
    answer_lp: Any = None


@dataclass(frozen=True)
class Completion:
    """A provider's reply to one request (n choices), with usage and cost (None: unknown).
    `recorded`: the reply was recorded earlier and served again (a replay): its usage and cost
    are what it had cost then, and nothing was paid now."""

    choices: tuple[Choice, ...]
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float
    recorded: bool = False


@dataclass(frozen=True)
class Capabilities:
    """What a provider can do, declared by the provider.

    max_concurrency: requests it serves at once, at most (None: no limit of its own; the
                     endpoint's limiter and `max_concurrency` of the run decide), e.g. 1 for
                     the embedded llama.cpp server, which decodes one sequence at a time.
    supports_n:      True: honours the provider's `n`; False: one request per sample; None:
                     unknown, the sampler finds out (and falls back when `n` is rejected or
                     ignored).
    max_n:           the most choices one request may ask for (None: no limit of its own;
                     the sampler's `max_n` applies), e.g. the local server's slots.
    batch_api:       makes the provider's Batch API client (`ensemble.sampling.batch.BatchAPI`)
                     for batch mode, or None: no Batch API. A factory, because making the
                     client checks the model against the provider (and imports its SDK): only
                     batch mode pays for that.
    limit_reason:    what sets `max_concurrency`, in words for the run's notes when it caps
                     the concurrency asked for (None: say nothing).
    logprobs:        True: returns token logprobs when asked; False: cannot (a draw that
                     asks for them is refused before its first request, `refuses`); None:
                     unknown (a reply that comes back without them is refused then).
    top_logprobs:    the most alternatives per token it returns (`top_logprobs=k`; 0: none;
                     None: unknown).
    logprobs_source: where the provider knows it from, in words for the refusal (e.g.
                     "litellm's supported parameters for anthropic").
    tokenizer:       what `count_tokens` counts with, in words for a dry run (e.g. "tiktoken";
                     None: it counts none, and the estimate counts ~4 characters a token).
    """

    max_concurrency: int | None = None
    supports_n: bool | None = None
    max_n: int | None = None
    batch_api: Callable[[], Any] | None = None
    limit_reason: str | None = None  # what caps max_concurrency, said in the run's notes
    logprobs: bool | None = None
    top_logprobs: int | None = None
    logprobs_source: str | None = None
    tokenizer: str | None = None  # what count_tokens counts with, said by a dry run

    def refuses(self, *, top_logprobs: int = 0) -> str | None:
        """Why this provider cannot give a draw token logprobs with `top_logprobs`
        alternatives per token, in words (None: it can, or it is not known)."""
        why = f" ({self.logprobs_source})" if self.logprobs_source else ""
        if self.logprobs is False:
            return f"cannot return token logprobs{why}"
        if top_logprobs and self.top_logprobs is not None and top_logprobs > self.top_logprobs:
            return (f"returns at most {self.top_logprobs} alternatives per token{why}, and "
                    f"{top_logprobs} are asked (top_logprobs)")
        return None


@runtime_checkable
class Provider(Protocol):
    """What the sampler needs from a provider. See the module docstring."""

    # which provider serves the samples ("openai" for the SDK, "litellm", "local", ...):
    # what `Sampler.provider_name` reports and summary.json's `served_by` records
    name: str
    model: str
    endpoint: tuple[str, str, str]
    # Where the samples come from, part of the store key: the normalised api_base, a local
    # model's weights checksum; None for the provider's own public endpoint (see request_key)
    identity: str | None
    api_base: str | None
    capabilities: Capabilities

    async def start(self) -> None:
        """Get ready (start a local server, check the model and key, ...). Idempotent."""
        ...

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, first_index: int = 0,
                       headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        """One request for `n` choices, samples `first_index` .. `first_index + n - 1`;
        raises a translated `ProviderError` on failure."""
        ...

    def price(self, prompt_tokens: int, completion_tokens: int, *,
              batch: bool = False) -> float | None:
        """USD for these tokens (at Batch API rates with `batch`); None: unknown."""
        ...

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        """Prompt tokens of `messages` by the model's tokenizer; None: unknown."""
        ...

    async def aclose(self) -> None:
        """Release what `start` acquired. Idempotent."""
        ...


def provider_of(model: str) -> str:
    """The provider part of a litellm model string ("openai" when there is none)."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def is_local_model(model: str) -> bool:
    """`local`, `local/<path>` or `local:<path>`: the embedded local model."""
    return model == "local" or model.startswith(("local/", "local:"))
