"""The simulated server in this process: an httpx transport that hands each request to a
`SimulatedServer`'s own route handlers, without a socket.

    server = SimulatedServer(lam1=3.0)
    Ensemble("openai/sim-expert", api_base=server.base_url, transport=server.transport())

The handlers are the HTTP server's (`SimulatedServer.routes()`): the same checks, the same
expert, the same statistics and the same reply bytes (JSON documents, server-sent events,
Files and Batch API documents). What the socket did is done here the way a client sees it:
a "drop" fault raises `RemoteProtocolError` (as a connection closed without a reply does), a
reply slower than the request's read timeout raises `ReadTimeout` (a "timeout" fault), and
`stats.connections` counts one connection per transport. The server need not be started (its
`base_url` then names port 0; the transport answers whatever host a request names).

The transport answers in the httpx flavour of the request it is given (`httpx`, or the
`httpx2` of openai 3.x): it works with either client without importing one it is not given.
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import functools
import importlib
import io
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from .wire import SSE_HEADERS

__all__ = ["InProcessTransport"]


@functools.cache
def _stream_type(httpx: Any) -> Any:
    """A reply body handed over in pieces (server-sent events), as the httpx flavour's
    `AsyncByteStream` (its client checks the type)."""

    class Events(httpx.AsyncByteStream):
        def __init__(self, events: list[bytes]) -> None:
            self.events = events

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for event in self.events:
                yield event

    return Events


@dataclass
class _Upload:
    """One file field of a multipart form (what aiohttp's `FileField` offers the handler)."""

    filename: str | None
    file: io.BytesIO


class _Connection:
    """What a handler asks of the socket: its peer, and `abort()` for a "drop" fault."""

    def __init__(self, peer: tuple[str, int]) -> None:
        self.peer = peer
        self.aborted = False

    def get_extra_info(self, name: str) -> Any:
        return self.peer if name == "peername" else None

    def abort(self) -> None:
        self.aborted = True


class _Request:
    """The part of an aiohttp request the simulator's handlers read."""

    def __init__(self, method: str, path: str, query: str, headers: Mapping[str, str],
                 body: bytes, match_info: dict[str, str], connection: _Connection) -> None:
        self.method = method
        self.path = path
        self.query = dict(parse_qsl(query))
        self.headers = headers
        self.body = body
        self.match_info = match_info
        self.transport = connection
        self.stream: list[bytes] | None = None
        self.status = 0

    async def read(self) -> bytes:
        return self.body

    async def json(self) -> Any:
        return json.loads(self.body)

    async def post(self) -> dict[str, Any]:
        """A multipart/form-data body as {name: text or _Upload} (aiohttp's `post()`)."""
        ctype = self.headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data"):
            raise ValueError("not a multipart/form-data body")
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {ctype}\r\n\r\n".encode() + self.body)
        form: dict[str, Any] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            filename = part.get_filename()
            if filename is not None or part.get_content_type() == "application/octet-stream":
                form[str(name)] = _Upload(filename, io.BytesIO(data))
            else:
                form[str(name)] = data.decode("utf-8")
        return form

    def stream_reply(self, events: list[bytes]) -> _Request:
        """Take a streamed reply (see `SimulatedServer._stream`): its events, in order."""
        self.stream = events
        self.status = 200
        return self


def _pattern(path: str) -> re.Pattern[str]:
    """An aiohttp route path ("/v1/files/{id}") as a regular expression."""
    return re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path)) + "$")


class InProcessTransport:
    """An httpx transport (`httpx.AsyncBaseTransport`'s interface) answering from a
    `SimulatedServer` in this process: give it to an httpx client (`transport=`) or to a
    provider (`transport=` in `ProviderOptions`, `Ensemble`, `Sampler`)."""

    _ids = iter(range(1, 1 << 62))

    def __init__(self, server: Any) -> None:
        self.server = server
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = [
            (method, _pattern(path), handler) for method, path, handler in server.routes()]
        self._connection = ("in-process", next(self._ids))

    def __repr__(self) -> str:
        return f"InProcessTransport({self.server.base_url})"

    async def __aenter__(self) -> InProcessTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        return None

    async def handle_async_request(self, request: Any) -> Any:
        """Answer one httpx request (the transport's one method)."""
        httpx = importlib.import_module(type(request).__module__.split(".")[0])
        body = await request.aread()
        url = request.url
        path = url.raw_path.decode("ascii").split("?", 1)[0]
        connection = _Connection(self._connection)
        timeouts = request.extensions.get("timeout") or {}
        read = timeouts.get("read")
        try:
            reply = await asyncio.wait_for(
                self._dispatch(request.method, path, url.query.decode("ascii"),
                               request.headers, body, connection), read)
        except asyncio.TimeoutError:
            raise httpx.ReadTimeout("timed out", request=request) from None
        if connection.aborted:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.",
                                            request=request)
        if isinstance(reply, _Request) and reply.stream is not None:
            events = _stream_type(httpx)(reply.stream)
            return httpx.Response(200, headers=SSE_HEADERS, stream=events, request=request)
        return httpx.Response(reply.status, headers=list(reply.headers.items()),
                              content=bytes(reply.body or b""), request=request)

    async def _dispatch(self, method: str, path: str, query: str, headers: Mapping[str, str],
                        body: bytes, connection: _Connection) -> Any:
        from aiohttp import web

        allowed = False
        for route_method, pattern, handler in self._routes:
            match = pattern.match(path)
            if match is None:
                continue
            if route_method != method:
                allowed = True
                continue
            return await handler(_Request(method, path, query, headers, body,
                                          match.groupdict(), connection))
        if allowed:
            return web.Response(status=405, text="405: Method Not Allowed")
        return web.Response(status=404, text="404: Not Found")
