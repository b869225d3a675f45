"""What the endpoint answers, as typed models: a `chat.completion` (`ChatCompletion`), the
`ensemble` object beside it (`EnsembleInfo`), a Responses API `response` (`ResponseDoc`) and
a legacy `text_completion` (`TextCompletion`).

Every route builds its reply as one of these and writes it with `body()`; the wire modules
(`serve.wire`, `serve.responses`, `serve.completions`) build them, the streamed forms are
derived from them. Optional keys that OpenAI's objects leave out when they do not apply (an
assistant message's `tool_calls`, the `ensemble` object's `fields`, `why`, ...) are left out
of the JSON when unset, never written as null.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, model_serializer
from pydantic.functional_serializers import SerializerFunctionWrapHandler

__all__ = ["ChatChoice", "ChatCompletion", "ChatMessage", "EnsembleInfo", "FieldVote",
           "FunctionCall", "MemberVotes", "ResponseDoc", "TextChoice", "TextCompletion",
           "ToolCallOut", "Usage", "agreement", "body", "summary", "tool_call_out",
           "vote_headers", "vote_metadata"]


class Reply(BaseModel):
    """A reply document: frozen, every field declared."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Omitting(Reply):
    """A document whose optional keys (`OMIT`) are left out while None."""

    OMIT: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in self.OMIT:
            if out.get(key) is None:
                out.pop(key, None)
        return out


class FunctionCall(Reply):
    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ToolCallOut(Reply):
    """One entry of an assistant message's `tool_calls`."""

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


def tool_call_out(call: Mapping[str, Any]) -> ToolCallOut:
    """A tool call as an upstream sent it (or `ToolCall.to_openai()`), in the reply's form."""
    fn = call.get("function")
    fn = fn if isinstance(fn, Mapping) else {}
    args = fn.get("arguments")
    return ToolCallOut(id=str(call.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
                       function=FunctionCall(name=str(fn.get("name") or ""),
                                             arguments=args if isinstance(args, str)
                                             else json.dumps(args or {})))


class ChatMessage(Omitting):
    OMIT: ClassVar[frozenset[str]] = frozenset({"tool_calls"})
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCallOut] | None = None


class ChatChoice(Reply):
    index: int
    message: ChatMessage
    logprobs: dict[str, Any] | None = None  # the chosen sample's own, as the upstream sent
    finish_reason: str = "stop"


class Usage(Reply):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class FieldVote(Reply):
    """One part's vote (a structured output's field, a tool call's argument)."""

    decision: Any
    votes: dict[str, int]
    margin: int
    invalid: int


class MemberVotes(Reply):
    model: str
    temperature: float
    votes: dict[str, int]


class EnsembleInfo(Omitting):
    """The `ensemble` object of a reply: the vote behind it."""

    OMIT: ClassVar[frozenset[str]] = frozenset({"fields", "why", "ignored", "cost_rule",
                                                "member_votes", "voted_as", "weights", "scores",
                                                "notes"})
    decision: Any
    votes: dict[str, int]
    margin: int
    tie: bool
    samples: int
    invalid: int
    cost_usd: float | None
    aggregator: str
    stop: str | None
    temperatures: list[float]
    fields: dict[str, FieldVote] | None = None
    why: str | None = None
    ignored: list[str] | None = None
    cost_rule: dict[str, Any] | None = None
    member_votes: list[MemberVotes] | None = None
    voted_as: str | None = None  # how replies in no known format were voted (free text)
    # a rule that weighs its samples by their logprobs (soft, confidence, ...): each sample's
    # weight, each answer's summed score (the decision's is the highest) and what the rule
    # says of this vote (e.g. counted as hard votes until the logprobs show a signal)
    weights: list[float] | None = None
    scores: dict[str, float] | None = None
    notes: list[str] | None = None


class ChatCompletion(Reply):
    """A `chat.completion` answering a request with the ensemble's decision."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChatChoice]
    usage: Usage
    ensemble: EnsembleInfo


class TextChoice(Reply):
    index: int
    text: str
    logprobs: dict[str, Any] | None = None
    finish_reason: str = "stop"


class TextCompletion(Reply):
    """A legacy `text_completion` (`POST /v1/completions`)."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[TextChoice]
    usage: Usage
    ensemble: EnsembleInfo


class ResponseDoc(Reply):
    """A Responses API `response`. Its output items and the echoed request fields (`text`,
    `tools`, `tool_choice`, `metadata`) keep the Responses API's own shapes."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["completed", "incomplete"]
    error: None = None
    incomplete_details: dict[str, str] | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    model: str
    output: list[dict[str, Any]]
    parallel_tool_calls: bool
    previous_response_id: None = None
    reasoning: dict[str, Any]
    store: bool = False
    temperature: float | None = None
    text: dict[str, Any]
    tool_choice: Any
    tools: list[Any]
    top_p: float | None = None
    truncation: str = "disabled"
    user: str | None = None
    metadata: dict[str, str]
    usage: dict[str, Any]
    ensemble: EnsembleInfo


HEADER_CHARS = 512  # a header value's length at most (proxies cap headers near 8 KiB in all)
METADATA_KEYS = 16  # OpenAI's bounds on a Responses `metadata`: 16 keys,
METADATA_CHARS = 512  # values of at most 512 characters (keys at most 64)


def _compact(value: Any, limit: int) -> str:
    """A value as compact ASCII JSON (a string as itself), cut to `limit` characters with a
    trailing `...` when longer."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"),
                                                           ensure_ascii=True)
    text = text.encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def agreement(info: EnsembleInfo) -> float | None:
    """The share of valid votes behind the decision: of the whole answers, or, for a
    decision voted by its parts, the least agreed part's; None without a decision."""
    if info.decision is None:
        return None
    if info.fields:
        shares = [max(f.votes.values()) / sum(f.votes.values()) for f in info.fields.values()
                  if f.decision is not None and f.votes]
        return round(min(shares), 4) if shares else None
    total = sum(info.votes.values())
    top = max(info.votes.values()) if info.votes else 0
    return round(top / total, 4) if total else None


def summary(info: EnsembleInfo) -> dict[str, str]:
    """The vote in a few short strings: what the headers and the Responses metadata carry."""
    agreed = agreement(info)
    top = dict(sorted(info.votes.items(), key=lambda kv: -kv[1])[:8])
    return {"decision": _compact(info.decision, HEADER_CHARS),
            "votes": _compact(top, HEADER_CHARS),
            "agreement": "" if agreed is None else f"{agreed:g}",
            "samples": str(info.samples), "invalid": str(info.invalid),
            "margin": str(info.margin), "aggregator": info.aggregator,
            # a weighing rule's scores (top 8, 4 decimals) and its notes
            "scores": "" if not info.scores else _compact(
                {k: round(v, 4) for k, v in sorted(info.scores.items(),
                                                   key=lambda kv: -kv[1])[:8]}, HEADER_CHARS),
            "notes": _compact("; ".join(info.notes or ()), HEADER_CHARS)}


def vote_headers(info: EnsembleInfo) -> dict[str, str]:
    """The vote as response headers (`x-ensemble-decision`, `-votes`, `-agreement`,
    `-samples`, `-invalid`, `-margin`, `-aggregator`; a weighing rule's `-scores`, `-notes`):
    every HTTP client keeps headers, where several drop a body's unknown fields (LangChain,
    pydantic-ai, the Agents SDK)."""
    return {f"x-ensemble-{k}": v for k, v in summary(info).items() if v != ""}


def vote_metadata(info: EnsembleInfo, client: Mapping[str, str] | None) -> dict[str, str]:
    """A Responses `metadata`: the client's keys as sent, then the vote's as `ensemble_<name>`
    where the client has not used the name, within OpenAI's 16 keys of 512 characters."""
    out = dict(client or {})
    for key, value in summary(info).items():
        name = f"ensemble_{key}"
        if len(out) >= METADATA_KEYS:
            break
        if name not in out and value != "":
            out[name] = _compact(value, METADATA_CHARS)
    return out


def body(doc: BaseModel) -> bytes:
    """A reply's JSON body."""
    return doc.model_dump_json().encode("utf-8")
