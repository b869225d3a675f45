"""Benchmark: `ensemble serve`'s memory and sockets under a hostile client (issue 38 item 7).

A client that sends every request with a schema of its own (a json_schema response_format or
a tool whose parameters are new each time) makes serve build a request variant per schema
(an Ensemble, its answer kind, its compiled validators). Serve keeps at most `max_variants` of
them (default 128, least recently used first out) and one provider per upstream for all, so
its resident memory must stay flat and its open sockets bounded however many schemas come.

serve runs in its own process at its default configuration in front of the simulated upstream
(zero latency, its own process); one `openai.AsyncOpenAI` client sends `--warm-up` requests
with distinct schemas, then `--requests` more (all distinct, never seen before), `--concurrency`
in flight. serve's RSS (/proc/PID/status VmRSS) and its open sockets (/proc/PID/fd) are read
after the warm-up and every `--every` requests. The targets: RSS at the end within 50 MB of
RSS after the warm-up; open sockets never above `--max-sockets` (by default the concurrency
plus serve's upstream concurrency, 64, plus a few listening and spare ones). Every reply is
checked (a decision, 5 samples), so the bench measures real votes. Exit status 1 if a target
is missed.

    python tests/bench/bench_serve_memory.py [--requests 5000] [--warm-up 500]
        [--concurrency 16] [--every 500] [--max-variants M]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from _servers import server_process
from bench_serve import KEY, PLANTED, start


def rss_mb(pid: int) -> float:
    """Resident set size of process `pid`, in MB (VmRSS of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def sockets(pid: int) -> int:
    """Open sockets of process `pid` (its file descriptors that are sockets)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return n


def hostile(i: int) -> dict[str, object]:
    """Request i, with a schema no other request has: a json_schema response_format (even i)
    or a tool whose name and parameters are new (odd i)."""
    if i % 2 == 0:
        schema = {"type": "object", "additionalProperties": False,
                  "required": ["label", f"score_{i}", "city"], "properties": {
                      "label": {"type": "string", "enum": ["yes", "no", "maybe", f"v{i}"]},
                      f"score_{i}": {"type": "integer", "description": f"request {i}"},
                      "city": {"type": "string"}}}
        return {"messages": [{"role": "user", "content": f"Review {i}: label, score, city."}],
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": f"Verdict{i}", "schema": schema}}}
    tool = {"type": "function", "function": {"name": f"lookup_{i}", "parameters": {
        "type": "object", "required": ["city", f"days_{i}"], "properties": {
            "city": {"type": "string"}, f"days_{i}": {"type": "integer"}}}}}
    return {"messages": [{"role": "user", "content": f"Step {i}: what do we look up?"}],
            "tools": [tool]}


async def send(client, start_at: int, total: int, conc: int) -> None:
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            r = await client.chat.completions.create(model="bench", **hostile(i))
            ens = r.model_extra["ensemble"]
            assert ens["samples"] == 5 and ens["decision"] is not None, ens

    await asyncio.gather(*(one(i) for i in range(start_at, start_at + total)))


async def main(args: argparse.Namespace) -> int:
    from openai import AsyncOpenAI

    limit = ["--max-variants", str(args.max_variants)] if args.max_variants else []
    with server_process("--latency", "0", "--seed", "0", "--tools", "--structured",
                        PLANTED) as up:
        cmd = [sys.executable, "-m", "ensemble", "serve", "--model", "openai/sim",
               "--api-base", up, "--n", "5", "--t", "1.0", "--name", "bench", "--port", "0"]
        if limit:  # max_variants is a config key, not a flag
            cfg = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"bench-mem-{os.getpid()}.yaml")
            with open(cfg, "w") as fh:
                fh.write(f"port: 0\nmax_variants: {args.max_variants}\nmodels:\n  bench:\n"
                         f"    model: openai/sim\n    api_base: {up}\n    n: 5\n"
                         "    temperature: 1.0\n")
            cmd = [sys.executable, "-m", "ensemble", "serve", "--config", cfg]
        serve, url = start(cmd, env={"OPENAI_API_KEY": KEY})
        pid = serve.pid
        try:
            client = AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
            t0 = time.monotonic()
            await send(client, 0, args.warm_up, args.concurrency)
            base = rss_mb(pid)
            peak_sockets = sockets(pid)
            print(f"after {args.warm_up} warm-up requests (distinct schemas): RSS {base:.1f} MB, "
                  f"{peak_sockets} open sockets", flush=True)
            done = 0
            while done < args.requests:
                step = min(args.every, args.requests - done)
                await send(client, args.warm_up + done, step, args.concurrency)
                done += step
                rss, socks = rss_mb(pid), sockets(pid)
                peak_sockets = max(peak_sockets, socks)
                print(f"{done:6d} more: RSS {rss:7.1f} MB ({rss - base:+6.1f}), {socks} open "
                      f"sockets ({time.monotonic() - t0:.0f} s)", flush=True)
            await client.close()
        finally:
            serve.terminate()
            serve.wait(10)
    grew = rss - base
    cap = args.max_sockets
    print(f"\n{args.requests} requests with distinct schemas after a {args.warm_up}-request "
          f"warm-up, concurrency {args.concurrency}, serve at "
          f"{'max_variants ' + str(args.max_variants) if limit else 'its default config'}, "
          f"{os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f})")
    print(f"RSS growth after the warm-up: {grew:+.1f} MB (target within 50 MB)")
    print(f"open sockets at most {peak_sockets} (bound {cap})")
    return 0 if abs(grew) <= 50 and peak_sockets <= cap else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--warm-up", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--max-variants", type=int, default=None,
                    help="serve's max_variants (default: serve's own default, 128)")
    ap.add_argument("--max-sockets", type=int, default=None,
                    help="the bound on serve's open sockets (default: concurrency + 64 + 8)")
    a = ap.parse_args()
    if a.max_sockets is None:
        a.max_sockets = a.concurrency + 64 + 8
    sys.exit(asyncio.run(main(a)))
