"""The Responses API wire format (`POST /v1/responses`), read and written through the chat
pipeline: a request is translated to the chat request it stands for (`to_chat`), decided like
any chat request, and the `chat.completion` is rewritten as a `response` object
(`response_doc`) or as the Responses API's server-sent events (`response_events`).

What is read: `model`; `input` as a string or a list of messages (`{"role", "content"}` with
the content a string or `input_text` / `output_text` parts; `"type": "message"` optional);
`instructions` (sent first, as the system message); `text.format` (`text`, or `json_schema`:
voted field by field as chat's `response_format`); `stream`; `include:
["message.output_text.logprobs"]` with `top_logprobs` (the chosen sample's own logprobs);
`extra_body={"ensemble": {...}}` overrides. `store` is ignored (nothing is kept: the response
says `"store": false`); `temperature`, `top_p` and `max_output_tokens` are the served
ensemble's (listed under `ensemble.ignored`). The endpoint is stateless:
`previous_response_id`, `conversation` and `background` are refused in one line naming why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .wire import ChatRequest, RequestRejected, Wire, parse_chat_request

__all__ = ["RESPONSES", "ResponsesInfo", "response_doc", "response_events", "to_chat"]

# the Responses names of sampling parameters the served ensemble sets itself
IGNORED = ("temperature", "top_p", "max_output_tokens", "seed")
STATELESS = {
    "previous_response_id": "the voting endpoint keeps no responses (it is stateless); send "
                            "the whole conversation in input",
    "conversation": "the voting endpoint keeps no conversations (it is stateless); send the "
                    "whole conversation in input",
    "background": "the voting endpoint answers in the request (it keeps no responses to poll); "
                  "send the request without background",
}
LOGPROBS_INCLUDE = "message.output_text.logprobs"
TEXT_PARTS = ("input_text", "output_text", "text")
CHUNK_CHARS = 64


@dataclass(frozen=True)
class ResponsesInfo:
    """What a Responses request says beyond its chat form (echoed in the response)."""

    instructions: str | None = None
    text_format: Any = None  # the request's text.format, echoed
    metadata: Any = None


def _content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
                raise RequestRejected(f"{where}.content[{j}]: only text parts are supported "
                                      f"(input_text, output_text), got {kind!r}",
                                      param=f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestRejected(f"{where}.content must be a string or a list of input_text parts",
                          param=f"{where}.content")


def _messages(raw: Any, instructions: Any) -> list[dict[str, str]]:
    """The chat messages of `instructions` and `input`."""
    out: list[dict[str, str]] = []
    if instructions is not None:
        if not isinstance(instructions, str):
            raise RequestRejected("instructions must be a string", param="instructions")
        if instructions.strip():
            out.append({"role": "system", "content": instructions})
    if isinstance(raw, str):
        return [*out, {"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise RequestRejected("input must be a string or a non-empty list of messages "
                              "({role, content})", param="input")
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            raise RequestRejected(f"{where} must be an object with role and content",
                                  param=where)
        kind = item.get("type", "message")
        if kind != "message" or "role" not in item:
            raise RequestRejected(f"{where}: input items of type {kind!r} are not supported "
                                  "(messages with role and content are)", param=where)
        out.append({"role": item["role"], "content": _content(item.get("content"), where)})
    return out


def _text_format(text: Any) -> tuple[Any, Any]:
    """(the chat response_format, the format echoed) of a request's `text` option."""
    if text is None:
        return None, {"type": "text"}
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if not isinstance(text, Mapping) or (fmt is not None and not isinstance(fmt, Mapping)):
        raise RequestRejected('text must be an object such as {"format": {"type": "text"}}',
                              param="text")
    if fmt is None or fmt.get("type") == "text":
        return None, {"type": "text"}
    if fmt.get("type") == "json_schema":
        spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": spec}, dict(fmt)
    return {k: v for k, v in fmt.items()}, dict(fmt)


def to_chat(body: Any) -> tuple[ChatRequest, ResponsesInfo]:
    """The chat request a Responses request stands for (RequestRejected naming the Responses
    field otherwise)."""
    if not isinstance(body, dict):
        raise RequestRejected("the request body must be a JSON object")
    for key, why in STATELESS.items():
        if body.get(key) not in (None, False):
            raise RequestRejected(f"{key} is not supported: {why}", param=key)
    if body.get("tools"):
        raise RequestRejected("tools are not supported on /v1/responses yet (it votes on text "
                              "and text.format json_schema answers); send the request without "
                              "tools", param="tools")
    response_format, echoed = _text_format(body.get("text"))
    include = body.get("include") or []
    if not isinstance(include, list):
        raise RequestRejected("include must be a list", param="include")
    logprobs = LOGPROBS_INCLUDE in include or body.get("top_logprobs") is not None
    chat: dict[str, Any] = {
        "model": body.get("model"),
        "messages": _messages(body.get("input"), body.get("instructions")),
        "stream": body.get("stream", False),
        "ensemble": body.get("ensemble"),
    }
    if response_format is not None:
        chat["response_format"] = response_format
    if logprobs:
        chat["logprobs"] = True
        if body.get("top_logprobs") is not None:
            chat["top_logprobs"] = body["top_logprobs"]
    for key in ("tool_choice",):
        if body.get(key) is not None and body.get(key) != "auto":
            chat[key] = body[key]
    try:
        req = parse_chat_request(chat)
    except RequestRejected as exc:
        param = exc.param
        if param is not None:
            param = (param.replace("messages", "input").replace("response_format", "text.format"))
        raise RequestRejected(str(exc).replace("response_format", "text.format"),
                              status=exc.status, param=param, code=exc.code,
                              etype=exc.etype) from None
    req = replace(req, ignored=tuple(k for k in IGNORED if body.get(k) is not None))
    return req, ResponsesInfo(instructions=body.get("instructions"), text_format=echoed,
                              metadata=body.get("metadata"))


def _logprobs(lp: Any) -> list[dict[str, Any]]:
    """A chat choice's logprobs as the Responses API's output_text logprobs."""
    if not isinstance(lp, Mapping) or not isinstance(lp.get("content"), list):
        return []
    return [{"token": t.get("token"), "logprob": t.get("logprob"),
             "bytes": t.get("bytes") or list(str(t.get("token", "")).encode("utf-8")),
             "top_logprobs": [{"token": u.get("token"), "logprob": u.get("logprob"),
                               "bytes": u.get("bytes") or list(str(u.get("token", ""))
                                                               .encode("utf-8"))}
                              for u in t.get("top_logprobs") or []]}
            for t in lp["content"] if isinstance(t, Mapping)]


def response_doc(chat: Mapping[str, Any], req: ChatRequest, info: ResponsesInfo
                 ) -> dict[str, Any]:
    """The `response` object of a decided request, from its `chat.completion`."""
    choice = chat["choices"][0]
    msg = choice["message"]
    part: dict[str, Any] = {"type": "output_text", "text": msg.get("content") or "",
                            "annotations": []}
    if req.logprobs:
        part["logprobs"] = _logprobs(choice.get("logprobs"))
    output = [{"type": "message", "id": f"msg_{chat['id'].rsplit('-', 1)[-1]}",
               "status": "completed", "role": "assistant", "content": [part]}]
    incomplete = choice.get("finish_reason") == "length"
    usage = chat["usage"]
    return {
        "id": f"resp_{chat['id'].rsplit('-', 1)[-1]}", "object": "response",
        "created_at": chat["created"], "status": "incomplete" if incomplete else "completed",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": info.instructions, "max_output_tokens": None, "model": chat["model"],
        "output": output, "parallel_tool_calls": False, "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None}, "store": False, "temperature": None,
        "text": {"format": info.text_format}, "tool_choice": "auto", "tools": [],
        "top_p": None, "truncation": "disabled", "user": None,
        "metadata": info.metadata or {},
        "usage": {"input_tokens": usage["prompt_tokens"],
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": usage["completion_tokens"],
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": usage["total_tokens"]},
        "ensemble": chat["ensemble"],
    }


def response_events(doc: Mapping[str, Any], req: ChatRequest | None = None,
                    info: Any = None) -> Iterator[str]:
    """A response as the Responses API streams it, each event one server-sent event: created,
    in_progress, per output item its added / content part / text deltas / done events, and
    `response.completed` carrying the whole response (and the `ensemble` object)."""
    seq = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal seq
        seq += 1
        return (f"event: {kind}\ndata: "
                f"{json.dumps({'type': kind, 'sequence_number': seq - 1, **fields})}\n\n")

    pending = {**doc, "status": "in_progress", "output": [], "usage": None}
    pending.pop("ensemble", None)
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for oi, item in enumerate(doc["output"]):
        yield event("response.output_item.added", output_index=oi,
                    item={**item, "status": "in_progress", "content": []})
        for ci, part in enumerate(item["content"]):
            ids = {"item_id": item["id"], "output_index": oi, "content_index": ci}
            empty = {**part, "text": ""}
            if "logprobs" in part:
                empty["logprobs"] = []
            yield event("response.content_part.added", **ids, part=empty)
            text = part["text"]
            lps = part.get("logprobs") or []
            for i in range(0, len(text), CHUNK_CHARS):
                yield event("response.output_text.delta", **ids,
                            delta=text[i:i + CHUNK_CHARS], logprobs=lps if i == 0 else [])
            yield event("response.output_text.done", **ids, text=text, logprobs=lps)
            yield event("response.content_part.done", **ids, part=part)
        yield event("response.output_item.done", output_index=oi, item=item)
    kind = "response.completed" if doc["status"] == "completed" else "response.incomplete"
    yield event(kind, response=dict(doc))



RESPONSES = Wire("a Responses API request", to_chat, response_doc, response_events)
