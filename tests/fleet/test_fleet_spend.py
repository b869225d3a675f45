"""The spend cap holds across the fleet (`max_cost`, a buffered ledger in a real redis-server):
two in-process endpoints stand for two replicas; tests/serve/test_fleet.py (marked `fleet`)
runs the same with real `ensemble serve` processes."""

from __future__ import annotations

import time
from typing import Any

import httpx

from ensemble.serve import VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

PROMPT = next(q for q in get_task("boxball").questions() if q.posterior > 0.95).prompt


def _ask(srv: VotingServer, prompt: str) -> httpx.Response:
    return httpx.post(f"{srv.base_url}/chat/completions", timeout=60, json={
        "model": "box", "messages": [{"role": "user", "content": prompt}]})


def _spent(srv: VotingServer) -> float:
    doc: dict[str, Any] = httpx.get(srv.base_url.rsplit("/v1", 1)[0] + "/health").json()
    return float(doc["spend"]["spent"])


def test_the_spend_cap_holds_across_two_replicas(redis_server):
    with SimulatedServer(lam1=3.0, seed=6) as up:
        # $1 per 1k tokens both ways: a 3-sample vote of this prompt costs ~$0.21
        cfg = parse_config({"port": 0, "max_cost": 1.0, "fleet": {"redis_url": redis_server.url},
                            "models": {"box": {"model": "openai/sim-expert",
                                               "api_base": up.base_url, "n": 3,
                                               "choices": ["L", "R"],
                                               "price_per_1k": [1.0, 1.0]}}})
        with VotingServer(cfg) as a, VotingServer(cfg) as b:
            codes, err, costs = [], None, []
            for i in range(12):
                r = _ask((a, b)[i % 2], f"{PROMPT} <{i}>")
                codes.append(r.status_code)
                if r.status_code == 200:
                    costs.append(r.json()["ensemble"]["cost_usd"])
                else:
                    err = r.json()["error"]
                    break
            # a heartbeat (1 s) later both replicas have flushed and read the ledger back
            end = time.monotonic() + 15
            while time.monotonic() < end and _spent(a) != _spent(b):
                time.sleep(0.1)
            views = (_spent(a), _spent(b))
            after = [_ask(s, f"{PROMPT} <after {i}>") for i, s in enumerate((a, b, a, b))]
            spent = max(_spent(a), _spent(b))
    assert codes[0] == 200 and codes[-1] == 429 and len(codes) >= 4, codes
    # one ledger: both replicas see the fleet's spend, and the fleet stops within one vote per
    # replica of the cap (what a heartbeat-old view of the other's spend lets through); a
    # ledger per replica lets each spend its own $1 (8 votes, $1.69, before a refusal)
    assert views[0] == views[1], views
    assert sum(costs) <= 1.0 + 2 * max(costs) + 1e-9, (sum(costs), costs)
    assert err is not None and err["code"] == "insufficient_quota"
    assert "spend cap of $1" in err["message"] and "\n" not in err["message"]
    assert [r.status_code for r in after] == [429] * 4  # refused on every replica
    assert 0.6 < spent <= 1.0 + 2 * max(costs) + 1e-9, spent  # the ledger says the same
