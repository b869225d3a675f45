"""Run a coroutine to completion from sync code, inside or outside a running event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(coro), or, when a loop is already running (Jupyter, async code calling a
    sync API), run it on a fresh loop in a worker thread and wait for it.

    The coroutine never runs inside an `except` block: an exception re-raised by the event loop
    there gets the handled exception as its `__context__`, which replaces the real cause (a
    refused connection read as "RuntimeError: no running event loop", then as a 500).
    """
    if not _loop_running():
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ensemble-sync") as pool:
        return pool.submit(asyncio.run, coro).result()
