"""The Responses API wire format (`POST /v1/responses`), read and written through the chat
pipeline: a request is translated to the chat request it stands for (`to_chat`), decided like
any chat request, and the `chat.completion` is rewritten as a `response` object
(`response_doc`) or as the Responses API's server-sent events (`response_events`).

What is read: `model`; `input` as a string or a list of messages (`{"role", "content"}` with
the content a string or `input_text` / `output_text` parts; `"type": "message"` optional);
`instructions` (sent first, as the system message); `text.format` (`text`, or `json_schema`:
voted field by field as chat's `response_format`); `stream`; `include:
["message.output_text.logprobs"]` with `top_logprobs` (the chosen sample's own logprobs);
function `tools` and `tool_choice` (the tool call voted as on chat; earlier calls and their
results as `function_call` / `function_call_output` input items); `extra_body={"ensemble":
{...}}` overrides. `store` is ignored (nothing is kept: the response
says `"store": false`); `temperature`, `top_p` and `max_output_tokens` are the served
ensemble's (listed under `ensemble.ignored`). The endpoint is stateless:
`previous_response_id`, `conversation` and `background` are refused in one line naming why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .replies import METADATA_CHARS, METADATA_KEYS, ChatCompletion, ResponseDoc, vote_metadata
from .wire import ChatRequest, RequestRejected, Wire, parse_chat_request, unread

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
# what a Responses request's fields are read for (the stateless ones are refused when set;
# `store` is answered "store": false); any other field is listed under ensemble.ignored
READ = ("model", "input", "instructions", "text", "stream", "include", "top_logprobs",
        "tools", "tool_choice", "metadata", "ensemble", "store", *STATELESS)
TEXT_PARTS = ("input_text", "output_text", "text")
CHUNK_CHARS = 64


@dataclass(frozen=True)
class ResponsesInfo:
    """What a Responses request says beyond its chat form (echoed in the response)."""

    instructions: str | None = None
    text_format: Any = None  # the request's text.format, echoed
    metadata: Any = None
    tools: Any = ()  # the request's tools and tool_choice, echoed
    tool_choice: Any = "auto"


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


def _tool_item(item: Mapping[str, Any], kind: str, where: str,
               out: list[dict[str, Any]]) -> None:
    """A `function_call` input item (the assistant's earlier call: joins the assistant message
    before it, or makes one) or a `function_call_output` (a tool message), in chat form."""
    call_id = item.get("call_id")
    if not isinstance(call_id, str):
        raise RequestRejected(f"{where}: a {kind} item needs its call_id", param=where)
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else _content(output, where)
        out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        return
    call = {"id": call_id, "type": "function",
            "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"}}
    if out and out[-1]["role"] == "assistant":
        out[-1].setdefault("tool_calls", []).append(call)
    else:
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _messages(raw: Any, instructions: Any) -> list[dict[str, Any]]:
    """The chat messages of `instructions` and `input` (earlier function calls and their
    outputs as the assistant's tool calls and tool messages)."""
    out: list[dict[str, Any]] = []
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
        if kind in ("function_call", "function_call_output"):
            _tool_item(item, kind, where, out)
            continue
        if kind != "message" or "role" not in item:
            raise RequestRejected(f"{where}: input items of type {kind!r} are not supported "
                                  "(messages, function_call and function_call_output are)",
                                  param=where)
        out.append({"role": item["role"], "content": _content(item.get("content"), where)})
    return out


def _tools(tools: Any, choice: Any) -> tuple[list[dict[str, Any]] | None, Any]:
    """The chat form of a request's function `tools` and `tool_choice`."""
    if tools is None or tools == []:
        return None, choice
    if not isinstance(tools, list):
        raise RequestRejected("tools must be a list of function tools", param="tools")
    out = []
    for i, t in enumerate(tools):
        kind = t.get("type") if isinstance(t, Mapping) else type(t).__name__
        if kind != "function":
            raise RequestRejected(f"tools[{i}]: {kind!r} tools are not supported (function "
                                  "tools are voted; the endpoint runs no hosted tools)",
                                  param="tools")
        out.append({"type": "function", "function": {
            k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}})
    if isinstance(choice, Mapping) and choice.get("type") == "allowed_tools":
        choice = {"type": "allowed_tools", "allowed_tools": {
            "mode": choice.get("mode", "auto"),
            "tools": [{"type": "function", "function": {"name": t.get("name")}}
                      for t in choice.get("tools") or [] if isinstance(t, Mapping)]}}
    elif isinstance(choice, Mapping):
        if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
            raise RequestRejected('tool_choice must be auto, none, required, {"type": '
                                  '"function", "name": NAME} or {"type": "allowed_tools", '
                                  '"mode": "auto", "tools": [...]}', param="tool_choice")
        choice = {"type": "function", "function": {"name": choice["name"]}}
    return out, choice


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


def _check_metadata(metadata: Any) -> None:
    """OpenAI's rule for `metadata`: at most 16 string keys (64 characters) to string values
    (512 characters); the reply adds the vote's keys where there is room."""
    if metadata is None:
        return
    if not isinstance(metadata, Mapping) or len(metadata) > METADATA_KEYS or not all(
            isinstance(k, str) and len(k) <= 64 and isinstance(v, str)
            and len(v) <= METADATA_CHARS for k, v in metadata.items()):
        raise RequestRejected(f"metadata must be an object of at most {METADATA_KEYS} string "
                              f"keys (64 characters) to strings of at most {METADATA_CHARS} "
                              "characters", param="metadata")


def to_chat(body: object) -> tuple[ChatRequest, ResponsesInfo]:
    """The chat request a Responses request stands for (RequestRejected naming the Responses
    field otherwise)."""
    if not isinstance(body, dict):
        raise RequestRejected("the request body must be a JSON object")
    for key, why in STATELESS.items():
        if body.get(key) not in (None, False):
            raise RequestRejected(f"{key} is not supported: {why}", param=key)
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
    tools, choice = _tools(body.get("tools"), body.get("tool_choice"))
    if tools is not None:
        chat["tools"] = tools
    if choice is not None and (tools is not None or choice != "auto"):
        chat["tool_choice"] = choice
    try:
        req = parse_chat_request(chat)
    except RequestRejected as exc:
        param = exc.param
        if param is not None:
            param = (param.replace("messages", "input").replace("response_format", "text.format"))
        raise RequestRejected(str(exc).replace("response_format", "text.format"),
                              status=exc.status, param=param, code=exc.code,
                              etype=exc.etype) from None
    ignored = [k for k in IGNORED if body.get(k) is not None]
    ignored += [k for k in unread(body, READ) if k not in ignored]
    if body.get("store") is True:  # nothing is kept: the response says "store": false
        ignored.append("store")
    req = replace(req, ignored=tuple(ignored))
    _check_metadata(body.get("metadata"))
    return req, ResponsesInfo(instructions=body.get("instructions"), text_format=echoed,
                              metadata=body.get("metadata"), tools=body.get("tools") or [],
                              tool_choice=body.get("tool_choice") or "auto")


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


def response_doc(chat: ChatCompletion, req: ChatRequest, info: ResponsesInfo) -> ResponseDoc:
    """The `response` object of a decided request, from its `chat.completion`."""
    choice = chat.choices[0]
    msg = choice.message
    uid = chat.id.rsplit("-", 1)[-1]
    part: dict[str, Any] = {"type": "output_text", "text": msg.content or "",
                            "annotations": []}
    if req.logprobs:
        part["logprobs"] = _logprobs(choice.logprobs)
    calls = msg.tool_calls or []
    output: list[dict[str, Any]] = []
    if part["text"] or not calls:
        output.append({"type": "message", "id": f"msg_{uid}", "status": "completed",
                       "role": "assistant", "content": [part]})
    output += [{"type": "function_call", "id": f"fc_{uid}_{i}", "call_id": c.id,
                "name": c.function.name, "arguments": c.function.arguments,
                "status": "completed"} for i, c in enumerate(calls)]
    incomplete = choice.finish_reason == "length"
    usage = chat.usage
    return ResponseDoc(
        id=f"resp_{uid}", created_at=chat.created,
        status="incomplete" if incomplete else "completed",
        incomplete_details={"reason": "max_output_tokens"} if incomplete else None,
        instructions=info.instructions, model=chat.model, output=output,
        parallel_tool_calls=len(calls) > 1, reasoning={"effort": None, "summary": None},
        text={"format": info.text_format}, tool_choice=info.tool_choice,
        tools=list(info.tools), metadata=vote_metadata(chat.ensemble, info.metadata),
        usage={"input_tokens": usage.prompt_tokens,
               "input_tokens_details": {"cached_tokens": 0},
               "output_tokens": usage.completion_tokens,
               "output_tokens_details": {"reasoning_tokens": 0},
               "total_tokens": usage.total_tokens},
        ensemble=chat.ensemble)


def response_events(response: ResponseDoc, req: ChatRequest | None = None,
                    info: object = None) -> Iterator[str]:
    """A response as the Responses API streams it, each event one server-sent event: created,
    in_progress, per output item its added / content part / text deltas / done events, and
    `response.completed` carrying the whole response (and the `ensemble` object)."""
    seq = 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal seq
        seq += 1
        return (f"event: {kind}\ndata: "
                f"{json.dumps({'type': kind, 'sequence_number': seq - 1, **fields})}\n\n")

    doc = response.model_dump()
    pending = {**doc, "status": "in_progress", "output": [], "usage": None}
    pending.pop("ensemble", None)
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for oi, item in enumerate(doc["output"]):
        if item["type"] == "function_call":
            ids = {"item_id": item["id"], "output_index": oi}
            yield event("response.output_item.added", output_index=oi,
                        item={**item, "status": "in_progress", "arguments": ""})
            yield event("response.function_call_arguments.delta", **ids,
                        delta=item["arguments"])
            yield event("response.function_call_arguments.done", **ids, name=item["name"],
                        arguments=item["arguments"])
            yield event("response.output_item.done", output_index=oi, item=item)
            continue
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



RESPONSES: Wire[ResponsesInfo, ResponseDoc] = Wire("a Responses API request", to_chat,
                                                   response_doc, response_events)
