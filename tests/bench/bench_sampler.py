"""Benchmark: the sampler's throughput against what a user writes by hand, at the same
concurrency, one sample per request, on the simulated server (its own process, so that its CPU
does not compete with the client's):

- `openai loop`: `asyncio.gather` over the official `openai.AsyncOpenAI` client with a semaphore;
- `litellm`: the same loop over bare `litellm.acompletion`;
- `sampler`: `Sampler("openai/...")`, which picks the openai SDK provider;
- `sampler/litellm`: the sampler forced onto litellm (ENSEMBLE_PROVIDER=litellm), i.e. the
  sampler as it was before the SDK provider.

Every figure is a median over `--repeats` rounds; within a round the four run one after the
other (interleaved), and the ratios are medians of the per-round ratios. `cpu/req` is the
client process's CPU time per request (the server runs in another process).

    python tests/bench/bench_sampler.py [--requests 400] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _servers import server_process

from ensemble.providers.litellm import litellm
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest

PROMPT = "Answer in <answer></answer>: hello"
Run = Callable[[], Coroutine[Any, Any, float]]


def _messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{PROMPT} {i}"}]


async def openai_loop(url: str, total: int, conc: int) -> float:
    """The hand-written loop: the official client, a semaphore, asyncio.gather."""
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="sk-x", max_retries=0)
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            await client.chat.completions.create(model="sim", messages=_messages(i),  # type: ignore[arg-type]
                                                 temperature=1.0)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    rate = total / (time.perf_counter() - t0)
    await client.close()
    return rate


async def litellm_loop(url: str, total: int, conc: int) -> float:
    ll = litellm()
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            await ll.acompletion(model="openai/sim", messages=_messages(i), api_base=url,
                                 api_key="sk-x", temperature=1.0, num_retries=0, max_retries=0)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    return total / (time.perf_counter() - t0)


async def sampler(url: str, total: int, conc: int, k: int = 1, provider: str = "openai") -> float:
    os.environ["ENSEMBLE_PROVIDER"] = provider
    reqs = [SampleRequest.of(f"{PROMPT} {i}", temperature=1.0, k=k) for i in range(total)]
    async with Sampler("openai/sim", api_base=url, max_concurrency=conc, use_n=k > 1,
                       max_n=k) as s:
        assert s.provider_name == provider, s.provider_name
        t0 = time.perf_counter()
        await s.sample(reqs)
        return total * k / (time.perf_counter() - t0)


def timed(fn: Run, total: int) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request)."""
    c0 = time.process_time()
    rate = asyncio.run(fn())
    return rate, (time.process_time() - c0) / total


def rounds(contenders: dict[str, Run], total: int, repeats: int
           ) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for r in range(repeats):
        names = list(contenders)
        names = names[r % len(names):] + names[:r % len(names)]  # rotate who goes first
        for name in names:
            out[name].append(timed(contenders[name], total))
    return out


def report(c: int, res: dict[str, list[tuple[float, float]]], ideal: float | None) -> None:
    def med(name: str) -> float:
        return statistics.median(x[0] for x in res[name])

    def cpu(name: str) -> float:
        return statistics.median(x[1] for x in res[name]) * 1000

    def ratio(a: str, b: str) -> float:
        return statistics.median(x[0] / y[0] for x, y in zip(res[a], res[b], strict=True))

    cells = "  ".join(f"{n} {med(n):6.0f}/s ({cpu(n):.2f} ms cpu/req)" for n in res)
    tail = f"  [ideal {ideal:.0f}/s: sampler at {med('sampler') / ideal:.0%}]" if ideal else ""
    print(f"  C={c:>2}: {cells}")
    print(f"        sampler/openai loop {ratio('sampler', 'openai loop'):.2f}   "
          f"sampler/litellm loop {ratio('sampler', 'litellm'):.2f}   "
          f"sampler/(sampler on litellm) {ratio('sampler', 'sampler/litellm'):.2f}{tail}",
          flush=True)


def contenders(url: str, total: int, c: int) -> dict[str, Run]:
    return {
        "openai loop": lambda: openai_loop(url, total, c),
        "litellm": lambda: litellm_loop(url, total, c),
        "sampler": lambda: sampler(url, total, c),
        "sampler/litellm": lambda: sampler(url, total, c, provider="litellm"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--conc", type=int, nargs="+", default=[1, 8, 16, 32])
    a = ap.parse_args()
    import openai  # noqa: F401 - imported outside the timings, as litellm below

    asyncio.run(litellm_loop("http://127.0.0.1:9/v1", 0, 1))
    print(f"one sample per request; medians of {a.repeats} interleaved rounds")
    print("zero-latency server (target: sampler/openai loop >= 0.90 at C = 8 and 32)")
    with server_process() as url:
        asyncio.run(sampler(url, 50, 8))  # warm up both paths
        asyncio.run(sampler(url, 50, 8, provider="litellm"))
        for c in a.conc:
            report(c, rounds(contenders(url, a.requests, c), a.requests, a.repeats), None)
    print("50 ms server: vs the ideal C / 0.05 s")
    with server_process("--latency", "0.05") as url:
        for c in a.conc:
            n = max(40, min(a.requests, c * 20))
            report(c, rounds(contenders(url, n, c), n, a.repeats), c / 0.05)
        for k in (5, 20):
            s = statistics.median(asyncio.run(sampler(url, 80, 16, k=k)) for _ in range(a.repeats))
            print(f"  n = {k:>2} samples per request, C=16: {s:7.1f} samples/s "
                  f"({s / (16 / 0.05):.1f}x the one-sample-per-request ideal)")
    os.environ.pop("ENSEMBLE_PROVIDER", None)


if __name__ == "__main__":
    main()
