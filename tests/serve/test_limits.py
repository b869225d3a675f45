"""The endpoint's shared limits, counted at the upstream: one limiter per upstream endpoint for
every request, a bounded queue (429 with Retry-After past it), a client that disconnects
cancelling its pending samples (the store keeps what was drawn), and the request timeout."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx
import pytest

from ensemble.sampling.parsing import choice_parser
from ensemble.sampling.store import SampleStore
from ensemble.serve import RequestLog, VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

QS = get_task("boxball").questions()
PARSE = choice_parser(["L", "R"])
SLOW = 0.5  # seconds per upstream reply of the slow upstream


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    store = str(tmp_path_factory.mktemp("serve") / "samples.sqlite")
    lines: list[str] = []
    with SimulatedServer(lam1=2.0, seed=5, latency=0.05, keep_replies=True) as fast, \
            SimulatedServer(lam1=2.0, seed=6, latency=SLOW, reject_n=True) as slow:
        lr = {"choices": ["L", "R"], "model": "openai/sim-expert"}
        main = parse_config({"port": 0, "max_queue": 64, "store": store, "models": {
            "many": {**lr, "api_base": fast.base_url, "n": 3, "temperature": 1.0,
                     "max_concurrency": 4},
            "cancel": {**lr, "api_base": slow.base_url, "n": 6, "temperature": 0.9,
                       "max_concurrency": 1},
            "timeout": {**lr, "api_base": slow.base_url, "n": 1, "temperature": 0.8,
                        "request_timeout": 0.2},
            "upstream-timeout": {**lr, "api_base": slow.base_url, "n": 1, "temperature": 0.6,
                                 "timeout": 0.2, "max_attempts": 1},
        }})
        small = parse_config({"port": 0, "max_queue": 2, "models": {
            "queued": {**lr, "api_base": slow.base_url, "n": 1, "temperature": 0.7}}})
        with VotingServer(main, log=RequestLog(sink=lines.append)) as srv, \
                VotingServer(small, log=RequestLog(sink=lines.append)) as srv_small:
            yield {"fast": fast, "slow": slow, "srv": srv, "small": srv_small, "store": store,
                   "lines": lines}


def _stored(path: str) -> int:
    store = SampleStore(path)
    try:
        return store.count()
    finally:
        store.close()


def _post(client, url, model, prompt, **kw):
    return client.post(f"{url}/chat/completions", timeout=kw.pop("timeout", 60),
                       json={"model": model, "messages": [{"role": "user", "content": prompt}],
                             **kw})


def test_forty_concurrent_requests_never_more_than_four_in_flight_upstream(env):
    prompts = [q.prompt for q in QS[:40]]

    async def main():
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=64)) as c:
            return await asyncio.gather(*(_post(c, env["srv"].base_url, "many", p)
                                          for p in prompts))

    rs = asyncio.run(main())
    assert [r.status_code for r in rs] == [200] * 40
    st = env["fast"].stats
    assert st.max_in_flight <= 4
    assert st.max_in_flight == 4  # and the limit was reached: the requests did overlap
    for p, r in zip(prompts, rs, strict=True):
        texts = [t for rep in st.replies if rep.prompt == p for t in rep.texts]
        votes = Counter(a for a in map(PARSE, texts) if a is not None)
        ens = r.json()["ensemble"]
        assert len(texts) == 3 and ens["votes"] == dict(votes)
        assert ens["decision"] is not None and votes[ens["decision"]] == max(votes.values())


def test_past_the_queue_bound_a_429_with_retry_after(env):
    async def main():
        async with httpx.AsyncClient() as c:
            return await asyncio.gather(*(_post(c, env["small"].base_url, "queued", q.prompt)
                                          for q in QS[100:106]))

    rs = asyncio.run(main())
    codes = Counter(r.status_code for r in rs)
    assert codes == {200: 2, 429: 4}
    for r in rs:
        if r.status_code == 429:
            assert r.headers["Retry-After"] == "1"
            assert r.json()["error"]["code"] == "queue_full"
            assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    # the bound counts requests in progress: once they are answered there is room again
    with httpx.Client() as c:
        assert _post(c, env["small"].base_url, "queued", QS[107].prompt).status_code == 200


def test_a_client_that_disconnects_cancels_its_pending_samples(env):
    slow = env["slow"]
    before = slow.stats.requests
    stored_before = _stored(env["store"])
    prompt = QS[200].prompt
    with httpx.Client() as c, pytest.raises(httpx.ReadTimeout):
        # 6 samples, one request each (the upstream rejects n), one at a time: ~3 s in all
        _post(c, env["srv"].base_url, "cancel", prompt, timeout=1.4)
    time.sleep(2.5 * SLOW + 1.0)  # long enough for the rest, had they been requested
    sent = slow.stats.requests - before
    # one probe of n (rejected at once), then at most the samples begun before the disconnect
    assert 2 <= sent <= 5
    assert any(" 499 model=cancel " in ln for ln in env["lines"])
    # every sample requested before the disconnect is in the store (the one in flight too:
    # its reply arrived after the client left), and nothing more: a repeat pays for none
    kept = _stored(env["store"]) - stored_before
    assert 1 <= kept < 6 and kept == sent - 1


def test_request_timeout_is_a_504_error_object(env):
    with httpx.Client() as c:
        r = _post(c, env["srv"].base_url, "timeout", QS[300].prompt)
    assert r.status_code == 504
    err = r.json()["error"]
    assert err["code"] == "request_timeout" and "0.2 s" in err["message"]
    assert "kept in its store" in err["message"]  # this endpoint has a store: true here
    stored = _stored(env["store"])
    time.sleep(SLOW + 0.3)  # the sample requested before the timeout arrives, and is kept
    assert _stored(env["store"]) == stored + 1


def test_an_upstream_timeout_is_a_504_naming_the_upstream(env):
    with httpx.Client() as c:
        r = _post(c, env["srv"].base_url, "upstream-timeout", QS[301].prompt)
    assert r.status_code == 504
    err = r.json()["error"]
    assert err["code"] == "upstream_timeout"
    assert "openai/sim-expert" in err["message"]
    assert env["slow"].base_url.removesuffix("/v1") in err["message"]
