"""Run a coroutine to completion from sync code, inside or outside a running event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(coro), or, when a loop is already running (Jupyter, async code calling a
    sync API), run it on a fresh loop in a worker thread and wait for it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ensemble-sync") as pool:
        return pool.submit(asyncio.run, coro).result()
