"""`ensemble._sync.within`: a wait with a time limit that never loses its caller's
cancellation (a Ctrl-C reaches a run as the cancellation of its task)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import ensemble
from ensemble._sync import within


async def test_a_cancellation_in_the_step_the_wait_ends_is_not_lost():
    """Python 3.11's `asyncio.wait_for` returned the result when its caller was cancelled in
    the loop step the awaited task completed (cpython gh-86296): a worker cancelled just as its
    limiter slot freed went on to send its request. Here the slot frees and the cancellation
    comes in the same step, every time."""
    loop = asyncio.get_running_loop()
    slot: asyncio.Future[str] = loop.create_future()
    sent: list[str] = []

    async def acquire() -> str:  # a limiter's acquire: waits for a free slot
        return await slot

    async def worker() -> None:
        ticket = await within(acquire(), 10.0)
        await asyncio.sleep(0)  # then the request: what a cancelled worker must not reach
        sent.append(ticket)

    task = asyncio.ensure_future(worker())
    for _ in range(3):  # the worker waits on the slot
        await asyncio.sleep(0)
    slot.set_result("ticket")
    loop.call_soon(task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sent == []


async def test_within_times_out_and_cancels_what_it_waited_for():
    cancelled = asyncio.Event()

    async def never() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(asyncio.TimeoutError):
        await within(never(), 0.05)
    assert cancelled.is_set()
    assert await within(asyncio.sleep(0, result="done"), 5.0) == "done"


def test_the_engine_waits_with_within_not_asyncio_wait_for():
    """The draw's waits (the limiter on a retry, a litellm request, a Batch API call) are
    where a Ctrl-C arrives: none may use 3.11's `asyncio.wait_for`."""
    src = Path(ensemble.__file__).parent
    found = [f"{p.relative_to(src)}:{n}" for part in ("sampling", "providers")
             for p in sorted((src / part).rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bwait_for\(", line) and not line.lstrip().startswith("#")]
    assert found == []
