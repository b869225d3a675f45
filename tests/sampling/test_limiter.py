"""The endpoint limiter, directly: FIFO waiting that wakes one waiter per free slot, a shared
cool-down, a rate learned from backpressure, token budgets, users across threads and loops."""

import asyncio
import threading
import time

import pytest

from ensemble.providers.endpoints import endpoint_key
from ensemble.providers.limiter import EndpointLimiter, limiter_for


def test_at_most_max_in_flight_and_fifo_order():
    lim = EndpointLimiter("t", max_concurrency=3)
    order, peak = [], [0]

    async def user(i):
        t = await lim.acquire()
        peak[0] = max(peak[0], lim.in_flight)
        order.append(i)
        await asyncio.sleep(0.01)
        lim.release(t)

    async def go():
        await asyncio.gather(*(user(i) for i in range(30)))

    asyncio.run(go())
    assert peak[0] == 3 and order == list(range(30)) and lim.in_flight == 0


def test_a_release_wakes_one_waiter_not_all():
    lim = EndpointLimiter("t", max_concurrency=1)
    woken = []

    async def go():
        first = await lim.acquire()
        futs = []
        for i in range(200):
            async def wait(i=i):
                t = await lim.acquire()
                woken.append((i, time.monotonic()))
                return t
            futs.append(asyncio.ensure_future(wait()))
        await asyncio.sleep(0.01)
        assert not woken and lim.status().waiting == 200
        lim.release(first)
        await asyncio.sleep(0.01)
        assert len(woken) == 1  # one slot freed, one waiter granted
        tickets = [await futs[0]]
        for f in futs[1:]:
            lim.release(tickets[-1])
            tickets.append(await f)
        lim.release(tickets[-1])

    asyncio.run(go())
    assert [i for i, _ in woken] == list(range(200))


def test_backpressure_cools_the_whole_endpoint_down_once_per_episode():
    lim = EndpointLimiter("t", max_concurrency=8)

    async def go():
        tickets = [await lim.acquire() for _ in range(4)]
        t0 = time.monotonic()
        for t in tickets:  # four 429s from one burst: one episode
            lim.release(t, outcome="backpressure", retry_after=0.3)
        assert lim.limit == 4.0 and lim.backpressure_events == 4
        assert 0.25 < lim.status().cooldown_s <= 0.3
        nxt = await lim.acquire()  # every request waits out the shared cool-down
        waited = time.monotonic() - t0
        lim.release(nxt)
        return waited

    assert asyncio.run(go()) >= 0.28


def test_a_rate_is_learned_from_429s_while_busy_and_regrows():
    lim = EndpointLimiter("t", max_concurrency=8)

    async def go():
        for _ in range(20):  # 20 successes within the last second
            lim.release(await lim.acquire(), outcome="ok")
        lim.release(await lim.acquire(), outcome="backpressure", retry_after=0.05)
        learned = lim.learned_rate
        await asyncio.sleep(0.06)
        t0 = time.monotonic()
        for _ in range(10):  # paced: about 10 / 18 per second
            lim.release(await lim.acquire(), outcome="ok")
        return learned, time.monotonic() - t0

    learned, took = asyncio.run(go())
    assert learned == pytest.approx(0.9 * 20)
    assert 9 / 18 * 0.9 < took < 1.5


def test_random_429s_at_low_traffic_do_not_grind_the_rate_down():
    lim = EndpointLimiter("t", max_concurrency=4)

    async def go():
        for _ in range(3):
            lim.release(await lim.acquire(), outcome="ok")
            lim.release(await lim.acquire(), outcome="backpressure", retry_after=0.01)
            await asyncio.sleep(0.02)

    asyncio.run(go())
    assert lim.learned_rate is None  # cool-downs only


def test_token_budget_waits_for_the_minute_to_free_up():
    lim = EndpointLimiter("t", max_concurrency=4, tpm=1000)

    async def go():
        t = await lim.acquire()
        lim.release(t, tokens=900)
        # the next request is estimated at 900 tokens: over the budget for a minute
        task = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0.05)
        assert not task.done() and 59 < lim._tpm_wait(time.monotonic(), 900) <= 60
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert lim.in_flight == 0 and lim.status().waiting == 0

    asyncio.run(go())


def test_users_share_the_tightest_limit_while_they_overlap():
    lim = limiter_for(endpoint_key("test", "http://x/v1", None), max_concurrency=16)
    a = lim.attach(max_concurrency=8)
    b = lim.attach(max_concurrency=2, rpm=600)
    assert lim.max == 2 and lim.rpm == 600
    lim.detach(b)
    assert lim.max == 8 and lim.rpm is None
    lim.detach(a)


def test_one_limiter_across_threads_and_event_loops():
    lim = EndpointLimiter("t", max_concurrency=3)
    peak, lock = [0], threading.Lock()

    def thread():
        async def go():
            for _ in range(10):
                t = await lim.acquire()
                with lock:
                    peak[0] = max(peak[0], lim.in_flight)
                await asyncio.sleep(0.005)
                lim.release(t)
        asyncio.run(go())

    threads = [threading.Thread(target=thread) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert peak[0] <= 3 and lim.in_flight == 0


def test_endpoints_are_keyed_by_a_fingerprint_never_the_key():
    key = endpoint_key("openai", "http://h/v1/", "sk-secret-value-1234")
    assert key[:2] == ("openai", "http://h/v1") and "secret" not in key[2]
    assert key != endpoint_key("openai", "http://h/v1", "sk-other-value-5678")
