"""The openai SDK provider: which model strings it serves, what it sends (the same body and
headers as litellm), cost without importing litellm, one pooled client per endpoint."""

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest

from ensemble.providers.base import INDEX_HEADER
from ensemble.providers.litellm import LiteLLMProvider
from ensemble.providers.openai import OpenAIProvider
from ensemble.providers.options import ProviderOptions
from ensemble.providers.registry import provider_for
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest
from ensemble.testing import SimulatedServer


@pytest.mark.parametrize("model,env,kind", [
    ("openai/gpt-4o-mini", None, OpenAIProvider),
    ("openai/sim", "openai", OpenAIProvider),
    ("openai/gpt-4o-mini", "litellm", LiteLLMProvider),
    ("anthropic/claude-3-5-haiku-latest", None, LiteLLMProvider),
    ("gpt-4o-mini", None, LiteLLMProvider),
])
def test_the_model_string_picks_the_provider_and_the_sampler_shows_it(monkeypatch, model, env,
                                                                      kind):
    if env is None:
        monkeypatch.delenv("ENSEMBLE_PROVIDER", raising=False)
    else:
        monkeypatch.setenv("ENSEMBLE_PROVIDER", env)
    opts = ProviderOptions(api_key="sk-test")
    assert type(provider_for(model, opts)) is kind
    s = Sampler(model, options=opts)
    assert type(s.provider) is kind and s.provider_name == kind.name


@pytest.fixture(scope="module")
def capture(serve_app):
    """An OpenAI-compatible server on 127.0.0.1 that records each request's headers and body
    and answers n choices with usage."""
    from aiohttp import web

    seen: list[tuple[dict, dict]] = []

    async def chat(request):
        body = await request.json()
        seen.append((dict(request.headers), body))
        n = int(body.get("n") or 1)
        choices = [{"index": i, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"<answer>{i}</answer>"},
                    "logprobs": {"content": [{"token": str(i), "logprob": -0.5, "bytes": None,
                                              "top_logprobs": []}]}} for i in range(n)]
        return web.json_response({"id": "c", "object": "chat.completion", "created": 1,
                                  "model": body["model"], "choices": choices,
                                  "usage": {"prompt_tokens": 1000, "completion_tokens": 200 * n,
                                            "total_tokens": 1000 + 200 * n}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    yield f"http://127.0.0.1:{serve_app(app)}/v1", seen


def _draw(url, model, provider, **params):
    os.environ["ENSEMBLE_PROVIDER"] = provider
    try:
        async def go():
            async with Sampler(model, api_base=url, store=None, use_n=True) as s:
                rows = await s.sample([SampleRequest.of("hi", temperature=0.3, k=2, **params)])
                return rows[0], s.stats.cost_usd, s.provider_name
        return asyncio.run(go())
    finally:
        os.environ.pop("ENSEMBLE_PROVIDER", None)


def test_both_providers_send_the_same_request_and_read_the_same_reply(capture):
    url, seen = capture
    params = dict(max_tokens=7, seed=3, stop=["</answer>"], logprobs=True, top_logprobs=2,
                  extra={"response_format": {"type": "json_object"},
                         "extra_body": {"top_k": 5}})
    got = {}
    for provider in ("openai", "litellm"):
        seen.clear()
        rows, cost, name = _draw(url, "openai/sim-x", provider, **params)
        assert name == provider and len(seen) == 1
        headers, body = seen[0]
        got[provider] = (body, [(s.text, s.logprobs) for s in rows], cost)
        assert headers.get(INDEX_HEADER) == "0" and body["n"] == 2
        assert body["response_format"] == {"type": "json_object"} and body["top_k"] == 5
        assert body["max_tokens"] == 7 and body["temperature"] == 0.3
        assert body["logprobs"] is True and body["top_logprobs"] == 2
        assert cost is None  # no price for an unknown model: unknown, not zero
    keys = ("model", "messages", "temperature", "n", "max_tokens", "seed", "stop", "logprobs",
            "top_logprobs", "response_format", "top_k")
    assert {k: got["openai"][0].get(k) for k in keys} == {k: got["litellm"][0].get(k)
                                                          for k in keys}
    def reply(p):  # texts and the first token's logprob, as the sampler stores them
        return [(t, lp["content"][0]["token"], lp["content"][0]["logprob"]) for t, lp in got[p][1]]
    assert reply("openai") == reply("litellm") == [("<answer>0</answer>", "0", -0.5),
                                                   ("<answer>1</answer>", "1", -0.5)]
    assert got["openai"][1][1][1]["content"][0]["token"] == "1"


def test_cost_comes_from_litellms_price_table_without_importing_litellm(capture):
    url, _ = capture
    _, ll_cost, _ = _draw(url, "openai/gpt-4o-mini", "litellm")
    code = textwrap.dedent(f"""
        import asyncio, sys
        from ensemble.sampling.sampler import Sampler
        from ensemble.sampling.types import SampleRequest
        async def go():
            async with Sampler("openai/gpt-4o-mini", api_base="{url}", store=None,
                               use_n=True) as s:
                await s.sample([SampleRequest.of("hi", temperature=0.3, k=2)])
                return s.stats.cost_usd, s.provider_name
        cost, name = asyncio.run(go())
        print(repr(cost), name, any(m.startswith("litellm") for m in sys.modules))
    """)
    env = {k: v for k, v in os.environ.items() if k != "ENSEMBLE_PROVIDER"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=env)
    assert res.returncode == 0, res.stderr
    cost, name, imported = res.stdout.split()
    # 1000 prompt and 400 completion tokens at gpt-4o-mini's listed price
    assert name == "openai" and imported == "False"
    assert ll_cost is not None and float(cost) == pytest.approx(ll_cost, rel=1e-9)


def test_each_providers_pool_is_sized_to_its_concurrency():
    with SimulatedServer(latency=1.0) as srv:
        async def go():
            a = Sampler("openai/a", api_base=srv.base_url, max_concurrency=40, store=None)
            b = Sampler("openai/b", api_base=srv.base_url, max_concurrency=40, store=None)
            async with a, b:
                reqs = [SampleRequest.of(f"p {i}", temperature=1.0) for i in range(40)]
                await asyncio.gather(a.sample(reqs[:20]), b.sample(reqs[20:]))
        os.environ["ENSEMBLE_PROVIDER"] = "openai"
        try:
            asyncio.run(go())
        finally:
            os.environ.pop("ENSEMBLE_PROVIDER", None)
        assert srv.stats.max_in_flight == 40


def test_the_sample_command_says_which_provider_served_it(monkeypatch):
    from ensemble.cli import main

    monkeypatch.delenv("ENSEMBLE_PROVIDER", raising=False)
    with SimulatedServer(lam1=2.0) as srv:
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(["sample", "--model", "openai/sim", "--api-base", srv.base_url, "--t",
                       "1", "-k", "3", "--json", "hello"])
    doc = json.loads(out.getvalue())
    assert rc == 0 and doc["provider"] == "openai" and len(doc["answers"]) == 3
