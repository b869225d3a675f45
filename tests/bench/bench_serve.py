"""Benchmark: `ensemble serve` against calling `Ensemble.adecide` directly, same run.

The upstream is the simulated server with zero latency, in its own process. Two ways to get
the same decisions (n samples of a prompt, one vote), interleaved, `--repeats` times:

- direct:   `Ensemble(...).adecide(prompt)` in this process, `--concurrency` calls at once;
- endpoint: `ensemble serve` in its own process, this process posting chat completions to it
            through aiohttp with `--concurrency` requests at once.

Printed: requests per second of each and their ratio (direct / endpoint; the target is at most
1.3), the endpoint process's CPU per request next to the direct path's CPU per request (the
difference is what serving adds: HTTP in and out, JSON, the log line), and one request at a
time, the median wall time per request of each (what a client waits on top of the upstream's
latency). Medians over the repeats; the machine's load is shared, so read the ratios, which
are measured in the same run.

    python tests/bench/bench_serve.py [--requests 200] [--concurrency 8] [--n 5] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _servers import server_process

from ensemble import Ensemble

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def prompt(tag: str, i: int) -> str:
    return f"Reply with <answer>L</answer> or <answer>R</answer>. Item {tag}-{i}."


async def direct(ens: Ensemble, tag: str, total: int, conc: int) -> tuple[float, float]:
    """(requests per second, CPU seconds per request) of adecide in this process."""
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            d = await ens.adecide(prompt(tag, i))
            assert d.n_samples == ens.n

    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return total / wall, cpu / total


async def endpoint(session, url: str, pid: int, tag: str, total: int, conc: int, n: int
                   ) -> tuple[float, float]:
    """(requests per second, the endpoint process's CPU seconds per request)."""
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            async with session.post(f"{url}/chat/completions", json={
                    "model": "bench", "messages": [{"role": "user",
                                                    "content": prompt(tag, i)}]}) as r:
                doc = await r.json()
                assert r.status == 200 and doc["ensemble"]["samples"] == n, doc

    c0, t0 = cpu_seconds(pid), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - c0
    return total / wall, cpu / total


async def sequential(ens: Ensemble, session, url: str, tag: str, k: int) -> tuple[float, float]:
    """Median seconds per request, one at a time: direct, endpoint."""
    d, e = [], []
    for i in range(k):
        t0 = time.perf_counter()
        await ens.adecide(prompt(f"{tag}d", i))
        d.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        async with session.post(f"{url}/chat/completions", json={
                "model": "bench", "messages": [{"role": "user",
                                                "content": prompt(f"{tag}e", i)}]}) as r:
            await r.read()
        e.append(time.perf_counter() - t0)
    return statistics.median(d), statistics.median(e)


async def main(args: argparse.Namespace) -> None:
    import aiohttp

    with server_process("--latency", "0", "--seed", "0") as up:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ensemble", "serve", "--model", "openai/sim",
             "--api-base", up, "--n", str(args.n), "--t", "1.0", "--choices", "L,R",
             "--max-concurrency", str(args.concurrency), "--name", "bench", "--port", "0",
             "--max-queue", "100000"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "OPENAI_API_KEY": "sk-bench-not-a-real-key-000"})
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert url.startswith("http"), "ensemble serve did not start"
            ens = Ensemble("openai/sim", api_base=up, api_key="sk-bench-not-a-real-key-000",
                           n=args.n, temperature=1.0, choices=["L", "R"],
                           max_concurrency=args.concurrency)
            conn = aiohttp.TCPConnector(limit=args.concurrency * 2)
            async with aiohttp.ClientSession(connector=conn) as session:
                # warm both paths (imports, connections, the endpoint's first request)
                await direct(ens, "warm", args.concurrency * 2, args.concurrency)
                await endpoint(session, url, proc.pid, "warm", args.concurrency * 2,
                               args.concurrency, args.n)
                rows = []
                for rep in range(args.repeats):
                    d_rps, d_cpu = await direct(ens, f"d{rep}", args.requests, args.concurrency)
                    e_rps, e_cpu = await endpoint(session, url, proc.pid, f"e{rep}",
                                                  args.requests, args.concurrency, args.n)
                    rows.append((d_rps, e_rps, d_cpu, e_cpu))
                    print(f"repeat {rep}: direct {d_rps:7.1f} req/s ({d_cpu * 1e3:5.2f} ms CPU "
                          f"per request)  endpoint {e_rps:7.1f} req/s ({e_cpu * 1e3:5.2f} ms "
                          f"CPU per request in its process)  ratio {d_rps / e_rps:.2f}",
                          flush=True)
                seq_d, seq_e = await sequential(ens, session, url, "seq", args.sequential)
            await ens.aclose()
        finally:
            proc.terminate()
            proc.wait(10)
    med = statistics.median
    ratio = med([r[0] / r[1] for r in rows])
    print(f"\n{args.requests} requests x {args.repeats} repeats, n = {args.n} samples per "
          f"decision, concurrency {args.concurrency}, zero-latency upstream in its own process")
    print(f"requests/s (median): direct {med([r[0] for r in rows]):.1f}, endpoint "
          f"{med([r[1] for r in rows]):.1f}; direct / endpoint = {ratio:.2f} (target <= 1.3)")
    print(f"CPU per request (median): direct path {med([r[2] for r in rows]) * 1e3:.2f} ms in "
          f"this process; endpoint process {med([r[3] for r in rows]) * 1e3:.2f} ms; serving "
          f"adds {(med([r[3] for r in rows]) - med([r[2] for r in rows])) * 1e3:.2f} ms")
    print(f"one request at a time (median of {args.sequential}): direct "
          f"{seq_d * 1e3:.2f} ms, endpoint {seq_e * 1e3:.2f} ms, "
          f"+{(seq_e - seq_d) * 1e3:.2f} ms per request")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sequential", type=int, default=30)
    asyncio.run(main(ap.parse_args()))
