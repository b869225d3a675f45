"""Voting in Python code: `Ensemble(...).decide(prompt)` and the `@vote` decorator.

    from ensemble import Ensemble
    ens = Ensemble(model="openai/gpt-4o-mini", temperature=0.5, n=5, choices=["L", "R"])
    d = ens.decide("...")          # or: await ens.adecide("...")
    d.decision, d.votes, d.margin

The core is async (`adecide`, `adecide_many`); `decide` and `decide_many` are thin wrappers that
work inside and outside a running event loop (Jupyter included).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .aggregators import Vote, get_aggregator
from .errors import InputError
from .sampling.parsing import choice_parser, extract_answer
from .sampling.types import Message, Sample, SampleRequest, SamplingParams, as_messages

__all__ = ["Decision", "Ensemble", "vote"]

Prompt = str | Sequence[Message]


@dataclass(frozen=True)
class Decision:
    """The ensemble's decision on one prompt, with its votes and every sample behind it."""

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


class Ensemble:
    """Draw n samples of a prompt at a fixed temperature and aggregate their answers.

    model:        a litellm model string (openai/gpt-4o-mini, anthropic/..., ollama/...), "local"
                  or "local/<path.gguf>" for the embedded llama.cpp model.
    choices:      the allowed answers; the default parser then normalises replies to them
                  (the paper's <answer>X</answer> format with fallbacks).
    aggregator:   plurality (default), majority, random-follow, weighted, robust (needs `lam`).
    tie:          "random" (seeded by `seed`) — never list order.
    invalid:      "ignore" | "abstain" | "fail" for unparseable answers.
    store:        a SQLite path to keep every sample (resumable, never paid twice); None keeps none.
    Other keyword arguments (top_p, max_tokens, seed, stop, logprobs, ...) are sampling
    parameters; unknown ones are passed to the provider.
    """

    def __init__(self, model: str, *, temperature: float = 0.7, n: int = 5,
                 aggregator: str = "plurality", choices: Sequence[str] | None = None,
                 parser: Callable[[str], str | None] | None = None, tie: str = "random",
                 invalid: str = "ignore", seed: int | None = None, lam: float | None = None,
                 api_base: str | None = None, api_key: str | None = None, timeout: float = 60.0,
                 max_concurrency: int = 16, rpm: float | None = None, max_attempts: int = 6,
                 max_retry_time: float = 300.0, store: Any = None, system: str | None = None,
                 **sampling: Any) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"n must be an integer >= 1, got {n!r}")
        from .qr import _validate_temperature

        self.temperature = _validate_temperature(temperature)
        self.model = model
        self.n = n
        self.choices = tuple(choices) if choices is not None else None
        self.parser = parser or (choice_parser(self.choices) if self.choices else extract_answer)
        opts: dict[str, Any] = {"tie": tie, "invalid": invalid, "rng": seed}
        if aggregator == "robust":
            opts["lam"] = lam
        self.aggregator = get_aggregator(aggregator, **opts)
        self.aggregator_name = aggregator
        self.system = system
        extra = {k: v for k, v in sampling.items() if k not in _PARAM_FIELDS}
        known = {k: v for k, v in sampling.items() if k in _PARAM_FIELDS}
        self.params = SamplingParams.make(self.temperature, extra=extra, **known)
        self._sampler_kw = dict(api_base=api_base, api_key=api_key, timeout=timeout,
                                max_concurrency=max_concurrency, rpm=rpm,
                                max_attempts=max_attempts, max_retry_time=max_retry_time,
                                store=store)

    def __repr__(self) -> str:
        return (f"Ensemble(model={self.model!r}, temperature={self.temperature}, n={self.n}, "
                f"aggregator={self.aggregator_name!r})")

    def _request(self, prompt: Prompt) -> SampleRequest:
        messages = as_messages(prompt)
        if self.system:
            messages = ({"role": "system", "content": self.system},) + messages
        return SampleRequest(messages, self.params, self.n)

    def _decide(self, samples: list[Sample]) -> Decision:
        answers = [s.answer for s in samples]
        weights = None
        if self.aggregator_name == "weighted":
            weights = [_confidence(s) for s in samples]
        v: Vote = self.aggregator(answers, choices=self.choices, weights=weights)
        costs = [s.cost_usd for s in samples]
        return Decision(
            decision=v.decision, votes=v.counts, samples=tuple(samples), margin=v.margin,
            n_invalid=v.n_invalid, tie=v.tie, aggregator=v.rule, credit=v.credit,
            cost_usd=None if any(c is None for c in costs) else float(sum(costs)),  # type: ignore
            prompt_tokens=sum(s.prompt_tokens or 0 for s in samples),
            completion_tokens=sum(s.completion_tokens or 0 for s in samples))

    async def adecide_many(self, prompts: Sequence[Prompt]) -> list[Decision]:
        """Decide many prompts concurrently through one sampler."""
        from .sampling.sampler import Sampler

        async with Sampler(self.model, **self._sampler_kw) as sampler:
            rows = await sampler.sample([self._request(p) for p in prompts], parser=self.parser)
        return [self._decide(r) for r in rows]

    async def adecide(self, prompt: Prompt) -> Decision:
        return (await self.adecide_many([prompt]))[0]

    def decide(self, prompt: Prompt) -> Decision:
        from ._sync import run_sync

        return run_sync(self.adecide(prompt))

    def decide_many(self, prompts: Sequence[Prompt]) -> list[Decision]:
        from ._sync import run_sync

        return run_sync(self.adecide_many(prompts))


_PARAM_FIELDS = {"top_p", "max_tokens", "seed", "stop", "logprobs", "top_logprobs"}


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


_ = asyncio
