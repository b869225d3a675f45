"""The local model draws n samples in one request on llama.cpp's parallel slots (issue 37's
leftover): each choice an independent sample (n at t > 0 differ, at t = 0 agree; with a seed,
sample i is seeded seed + i however the samples are split into requests), each sample's own
completion tokens (llama.cpp reports one choice's for the reply), and requests that do not
fit the server's KV cells wait or are split instead of failing in the server."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import ensemble.local as local
from ensemble import SampleRequest
from ensemble.sampling.sampler import Sampler


def _draw(sampler: Sampler, prompt: str, **params) -> list:
    before = sampler.stats.requests
    (row,) = asyncio.get_event_loop().run_until_complete(
        sampler.sample([SampleRequest.of(prompt, **params)]))
    return row, sampler.stats.requests - before


@pytest.mark.local_model
def test_n_samples_in_one_request_are_independent_and_counted_each(smollm2_path, monkeypatch):
    pytest.importorskip("xllamacpp", reason="xllamacpp not installed (pip install '.[local]')")
    # 4 slots in 160 cells: a request of 4 choices of 24 tokens does not fit (the prompt
    # counted as at most 94): split in two
    monkeypatch.setenv("ENSEMBLE_LOCAL_SLOTS", "4")
    monkeypatch.setenv("ENSEMBLE_LOCAL_CONTEXT", "160")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    sampler = Sampler(f"local:{smollm2_path}")
    try:
        loop.run_until_complete(sampler.__aenter__())
        caps = sampler.provider.capabilities
        assert caps.supports_n and caps.max_n == 4 and caps.max_concurrency == 1
        assert sampler.max_n == 4
        # t > 0: one request (the sampler's), four different samples, each its own tokens
        row, sent = _draw(sampler, "Name a colour.", temperature=1.0, k=4, max_tokens=24)
        assert sent == 1 and len(row) == 4 and all(s.text is not None for s in row)
        assert len({s.text for s in row}) > 1
        assert all(1 <= s.completion_tokens <= 24 for s in row)
        # each choice's tokens are its own: the count of its token logprobs
        row, sent = _draw(sampler, "Name an animal.", temperature=1.0, k=3, max_tokens=12,
                          logprobs=True)
        assert sent == 1
        assert [s.completion_tokens for s in row] == [len(s.logprobs["content"]) for s in row]
        # t = 0: the same sample three times
        row, _ = _draw(sampler, "What is 2 + 3?", temperature=0.0, k=3, max_tokens=8)
        assert len({s.text for s in row}) == 1
        # a seed: sample i is seeded seed + i, in one request of three or alone
        three, _ = _draw(sampler, "Name a fruit.", temperature=1.0, k=3, max_tokens=8, seed=7)
        alone, _ = _draw(sampler, "Name a fruit.", temperature=1.0, k=1, max_tokens=8, seed=9)
        assert alone[0].text == three[2].text
        assert len({s.text for s in three}) > 1
    finally:
        loop.run_until_complete(sampler.aclose())
        loop.close()
    assert local.running() == []


def test_requests_wait_for_the_servers_slots_and_cells_in_turn():
    seats = local.Seats(slots=4, cells=1000)
    order: list[str] = []

    async def request(name: str, seqs: int, cells: int, hold: float) -> None:
        await seats.hold(seqs, cells)
        order.append(f"+{name}")
        assert seats.seqs <= 4 and (seats.used <= 1000 or seats.seqs == seqs)  # or alone
        await asyncio.sleep(hold)
        order.append(f"-{name}")
        seats.give(seqs, cells)

    async def main() -> None:
        # a (3 slots) and b (1 slot) fit together; c (2 slots) waits for a; d (100 cells)
        # comes after c although it would fit earlier (first come, first served); e alone is
        # larger than the whole pool and still goes, once nothing else is in flight
        await asyncio.gather(request("a", 3, 300, 0.2), request("b", 1, 300, 0.05),
                             request("c", 2, 300, 0.05), request("d", 1, 100, 0.01),
                             request("e", 1, 5000, 0.01))

    asyncio.run(main())
    assert order.index("+c") > order.index("-a") and order.index("+d") > order.index("+c")
    assert order.index("+e") > max(order.index(f"-{x}") for x in "abcd")
    assert seats.peak == 4 and seats.seqs == 0 and seats.used == 0


def test_a_cancelled_wait_keeps_no_place_in_the_queue():
    seats = local.Seats(slots=1, cells=100)

    async def main() -> None:
        await seats.hold(1, 10)
        waiter = asyncio.ensure_future(seats.hold(1, 10))
        await asyncio.sleep(0.02)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        seats.give(1, 10)
        await asyncio.wait_for(seats.hold(1, 10), 5)  # not stuck behind the cancelled one

    asyncio.run(main())


def test_one_servers_requests_share_its_hold_on_the_cores():
    budget = local.CoreBudget(2)
    budget.take(2, owner="a")
    assert budget.try_take(2, owner="a")  # a second request to the same server joins
    assert not budget.try_take(2, owner="b")  # another server waits for the cores
    budget.give(2, owner="a")
    assert not budget.try_take(2, owner="b")  # a still has a request running
    done = threading.Event()

    def other() -> None:
        budget.take(2, owner="b")
        done.set()

    t = threading.Thread(target=other)
    t.start()
    time.sleep(0.05)
    assert not done.is_set()
    budget.give(2, owner="a")
    t.join(10)
    assert done.is_set() and budget.peak == 2
    budget.give(2, owner="b")
    assert budget.used == 0
