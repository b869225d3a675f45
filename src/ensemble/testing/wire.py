"""The simulated server's wire: OpenAI-style error documents and replies, and what its Batch
API needs from the server (`ChatServer`). Shared by `server.py` and `batchapi.py`; neither
calls the other's private members."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["SSE_HEADERS", "ChatServer", "error_doc", "error_response"]

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}  # a stream's


def error_doc(message: str, etype: str, *, param: str | None = None,
              code: str | None = None) -> dict[str, Any]:
    """An OpenAI error document: {"error": {"message", "type", "param", "code"}}."""
    return {"error": {"message": message, "type": etype, "param": param, "code": code}}


def error_response(status: int, message: str, etype: str, *,
                   headers: Mapping[str, str] | None = None, param: str | None = None,
                   code: str | None = None) -> Any:
    """An aiohttp JSON reply carrying `error_doc`."""
    from aiohttp import web

    return web.json_response(error_doc(message, etype, param=param, code=code), status=status,
                             headers=headers)


class ChatServer(Protocol):
    """What the Batch API uses of the chat server it is mounted on."""

    stats: Any
    lock: threading.Lock

    def check_key(self, request: Any) -> Any:
        """None if the request's key passes, else the 401 reply."""
        ...

    def check_body(self, body: Any) -> tuple[int, dict[str, Any]] | None:
        """(status, error) for a chat request refused before answering, else None."""
        ...

    def misreport(self, doc: dict[str, Any], auth: str) -> None:
        """Make a reply document misreport as the server's faults say (echoed key, usage)."""
        ...

    def completion(self, body: dict[str, Any], *, start: int | None, number: int,
                   short_n: bool = False) -> tuple[int, dict[str, Any]]:
        """(status, document) of a chat completion."""
        ...
