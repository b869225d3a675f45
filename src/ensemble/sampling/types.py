"""Values that flow through the sampling engine: what to ask, and what came back.

This module is the contract between the sampler and its users (Ensemble, evals, calibration):
add fields with defaults, never change the meaning of existing ones. `SamplingParams` lives
with the providers (`ensemble.providers.params`), which take it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..providers.params import SamplingParams

__all__ = [
    "JobStats",
    "Message",
    "Parser",
    "ROLES",
    "Sample",
    "SampleRequest",
    "as_messages",
    "check_text",
    "request_key",
    "with_logprobs",
    "without_logprobs",
]

Message = Mapping[str, Any]
"""One chat message: {"role": "user" | "system" | "assistant" | "tool", "content": "..."}; an
assistant message that called tools carries `tool_calls` (its content may be None), a tool
result its `tool_call_id` (and maybe `name`)."""

Parser = Callable[[str], "str | None"]
"""Turns a completion's text into a normalised answer, or None when it is invalid."""

MAX_SAMPLES_PER_PROMPT = 100_000
#: the roles of a chat message that a chat-completions API takes
ROLES = ("system", "developer", "user", "assistant", "tool")
# the fields of a message besides role and content that are kept, sent and part of the key
TOOL_FIELDS = ("tool_calls", "tool_call_id", "name")


def as_messages(prompt: str | Sequence[Message]) -> tuple[dict[str, Any], ...]:
    """A prompt as chat messages: a string becomes one user message. An empty or missing
    prompt is an InputError (it would be sent, and paid for, for nothing). A message's
    `tool_calls`, `tool_call_id` and `name` are kept (a tool-calling history); an assistant
    message with tool calls may have no content."""
    from ..errors import InputError

    if isinstance(prompt, str):
        if not prompt.strip():
            raise InputError("the prompt is empty; give the text to send to the model")
        check_text(prompt, what="the prompt")
        return ({"role": "user", "content": prompt},)
    if prompt is None or isinstance(prompt, (bytes, int, float)) or not hasattr(prompt, "__iter__"):
        raise InputError(f"a prompt must be a string or a list of chat messages "
                         f"({{'role': ..., 'content': ...}}), got {type(prompt).__name__}")
    out: list[dict[str, Any]] = []
    for m in prompt:
        try:
            content = m["content"] if "content" in m or not m.get("tool_calls") else None
            msg: dict[str, Any] = {"role": str(m["role"]),
                                   "content": None if content is None and m.get("tool_calls")
                                   else str(content)}
        except (TypeError, KeyError, AttributeError):
            raise InputError("each chat message must be a mapping with 'role' and 'content', "
                             f"got {m!r}"[:200]) from None
        if msg["role"] not in ROLES:
            raise InputError(f"a chat message's role is {msg['role']!r}; use one of "
                             f"{', '.join(ROLES)}"[:200])
        for k in TOOL_FIELDS:
            if m.get(k) is not None:
                msg[k] = m[k]
        out.append(msg)
    if not out or not any((m["content"] or "").strip() or m.get("tool_calls") for m in out):
        raise InputError("the prompt is empty; give the text to send to the model")
    for m in out:
        if m["content"] is not None:
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
        "messages": [_keyed(m) for m in messages],
        "params": params.as_dict(),
    }
    if endpoint is not None:
        doc["endpoint"] = endpoint
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _keyed(m: Message) -> dict[str, Any]:
    """What of a message is part of the key: role and content, and its tool fields when it has
    them (so a plain message's key is what it always was)."""
    out = {"role": m["role"], "content": m["content"]}
    for k in TOOL_FIELDS:
        if m.get(k) is not None:
            out[k] = m[k]
    return out


@dataclass(frozen=True)
class SampleRequest:
    """Ask for `k` samples of one prompt with one set of sampling parameters.

    `tag` is the caller's label (e.g. a question id); it is not part of the store key.
    """

    messages: tuple[dict[str, Any], ...]
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


def without_logprobs(req: SampleRequest) -> SampleRequest:
    """The same request drawn without logprobs (another store key: what a run drawn without
    them stored)."""
    from dataclasses import replace

    return replace(req, params=replace(req.params, logprobs=False, top_logprobs=None))


def with_logprobs(req: SampleRequest) -> tuple[SampleRequest, ...]:
    """The same request as the rules that read logprobs ask it (`ensemble.rules.Requests`:
    logprobs with the top 5 at each token, or without them): other store keys, whose samples
    serve a request that reads less."""
    from dataclasses import replace

    from .logprobs import TOP_K

    return tuple(replace(req, params=replace(req.params, logprobs=True, top_logprobs=k))
                 for k in (TOP_K, None))


@dataclass(frozen=True, slots=True)
class Sample:
    """One completion, as stored. `answer` is None when the text could not be parsed.
    (Slotted: a paper-sized run holds 298,500 of them.)"""

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
    # the compact logprobs the soft rules read (`ensemble.sampling.logprobs`: the answer span's
    # token logprobs, the top-k at its first token, the trace's confidence summary)
    answer_lp: Any = None

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
    samples_batch: int = 0  # collected from finished Batch API results by this job
    failed: int = 0  # samples whose request failed for good
    unstored: int = 0  # samples drawn (paid for) that the store could not take (a full disk)
    requests: int = 0
    retries: int = 0
    errors: int = 0
    rate_limited: int = 0  # 429 / overloaded replies (backpressure, not failures)
    prompt_tokens: int = 0  # paid for by this job's requests, of those that reported them
    completion_tokens: int = 0
    prompt_tokens_unknown: int = 0  # replies paid for that did not report them (or not truly)
    completion_tokens_unknown: int = 0
    cost_usd: float | None = 0.0  # spent by this job's requests (None: some price unknown)
    recorded_replies: int = 0  # replies served from a recording (a replay): nothing paid
    recorded_cost_usd: float | None = 0.0  # what those had cost when recorded (None: unknown)
    cost_unknown_requests: int = 0
    stored_cost_usd: float | None = 0.0  # what the samples read from the store had cost
    wall_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)
