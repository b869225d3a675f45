"""Running the voting endpoint: in the current event loop (`serve_forever`, what `ensemble
serve` does) or on a background thread (`with VotingServer(config) as srv:`, for tests and
notebooks). `base_url` is "http://HOST:PORT/v1", what OpenAI clients take as their base URL.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from .app import VotingApp
from .config import ServeConfig
from .logs import RequestLog

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
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    async def start_async(self) -> None:
        """Listen in the running loop (the port is known when this returns)."""
        from aiohttp import web

        # handler_cancellation: a client that disconnects cancels its request's samples
        self._runner = web.AppRunner(self.app.application(), access_log=None,
                                     handle_signals=False, handler_cancellation=True,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        for addr in self._runner.addresses:
            self.port = int(addr[1])
            break
        self.app.ensembles.warm_up()  # listening (a taken port fails fast), not yet announced

    async def stop_async(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
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
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="ensemble-serve", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self.start_async())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        # tasks left in the loop (litellm's logging worker) end here, not at garbage collection
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self.stop_async(), loop)
        try:
            fut.result(15)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(15)
            self._thread = None
            self._loop = None

    def __enter__(self) -> VotingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
