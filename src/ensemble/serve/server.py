"""Running the voting endpoint: in the current event loop (`serve_forever`, what `ensemble
serve` does) or on a background thread (`with VotingServer(config) as srv:`, for tests and
notebooks). `base_url` is "http://HOST:PORT/v1", what OpenAI clients take as their base URL.

Stopping drains: the replica stops listening (a new connection is refused, a new request on a
kept-alive connection gets 503 "draining"; /ready answers 503 from then on), the requests
already accepted (their body read) finish within `drain_timeout` seconds (30 by default), and
what is left then is cancelled. `ensemble serve` stops this way on SIGTERM or SIGINT; a second
signal stops at once.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from .._sync import LoopThread
from .app import VotingApp
from .config import ServeConfig
from .logs import RequestLog, http_logger

__all__ = ["VotingServer"]


class VotingServer:
    """The endpoint for a `ServeConfig`: its served ensembles are built on construction (a bad
    config fails here, before anything listens); `api_key`: the key clients must send."""

    def __init__(self, config: ServeConfig, *, api_key: str | None = None,
                 log: RequestLog | None = None) -> None:
        self.config = config
        self.host = config.host
        self.port = config.port
        self.app = VotingApp(config, api_key=api_key, log=log)
        self._runner: Any = None
        self._thread = LoopThread("ensemble-serve")  # tasks left at stop end there, not at GC

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def start_async(self) -> None:
        """Listen in the running loop (the port is known when this returns)."""
        from aiohttp import web

        # handler_cancellation: a client that disconnects cancels its request's samples
        # keepalive_timeout: aiohttp closes a connection that has not sent a whole request
        # (a header drip) or sits idle between requests after this long
        # shutdown_timeout: what is left after the drain (`stop_async`) gets 1 s more
        # logger: a client's unreadable body in one line, not aiohttp's traceback
        # auto_decompress: serve decodes a body's Content-Encoding itself (`encodings`), so
        # that one it cannot read is an OpenAI error, not aiohttp's plain-text 400
        self._runner = web.AppRunner(self.app.application(), access_log=None,
                                     handle_signals=False, handler_cancellation=True,
                                     shutdown_timeout=1.0, logger=http_logger(),
                                     keepalive_timeout=self.config.body_timeout,
                                     auto_decompress=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        for addr in self._runner.addresses:
            self.port = int(addr[1])
            break
        self.app.ensembles.warm_up()  # listening (a taken port fails fast), not yet announced

    async def stop_async(self) -> None:
        """Drain (stop listening, finish what was accepted within `drain_timeout`), then stop."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            replica = self.app.replica
            replica.drain()
            for site in list(runner.sites):
                await site.stop()  # no new connections from here on
            left = replica.describe()["accepted"]
            deadline = self.config.drain_timeout
            if left:
                t0 = time.monotonic()
                print(f"ensemble: draining: {left} accepted request{'s' if left != 1 else ''}"
                      f" to finish (at most {deadline:g} s)", file=sys.stderr, flush=True)
                done = await replica.drained(deadline)
                if done:
                    print(f"ensemble: drained in {time.monotonic() - t0:.1f} s",
                          file=sys.stderr, flush=True)
                else:
                    n = replica.describe()["accepted"]
                    print(f"ensemble: drain deadline ({deadline:g} s) passed: {n} request"
                          f"{'s' if n != 1 else ''} cancelled", file=sys.stderr, flush=True)
            await runner.cleanup()

    async def serve_forever(self, on_ready: Any = None) -> None:
        """Serve in the current loop until cancelled; `on_ready(base_url)` once listening."""
        await self.start_async()
        try:
            if on_ready is not None:
                on_ready(self.base_url)
            await asyncio.Event().wait()
        finally:
            await self.stop_async()

    # -- on a background thread ----------------------------------------------------------------
    def start(self) -> VotingServer:
        self._thread.start(self.start_async)
        return self

    def stop(self) -> None:
        self._thread.stop(self.stop_async)

    def __enter__(self) -> VotingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
