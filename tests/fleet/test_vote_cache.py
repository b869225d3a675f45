"""The idempotent vote cache as a client sees it: a retried request (same Idempotency-Key) is
answered with the first reply as it was sent, body and vote headers (`x-ensemble-*`), whether
the retry reaches another replica (shared through a real redis-server) or the same one (no
Redis). Two in-process endpoints stand for two replicas here; tests/serve/test_fleet.py runs
real `ensemble serve` processes."""

from __future__ import annotations

from typing import Any

import httpx

from ensemble.serve import VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

PROMPT = get_task("boxball").questions()[3].prompt


def _config(upstream: str, redis_url: str | None) -> Any:
    doc: dict[str, Any] = {"port": 0, "models": {"box": {
        "model": "openai/sim-expert", "api_base": upstream, "n": 3, "choices": ["L", "R"]}}}
    if redis_url is not None:
        doc["fleet"] = {"redis_url": redis_url}
    return parse_config(doc)


def _post(srv: VotingServer, key: str, *, stream: bool = False) -> httpx.Response:
    body = {"model": "box", "stream": stream,
            "messages": [{"role": "user", "content": PROMPT}]}
    return httpx.post(f"{srv.base_url}/chat/completions", json=body, timeout=60,
                      headers={"Idempotency-Key": key})


def _vote_headers(r: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in r.headers.items() if k.startswith("x-ensemble-")}


def _check_replayed(first: httpx.Response, retry: httpx.Response) -> None:
    assert first.status_code == retry.status_code == 200
    assert "idempotent-replayed" not in first.headers
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.content == first.content
    assert retry.headers["content-type"].split(";")[0] == \
        first.headers["content-type"].split(";")[0]
    vote = _vote_headers(first)
    assert {"x-ensemble-decision", "x-ensemble-votes", "x-ensemble-samples"} <= set(vote)
    assert _vote_headers(retry) == vote


def test_a_retry_on_another_replica_gets_the_vote_headers_too(redis_server):
    with SimulatedServer(lam1=3.0, seed=21) as up:
        cfg = _config(up.base_url, redis_server.url)
        with VotingServer(cfg) as a, VotingServer(cfg) as b:
            first = _post(a, "order-1")
            paid = up.stats.requests
            retry = _post(b, "order-1")
            streamed = _post(a, "order-2", stream=True)
            streamed_retry = _post(b, "order-2", stream=True)
        assert up.stats.requests == 2 * paid  # each key paid once
    _check_replayed(first, retry)
    _check_replayed(streamed, streamed_retry)
    assert streamed_retry.headers["content-type"].startswith("text/event-stream")


def test_a_retry_on_the_same_replica_without_redis_gets_the_vote_headers_too():
    with SimulatedServer(lam1=3.0, seed=22) as up:
        with VotingServer(_config(up.base_url, None)) as srv:
            first = _post(srv, "order-3")
            paid = up.stats.requests
            retry = _post(srv, "order-3")
        assert up.stats.requests == paid
    _check_replayed(first, retry)


def test_a_claim_whose_replica_died_is_decided_by_the_retry(redis_server):
    # replica A claims a key and dies before deciding it (no keep, no drop, no more heartbeats
    # renewing the claim): a retry on B waits while the claim lives, then decides it itself,
    # and once B kept its reply, A's late answer cannot overwrite it
    import asyncio
    import time

    from ensemble.fleet import FleetConnection
    from ensemble.fleet.votes import Reply, VoteCache

    async def go() -> tuple[bool, float, bytes]:
        a_conn = FleetConnection(redis_server.url, heartbeat=0.1)
        b_conn = FleetConnection(redis_server.url, heartbeat=0.1)
        await a_conn.start()
        await b_conn.start()
        a = VoteCache(a_conn, lease_ttl=0.6)
        b = VoteCache(b_conn, lease_ttl=0.6)
        mine = await a.claim("/v1/chat/completions", "job-9", b"{}", timeout=1)
        await a_conn.aclose()  # killed: its heartbeat stops renewing the claim
        t0 = time.monotonic()
        theirs = await b.claim("/v1/chat/completions", "job-9", b"{}", timeout=10)
        waited = time.monotonic() - t0
        await b.keep(theirs, Reply("application/json", b'{"b": 1}'))
        await a_conn.start()  # the old owner comes back and answers late: not kept
        await a.keep(mine, Reply("application/json", b'{"a": 1}'))
        again = await b.claim("/v1/chat/completions", "job-9", b"{}", timeout=1)
        await a_conn.aclose()
        await b_conn.aclose()
        assert again.reply is not None
        return theirs.reply is None, waited, again.reply.body

    decides, waited, body = asyncio.run(go())
    assert decides  # the retry's turn to decide, not a reply
    assert 0.2 <= waited <= 8.0, waited  # it waited for the claim to expire (0.6 s)
    assert body == b'{"b": 1}'
