"""Benchmark: the HTTP seam (docs/sampling.md, "One HTTP seam"), in two parts.

- `clients`: the CPU per chat completion of the HTTP clients a provider could POST with, one
  after the other against the simulated server in its own process (zero latency): aiohttp
  (the openai provider's), httpx, httpx2 (the openai SDK 3.x's) and the SDK's own `post`, at
  each `--conc` in flight. Why chat completions stay on aiohttp and the seam sits below it.
- `seam`: the sampler's cost per request through each provider (`openai`, `litellm`), the
  server reached in this process (`server.transport()`: a Unix socket of the caller's loop)
  or over TCP to the server on its own thread (`with SimulatedServer()`), and the CPU of one
  `asyncio.run` holding one request (what a test's first request in a loop pays).

Every figure is a median over `--repeats` rounds, the contenders interleaved in each round;
CPU is this process's (the server's too where it runs in this process: in-process and
thread); ratios are against the first contender of each table, in the same run.

    python tests/bench/bench_transport.py [--requests 300] [--repeats 3] [--conc 1 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _servers import server_process

from ensemble.providers.http import new_client
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest
from ensemble.testing import SimulatedServer

BODY = {"model": "sim", "temperature": 1.0,
        "messages": [{"role": "user", "content": "Answer in <answer></answer>: hello"}]}
HEADERS = {"Authorization": "Bearer sk-x", "Content-Type": "application/json"}
Post = Callable[[], Coroutine[Any, Any, bytes]]


async def _load(post: Post, total: int, conc: int) -> None:
    sem = asyncio.Semaphore(conc)

    async def one() -> None:
        async with sem:
            json.loads(await post())

    await asyncio.gather(*(one() for _ in range(total)))


async def aiohttp_client(url: str, total: int, conc: int) -> None:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            limit=conc, limit_per_host=conc), headers=HEADERS) as s:
        async def post() -> bytes:
            async with s.post(f"{url}/chat/completions", data=json.dumps(BODY),
                              timeout=aiohttp.ClientTimeout(total=60)) as r:
                return await r.read()

        await _load(post, total, conc)


def httpx_client(module: str) -> Callable[[str, int, int], Coroutine[Any, Any, None]]:
    async def run(url: str, total: int, conc: int) -> None:
        import importlib

        httpx = importlib.import_module(module)
        limits = httpx.Limits(max_connections=conc, max_keepalive_connections=conc)
        async with httpx.AsyncClient(limits=limits, headers=HEADERS) as c:
            async def post() -> bytes:
                r = await c.post(f"{url}/chat/completions", content=json.dumps(BODY),
                                 timeout=60)
                return bytes(r.content)

            await _load(post, total, conc)

    return run


async def sdk_post(url: str, total: int, conc: int) -> None:
    import openai

    client = new_client(url, "sk-x", conc)
    response = type(openai.DEFAULT_CONNECTION_LIMITS).__module__.split(".")[0]
    cast = __import__(response).Response

    async def post() -> bytes:
        r = await client.post("/chat/completions", body=BODY, cast_to=cast,
                              options={"timeout": 60})
        return bytes(r.content)

    await _load(post, total, conc)
    await client.close()


def clients(total: int, repeats: int, concs: list[int]) -> None:
    contenders = {"aiohttp": aiohttp_client, "httpx": httpx_client("httpx"),
                  "httpx2": httpx_client("httpx2"), "sdk post": sdk_post}
    print("clients: CPU ms per request against the simulator in its own process")
    with server_process("--lam", "3") as url:
        for conc in concs:
            cpu: dict[str, list[float]] = {k: [] for k in contenders}
            for _ in range(repeats):
                for name, run in contenders.items():
                    c0 = time.process_time()
                    asyncio.run(run(url, total, conc))
                    cpu[name].append((time.process_time() - c0) / total * 1e3)
            base = statistics.median(cpu["aiohttp"])
            for name, xs in cpu.items():
                m = statistics.median(xs)
                print(f"  C={conc:<3d} {name:9s} {m:6.3f} ms  x{m / base:5.2f} of aiohttp")


def _sample(provider: str, server: SimulatedServer, total: int, conc: int, tag: str,
            in_process: bool) -> tuple[float, float]:
    os.environ["ENSEMBLE_PROVIDER"] = provider
    kw: dict[str, Any] = {"transport": server.transport()} if in_process else {}
    reqs = [SampleRequest.of(f"Answer in <answer></answer>: {tag} {i}", temperature=1.0, k=1)
            for i in range(total)]

    async def go() -> None:
        async with Sampler("openai/sim", api_base=server.base_url, max_concurrency=conc,
                           **kw) as s:
            await s.sample(reqs, parser=lambda t: t)

    c0, t0 = time.process_time(), time.perf_counter()
    asyncio.run(go())
    return ((time.perf_counter() - t0) / total * 1e3, (time.process_time() - c0) / total * 1e3)


def seam(total: int, repeats: int, concs: list[int]) -> None:
    print("seam: the sampler per request (wall, CPU ms), and one asyncio.run of one request "
          "(CPU ms)")
    with SimulatedServer(lam1=3.0) as tcp:
        for provider in ("openai", "litellm"):
            _sample(provider, tcp, 10, 4, "warm", True)  # imports, first clients
            _sample(provider, tcp, 10, 4, "warm", False)
            for conc in concs:
                got: dict[str, list[tuple[float, float]]] = {"in-process": [], "tcp": []}
                for r in range(repeats):
                    got["in-process"].append(_sample(provider, SimulatedServer(lam1=3.0),
                                                     total, conc, f"p{r}", True))
                    got["tcp"].append(_sample(provider, tcp, total, conc, f"t{r}", False))
                base = statistics.median(x[1] for x in got["in-process"])
                for name, xs in got.items():
                    wall = statistics.median(x[0] for x in xs)
                    cpu = statistics.median(x[1] for x in xs)
                    print(f"  {provider:8s} C={conc:<3d} {name:11s} wall {wall:6.2f}  "
                          f"cpu {cpu:6.2f}  cpu x{cpu / base:5.2f} of in-process")
            one: dict[str, list[float]] = {"in-process": [], "tcp": []}
            for r in range(repeats * 10):
                one["in-process"].append(_sample(provider, SimulatedServer(lam1=3.0), 1, 1,
                                                 f"o{r}", True)[1])
                one["tcp"].append(_sample(provider, tcp, 1, 1, f"u{r}", False)[1])
            print(f"  {provider:8s} one asyncio.run, one request: "
                  + "  ".join(f"{k} {statistics.median(v):5.2f}" for k, v in one.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--conc", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--only", choices=["clients", "seam"])
    args = ap.parse_args()
    if args.only != "seam":
        clients(args.requests, args.repeats, args.conc)
    if args.only != "clients":
        seam(args.requests, args.repeats, args.conc)


if __name__ == "__main__":
    main()
