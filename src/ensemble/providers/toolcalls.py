"""A reply that calls tools, kept as text.

The engine keeps one text per sample (the store, the batch path, the parsers and the stopping
rules all read text). A reply message that calls tools (`message.tool_calls`, OpenAI's chat
format) is kept as `TOOL_CALLS_PREFIX` followed by the JSON of `{"content": ..., "tool_calls":
[{"id": ..., "type": "function", "function": {"name": ..., "arguments": "..."}}, ...]}`; a
reply without tool calls is its content, unchanged. The prefix starts with the ASCII record
separator (U+001E), which no model writes in a text reply, so the two never collide.

`reply_text` is how every provider turns a reply message into the sample's text;
`read_tool_calls` is how the answer kinds read it back (`ensemble.answers.toolcalls`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TOOL_CALLS_PREFIX", "ToolCallsReply", "read_tool_calls", "reply_text"]

TOOL_CALLS_PREFIX = "\x1etool_calls:"


@dataclass(frozen=True)
class ToolCallsReply:
    """A reply that calls tools: its text content (often None) and its calls, as sent
    (`{"id", "type", "function": {"name", "arguments"}}`, `arguments` a JSON string)."""

    content: str | None
    tool_calls: tuple[dict[str, Any], ...]


def _plain_call(call: Any) -> dict[str, Any] | None:
    dump = getattr(call, "model_dump", None)
    if callable(dump):  # litellm's and the SDK's message objects
        call = dump()
    if not isinstance(call, Mapping):
        return None
    fn = call.get("function")
    if not isinstance(fn, Mapping):
        return None
    args = fn.get("arguments")
    if not isinstance(args, str):  # some servers send the object itself
        args = json.dumps(args if args is not None else {})
    return {"id": call.get("id"), "type": call.get("type") or "function",
            "function": {"name": fn.get("name"), "arguments": args}}


def reply_text(content: Any, tool_calls: Sequence[Any] | None = None) -> str | None:
    """The text a reply message is kept as: its content, or, when it calls tools, the prefix
    and the JSON of its content and calls."""
    calls = [c for c in (_plain_call(c) for c in (tool_calls or ())) if c is not None]
    text = content if isinstance(content, str) or content is None else str(content)
    if not calls:
        return text
    return TOOL_CALLS_PREFIX + json.dumps({"content": text, "tool_calls": calls},
                                          ensure_ascii=False)


def read_tool_calls(text: str | None) -> ToolCallsReply | None:
    """The tool calls a sample's text holds (None: a text reply)."""
    if not text or not text.startswith(TOOL_CALLS_PREFIX):
        return None
    try:
        doc = json.loads(text[len(TOOL_CALLS_PREFIX):])
    except ValueError:
        return None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("tool_calls"), list):
        return None
    content = doc.get("content")
    return ToolCallsReply(content if isinstance(content, str) else None,
                          tuple(c for c in doc["tool_calls"] if isinstance(c, dict)))
