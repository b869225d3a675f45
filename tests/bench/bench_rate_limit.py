"""Benchmark: a long run against a provider at its rate limit, counted at the server.

The server (its own process) answers 429 with Retry-After: 1 above 20 accepted requests in any
1-second window, and rejects n > 1 (one request per sample). The sampler runs one request per
sample for at least `--seconds` seconds. Printed: the share of the limit served (accepted
requests / (20/s x wall time), counted at the server), the 429 replies against the samples, and
the eval of the issue (219 samples, boxball --limit 40 --samples 3) wall time.

    python tests/bench/bench_rate_limit.py [--seconds 60] [--limit 20]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time

from _servers import server_process, server_stats

from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest


async def run(url: str, n: int) -> tuple[float, object]:
    reqs = [SampleRequest.of(f"Say <answer>OK</answer>. Request {i}.", temperature=1.0)
            for i in range(n)]
    async with Sampler("openai/sim", api_base=url, max_concurrency=16) as s:
        t0 = time.perf_counter()
        await s.sample(reqs)
        return time.perf_counter() - t0, s.stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--limit", type=int, default=20, help="requests per second at the server")
    a = ap.parse_args()
    n = int(a.seconds * a.limit * 1.05)
    with server_process("--rate-limit", f"{a.limit}/1", "--rate-limit-retry-after", "1",
                        "--reject-n") as url:
        wall, stats = asyncio.run(run(url, n))
        st = server_stats(url)
    share = st["accepted"] / (a.limit * wall)
    print(f"{n} samples, one request each, in {wall:.1f} s against {a.limit} requests/s")
    print(f"  served (at the server): {st['accepted']} accepted, {st['rate_limited']} answered "
          f"429; {st['served_twice']} samples served twice")
    print(f"  share of the limit served: {share:.3f}  (target >= 0.85)")
    print(f"  429 replies / samples: {st['rate_limited'] / n:.3f}  (target < 1)")
    with server_process("--rate-limit", f"{a.limit}/1", "--rate-limit-retry-after", "1",
                        "--reject-n", "--lam", "3") as url, tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "ensemble", "eval", "boxball", "--model",
                            "openai/sim-expert", "--api-base", url, "--t", "1", "--n", "1",
                            "--samples", "3", "--limit", "40", "--out", d, "--json"],
                           capture_output=True, text=True)
        wall = time.perf_counter() - t0
        st = server_stats(url)
    print(f"the issue's eval (219 samples): exit {r.returncode}, {wall:.1f} s (target <= 20 s), "
          f"{st['rate_limited']} 429 replies (target < 219)")


if __name__ == "__main__":
    main()
