"""Benchmark: the sampler's throughput against bare litellm.acompletion at the same concurrency,
and against the ideal C / latency, on the simulated server (its own process, so that its CPU
does not compete with the client's). Ratios are medians of `--repeats` runs, interleaved.

    python tests/bench/bench_sampler.py [--requests 400] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _servers import server_process

from ensemble.sampling.client import litellm
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest

PROMPT = "Answer in <answer></answer>: hello"


async def bare(url: str, total: int, conc: int) -> float:
    ll = litellm()
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            await ll.acompletion(model="openai/sim", messages=[{"role": "user",
                                 "content": f"{PROMPT} {i}"}], api_base=url, api_key="sk-x",
                                 temperature=1.0, num_retries=0, max_retries=0)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    return total / (time.perf_counter() - t0)


async def sampler(url: str, total: int, conc: int, k: int = 1) -> float:
    reqs = [SampleRequest.of(f"{PROMPT} {i}", temperature=1.0, k=k) for i in range(total)]
    async with Sampler("openai/sim", api_base=url, max_concurrency=conc, use_n=k > 1,
                       max_n=k) as s:
        t0 = time.perf_counter()
        await s.sample(reqs)
        return total * k / (time.perf_counter() - t0)


def med(fn, repeats):  # type: ignore[no-untyped-def]
    return statistics.median(asyncio.run(fn()) for _ in range(repeats))


def paired(fa, fb, repeats):  # type: ignore[no-untyped-def]
    """Medians of a and b and of the ratio b/a, the two measured alternately."""
    ra, rb = [], []
    for _ in range(repeats):
        ra.append(asyncio.run(fa()))
        rb.append(asyncio.run(fb()))
    return (statistics.median(ra), statistics.median(rb),
            statistics.median(b / a for a, b in zip(ra, rb, strict=True)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    asyncio.run(bare("http://127.0.0.1:9/v1", 0, 1))  # import litellm outside the timings
    print("zero-latency server: requests/s, medians of", a.repeats, "(target: ratio >= 0.90)")
    with server_process() as url:
        asyncio.run(sampler(url, 50, 8))  # warm up both paths
        for c in (1, 8, 16, 32):
            b, s, ratio = paired(lambda c=c: bare(url, a.requests, c),
                                 lambda c=c: sampler(url, a.requests, c), a.repeats)
            print(f"  C={c:>2}: bare litellm {b:7.1f}/s  sampler {s:7.1f}/s  ratio {ratio:.2f}")
    print("50 ms server: requests/s vs ideal C / 0.05 s")
    with server_process("--latency", "0.05") as url:
        for c in (1, 8, 16, 32):
            n = max(40, min(a.requests, c * 20))
            b, s, ratio = paired(lambda n=n, c=c: bare(url, n, c),
                                 lambda n=n, c=c: sampler(url, n, c), a.repeats)
            ideal = c / 0.05
            print(f"  C={c:>2}: ideal {ideal:6.0f}/s  bare {b / ideal:5.0%}  sampler "
                  f"{s / ideal:5.0%}  sampler/bare {ratio:.2f}")
        for k in (5, 20):
            s = med(lambda k=k: sampler(url, 80, 16, k=k), a.repeats)
            print(f"  n = {k:>2} samples per request, C=16: {s:7.1f} samples/s "
                  f"({s / (16 / 0.05):.1f}x the one-sample-per-request ideal)")


if __name__ == "__main__":
    main()
