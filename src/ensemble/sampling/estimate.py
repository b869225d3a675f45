"""A dry run: what a run would request and cost, without sending anything
(`Sampler.estimate`, `ensemble eval --dry-run`), and the price bound it and `--max-cost`'s check
ask of the provider."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..providers.base import Provider
from .online import chars_estimate
from .results import RunEstimate
from .run import contiguous
from .store import SampleStore
from .types import SampleRequest

__all__ = ["estimate_run", "price_bound"]


def estimate_run(requests: Sequence[SampleRequest], *, key_of: Callable[[SampleRequest], str],
                 store: SampleStore | None, per_request: int, provider: Provider, model: str,
                 price_per_1k: tuple[float, float] | None) -> RunEstimate:
    """What a run of `requests` would request, and cost, without sending anything.

    Reads the store for what is there (None: nothing counts as stored, as with `refresh`);
    counts the requests the missing samples take (`per_request` samples each: the provider's
    `n` where it is known to work, else one); counts prompt tokens with the provider's
    tokenizer (~4 characters a token where it has none; `prompt_tokens_by` says which),
    bounds completion tokens by `max_tokens`; prices both with the provider's prices (None:
    unknown, with why).
    """
    stored = missing = n_requests = 0
    prompt_tokens = 0
    counted = guessed = False  # by the provider's tokenizer; at ~4 characters a token
    completion_max: int | None = 0
    for req in requests:
        have = store.get(key_of(req), range(req.k)) if store is not None else {}
        miss = [i for i in range(req.k) if i not in have]
        stored += len(have)
        missing += len(miss)
        reqs = sum(-(-len(run) // per_request) for run in contiguous(miss))
        n_requests += reqs
        if reqs:
            by_tokenizer = provider.count_tokens(req.messages)
            counted, guessed = counted or by_tokenizer is not None, guessed or by_tokenizer is None
            prompt_tokens += reqs * (by_tokenizer if by_tokenizer is not None
                                     else chars_estimate(req.messages))
        if completion_max is not None:
            completion_max = (None if req.params.max_tokens is None
                              else completion_max + len(miss) * req.params.max_tokens)
    cost, why = price_bound(provider, model, price_per_1k, prompt_tokens, completion_max)
    return RunEstimate(samples_stored=stored, samples_missing=missing, requests=n_requests,
                       prompt_tokens=prompt_tokens, completion_tokens_max=completion_max,
                       cost_usd_max=cost, price=why,
                       prompt_tokens_by=counted_by(provider, counted=counted, guessed=guessed))


def counted_by(provider: Provider, *, counted: bool, guessed: bool) -> str:
    """Which counter counted a dry run's prompt tokens, in words."""
    tokenizer = provider.capabilities.tokenizer or "the provider's tokenizer"
    if counted and guessed:
        return f"{tokenizer}, ~4 characters a token for prompts it cannot count"
    if guessed:
        return "~4 characters a token (the provider has no tokenizer for them)"
    return tokenizer if counted else "none counted"


def price_bound(provider: Provider, model: str, per_1k: tuple[float, float] | None, prompt: int,
                completion_max: int | None) -> tuple[float | None, str]:
    """At most what a run costs, asked of the provider, and where the price comes from."""
    pin = provider.price(1_000_000, 0)
    pout = provider.price(0, 1_000_000)
    if pin is None or pout is None or not (pin or pout):
        return None, (f"unknown: the provider has no price for {model} (litellm's price table "
                      "has none); give one with --price-per-1k-tokens IN,OUT")
    pin, pout = pin / 1e6, pout / 1e6
    src = (f"--price-per-1k-tokens {per_1k[0]:g},{per_1k[1]:g}" if per_1k is not None
           else f"the provider's prices ({pin * 1e6:g} / {pout * 1e6:g} USD per 1M tokens, "
                "litellm's price table)")
    if completion_max is None:
        return None, f"{src}; completion tokens unbounded (no --max-tokens)"
    return prompt * pin + completion_max * pout, src
