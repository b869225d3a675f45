"""Request variants under load (issue 38 items 6 and 7): a served name's variants (a schema,
tools, overrides) share the server's one provider per upstream, so thousands of distinct
schemas leave the upstream connections and the kept variants bounded; the default upstream
concurrency does not throttle 32 clients of a normal upstream. Counted at the upstream."""

from __future__ import annotations

import asyncio

import httpx

from ensemble.serve import SERVE_MAX_CONCURRENCY, VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer, StructuredPlan

QS = get_task("boxball").questions()


def _schema(i: int) -> dict:
    return {"type": "json_schema", "json_schema": {"name": f"S{i}", "schema": {
        "type": "object", "properties": {"city": {"type": "string"}, f"n{i}": {
            "type": "integer"}}, "required": ["city", f"n{i}"]}}}


def test_distinct_schemas_share_one_provider_and_a_bounded_cache():
    with SimulatedServer(seed=4, structured=StructuredPlan({"city": "paris"})) as up:
        cfg = parse_config({"port": 0, "max_variants": 8, "models": {"judge": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 3}}})
        with VotingServer(cfg) as srv:
            async def main():
                sem = asyncio.Semaphore(4)
                async with httpx.AsyncClient(timeout=30) as c:
                    async def one(i):
                        async with sem:
                            return await c.post(f"{srv.base_url}/chat/completions", json={
                                "model": "judge", "response_format": _schema(i),
                                "messages": [{"role": "user", "content": f"City {i}?"}]})
                    return await asyncio.gather(*(one(i) for i in range(60)))

            rs = asyncio.run(main())
            assert [r.status_code for r in rs] == [200] * 60
            assert all(r.json()["ensemble"]["decision"]["city"] for r in rs)
            ensembles = srv.app.ensembles
            assert ensembles.variants <= 8  # the least recently used were dropped
            assert ensembles.connections == 1  # one provider for the one upstream
            # 60 schemas, 4 at a time: the upstream saw the one pool's connections, not one
            # pool per schema (each variant opened its own before)
            assert up.stats.connections <= 8, up.stats.connections


def test_the_default_concurrency_does_not_throttle_32_clients():
    assert parse_config({"models": {"m": {"model": "openai/x"}}}).models["m"] \
        .provider_options()["max_concurrency"] == SERVE_MAX_CONCURRENCY >= 32
    # each upstream reply takes 1 s: all 32 are in flight at once even on a loaded machine
    # (at 0.2 s the first replies could come back before the last requests were sent)
    with SimulatedServer(seed=5, lam1=2.0, latency=1.0) as up:
        cfg = parse_config({"port": 0, "models": {"box": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 3,
            "choices": ["L", "R"]}}})
        with VotingServer(cfg) as srv:
            async def main():
                async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(
                        max_connections=64)) as c:
                    return await asyncio.gather(*(c.post(
                        f"{srv.base_url}/chat/completions", json={
                            "model": "box", "messages": [{"role": "user",
                                                          "content": q.prompt}]})
                        for q in QS[:32]))

            rs = asyncio.run(main())
            assert [r.status_code for r in rs] == [200] * 32
            assert up.stats.max_in_flight == 32  # every client's decision upstream at once
