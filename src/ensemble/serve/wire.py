"""The Chat Completions wire format, as the endpoint reads and writes it.

In: a request body, checked (`parse_chat_request`): what is malformed or not supported is a
`RequestRejected` carrying the HTTP status and OpenAI's `param` / `code`.
Out: a `chat.completion` built from a `Decision` (`completion_doc`), the same as
`chat.completion.chunk`s for `stream=True` (`completion_chunks`), and OpenAI's error object
(`error_doc`).

What a response says: `choices[0].message.content` is the full text of one sample that voted
for the decision (the first drawn); with a client's `n = k > 1`, choice i is a sample of the
i-th most voted answer (at most k choices, one per distinct answer). `usage` sums every sample
drawn; the `ensemble` object beside them carries the vote.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from ..answers import votes_fields
from ..answers.formats import FREE_TEXT
from ..decision import plain
from ..errors import InputError
from ..providers.toolcalls import read_tool_calls
from ..sampling.types import ROLES
from .replies import (
    ChatChoice,
    ChatCompletion,
    ChatMessage,
    EnsembleInfo,
    FieldVote,
    MemberVotes,
    Usage,
    tool_call_out,
)

if TYPE_CHECKING:
    from ..decision import Decision
    from ..members import Member
    from ..sampling.types import Sample

__all__ = ["CHAT", "ChatRequest", "RequestRejected", "Wire", "completion_chunks",
           "completion_doc", "ensemble_doc", "error_doc", "parse_chat_request", "unread"]

UNSUPPORTED = ("functions", "function_call", "audio", "prediction")
# sampling parameters the served ensemble sets itself: a request's are ignored, and said so
# (parallel_tool_calls too: parallel calls are voted position by position when they come)
IGNORED = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop",
           "presence_penalty", "frequency_penalty", "logit_bias", "parallel_tool_calls")
FORMATS = ("text", "json_schema", "json_object")
# what a chat request's fields are read for; any other field is served without it, and said
READ = ("model", "messages", "stream", "stream_options", "n", "response_format", "logprobs",
        "top_logprobs", "tools", "tool_choice", "ensemble")
MAX_TOP_LOGPROBS = 20
MAX_CHOICES = 16
CHUNK_CHARS = 64


class RequestRejected(InputError):
    """A request the endpoint will not serve: status (400, 404, ...), OpenAI's param and code."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None,
                 code: str | None = None, etype: str = "invalid_request_error") -> None:
        self.status = status
        self.param = param
        self.code = code
        self.etype = etype
        super().__init__(message)


@dataclass(frozen=True)
class ChatRequest:
    """A checked chat request: the served name, the messages, and how to answer."""

    model: str
    messages: tuple[dict[str, Any], ...]
    stream: bool = False
    include_usage: bool = False
    n: int = 1
    overrides: Any = None  # the raw `ensemble` object of extra_body (checked per model)
    response_format: Any = None  # a json_schema response format (checked by serve.schemas)
    ignored: tuple[str, ...] = ()  # sampling parameters the request set (the ensemble's rule)
    logprobs: bool = False  # the chosen sample's own logprobs in the reply
    top_logprobs: int | None = None
    tools: tuple[Any, ...] | None = None  # function tools, sent upstream as given and voted
    tool_choice: Any = None  # sent upstream as given

    @property
    def sampling(self) -> tuple[tuple[str, Any], ...]:
        """The Ensemble keywords this request adds to the served ones (its logprobs)."""
        if not self.logprobs:
            return ()
        return (("logprobs", True),) + ((("top_logprobs", self.top_logprobs),)
                                        if self.top_logprobs is not None else ())


def _text(content: Any, i: int) -> str:
    """A message's content as text: a string, or the text of OpenAI's content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text" \
                    or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise RequestRejected(f"messages[{i}].content: only text parts are supported, "
                                      f"got {kind!r}", param=f"messages[{i}].content")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestRejected(f"messages[{i}].content must be a string or a list of text parts",
                          param=f"messages[{i}].content")


def _messages(raw: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(raw, list) or not raw:
        raise RequestRejected("messages must be a non-empty list of {role, content} objects",
                              param="messages")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, Mapping) or "role" not in m:
            raise RequestRejected(f"messages[{i}] must be an object with role and content",
                                  param=f"messages[{i}]")
        role = m["role"]
        if role not in ROLES:
            raise RequestRejected(f"messages[{i}].role {role!r} is not supported; use one of "
                                  f"{', '.join(ROLES)}", param=f"messages[{i}].role")
        out.append(_message(m, role, i))
    if not any((m["content"] or "").strip() or m.get("tool_calls") for m in out):
        raise RequestRejected("every message is empty; give the text to send", param="messages")
    return tuple(out)


def _message(m: Mapping[str, Any], role: str, i: int) -> dict[str, Any]:
    """One message as sent upstream: its text; an assistant's tool calls (its content may then
    be null) and a tool result's `tool_call_id`, unchanged."""
    calls = m.get("tool_calls") if role == "assistant" else None
    if calls is not None and (not isinstance(calls, list) or not all(
            isinstance(c, Mapping) and isinstance(c.get("function"), Mapping) for c in calls)):
        raise RequestRejected(f"messages[{i}].tool_calls must be a list of "
                              '{"id", "type": "function", "function": {...}} objects',
                              param=f"messages[{i}].tool_calls")
    content = m.get("content")
    out: dict[str, Any] = {"role": "system" if role == "developer" else role,
                           "content": None if content is None and calls
                           else _text(content, i)}
    if calls:
        out["tool_calls"] = [dict(c) for c in calls]
    if role == "tool":
        if not isinstance(m.get("tool_call_id"), str):
            raise RequestRejected(f"messages[{i}]: a tool message needs the tool_call_id of "
                                  "the call it answers", param=f"messages[{i}].tool_call_id")
        out["tool_call_id"] = m["tool_call_id"]
    if isinstance(m.get("name"), str) and role in ("tool", "user", "assistant"):
        out["name"] = m["name"]
    return out


def _tools(body: Mapping[str, Any]) -> tuple[tuple[Any, ...] | None, Any]:
    """(tools, tool_choice) of a request, checked (`ensemble.answers.tools_of`)."""
    from ..answers import tools_of

    tools, choice = body.get("tools"), body.get("tool_choice")
    if tools is None:
        if choice is not None and choice != "none":
            raise RequestRejected("tool_choice needs tools", param="tool_choice")
        return None, None
    try:
        declared = tools_of(tools)
    except InputError as exc:
        raise RequestRejected(str(exc), param="tools") from None
    names = [t.name for t in declared]
    from ..answers.toolcalls import choice_rule

    try:
        allowed, _, may = choice_rule(choice, declared)
    except InputError as exc:
        raise RequestRejected(str(exc), param="tool_choice") from None
    if may and not allowed:
        raise RequestRejected(f"tool_choice names no tool of the request ({', '.join(names)}): "
                              f"{json.dumps(choice)}; name one of them", param="tool_choice")
    return tuple(tools), choice


def parse_chat_request(body: object) -> ChatRequest:
    """A checked `ChatRequest` from a decoded JSON body (RequestRejected otherwise)."""
    if not isinstance(body, dict):
        raise RequestRejected("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestRejected("model is required: the name of a served ensemble (see "
                              "GET /v1/models)", param="model")
    for key in UNSUPPORTED:
        if body.get(key) is not None:
            raise RequestRejected(f"{key} is not supported by the voting endpoint (it votes on "
                                  "text answers)", param=key)
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, Mapping) and fmt.get("type") in FORMATS):
        raise RequestRejected("response_format must be {\"type\": \"json_schema\", "
                              "\"json_schema\": {\"name\": ..., \"schema\": {...}}} (voted field "
                              "by field), {\"type\": \"json_object\"} (voted key by key) or "
                              "{\"type\": \"text\"}", param="response_format")
    stream = body.get("stream", False)
    if stream not in (True, False, None):
        raise RequestRejected(f"stream must be a boolean, got {stream!r}", param="stream")
    opts = body.get("stream_options")
    if opts is not None and not isinstance(opts, Mapping):
        raise RequestRejected("stream_options must be an object", param="stream_options")
    n = body.get("n", 1)
    n = 1 if n is None else n
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise RequestRejected(f"n must be an integer from 1 to {MAX_CHOICES}, got {n!r}",
                              param="n")
    logprobs, top = _logprobs(body)
    tools, tool_choice = _tools(body)
    return ChatRequest(model=model, messages=_messages(body.get("messages")),
                       stream=bool(stream), include_usage=bool((opts or {}).get("include_usage")),
                       n=n, overrides=body.get("ensemble"),
                       response_format=fmt if isinstance(fmt, Mapping)
                       and fmt.get("type") in ("json_schema", "json_object") else None,
                       ignored=unread(body, READ + UNSUPPORTED),
                       logprobs=logprobs, top_logprobs=top, tools=tools,
                       tool_choice=tool_choice)


def unread(body: Mapping[str, Any], read: Sequence[str]) -> tuple[str, ...]:
    """The fields a request set that the endpoint does not act on: the sampling parameters
    the served ensemble sets itself first (`IGNORED`), then any other, in the body's order;
    each is listed under `ensemble.ignored` (never dropped silently)."""
    given = [k for k in body if body[k] is not None and k not in read]
    return tuple([k for k in IGNORED if k in given] + [k for k in given if k not in IGNORED])


def _logprobs(body: Mapping[str, Any]) -> tuple[bool, int | None]:
    """(logprobs, top_logprobs) of a chat request: the chosen sample's own logprobs are
    asked of the upstream and carried in the reply."""
    want = body.get("logprobs")
    if want not in (True, False, None):
        raise RequestRejected(f"logprobs must be a boolean, got {want!r}", param="logprobs")
    top = body.get("top_logprobs")
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, int) \
                or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise RequestRejected(f"top_logprobs must be an integer from 0 to "
                                  f"{MAX_TOP_LOGPROBS}, got {top!r}", param="top_logprobs")
        if not want:
            raise RequestRejected("top_logprobs needs logprobs: true", param="top_logprobs")
    return bool(want), top


def error_doc(message: str, etype: str = "invalid_request_error", *, param: str | None = None,
              code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


def _representatives(d: Decision[Any], k: int, won: str | None = None) -> list[Sample]:
    """Choice 0: the first sample that voted for the decision (`won`, its key, when the kind
    says it; else the answer the decision credits most); then one sample per next most voted
    answer, up to k in all. No valid vote: the first sample drawn.

    Samples carry the canonical answer (the votes' keys); the decision is typed by the answer
    kind (a float for numbers), so the winner's key is the one the decision credits most."""
    if won is None and d.decision is not None and d.credit:
        won = max(d.credit, key=lambda a: d.credit[a])
    ranked = [won] if won is not None else []
    ranked += [a for a, _ in sorted(d.votes.items(), key=lambda kv: (-kv[1], kv[0]))
               if a != won]
    out = []
    for answer in ranked[:k]:
        s = next((s for s in d.samples if s.answer == answer), None)
        if s is not None:
            out.append(s)
    if not out and d.samples:
        out.append(d.samples[0])
    return out


def _sample_message(s: Sample) -> ChatMessage:
    """A sample as the assistant message it was: its text, or its tool calls as sent."""
    reply = read_tool_calls(s.text)
    if reply is None:
        return ChatMessage(content=s.text or "")
    return ChatMessage(content=reply.content,
                       tool_calls=[tool_call_out(c) for c in reply.tool_calls])


def _voted_choices(d: Decision[Any], kind: object) -> list[ChatChoice] | None:
    """The one choice of a decision voted part by part: the voted tool calls, or the text the
    kind renders for it (the voted object, a client's format); None when a sample's text is
    the reply."""
    if d.tool_calls:
        return [ChatChoice(index=0, message=ChatMessage(content=None, tool_calls=[
            tool_call_out(c.to_openai()) for c in d.tool_calls]),
            finish_reason="tool_calls")]
    if d.decision is None or not d.fields or not votes_fields(kind):
        return None
    text = kind.render(d.decision)
    if text is None:
        return None
    return [ChatChoice(index=0, message=ChatMessage(content=text))]


def json_decision(d: Decision[Any]) -> Any:
    """The decision as a JSON value (a structured output's model as its fields)."""
    return plain(d.decision)


def ensemble_doc(d: Decision[Any], members: Sequence[Member], *,
                 ignored: Sequence[str] = ()) -> EnsembleInfo:
    """The `ensemble` object of a response: the vote behind the reply (and, when the request
    set sampling parameters, that they were ignored: the served ensemble sets its own)."""
    return EnsembleInfo(
        decision=json_decision(d), votes=dict(d.votes), margin=d.margin, tie=d.tie,
        samples=d.n_samples, invalid=d.n_invalid, cost_usd=d.cost_usd,
        aggregator=d.aggregator, stop=d.stop,
        temperatures=sorted({m.temperature for m in members}),
        # structured outputs: each field's own vote, its decision typed (8, not "8")
        # (a part whose kind keeps no typed value, one plain answer, is its key)
        fields={name: FieldVote(decision=None if f.decision is None
                                else plain(f.decision if f.value is None else f.value),
                                votes=dict(f.counts), margin=f.margin, invalid=f.n_invalid)
                for name, f in d.fields.items()} if d.fields else None,
        why=d.why,  # nothing decided: why (the content is then the first sample's)
        ignored=list(ignored) or None,
        # stop: cost: the rule decided; its posterior, its draws
        cost_rule=d.cost_rule.to_dict() if d.cost_rule is not None else None,
        member_votes=[MemberVotes(model=m.model, temperature=m.temperature, votes=v)
                      for m, v in zip(members, d.member_votes, strict=False)]
        if len(members) > 1 else None,
        voted_as=FREE_TEXT if "format" in d.fields and d.fields["format"].value == "text"
        else None,
        weights=list(d.weights) or None, scores=dict(d.scores) or None,
        notes=list(d.notes) or None)


def completion_doc(name: str, d: Decision[Any], members: Sequence[Member], *, n: int = 1,
                   ignored: Sequence[str] = (), completion_id: str | None = None,
                   logprobs: bool = False, kind: object = None) -> ChatCompletion:
    """The `chat.completion` answering a request with the ensemble's decision.

    A decision voted part by part (`kind` a `FieldVoter`) is answered with what was voted:
    the voted tool calls (`finish_reason: tool_calls`), the voted object as JSON (a
    `response_format` schema, JSON mode), or the client's own format (DSPy's sections); each
    part is its own vote's winner, so no single sample need hold them all. Otherwise, and
    when nothing was decided, with samples' texts (a sample that voted for the decision;
    the first sample's text, or its tool calls, when none did). With `logprobs`, each
    choice carries its sample's own logprobs as the upstream sent them (a voted reply is no
    one sample's text: null)."""
    choices = _voted_choices(d, kind)
    if choices is None:
        won = kind.answer_key(d.decision) if votes_fields(kind) \
            and d.decision is not None else None
        choices = [ChatChoice(index=i, message=_sample_message(s),
                              logprobs=s.logprobs if logprobs else None,
                              finish_reason=s.finish_reason or "stop")
                   for i, s in enumerate(_representatives(d, n, won))]
    if not choices:  # pragma: no cover - a decision always has samples
        choices = [ChatChoice(index=0, message=ChatMessage(content=""))]
    return ChatCompletion(
        id=completion_id or f"chatcmpl-ens-{uuid.uuid4().hex[:24]}", created=int(time.time()),
        model=name, choices=choices,
        usage=Usage(prompt_tokens=d.prompt_tokens, completion_tokens=d.completion_tokens,
                    total_tokens=d.prompt_tokens + d.completion_tokens),
        ensemble=ensemble_doc(d, members, ignored=ignored))


def completion_chunks(doc: ChatCompletion, *, include_usage: bool = False
                      ) -> Iterator[dict[str, Any]]:
    """A `chat.completion` as the chunks OpenAI streams: per choice a role chunk, content
    pieces (or its tool calls) and a finish chunk (it carries the `ensemble` object); with
    `include_usage`, every chunk has `usage: null` and a last chunk without choices carries
    the usage."""
    head = {"id": doc.id, "object": "chat.completion.chunk", "created": doc.created,
            "model": doc.model, "system_fingerprint": None}
    extra = {"usage": None} if include_usage else {}
    last = len(doc.choices) - 1
    for ch in doc.choices:
        j = ch.index
        yield {**head, "choices": [{"index": j, "delta": {"role": "assistant", "content": ""},
                                    "logprobs": None, "finish_reason": None}], **extra}
        text = ch.message.content or ""
        for i in range(0, len(text), CHUNK_CHARS):  # the logprobs ride on the first piece
            yield {**head, "choices": [{"index": j, "delta": {"content": text[i:i + CHUNK_CHARS]},
                                        "logprobs": ch.logprobs if i == 0 else None,
                                        "finish_reason": None}], **extra}
        calls = ch.message.tool_calls
        if calls:  # each call whole in one delta, as OpenAI's first delta of a call has it
            yield {**head, "choices": [{"index": j, "delta": {"tool_calls": [
                {"index": i, **c.model_dump()} for i, c in enumerate(calls)]},
                "logprobs": None, "finish_reason": None}], **extra}
        final: dict[str, Any] = {**head, "choices": [{"index": j, "delta": {}, "logprobs": None,
                                                      "finish_reason": ch.finish_reason}],
                                 **extra}
        if j == last:
            final["ensemble"] = doc.ensemble.model_dump()
        yield final
    if include_usage:
        yield {**head, "choices": [], "usage": doc.usage.model_dump()}


def _chat_frames(doc: ChatCompletion, req: ChatRequest, info: object) -> Iterator[str]:
    for chunk in completion_chunks(doc, include_usage=req.include_usage):
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


InfoT = TypeVar("InfoT")
DocT = TypeVar("DocT", bound=BaseModel)


@dataclass(frozen=True)
class Wire(Generic[InfoT, DocT]):
    """How one route reads and writes: `parse` a body as the chat request it stands for (and
    what else the route needs to answer, `InfoT`), `render` the decided `chat.completion` in
    the route's format (`DocT`), `frames` it as server-sent events."""

    what: str  # what a body should be, for the malformed-JSON error
    parse: Callable[[object], tuple[ChatRequest, InfoT]]
    render: Callable[[ChatCompletion, ChatRequest, InfoT], DocT]
    frames: Callable[[DocT, ChatRequest, InfoT], Iterator[str]]


def _chat_request(body: object) -> tuple[ChatRequest, None]:
    return parse_chat_request(body), None


def _as_is(doc: ChatCompletion, req: ChatRequest, info: None) -> ChatCompletion:
    return doc


CHAT: Wire[None, ChatCompletion] = Wire("a chat completion request", _chat_request, _as_is,
                                        _chat_frames)
