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
    "check_text",
    "normalise_api_base",
    "request_key",
]

Message = Mapping[str, str]
"""One chat message: {"role": "user" | "system" | "assistant", "content": "..."}."""

Parser = Callable[[str], "str | None"]
"""Turns a completion's text into a normalised answer, or None when it is invalid."""


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters for one request, validated here and nowhere else.

    temperature: >= 0 (0 is greedy decoding). top_p: in (0, 1]. max_tokens: >= 1.
    seed: the provider's sampling seed (where it has one). stop: stop strings.
    logprobs / top_logprobs (0..20): ask for token log-probabilities.
    extra: provider-specific parameters, passed through as given (e.g. ("extra_body", {...})).
    """

    temperature: float
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int | None = None
    extra: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        import math

        from ..errors import InputError

        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) \
                or t < 0:
            raise InputError(f"temperature must be a finite number >= 0, got {t!r}")
        if self.top_p is not None and not (isinstance(self.top_p, (int, float))
                                           and 0 < self.top_p <= 1):
            raise InputError(f"top_p must lie in (0, 1], got {self.top_p!r}")
        mt = self.max_tokens
        if mt is not None and (isinstance(mt, bool) or not isinstance(mt, int) or mt < 1):
            raise InputError(f"max_tokens must be an integer >= 1, got {mt!r}")
        if self.seed is not None and (isinstance(self.seed, bool)
                                      or not isinstance(self.seed, int)):
            raise InputError(f"seed must be an integer, got {self.seed!r}")
        if any(not isinstance(x, str) or not x for x in self.stop):
            raise InputError(f"stop must be non-empty strings, got {list(self.stop)!r}")
        tl = self.top_logprobs
        if tl is not None and (isinstance(tl, bool) or not isinstance(tl, int)
                               or not 0 <= tl <= 20):
            raise InputError(f"top_logprobs must be an integer in 0..20, got {tl!r}")

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
        from ..errors import InputError
        from .options import check_keywords

        check_keywords(kwargs, ("top_p", "max_tokens", "seed", "logprobs", "top_logprobs"),
                       what="sampling parameter")
        stop_t: tuple[str, ...] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        extra_t = tuple(sorted((extra or {}).items()))
        try:
            t = float(temperature)
        except (TypeError, ValueError):
            raise InputError(f"temperature must be a number >= 0, got {temperature!r}") from None
        return cls(temperature=t, stop=stop_t, extra=extra_t, **kwargs)


MAX_SAMPLES_PER_PROMPT = 100_000


def as_messages(prompt: str | Sequence[Message]) -> tuple[dict[str, str], ...]:
    """A prompt as chat messages: a string becomes one user message. An empty or missing
    prompt is an InputError (it would be sent, and paid for, for nothing)."""
    from ..errors import InputError

    if isinstance(prompt, str):
        if not prompt.strip():
            raise InputError("the prompt is empty; give the text to send to the model")
        check_text(prompt, what="the prompt")
        return ({"role": "user", "content": prompt},)
    if prompt is None or isinstance(prompt, (bytes, int, float)) or not hasattr(prompt, "__iter__"):
        raise InputError(f"a prompt must be a string or a list of chat messages "
                         f"({{'role': ..., 'content': ...}}), got {type(prompt).__name__}")
    out = []
    for m in prompt:
        try:
            out.append({"role": str(m["role"]), "content": str(m["content"])})
        except (TypeError, KeyError):
            raise InputError("each chat message must be a mapping with 'role' and 'content', "
                             f"got {m!r}"[:200]) from None
    if not out or not any(m["content"].strip() for m in out):
        raise InputError("the prompt is empty; give the text to send to the model")
    for m in out:
        check_text(m["content"], what=f"the {m['role']} message")
    return tuple(out)


def check_text(text: str, *, what: str) -> None:
    """InputError unless `text` can be sent as UTF-8: a lone surrogate ("\\ud800", or bytes that
    were not UTF-8 on a command line) would fail deep inside the HTTP client."""
    from ..errors import InputError

    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what} is not valid text: character {exc.start} is "
                         f"{text[exc.start]!r}, a lone surrogate (bytes that are not UTF-8, or "
                         "a broken escape); fix the text or its file's encoding") from None


def normalise_api_base(url: str) -> str:
    """An endpoint's identity from its base URL: scheme and host lower-cased, credentials,
    query, fragment, a default port and trailing slashes dropped.

    `http://LOCALHOST:80/v1/` and `http://localhost/v1` are one endpoint; another port, host or
    path is another (a restarted local server on a new port may serve other weights).
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    scheme = (parts.scheme or "http").lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    return f"{scheme}://{host}{path}"


def request_key(model: str, messages: Sequence[Message], params: SamplingParams, *,
                endpoint: str | None = None) -> str:
    """Hash of (endpoint, model, messages, sampling parameters): the store key of a prompt's
    samples.

    `endpoint` is where the samples come from (a provider's `identity`: the normalised api_base,
    a local model's weights checksum); None for a provider's own public endpoint, whose keys
    are those of stores written before endpoints were part of the key (schema < 4). Two
    servers that share a model name are two sources, never one.

    The sample index is *not* part of this hash; the store keys each sample by (key, index),
    so k repeated samples of one prompt stay k distinct rows.
    """
    doc: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "params": params.as_dict(),
    }
    if endpoint is not None:
        doc["endpoint"] = endpoint
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

    def __post_init__(self) -> None:
        from ..errors import InputError

        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InputError(f"k (samples per prompt) must be an integer >= 1, got {self.k!r}")
        if self.k > MAX_SAMPLES_PER_PROMPT:
            raise InputError(f"k = {self.k} samples of one prompt is more than this tool "
                             f"handles ({MAX_SAMPLES_PER_PROMPT}); split the request")

    @classmethod
    def of(cls, prompt: str | Sequence[Message], *, temperature: float, k: int = 1,
           tag: str | None = None, **params: Any) -> SampleRequest:
        """A request for `k` samples of `prompt` (a string, or chat messages)."""
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
    samples_shared: int = 0  # stored meanwhile by another run on the same store
    failed: int = 0  # samples whose request failed for good
    requests: int = 0
    retries: int = 0
    errors: int = 0
    rate_limited: int = 0  # 429 / overloaded replies (backpressure, not failures)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # spent by this job's requests (None: some price unknown)
    cost_unknown_requests: int = 0
    stored_cost_usd: float | None = 0.0  # what the samples read from the store had cost
    wall_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)
