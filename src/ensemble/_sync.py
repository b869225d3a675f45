"""Event loops for sync code: run a coroutine to completion inside or outside a running loop
(`run_sync`, what a one-shot command does; SIGTERM stops it as Ctrl-C does, `Terminated`,
`stop_reason`), keep a loop on a background thread (`LoopThread`:
what each `Ensemble`'s sync calls run on, so its connections outlive a call, and what the
voting endpoint and the simulated server run on in tests and notebooks), and serve until SIGINT
or SIGTERM (`serve_until_signal`, what `ensemble serve` and `ensemble testing serve` do), and
hold an object bound to the loop it was made in, closed in that loop (`PerLoop`: the openai
provider's aiohttp session), and wait with a time limit without losing a cancellation
(`within`)."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

__all__ = ["LoopThread", "PerLoop", "Terminated", "outlive_caller", "run_sync",
           "serve_until_signal", "stop_reason", "within"]

T = TypeVar("T")


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Terminated(KeyboardInterrupt):
    """A command run by `run_sync` was stopped by SIGTERM (`kill`, `docker stop`, a cancelled
    CI job, systemd): it ended as after Ctrl-C (the requests in flight waited for and stored),
    and the process exits 143 (128 + SIGTERM) where Ctrl-C's exits 130. A KeyboardInterrupt,
    so that whatever handles Ctrl-C handles it too."""

    signum = signal.SIGTERM


# what is stopping the command `run_sync` runs in the main thread (set by its SIGTERM handler,
# read by whoever says so while the run winds down: `stop_reason`); a signal is the process's
_STOPPING: list[str] = []


def stop_reason() -> str | None:
    """How to name what is stopping the running command when it is SIGTERM ("terminated
    (SIGTERM)"); None otherwise (Ctrl-C, or nothing)."""
    return _STOPPING[0] if _STOPPING else None


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(coro), or, when a loop is already running (Jupyter, async code calling a
    sync API), run it on a fresh loop in a worker thread and wait for it.

    In the main thread SIGTERM stops the coroutine as asyncio.run's Ctrl-C does: its task is
    cancelled (what it does on cancellation runs: a sampler stores the replies in flight) and
    `Terminated` is raised; a second SIGTERM (or a Ctrl-C) cancels it again, ending that wait.
    Only over SIGTERM's default action: one the parent set to "ignore" stays ignored, as
    asyncio.run leaves an ignored SIGINT alone.

    The coroutine never runs inside an `except` block: an exception re-raised by the event loop
    there gets the handled exception as its `__context__`, which replaces the real cause (a
    refused connection read as "RuntimeError: no running event loop", then as a 500).
    """
    if _loop_running():
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ensemble-sync") as pool:
            return pool.submit(asyncio.run, coro).result()
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        return asyncio.run(coro)
    first: list[bool] = []  # SIGTERM came: was it the first stop (not after a Ctrl-C)?
    try:
        return asyncio.run(_until_sigterm(coro, first))
    except (asyncio.CancelledError, KeyboardInterrupt) as exc:
        if not first or isinstance(exc, Terminated):
            raise
        # stopped by a signal: the first one names it (a Ctrl-C then a SIGTERM ends as asyncio.
        # run does not: with the task cancelled twice it raises CancelledError)
        raise (Terminated() if first[0] else KeyboardInterrupt()) from None
    finally:
        _STOPPING.clear()


async def _until_sigterm(coro: Coroutine[Any, Any, T], first: list[bool]) -> T:
    """Await `coro` in this (asyncio.run's main) task, which SIGTERM cancels."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def on_sigterm() -> None:
        if not first:
            # after a Ctrl-C (asyncio.run cancelled the task already) it only ends the wait
            first.append(sys.version_info < (3, 11) or task.cancelling() == 0)
            if first[0]:
                _STOPPING.append("terminated (SIGTERM)")
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except NotImplementedError:  # Windows' event loops have no signal handlers: as before
        return await coro
    try:
        return await coro
    finally:
        loop.remove_signal_handler(signal.SIGTERM)  # back to the default action


class LoopThread:
    """An event loop of its own on a daemon thread.

    `start(startup)` runs `startup()` in the loop and returns once it has (its error raised
    here: a taken port fails the caller); the loop then runs until `stop(shutdown)`, which runs
    `shutdown()` in it, stops it, cancels and awaits every task still in it (a request handler
    aiohttp cancelled, a background job) and closes it, so that no task is left to be destroyed
    pending when the loop is garbage collected.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` in the loop and wait for its result (its error raised here). Called from
        any thread but the loop's own; an interrupted wait (Ctrl-C) cancels the coroutine."""
        loop = self.loop
        if loop is None:
            coro.close()
            raise RuntimeError(f"{self.name}: the loop is not running (start it first)")
        try:
            inside = asyncio.get_running_loop() is loop
        except RuntimeError:
            inside = False
        if inside:
            coro.close()
            raise RuntimeError(f"{self.name}: a sync call from inside its own event loop would "
                               "wait for itself; await the async form instead")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def start(self, startup: Callable[[], Coroutine[Any, Any, None]], *,
              timeout: float = 30.0) -> None:
        if self._thread is not None:
            return
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(startup())
            except BaseException as exc:  # noqa: BLE001 - raised by start()
                failed.append(exc)
            ready.set()
            if not failed:
                loop.run_forever()
            self._close(loop)

        self.loop = loop
        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        ready.wait(timeout)
        if failed:
            self._thread.join(timeout)
            self._thread = self.loop = None
            raise failed[0]

    def stop(self, shutdown: Callable[[], Coroutine[Any, Any, None]], *,
             timeout: float = 15.0) -> None:
        """Run `shutdown()` in the loop (its error raised here), then end the loop and its
        thread."""
        loop, thread = self.loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
            self._thread = self.loop = None

    def stop_soon(self, *, timeout: float = 5.0) -> None:
        """Ask the loop to end (its tasks cancelled, what it holds closed, then the loop)
        without running anything in it: what a finaliser may do from any thread. From another
        thread than the loop's own, wait for it to have ended (at most `timeout` seconds): at
        interpreter exit a daemon thread still closing would be frozen with its connections
        open."""
        loop, thread = self.loop, self._thread
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:  # closed in between
            return
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @staticmethod
    def _close(loop: asyncio.AbstractEventLoop) -> None:
        # what was scheduled together with the stop (a finaliser closing a PerLoop's object
        # as its owner is collected) takes its first step before the rest is cancelled
        loop.run_until_complete(asyncio.sleep(0))
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def outlive_caller(coro: Coroutine[Any, Any, T], *,
                         keep: set[asyncio.Task[Any]] | None = None) -> T:
    """Await `coro` as a task that outlives its caller: when the caller is cancelled, the
    task goes on alone (a request already sent, whose reply is to be stored); an error it
    ends with then is no one's to report (nor does `asyncio.run`'s shutdown report it), and it
    returns None. `keep`: a set holding the task until it ends, for whoever waits for such
    tasks before closing what they use (an interrupted run, for its replies in flight)."""
    gone = False

    async def alone() -> T | None:
        try:
            return await coro
        except Exception:
            if gone:
                return None
            raise

    task = asyncio.ensure_future(alone())
    if keep is not None:
        keep.add(task)
        task.add_done_callback(keep.discard)
    try:
        got = await asyncio.shield(task)
    except asyncio.CancelledError:
        gone = True
        raise
    return got  # type: ignore[return-value]  # None only once the caller is gone


async def within(aw: Awaitable[T], seconds: float) -> T:
    """`await aw`, raising `TimeoutError` after `seconds` (what `asyncio.wait_for` does), and
    never losing a cancellation of the caller. Python 3.11's `wait_for` runs `aw` as a second
    task and, when the caller is cancelled in the loop step that task completes in, returns
    its result instead (cpython gh-86296; 3.12 rebuilt `wait_for` on `asyncio.timeout`): the
    Ctrl-C that cancelled a run vanished and the caller went on to send its next request.
    `asyncio.timeout` awaits `aw` in the caller's own task, so nothing completes in between."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await aw
    return await asyncio.wait_for(aw, seconds)  # 3.10 has no asyncio.timeout


def serve_until_signal(serve: Coroutine[Any, Any, None]) -> None:
    """Run `serve` (a server's `serve_forever`) in a new event loop until SIGINT or SIGTERM
    cancels it: the server's own shutdown runs, and this returns normally. An error of the
    server (a taken port) is raised."""
    import signal

    async def main() -> None:
        task = asyncio.ensure_future(serve)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass

    asyncio.run(main())


class PerLoop(Generic[T]):
    """An object per event loop, made by `make()` on first use in a loop and closed by
    `close(obj)` in that loop, for objects bound to the loop they were made in (an aiohttp
    session). Loops used at once (an `Ensemble`'s sync-call thread and a caller's own loop)
    each keep theirs. Whichever way a loop or the owner ends, its object is closed:

    - `aclose()`: the running loop's now, the others' scheduled in their loops;
    - its loop shutting down: a guard (an async generator started in that loop) closes it
      when the loop shuts down its async generators, as `asyncio.run`, `asyncio.Runner`
      (pytest-asyncio) and `LoopThread` do before closing a loop;
    - the `PerLoop` collected while the loop runs on (its owner dropped): a finaliser
      schedules the close in the loop. A finaliser of its own, not the guard's: collected
      with its owner as cyclic garbage, the object's own finalisers (aiohttp's warnings)
      would run in the same pass, before the guard could close it.
    """

    def __init__(self, make: Callable[[], T], close: Callable[[T], Awaitable[object]]) -> None:
        self._make, self._close = make, close
        # loop -> (object, its guard); the finaliser holds this dict, never the PerLoop
        self._made: dict[asyncio.AbstractEventLoop, tuple[T, Any]] = {}
        self._finalizer = weakref.finalize(self, _close_elsewhere, self._made)
        self._finalizer.atexit = False  # at exit the loops have shut down (or never will)

    async def get(self) -> T:
        """The object of the running loop, made on first use in it."""
        loop = asyncio.get_running_loop()
        made = self._made.get(loop)
        if made is None:
            for gone in [lp for lp in list(self._made) if lp.is_closed()]:  # closed as they
                self._made.pop(gone, None)  # shut down
            obj = self._make()
            guard = _closing(obj, self._close)
            await guard.__anext__()  # inside the try: closed however the loop ends
            made = self._made[loop] = (obj, guard)
        return made[0]

    async def aclose(self) -> None:
        """Close the objects now (idempotent): the running loop's awaited, the others
        scheduled in their own loops."""
        here = self._made.pop(asyncio.get_running_loop(), None)
        _close_elsewhere(self._made)
        if here is not None:
            await here[1].aclose()


async def _closing(obj: T, close: Callable[[T], Awaitable[object]]) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await close(obj)


def _close_elsewhere(made: dict[asyncio.AbstractEventLoop, tuple[Any, Any]]) -> None:
    """Close `PerLoop` guards in their loops, from any thread (a closed loop closed its own
    as it shut down)."""
    items = list(made.items())
    made.clear()
    for loop, (_, guard) in items:
        if loop.is_closed():
            continue
        try:
            loop.call_soon_threadsafe(_start_close, loop, guard)
        except RuntimeError:  # closed in between
            pass


def _start_close(loop: asyncio.AbstractEventLoop, guard: Any) -> None:
    loop.create_task(guard.aclose())  # made here, in the loop: never left un-awaited
