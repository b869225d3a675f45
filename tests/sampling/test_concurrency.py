"""Concurrency, throttling, pools, secrets and the local-model hook, through litellm and HTTP."""

import asyncio
import logging
import subprocess
import sys
import textwrap
import time

import pytest

from ensemble.errors import AuthenticationError
from ensemble.providers.endpoints import endpoint_key
from ensemble.providers.limiter import limiter_for
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest
from ensemble.testing import FaultPlan, SimulatedServer

pytestmark = pytest.mark.usefixtures("each_provider")  # both providers: conftest.py

MODEL = "openai/sim-expert"


def reqs(n, k=1, t=1.0, tag="p"):
    return [SampleRequest.of(f"{tag} {i}", temperature=t, k=k) for i in range(n)]


def test_http_pool_does_not_cap_concurrency():
    # httpx's default pool (100 connections) or a small aiohttp connector would cap this at 100
    with SimulatedServer(latency=2.0) as srv:  # long enough for every request to be sent
        async def go():
            async with Sampler(MODEL, api_base=srv.base_url, max_concurrency=150) as s:
                await s.sample(reqs(150))
        asyncio.run(go())
        assert srv.stats.max_in_flight == 150


HTTPX_SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from ensemble.sampling.sampler import Sampler
    from ensemble.sampling.types import SampleRequest
    reqs = [SampleRequest.of(f"p {i}", temperature=1.0) for i in range(130)]
    async def main():
        async with Sampler("openai/sim", api_base=sys.argv[1], max_concurrency=130) as s:
            rows = await s.sample(reqs)
        assert sum(len(r) for r in rows) == 130
        print("\\n".join(s.stats.notes))
    asyncio.run(main())
""")


def test_sampling_works_on_the_httpx_transport_and_says_what_caps_it(each_provider):
    # litellm's httpx transport (DISABLE_AIOHTTP_TRANSPORT=True) keeps httpx's default pool of
    # 100 connections; we no longer patch litellm's private transport factory to widen it (a
    # fresh install's litellm changed its signature, and every request failed), so concurrency
    # reaches that pool and the run says so, and every sample is drawn
    import os

    env = {**os.environ, "DISABLE_AIOHTTP_TRANSPORT": "True"}
    with SimulatedServer(latency=2.0) as srv:  # long enough for every request to be sent
        res = subprocess.run([sys.executable, "-c", HTTPX_SCRIPT, srv.base_url], env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert srv.stats.requests == 130
        if each_provider == "openai":  # litellm's transport is not involved: its own pool
            assert srv.stats.max_in_flight == 130 and "capped" not in res.stdout
            return
        assert 20 < srv.stats.max_in_flight <= 100
    assert "holds 100 connections per host" in res.stdout and "capped at 100" in res.stdout


def test_concurrency_bound_is_shared_per_endpoint():
    with SimulatedServer(latency=0.05) as srv:
        async def go():
            async with Sampler(MODEL, api_base=srv.base_url, max_concurrency=4) as a, \
                    Sampler("openai/other", api_base=srv.base_url, max_concurrency=4) as b:
                await asyncio.gather(a.sample(reqs(20, tag="a")), b.sample(reqs(20, tag="b")))
        asyncio.run(go())
        assert srv.stats.max_in_flight == 4 and srv.stats.requests == 40


def test_rate_limits_halve_concurrency_once_per_episode_and_it_recovers():
    # four 429s at once (one episode: the replies to requests sent before the first 429)
    plan = FaultPlan(first=4, kinds=("429",), retry_after=0.05)
    with SimulatedServer(latency=0.01, faults=plan) as srv:
        async def go():
            async with Sampler(MODEL, api_base=srv.base_url, max_concurrency=8) as s:
                lim = limiter_for(endpoint_key("openai", srv.base_url, "sk-no-key-required"),
                                  max_concurrency=8)
                await s.sample(reqs(8, tag="x"))
                after_429s = lim.limit
                await s.sample(reqs(150, tag="y"))
                return after_429s, lim.limit, lim.backpressure_events, s.stats
        after, final, events, stats = asyncio.run(go())
    assert events == 4 and after < 8  # halved once for the episode, not four times
    assert final == 8 and stats.retries == 4 and stats.rate_limited == 4


def test_rpm_spaces_requests():
    with SimulatedServer() as srv:
        async def go():
            async with Sampler(MODEL, api_base=srv.base_url, rpm=600) as s:
                t0 = time.perf_counter()
                await s.sample(reqs(11))
                return time.perf_counter() - t0
        assert asyncio.run(go()) >= 0.95  # 10 gaps of 60/600 s


def test_temperature_sent_unchanged_and_one_sampler_in_two_event_loops(box_questions, box_parse):
    from ensemble._sync import run_sync

    q = box_questions[7]
    with SimulatedServer(lam1=3.0) as srv:
        s = Sampler(MODEL, api_base=srv.base_url)

        async def inside_a_running_loop():  # run_sync runs it on a loop in a worker thread
            return run_sync(s.sample([SampleRequest.of(q.prompt, temperature=0.37, k=5),
                                      SampleRequest.of(q.prompt, temperature=1.7, k=3)],
                                     parser=box_parse))
        rows = asyncio.run(inside_a_running_loop())
        again = run_sync(s.sample([SampleRequest.of(q.prompt, temperature=0.37, k=2)]))
        assert sorted(set(srv.stats.temperatures)) == [0.37, 1.7]
    assert [len(r) for r in rows] == [5, 3] and len(again[0]) == 2


def test_no_secret_in_errors_logs_or_store(tmp_path, caplog, capfd, box_questions, box_parse):
    secret = "sk-SECRET-123"
    store = tmp_path / "secret.sqlite"
    caplog.set_level(logging.DEBUG)
    with SimulatedServer(require_api_key="sk-other") as srv:
        async def refused():
            async with Sampler(MODEL, api_base=srv.base_url, api_key=secret, store=store) as s:
                await s.sample([SampleRequest.of("hi", temperature=1.0)])
        with pytest.raises(AuthenticationError) as info:
            asyncio.run(refused())
    message = str(info.value)
    assert secret not in message and "api-key" in message and "\n" not in message
    with SimulatedServer(require_api_key=secret, lam1=2.0) as srv:
        async def accepted():
            async with Sampler(MODEL, api_base=srv.base_url, api_key=secret, store=store,
                               progress=True) as s:
                rows = await s.sample([SampleRequest.of(q.prompt, temperature=1.0, k=3)
                                       for q in box_questions[:5]], parser=box_parse)
                return rows, repr(s)
        rows, rep = asyncio.run(accepted())
    assert sum(len(r) for r in rows) == 15 and secret not in rep
    out, err = capfd.readouterr()
    assert secret not in out + err + caplog.text
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes()


def test_local_model_hook_acquires_and_releases(monkeypatch, tmp_path, box_questions,
                                                box_parse):
    import ensemble.local as local

    calls = []
    with SimulatedServer(lam1=3.0) as srv:
        endpoint = local.LocalEndpoint(model="openai/smollm2", api_base=srv.base_url,
                                       path="unused.gguf")
        (tmp_path / "w.gguf").write_bytes(b"GGUF weights")  # their sha256 names the source
        monkeypatch.setattr(local, "resolve_weights", lambda m: tmp_path / "w.gguf")
        monkeypatch.setattr(local, "acquire", lambda m: calls.append(("acquire", m)) or endpoint)
        monkeypatch.setattr(local, "release", lambda e: calls.append(("release", e.model)))

        async def go():
            async with Sampler("local", store=None) as s:
                return await s.sample([SampleRequest.of(box_questions[0].prompt,
                                                        temperature=1.0, k=4)], parser=box_parse)
        rows = asyncio.run(go())
        assert srv.stats.completions == 4
    assert calls == [("acquire", "local"), ("release", "openai/smollm2")] and len(rows[0]) == 4


def test_parser_errors_make_invalid_answers_not_crashes(box_questions):
    def broken(text):
        raise RuntimeError("parser bug")

    with SimulatedServer(lam1=3.0) as srv:
        async def go():
            async with Sampler(MODEL, api_base=srv.base_url) as s:
                return await s.sample([SampleRequest.of(box_questions[0].prompt,
                                                        temperature=1.0, k=3)], parser=broken), s
        rows, s = asyncio.run(go())
    assert [x.answer for x in rows[0]] == [None] * 3 and s.stats.invalid == 3
    assert any("parser raised RuntimeError" in n for n in s.stats.notes)
