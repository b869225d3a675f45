"""The in-process transport is the HTTP server in this process, reached by the providers'
production clients: the same bytes for the same requests as over TCP (two servers with the
same settings), the same errors where a socket misbehaves, every fault reaching each provider
as the same error it raises over TCP (the openai provider's one POST, timeout and error path), the
Batch API's multipart upload, and both providers through the `transport=` provider option."""

import asyncio
import json
import re

import httpx2 as httpx
import pytest

from ensemble import Ensemble
from ensemble.errors import InputError, ProviderError
from ensemble.providers.base import INDEX_HEADER
from ensemble.providers.litellm import LiteLLMProvider
from ensemble.providers.openai import OpenAIProvider
from ensemble.providers.options import ProviderOptions
from ensemble.providers.params import SamplingParams
from ensemble.tasks import get_task
from ensemble.testing import FaultPlan, InProcessTransport, SimulatedServer

QS = get_task("boxball").questions()
MESSAGES = [{"role": "user", "content": QS[0].prompt}]

REQUESTS = [
    ("POST", "/v1/chat/completions", {"model": "sim-expert", "messages": MESSAGES}, {}),
    ("POST", "/v1/chat/completions",
     {"model": "sim-expert", "messages": MESSAGES, "n": 3, "temperature": 0.7, "logprobs": True,
      "top_logprobs": 2}, {INDEX_HEADER: "5"}),
    ("POST", "/v1/chat/completions",
     {"model": "sim-expert", "messages": MESSAGES, "n": 2, "stream": True,
      "stream_options": {"include_usage": True}}, {INDEX_HEADER: "0"}),
    ("POST", "/v1/chat/completions", {"model": "nope", "messages": MESSAGES}, {}),
    ("POST", "/v1/chat/completions", {"model": "sim-expert", "messages": MESSAGES, "n": 500}, {}),
    ("POST", "/v1/chat/completions", b"{not json", {}),
    ("GET", "/v1/models", None, {}),
    ("GET", "/v1/batches/batch-none", None, {}),
    ("DELETE", "/v1/models", None, {}),
    ("GET", "/v1/nowhere", None, {}),
]


def settings():
    return {"lam1": 3.0, "seed": 7, "models": ["sim-expert"], "require_api_key": "sk-test"}


async def exchange(client):
    out = []
    for method, path, body, headers in REQUESTS:
        kw = {"content": body} if isinstance(body, bytes) else {"json": body}
        r = await client.request(method, path, headers={"Authorization": "Bearer sk-test",
                                                        **headers}, **kw)
        # the creation time is the clock's, not the server's state
        text = re.sub(rb'"created": \d+', b'"created": 0', await r.aread())
        out.append((r.status_code, r.headers.get("content-type"), text))
    return out


def test_same_bytes_as_the_http_server():
    with SimulatedServer(**settings()) as http_srv:
        async def over_http():
            async with httpx.AsyncClient(base_url=http_srv.base_url.removesuffix("/v1")) as c:
                return await exchange(c)

        expected = asyncio.run(over_http())
    local = SimulatedServer(**settings())

    async def in_process():
        async with httpx.AsyncClient(base_url="http://sim", transport=local.transport()) as c:
            return await exchange(c)

    got = asyncio.run(in_process())
    assert [g[0] for g in got] == [200, 200, 200, 404, 400, 400, 200, 404, 405, 404]
    assert got == expected
    assert got[2][2].endswith(b"data: [DONE]\n\n") and got[2][1] == "text/event-stream"
    assert local.stats.requests == http_srv.stats.requests == 6
    assert local.stats.served == http_srv.stats.served and local.stats.streamed == 1


@pytest.mark.parametrize("fault,error", [("drop", "RemoteProtocolError"),
                                         ("timeout", "ReadTimeout")])
def test_a_misbehaving_socket_raises_what_the_network_raises(fault, error):
    plan = FaultPlan(first=1, kinds=(fault,), hang=5.0)
    body = {"model": "sim-expert", "messages": MESSAGES}

    async def post(client):
        with pytest.raises(httpx.TransportError) as caught:
            await client.post("/v1/chat/completions", json=body, timeout=0.3)
        ok = await client.post("/v1/chat/completions", json=body, timeout=5)
        return type(caught.value).__name__, ok.status_code

    with SimulatedServer(faults=plan) as srv:
        async def over_http():
            async with httpx.AsyncClient(base_url=srv.base_url.removesuffix("/v1")) as c:
                return await post(c)

        assert asyncio.run(over_http()) == (error, 200)
    local = SimulatedServer(faults=plan)

    async def in_process():
        async with httpx.AsyncClient(base_url="http://sim", transport=local.transport()) as c:
            return await post(c)

    assert asyncio.run(in_process()) == (error, 200)
    assert local.stats.faults[fault] == 1


def test_the_batch_api_through_the_transport():
    import openai

    srv = SimulatedServer(lam1=3.0, seed=1)
    lines = [json.dumps({"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions",
                         "body": {"model": "sim-expert", "messages": [
                             {"role": "user", "content": q.prompt}]}})
             for i, q in enumerate(QS[:3])]

    async def go():
        client = openai.AsyncOpenAI(api_key="sk-x", base_url="http://sim/v1", max_retries=0,
                                    http_client=openai.DefaultAsyncHttpxClient(
                                        transport=srv.transport()))
        f = await client.files.create(file=("in.jsonl", "\n".join(lines).encode()),
                                      purpose="batch")
        b = await client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                        completion_window="24h")
        for _ in range(200):
            b = await client.batches.retrieve(b.id)
            if b.status == "completed":
                break
            await asyncio.sleep(0.02)
        content = await client.files.content(b.output_file_id)
        await client.close()
        return f, b, content.read()

    f, b, out = asyncio.run(go())
    assert f.filename == "in.jsonl" and b.status == "completed"
    rows = [json.loads(x) for x in out.decode().splitlines()]
    assert sorted(r["custom_id"] for r in rows) == ["q0", "q1", "q2"]
    assert srv.stats.files_uploaded == 1 and srv.stats.batch_lines == 3


@pytest.mark.parametrize("provider", ["openai", "litellm"])
def test_both_providers_take_the_transport(provider, monkeypatch):
    monkeypatch.setenv("ENSEMBLE_PROVIDER", provider)
    srv = SimulatedServer(lam1=3.0, seed=2, keep_replies=True)
    transport = srv.transport()
    assert isinstance(transport, InProcessTransport)
    with Ensemble("openai/sim-expert", api_base=srv.base_url, transport=transport, n=3,
                  choices=["L", "R"]) as ens:
        ds = ens.decide_many([q.prompt for q in QS[:4]])
    # real connections now: up to one per request in flight, then reused
    assert srv.stats.requests == 4 and 1 <= srv.stats.connections <= 4
    assert [sum(d.votes.values()) + d.n_invalid for d in ds] == [3] * 4
    served = {r.prompt: r.texts for r in srv.stats.replies}
    assert [tuple(s.text for s in d.samples) for d in ds] == [served[q.prompt] for q in QS[:4]]


FAULTS = ["429", "500", "503", "timeout", "slow", "malformed", "drop", "short_n"]


PROVIDERS = {"openai": OpenAIProvider, "litellm": LiteLLMProvider}


async def _outcome(kind, api_base, transport):
    """What a provider makes of the server's first reply: its error (type, reason, status,
    Retry-After, message), or the choices it got."""
    provider = PROVIDERS[kind]("openai/sim-expert", ProviderOptions(
        api_base=api_base, api_key="sk-x", transport=transport))
    try:
        c = await provider.complete(MESSAGES, SamplingParams(temperature=1.0), n=4,
                                    timeout=0.4)
        return "ok", len(c.choices)
    except ProviderError as e:
        return type(e).__name__, e.reason, e.status, e.retry_after, str(e)
    finally:
        await provider.aclose()


@pytest.fixture(scope="module")
def warmed():
    """Each provider's first request of the process, both ways, made before the ones compared:
    a first request pays imports and client set-up (litellm's takes more than the 0.4 s
    timeout the comparison uses)."""
    done = set()

    def warm(kind):
        if kind not in done:
            with SimulatedServer() as tcp:
                asyncio.run(_outcome(kind, tcp.base_url, None))
                asyncio.run(_outcome(kind, tcp.base_url, SimulatedServer().transport()))
            done.add(kind)

    return warm


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("kind", PROVIDERS)
def test_every_fault_reaches_the_provider_as_over_tcp(kind, fault, warmed):
    """One POST, one timeout, one error path: the in-process server gives each provider what
    the server over TCP gives it, error for error (the openai provider's aiohttp client on a
    Unix socket; litellm's request code on the SDK's client, over httpx's own transport there
    and litellm's aiohttp one over TCP)."""
    warmed(kind)
    plan = FaultPlan(first=1, kinds=(fault,), hang=3.0, slow=0.05, retry_after=2.0)
    with SimulatedServer(faults=plan) as tcp:
        over_tcp = asyncio.run(_outcome(kind, tcp.base_url, None))
    local = SimulatedServer(faults=plan)  # the same URL: the transport answers any host
    in_process = asyncio.run(_outcome(kind, tcp.base_url, local.transport()))
    assert in_process == over_tcp
    assert local.stats.faults[fault] == 1
    expected = {"429": "RateLimitError", "500": "ServerError", "503": "ServerError",
                "timeout": "ProviderTimeoutError", "malformed": "MalformedResponseError",
                "drop": "ProviderConnectionError"}
    assert in_process[0] == expected.get(fault, "ok")
    if fault == "short_n":
        assert in_process == ("ok", 2)


def test_an_httpx_transport_alone_is_refused_in_one_line():
    mock = httpx.MockTransport(lambda request: httpx.Response(200))
    with pytest.raises(InputError) as caught:
        Ensemble("openai/sim-expert", api_base="http://sim/v1", transport=mock)
    assert "\n" not in str(caught.value) and "SimulatedServer.transport()" in str(caught.value)
