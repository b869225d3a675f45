"""Values that flow through the sampling engine: what to ask, and what came back.

This module is the contract between the sampler and its users (Ensemble, evals, calibration):
add fields with defaults, never change the meaning of existing ones.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "JobStats",
    "Message",
    "Parser",
    "Sample",
    "SampleRequest",
    "SamplingParams",
    "as_messages",
    "request_key",
]

Message = Mapping[str, str]
"""One chat message: {"role": "user" | "system" | "assistant", "content": "..."}."""

Parser = Callable[[str], "str | None"]
"""Turns a completion's text into a normalised answer, or None when it is invalid."""


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters for one request. `extra` is passed through to the provider."""

    temperature: float
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int | None = None
    extra: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The parameters that are set, as litellm keyword arguments (sorted, JSON-able)."""
        out: dict[str, Any] = {"temperature": self.temperature}
        if self.top_p is not None:
            out["top_p"] = self.top_p
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.seed is not None:
            out["seed"] = self.seed
        if self.stop:
            out["stop"] = list(self.stop)
        if self.logprobs:
            out["logprobs"] = True
            if self.top_logprobs is not None:
                out["top_logprobs"] = self.top_logprobs
        for k, v in self.extra:
            out[k] = v
        return dict(sorted(out.items()))

    @classmethod
    def make(cls, temperature: float, *, extra: Mapping[str, Any] | None = None,
             stop: Sequence[str] | str | None = None, **kwargs: Any) -> SamplingParams:
        """Build from plain keyword arguments (a dict for `extra`, a list or str for `stop`)."""
        stop_t: tuple[str, ...] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        extra_t = tuple(sorted((extra or {}).items()))
        return cls(temperature=float(temperature), stop=stop_t, extra=extra_t, **kwargs)


def as_messages(prompt: str | Sequence[Message]) -> tuple[dict[str, str], ...]:
    """A prompt as chat messages: a string becomes one user message."""
    if isinstance(prompt, str):
        return ({"role": "user", "content": prompt},)
    return tuple({"role": str(m["role"]), "content": str(m["content"])} for m in prompt)


def request_key(model: str, messages: Sequence[Message], params: SamplingParams) -> str:
    """Hash of (model, messages, sampling parameters): the store key of a prompt's samples.

    The sample index is *not* part of this hash; the store keys each sample by (key, index),
    so k repeated samples of one prompt stay k distinct rows.
    """
    doc = {
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "params": params.as_dict(),
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SampleRequest:
    """Ask for `k` samples of one prompt with one set of sampling parameters.

    `tag` is the caller's label (e.g. a question id); it is not part of the store key.
    """

    messages: tuple[dict[str, str], ...]
    params: SamplingParams
    k: int = 1
    tag: str | None = None

    @classmethod
    def of(cls, prompt: str | Sequence[Message], *, temperature: float, k: int = 1,
           tag: str | None = None, **params: Any) -> SampleRequest:
        return cls(as_messages(prompt), SamplingParams.make(temperature, **params), k, tag)


@dataclass(frozen=True)
class Sample:
    """One completion, as stored. `answer` is None when the text could not be parsed."""

    key: str
    index: int
    text: str | None
    answer: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    logprobs: Any = None
    cached: bool = False
    source: str = "online"  # how it was drawn: "online" or "batch" (kept in the store)

    @property
    def valid(self) -> bool:
        return self.answer is not None


@dataclass
class JobStats:
    """Running totals of one sampling job (mutable: the sampler updates it as it goes)."""

    samples_total: int = 0
    samples_done: int = 0
    samples_cached: int = 0
    invalid: int = 0
    requests: int = 0
    retries: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    cost_unknown_requests: int = 0
    wall_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)
