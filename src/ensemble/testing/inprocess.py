"""The simulated server in this process, behind the providers' one HTTP seam
(`ensemble.providers.http.Transport`):

    server = SimulatedServer(lam1=3.0)
    Ensemble("openai/sim-expert", api_base=server.base_url, transport=server.transport())

The server's own aiohttp application is served on the event loop of the client that calls it,
over a Unix socket made for that loop, and the client's production code talks to it: the
openai provider's aiohttp session (a `UnixConnector` in place of the network's
`TCPConnector`), the openai SDK's httpx client (an httpx `uds` transport: the Files and Batch
API, litellm's `client=`), or any httpx client given the transport. So the request, its
timeout, its errors and the reading of the reply are the code that runs against a hosted
provider, and every fault the server injects (429 with Retry-After, 5xx, hangs, slow and
malformed replies, dropped connections, fewer choices) reaches the client as it does over
TCP, from the same server code.

Why a Unix socket of the caller's loop rather than the server's own thread and port: one
thread, no port, no TCP handshake; a request took about 0.55 of what the SDK's client over the
former socket-free transport took (its HTTP stack, not the server, was the cost) and about
0.75 of what it takes over TCP to the server's thread (docs/sampling.md, "One HTTP seam").
The server need not be started: `base_url` then names port 0, and the transport answers
whatever host a request names. Its handlers run on the client's loop: a batch the server
runs in the background lives as long as that loop (a test whose batch must outlive the
submitting loop uses the server over TCP). POSIX only (asyncio serves Unix sockets there).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import importlib
import os
import shutil
import tempfile
from types import ModuleType
from typing import Any

from .._sync import PerLoop

__all__ = ["InProcessTransport"]


class _Site:
    """The server's application listening on one event loop's Unix socket, started by the
    first request of that loop and closed when the loop shuts down (or the transport is
    collected while it runs)."""

    def __init__(self, server: Any, path: str) -> None:
        self.server = server
        self.path = path
        self.runner: Any = None
        self.started: asyncio.Task[None] | None = None
        self.clients: dict[ModuleType, Any] = {}  # httpx module -> its uds transport

    async def ready(self) -> None:
        started = self.started
        if started is None:
            started = self.started = asyncio.ensure_future(self._start())
        if not started.done():
            await asyncio.shield(started)  # a cancelled first caller leaves it starting
        started.result()

    async def _start(self) -> None:
        from aiohttp import web

        runner = self.server.runner()
        await runner.setup()
        self.runner = runner
        await web.UnixSite(runner, self.path).start()

    def httpx(self, httpx: ModuleType) -> Any:
        """This loop's httpx transport to the socket, in the flavour of `httpx`."""
        client = self.clients.get(httpx)
        if client is None:  # plain HTTP: no TLS context (loading the CA bundle took ~80 ms)
            client = self.clients[httpx] = httpx.AsyncHTTPTransport(uds=self.path,
                                                                     verify=False)
        return client

    async def aclose(self) -> None:
        clients, self.clients = list(self.clients.values()), {}
        for client in clients:
            await client.aclose()
        if self.started is not None and not self.started.done():
            self.started.cancel()
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()
        try:
            os.unlink(self.path)
        except OSError:
            pass


@functools.cache
def _connector_type() -> type:
    """aiohttp's `UnixConnector` that has its loop's site listening before it connects
    (`connect`, the connector's public method); made on first use, so that importing
    `ensemble.testing` does not import aiohttp."""
    import aiohttp

    class Connector(aiohttp.UnixConnector):
        def __init__(self, transport: InProcessTransport, path: str, limit: int) -> None:
            super().__init__(path=path, limit=limit, limit_per_host=limit)
            self.ensemble_transport = transport

        async def connect(self, *args: Any, **kwargs: Any) -> Any:
            await self.ensemble_transport.listening()
            return await super().connect(*args, **kwargs)

    return Connector


class InProcessTransport:
    """A `SimulatedServer` in this process, served on the caller's event loop over a Unix
    socket (see the module docstring): the providers' `transport=` option
    (`ensemble.providers.http.Transport`), and an httpx transport
    (`handle_async_request`) for any httpx client, `httpx` or the SDK's `httpx2`."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self._sites: PerLoop[_Site] = PerLoop(
            functools.partial(_new_site, server, id(self)), _close_site)

    def __repr__(self) -> str:
        return f"InProcessTransport({self.server.base_url})"

    # -- the providers' seam ---------------------------------------------------------------
    def connector(self, limit: int) -> Any:
        """An aiohttp connector to this loop's socket, of at most `limit` connections."""
        return _connector_type()(self, _socket_path(id(self)), limit)

    def proxy(self, url: str) -> dict[str, Any]:
        """No proxy: the environment's proxies are the network's."""
        return {}

    def httpx_transport(self, httpx: ModuleType) -> InProcessTransport:
        """Itself: it answers requests of either httpx flavour."""
        return self

    async def listening(self) -> _Site:
        """This loop's site, listening."""
        site = await self._sites.get()
        await site.ready()
        return site

    # -- an httpx transport -----------------------------------------------------------------
    async def __aenter__(self) -> InProcessTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Nothing to close for one client: a loop's socket is closed when the loop ends."""
        return None

    async def handle_async_request(self, request: Any) -> Any:
        """Send one httpx request to this loop's socket (the transport's one method), with
        an httpx transport of the request's own flavour."""
        httpx = importlib.import_module(type(request).__module__.split(".")[0])
        site = await self.listening()
        return await site.httpx(httpx).handle_async_request(request)


@functools.cache
def _folder() -> str:
    """The process's folder of sockets, made on first use and removed at exit (a short path:
    a Unix socket's path holds about 100 bytes)."""
    folder = tempfile.mkdtemp(prefix="ensemble-sim-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _socket_path(owner: int) -> str:
    """The socket of transport `owner` (its id) on the running loop (ids are unique while
    their objects live; a site removes its socket when it closes)."""
    return os.path.join(_folder(), f"{owner:x}-{id(asyncio.get_running_loop()):x}.sock")


def _new_site(server: Any, owner: int) -> _Site:
    return _Site(server, _socket_path(owner))


async def _close_site(site: _Site) -> None:
    await site.aclose()
