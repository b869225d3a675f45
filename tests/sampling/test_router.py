"""Online sampling over several deployments with litellm's Router (`--router`, or a Router
passed to Sampler), against two simulated servers on 127.0.0.1, counting at each server."""

from __future__ import annotations

import pytest
import yaml

from ensemble.cli import main
from ensemble.errors import InputError
from ensemble.jsonio import loads
from ensemble.providers.options import ProviderOptions
from ensemble.providers.router import RouterProvider
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

TASK = get_task("boxball")
QS = TASK.questions()


def reqs(n, k=3):
    return [SampleRequest.of(q.prompt, temperature=1.0, k=k, tag=q.id, max_tokens=512)
            for q in QS[:n]]


def config(tmp_path, *deployments, settings=None):
    doc = {"model_list": [{"model_name": "grp", "litellm_params": {"model": "openai/sim", **d}}
                          for d in deployments]}
    if settings:
        doc["router_settings"] = settings
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def answers(rows):
    return [[s.answer for s in r] for r in rows]


async def test_two_deployments_share_the_work_each_within_its_own_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("SIM_KEY_B", "sk-deployment-b-0123456789")
    with SimulatedServer(lam1=0.5, seed=4, latency=0.05) as a, \
            SimulatedServer(lam1=0.5, seed=4, latency=0.05,
                            require_api_key="sk-deployment-b-0123456789") as b:
        path = config(tmp_path,
                      {"api_base": a.base_url, "api_key": "sk-deployment-a-0123456789",
                       "max_parallel_requests": 2},
                      {"api_base": b.base_url, "api_key": "os.environ/SIM_KEY_B",
                       "max_parallel_requests": 3})
        prov = RouterProvider.from_config(path, model="grp")
        assert prov.max_concurrency == 5 and "sk-" not in repr(prov)
        async with Sampler("grp", provider=prov, store=None, use_n=False) as s:
            res = await s.run(reqs(30), parser=TASK.parse)
        assert res.complete
        assert a.stats.requests > 10 and b.stats.requests > 10  # both deployments used
        assert a.stats.requests + b.stats.requests == 90
        assert a.stats.max_in_flight <= 2 and b.stats.max_in_flight <= 3
        assert b.stats.statuses.get(401, 0) == 0  # the key from the environment was sent
    with SimulatedServer(lam1=0.5, seed=4) as one:  # the same draws as one endpoint
        async with Sampler("openai/sim", api_base=one.base_url, store=None, use_n=False) as s:
            ref = await s.run(reqs(30), parser=TASK.parse)
    assert answers(res.rows) == answers(ref.rows)


async def test_a_deployments_rpm_is_its_own(tmp_path):
    with SimulatedServer(lam1=3.0) as a, SimulatedServer(lam1=3.0) as b:
        path = config(tmp_path, {"api_base": a.base_url, "api_key": "sk-x", "rpm": 6},
                      {"api_base": b.base_url, "api_key": "sk-x"})
        async with Sampler("grp", provider=RouterProvider.from_config(path, model="grp"),
                           store=None, use_n=False) as s:
            res = await s.run(reqs(20), parser=TASK.parse)
        assert res.complete
        # 6 a minute, evenly spaced: at most one request to a in this short run
        assert a.stats.requests <= 1 and a.stats.requests + b.stats.requests == 60


async def test_a_deployment_at_its_rate_limit_cools_down_and_the_work_moves(tmp_path):
    with SimulatedServer(lam1=3.0, latency=0.02, rate_limit=(3, 1.0),
                         rate_limit_retry_after=1.0) as a, \
            SimulatedServer(lam1=3.0, latency=0.02) as b:
        path = config(tmp_path, {"api_base": a.base_url, "api_key": "sk-x"},
                      {"api_base": b.base_url, "api_key": "sk-x"})
        async with Sampler("grp", provider=RouterProvider.from_config(path, model="grp"),
                           store=None, use_n=False) as s:
            res = await s.run(reqs(30), parser=TASK.parse)
            rate_limited = s.stats.rate_limited
        assert res.complete
        assert a.stats.rate_limited > 0  # a said 429 ...
        assert rate_limited == 0  # ... and the request went to b, not back to the sampler
        assert b.stats.statuses[200] > a.stats.statuses[200]
        assert sum(a.stats.served.values()) + sum(b.stats.served.values()) == 90


async def test_a_router_passed_to_the_sampler_is_wrapped():
    from ensemble.providers.litellm import litellm

    with SimulatedServer(lam1=3.0) as a, SimulatedServer(lam1=3.0) as b:
        router = litellm().Router(model_list=[
            {"model_name": "grp", "litellm_params": {"model": "openai/sim", "api_base": u,
                                                     "api_key": "sk-x"}}
            for u in (a.base_url, b.base_url)])
        async with Sampler("grp", provider=router, store=None) as s:
            assert isinstance(s.provider, RouterProvider)
            rows = await s.sample(reqs(6), parser=TASK.parse)
        assert len(rows) == 6 and a.stats.requests + b.stats.requests >= 6


async def test_a_given_price_prices_the_deployments_samples(tmp_path):
    # --price-per-1k-tokens (price_per_1k) prices the router's replies as any provider's
    # (CostPolicy.cost): each sample, the run's total, and the dry run's bound before them
    with SimulatedServer(lam1=3.0) as a, SimulatedServer(lam1=3.0) as b:
        path = config(tmp_path, {"api_base": a.base_url, "api_key": "sk-x"},
                      {"api_base": b.base_url, "api_key": "sk-x"})
        opts = ProviderOptions(price_per_1k=(1.0, 3.0))
        prov = RouterProvider.from_config(path, model="grp", options=opts)
        assert prov.price(1000, 1000) == 4.0
        async with Sampler("grp", provider=prov, store=None, use_n=False, options=opts) as s:
            est = s.estimate(reqs(4, k=2))
            assert est.cost_usd_max is not None and est.price.startswith("--price-per-1k")
            res = await s.run(reqs(4, k=2), parser=TASK.parse)
        assert res.complete and a.stats.requests > 0 and b.stats.requests > 0
        samples = [x for row in res.rows for x in row]
        for x in samples:
            assert x.cost_usd == pytest.approx(
                (x.prompt_tokens * 1.0 + x.completion_tokens * 3.0) / 1000)
        st = s.stats
        assert st.cost_usd == pytest.approx((st.prompt_tokens + 3.0 * st.completion_tokens) / 1000)
        assert st.cost_usd > 0


def test_eval_with_router_equals_the_direct_eval(tmp_path, capsys):
    with SimulatedServer(lam1=0.5, seed=6) as a, SimulatedServer(lam1=0.5, seed=6) as b:
        path = config(tmp_path, {"api_base": a.base_url, "api_key": "sk-x"},
                      {"api_base": b.base_url, "api_key": "sk-x"})
        common = ("eval", "boxball", "--t", "1", "--n", "1", "3", "--samples", "3",
                  "--limit", "10", "--json")
        assert main([*common, "--model", "grp", "--router", str(path),
                     "--out", str(tmp_path / "r")]) == 0
        routed = loads(capsys.readouterr().out)
        assert a.stats.requests > 0 and b.stats.requests > 0
        assert main([*common, "--model", "openai/sim", "--api-base", a.base_url,
                     "--out", str(tmp_path / "d")]) == 0
        direct = loads(capsys.readouterr().out)
    assert routed["results"] == direct["results"]


def test_router_config_mistakes_are_one_line(tmp_path, capsys):
    path = config(tmp_path, {"api_base": "http://127.0.0.1:9/v1", "api_key": "sk-x"})
    with pytest.raises(InputError, match="groups are: grp"):
        RouterProvider.from_config(path, model="other")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model_list: [")
    with pytest.raises(InputError, match="not valid YAML"):
        RouterProvider.from_config(bad, model="grp")
    bad.write_text("model_list: []")
    with pytest.raises(InputError, match="needs a `model_list`"):
        RouterProvider.from_config(bad, model="grp")
    base = ("eval", "boxball", "--model", "grp", "--t", "1", "--n", "1", "--router", str(path))
    assert main([*base, "--batch"]) == 1
    assert "use --batch with --api-base" in capsys.readouterr().err
    assert main([*base, "--api-base", "http://127.0.0.1:9/v1"]) == 1
    assert "drop --api-base" in capsys.readouterr().err
