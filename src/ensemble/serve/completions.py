"""The legacy Completions wire format (`POST /v1/completions`, what prompt-style clients such
as `litellm.text_completion` send), read and written through the chat pipeline: the prompt is
sent upstream as one user message (the served ensembles are chat models), decided like any chat
request, and the `chat.completion` rewritten as a `text_completion` (`text_completion_doc`) or
its streamed chunks (`text_completion_frames`).

What is read: `model`; `prompt`, a string (or a list holding one string); `n` (as chat's:
one choice per distinct answer); `stream` with `stream_options`; `logprobs` (an integer k:
the chosen sample's own logprobs, with its top k alternatives, in the legacy layout of tokens,
token_logprobs, top_logprobs and text_offset); `echo` (the prompt before the text); `suffix`
is refused (no insertion mode); `best_of` above 1 is refused (the vote is the ensemble's
choice); sampling parameters are the served ensemble's, as for chat.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .replies import ChatCompletion, TextChoice, TextCompletion
from .wire import (
    MAX_TOP_LOGPROBS,
    ChatRequest,
    RequestRejected,
    Wire,
    parse_chat_request,
    unread,
)

__all__ = ["COMPLETIONS", "CompletionInfo", "text_completion_doc", "text_completion_frames",
           "to_chat"]

CHUNK_CHARS = 64
# what a completions request's fields are read for (suffix and best_of > 1 are refused)
READ = ("model", "prompt", "stream", "stream_options", "n", "logprobs", "echo", "suffix",
        "best_of", "ensemble")


@dataclass(frozen=True)
class CompletionInfo:
    """What a completions request says beyond its chat form."""

    prompt: str
    echo: bool = False


def _prompt(raw: Any) -> str:
    if isinstance(raw, list) and len(raw) == 1 and not isinstance(raw[0], int):
        raw = raw[0]
    if isinstance(raw, list) and raw and all(
            isinstance(x, int) and not isinstance(x, bool) or isinstance(x, list) for x in raw):
        raise RequestRejected("prompt is token ids; this endpoint votes on text (each member "
                              "may use its own tokenizer): send the prompt as a string",
                              param="prompt")
    if isinstance(raw, list):
        raise RequestRejected(f"prompt holds {len(raw)} items; send one prompt (a string) per "
                              "request", param="prompt")
    if not isinstance(raw, str) or not raw.strip():
        raise RequestRejected("prompt must be a non-empty string", param="prompt")
    return raw


def to_chat(body: object) -> tuple[ChatRequest, CompletionInfo]:
    """The chat request a completions request stands for."""
    if not isinstance(body, dict):
        raise RequestRejected("the request body must be a JSON object")
    prompt = _prompt(body.get("prompt"))
    if body.get("suffix"):
        raise RequestRejected("suffix is not supported (no insertion mode: the prompt is sent "
                              "as a chat message)", param="suffix")
    best_of = body.get("best_of")
    if best_of not in (None, 1):
        raise RequestRejected("best_of is not supported: the ensemble's vote chooses the "
                              "reply; set its samples with extra_body={\"ensemble\": {\"n\": "
                              "...}}", param="best_of")
    k = body.get("logprobs")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int)
                          or not 0 <= k <= MAX_TOP_LOGPROBS):
        raise RequestRejected(f"logprobs must be an integer from 0 to {MAX_TOP_LOGPROBS}, got "
                              f"{k!r}", param="logprobs")
    echo = body.get("echo", False)
    if echo not in (True, False, None):
        raise RequestRejected(f"echo must be a boolean, got {echo!r}", param="echo")
    chat: dict[str, Any] = {"model": body.get("model"),
                            "messages": [{"role": "user", "content": prompt}],
                            "stream": body.get("stream", False), "n": body.get("n"),
                            "stream_options": body.get("stream_options"),
                            "ensemble": body.get("ensemble")}
    if k is not None:
        chat.update(logprobs=True, top_logprobs=k)
    req = parse_chat_request(chat)
    return (replace(req, ignored=unread(body, READ)),
            CompletionInfo(prompt=prompt, echo=bool(echo)))


def _legacy_logprobs(lp: Any, offset: int) -> dict[str, Any] | None:
    """A chat choice's logprobs in the Completions layout (text offsets from `offset`)."""
    if not isinstance(lp, Mapping) or not isinstance(lp.get("content"), list):
        return None
    tokens, values, tops, offsets = [], [], [], []
    at = offset
    for t in lp["content"]:
        token = str(t.get("token", ""))
        tokens.append(token)
        values.append(t.get("logprob"))
        tops.append({u.get("token"): u.get("logprob") for u in t.get("top_logprobs") or []})
        offsets.append(at)
        at += len(token)
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops,
            "text_offset": offsets}


def text_completion_doc(chat: ChatCompletion, req: ChatRequest, info: CompletionInfo
                        ) -> TextCompletion:
    """The `text_completion` of a decided request, from its `chat.completion`."""
    head = info.prompt if info.echo else ""
    choices = [TextChoice(index=ch.index, text=head + (ch.message.content or ""),
                          logprobs=_legacy_logprobs(ch.logprobs, len(head))
                          if req.logprobs else None, finish_reason=ch.finish_reason)
               for ch in chat.choices]
    return TextCompletion(id=chat.id.replace("chatcmpl", "cmpl", 1), created=chat.created,
                          model=chat.model, choices=choices, usage=chat.usage,
                          ensemble=chat.ensemble)


def text_completion_frames(doc: TextCompletion, req: ChatRequest, info: object = None
                           ) -> Iterator[str]:
    """A `text_completion` as the server-sent events OpenAI streams: per choice its text in
    pieces (the first carrying the logprobs), a finish chunk (the last one carrying the
    `ensemble` object); with `include_usage`, a last chunk without choices; `data: [DONE]`."""
    head = {"id": doc.id, "object": "text_completion", "created": doc.created,
            "model": doc.model, "system_fingerprint": None}
    extra = {"usage": None} if req.include_usage else {}
    last = len(doc.choices) - 1
    for ch in doc.choices:
        text = ch.text
        for i in range(0, len(text), CHUNK_CHARS):
            chunk = {**head, "choices": [{"index": ch.index, "text": text[i:i + CHUNK_CHARS],
                                          "logprobs": ch.logprobs if i == 0 else None,
                                          "finish_reason": None}], **extra}
            yield f"data: {json.dumps(chunk)}\n\n"
        final: dict[str, Any] = {**head, "choices": [{"index": ch.index, "text": "",
                                                      "logprobs": None,
                                                      "finish_reason": ch.finish_reason}],
                                 **extra}
        if ch.index == last:
            final["ensemble"] = doc.ensemble.model_dump()
        yield f"data: {json.dumps(final)}\n\n"
    if req.include_usage:
        chunk = {**head, "choices": [], "usage": doc.usage.model_dump()}
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


COMPLETIONS: Wire[CompletionInfo, TextCompletion] = Wire(
    "a completions request", to_chat, text_completion_doc, text_completion_frames)
