"""Voting in Python code: `Ensemble(...).decide(prompt)` and the `@vote` decorator.

    from ensemble import Ensemble
    ens = Ensemble(model="openai/gpt-4o-mini", temperature=0.5, n=5, choices=["L", "R"])
    d = ens.decide("...")          # or: await ens.adecide("...")
    d.decision, d.votes, d.margin

The core is async (`adecide`, `adecide_many`); `decide` and `decide_many` are thin wrappers that
work inside and outside a running event loop (Jupyter included).
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from .aggregators import Vote, get_aggregator
from .errors import EnsembleError, InputError, SamplingFailed
from .sampling.options import ProviderOptions, check_keywords
from .sampling.parsing import choice_parser, extract_answer
from .sampling.provider import Provider, make_provider
from .sampling.types import Message, Sample, SampleRequest, SamplingParams, as_messages

__all__ = ["Decision", "Ensemble", "vote"]

Prompt = str | Sequence[Message]


@dataclass(frozen=True, repr=False)
class Decision:
    """The ensemble's decision on one prompt, with its votes and every sample behind it.

    decision:   the winning answer (None: no valid vote, or an unresolved tie).
    votes:      answer -> count of valid votes.  margin: top count minus the runner-up's.
    samples:    every sample drawn (text, parsed answer, tokens, cost, latency).
    n_invalid:  replies whose answer could not be parsed.  tie: the top was tied.
    aggregator: the rule that decided; credit: answer -> its share of the decision.
    cost_usd:   the samples' cost (None: unknown price).
    """

    decision: str | None
    votes: dict[str, int]
    samples: tuple[Sample, ...]
    margin: int
    n_invalid: int
    tie: bool
    aggregator: str
    credit: dict[str, float]
    cost_usd: float | None
    prompt_tokens: int
    completion_tokens: int

    def __str__(self) -> str:
        votes = ", ".join(f"{k}: {v}" for k, v in sorted(self.votes.items(), key=lambda kv: -kv[1]))
        parts = [votes] if votes else []
        if self.n_invalid:
            parts.append(f"{self.n_invalid} invalid")
        return f"{self.decision} ({'; '.join(parts)})"

    def __repr__(self) -> str:  # short: the samples are in .samples, the whole in to_dict()
        return (f"Decision(decision={self.decision!r}, votes={self.votes!r}, "
                f"n={len(self.samples)}, invalid={self.n_invalid}, tie={self.tie}, "
                f"aggregator={self.aggregator!r}, cost_usd={self.cost_usd!r})")

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON values (samples included)."""
        return {
            "decision": self.decision, "votes": dict(self.votes), "margin": self.margin,
            "n_invalid": self.n_invalid, "tie": self.tie, "aggregator": self.aggregator,
            "credit": dict(self.credit), "cost_usd": self.cost_usd,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "samples": [{"index": s.index, "text": s.text, "answer": s.answer,
                         "valid": s.valid, "finish_reason": s.finish_reason,
                         "completion_tokens": s.completion_tokens, "cost_usd": s.cost_usd,
                         "latency_s": s.latency_s, "cached": s.cached} for s in self.samples],
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """`to_dict()` as JSON text."""
        from .jsonio import dumps

        return dumps(self.to_dict(), indent=indent)


class Ensemble:
    """Draw n samples of a prompt at a fixed temperature and aggregate their answers.

    model:        a litellm model string (openai/gpt-4o-mini, anthropic/..., ollama/...), "local",
                  "local/<path.gguf>" or "local:<path.gguf>" for the embedded llama.cpp model.
    temperature:  the sampling temperature (0: greedy).  n: samples per decision.
    choices:      the allowed answers; the default parser then normalises replies to them
                  (the paper's <answer>X</answer> format with fallbacks).
    aggregator:   plurality (default), majority, random-follow, weighted, robust (needs `lam`).
    tie:          "random" (seeded by `seed`) or "fractional"; never list order.
    invalid:      "ignore" | "abstain" | "fail" for unparseable answers.
    seed:         seeds the tie-breaking (and the robust rule's randomisation); it does not seed
                  the provider's sampling (pass `sampling_seed=` for a provider that has one).
    store:        a SQLite path to keep every sample (resumable, never paid twice); None: none.
    options:      `ProviderOptions`, or its fields as keywords: api_base, api_key, timeout,
                  max_concurrency, rpm, tpm, max_attempts, max_retry_time, max_failures.
                  Limits are per endpoint and process: every Ensemble, Sampler and concurrent
                  `adecide` call on the same endpoint shares them.
    provider:     a provider object to use instead of the model string's (e.g.
                  `ensemble.testing.FakeExpertProvider` in unit tests).
    Sampling parameters: top_p, max_tokens, sampling_seed, stop, logprobs, top_logprobs;
    provider-specific parameters go in `extra_body={...}`. Unknown keywords are an error that
    names the closest known one.

    The Ensemble keeps what it opens (the embedded local model's server, the store) until
    `close()` (or `with Ensemble(...) as ens:`), so repeated `decide` calls reuse them.
    """

    def __init__(self, model: str, *, temperature: float = 0.7, n: int = 5,
                 aggregator: str = "plurality", choices: Sequence[str] | None = None,
                 parser: Callable[[str], str | None] | None = None, tie: str = "random",
                 invalid: str = "ignore", seed: int | None = None, lam: float | None = None,
                 system: str | None = None, store: str | os.PathLike[str] | None = None,
                 options: ProviderOptions | None = None, provider: Provider | None = None,
                 extra_body: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"n must be an integer >= 1, got {n!r}")
        if not isinstance(model, str) or not model.strip():
            raise InputError("model must be a litellm model string such as openai/gpt-4o-mini")
        check_keywords(kwargs, (*ProviderOptions.names(), *_PARAM_FIELDS, *_ENSEMBLE_NAMES),
                       where="Ensemble")
        from .qr import _validate_temperature

        self.temperature = _validate_temperature(temperature)
        self.model = model
        self.n = n
        if choices is not None and (isinstance(choices, str) or len(set(choices)) != len(
                choices) or not all(isinstance(c, str) and c.strip() for c in choices)):
            raise InputError(f"choices must be distinct non-empty strings, got {choices!r}")
        self.choices = tuple(choices) if choices is not None else None
        self.parser = parser or (choice_parser(self.choices) if self.choices else extract_answer)
        opts: dict[str, Any] = {"tie": tie, "invalid": invalid, "rng": seed}
        if aggregator == "robust":
            opts["lam"] = lam
        self.aggregator = get_aggregator(aggregator, **opts)
        self.aggregator_name = aggregator
        self.system = system
        provider_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in ProviderOptions.names()}
        self.options = ProviderOptions.build(options, **provider_kw)
        params = {("seed" if k == "sampling_seed" else k): v for k, v in kwargs.items()}
        self.params = SamplingParams.make(self.temperature,
                                          extra={"extra_body": extra_body} if extra_body else None,
                                          **params)
        self._store_path = store
        self._store: Any = None
        self._provider: Provider | None = provider
        self._own_provider = provider is None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"Ensemble(model={self.model!r}, temperature={self.temperature}, n={self.n}, "
                f"aggregator={self.aggregator_name!r})")

    # -- resources ---------------------------------------------------------------------------
    def _resources(self) -> tuple[Provider, Any]:
        with self._lock:
            if self._provider is None:
                self._provider = make_provider(self.model, self.options)
            if self._store is None and self._store_path is not None:
                from .sampling.store import SampleStore

                self._store = SampleStore(self._store_path)
            return self._provider, self._store

    async def aclose(self) -> None:
        """Stop what the Ensemble started (the local model's server) and close its store."""
        with self._lock:
            provider = self._provider if self._own_provider else None
            store, self._store = self._store, None
            if self._own_provider:
                self._provider = None
        if provider is not None:
            await provider.aclose()
        if store is not None:
            store.close()

    def close(self) -> None:
        """`aclose()` from sync code."""
        from ._sync import run_sync

        run_sync(self.aclose())

    def __enter__(self) -> Ensemble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Ensemble:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- deciding ----------------------------------------------------------------------------
    def _request(self, prompt: Prompt) -> SampleRequest:
        messages = as_messages(prompt)
        if self.system:
            messages = ({"role": "system", "content": self.system},) + messages
        return SampleRequest(messages, self.params, self.n)

    def _decide(self, samples: Sequence[Sample]) -> Decision:
        answers = [s.answer for s in samples]
        weights = None
        if self.aggregator_name == "weighted":
            weights = [_confidence(s) for s in samples]
        v: Vote = self.aggregator(answers, choices=self.choices, weights=weights)
        costs = [s.cost_usd for s in samples]
        cost = None if any(c is None for c in costs) else float(sum(c for c in costs if c))
        return Decision(
            decision=v.decision, votes=v.counts, samples=tuple(samples), margin=v.margin,
            n_invalid=v.n_invalid, tie=v.tie, aggregator=v.rule, credit=v.credit,
            cost_usd=cost, prompt_tokens=sum(s.prompt_tokens or 0 for s in samples),
            completion_tokens=sum(s.completion_tokens or 0 for s in samples))

    @overload
    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: Literal["raise"] = ...) -> list[Decision]: ...

    @overload
    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: Literal["return"]) -> list[Decision | EnsembleError]: ...

    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: str = "raise") -> Sequence[Decision | EnsembleError]:
        """Decide many prompts concurrently (within the endpoint's limits).

        A prompt that fails for good (e.g. refused by the provider) does not stop the others:
        they all finish and are stored. Then `on_error="raise"` raises `SamplingFailed` naming
        the failures; `on_error="return"` puts the error in that prompt's place in the list.
        """
        from .sampling.sampler import Sampler

        if on_error not in ("raise", "return"):
            raise InputError(f"on_error must be 'raise' or 'return', got {on_error!r}")
        if isinstance(prompts, str):
            raise InputError("adecide_many takes a list of prompts; use adecide for one")
        requests = [self._request(p) for p in prompts]
        provider, store = self._resources()
        sampler = Sampler(self.model, options=self.options, provider=provider, store=store)
        async with sampler:
            result = await sampler.run(requests, parser=self.parser)
        if on_error == "raise":
            from .sampling.sampler import raise_for_failures

            raise_for_failures(result, len(requests))
        out: list[Decision | EnsembleError] = []
        for ri, row in enumerate(result.rows):
            if any(s is None for s in row):
                why = next((f.message for f in result.failures if f.request == ri), None)
                out.append(SamplingFailed(why or str(result.stopped), failures=[
                    f for f in result.failures if f.request == ri]))
            else:
                out.append(self._decide(row))  # type: ignore[arg-type]
        return out

    async def adecide(self, prompt: Prompt) -> Decision:
        """Draw n samples of `prompt` and aggregate them (async)."""
        return (await self.adecide_many([prompt]))[0]

    def decide(self, prompt: Prompt) -> Decision:
        """Draw n samples of `prompt` and aggregate them. Works inside a running event loop
        too (Jupyter): the request then runs on a worker thread."""
        from ._sync import run_sync

        return run_sync(self.adecide(prompt))

    def decide_many(self, prompts: Sequence[Prompt]) -> list[Decision]:
        """Decide many prompts concurrently (sync form of `adecide_many`)."""
        from ._sync import run_sync

        return run_sync(self.adecide_many(prompts))


_PARAM_FIELDS = ("top_p", "max_tokens", "sampling_seed", "stop", "logprobs", "top_logprobs")
_ENSEMBLE_NAMES = ("temperature", "n", "aggregator", "choices", "parser", "tie", "invalid", "seed",
                   "lam", "system", "store", "options", "provider", "extra_body")


def _confidence(s: Sample) -> float:
    """exp(mean token logprob) of a sample: a confidence weight in (0, 1]; 1 when unknown."""
    import math

    try:
        toks = s.logprobs["content"]  # type: ignore[index]
        lps = [t["logprob"] for t in toks]
        return math.exp(sum(lps) / len(lps)) if lps else 1.0
    except (TypeError, KeyError):
        return 1.0


def vote(model: str, **options: Any) -> Callable[[Callable[..., Prompt]], Any]:
    """Decorator: the function builds a prompt; calling it returns the ensemble's Decision.

        @vote(model="openai/gpt-4o-mini", temperature=0.5, n=5, choices=["positive", "negative"])
        def sentiment(text): return f"Is this review positive or negative? {text}"

        sentiment("Great film!").decision
        await sentiment.adecide("Great film!")      # async variant

    An `async def` prompt builder gives an async function returning the Decision.
    """
    ens = Ensemble(model, **options)

    def deco(fn: Callable[..., Any]) -> Any:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Decision:
                return await ens.adecide(await fn(*args, **kwargs))

            async_wrapper.ensemble = ens  # type: ignore[attr-defined]
            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Decision:
            return ens.decide(fn(*args, **kwargs))

        async def adecide(*args: Any, **kwargs: Any) -> Decision:
            return await ens.adecide(fn(*args, **kwargs))

        wrapper.adecide = adecide  # type: ignore[attr-defined]
        wrapper.ensemble = ens  # type: ignore[attr-defined]
        return wrapper

    return deco
