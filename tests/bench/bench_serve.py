"""Benchmark: what `ensemble serve` costs a client, against the same client calling the upstream
directly and against litellm's proxy, in one run.

The upstream is the simulated server with zero latency, in its own process. One client, the
official `openai.AsyncOpenAI`, sends `--requests` chat completions with `--concurrency` in
flight, three ways, interleaved, `--repeats` times:

- direct:  to the upstream itself, asking n = `--n` samples per request (`n=5`): what a client
           that wants n samples pays without any endpoint in between;
- serve:   to `ensemble serve` in its own process (n = `--n` samples, voted, one reply);
- litellm: to litellm's proxy (`litellm --config`, the peer a user would put there) in its own
           process, forwarding `n` to the same upstream without voting; skipped with the reason
           when `litellm[proxy]` is not installed. litellm 1.110's `proxy` extra needs the
           `litellm-proxy` package, which the package index here does not have: install
           `litellm[proxy]==1.108.7` (the proxy still inside litellm) in a venv of its own and
           give its Python with `--litellm-python`.

Printed per repeat and as medians: requests per second of each, direct / serve (the target is
at most 1.3 at C = 32, n = 5) and litellm / serve, and the CPU seconds per request of the
serve and proxy processes (read from /proc: the endpoint's own cost per request; the target is
at most 0.8 ms at C = 32). The machine's load is shared, so read the ratios, which are measured
in the same run.

    python tests/bench/bench_serve.py [--requests 400] [--concurrency 32] [--n 5] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from _servers import server_process

KEY = "sk-bench-0123456789abcdef0123456789abcdef"  # every endpoint's key (the proxy's master key)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def prompt(tag: str, i: int) -> str:
    return f"Reply with <answer>L</answer> or <answer>R</answer>. Item {tag}-{i}."


def start(cmd: list[str], env: dict[str, str] | None = None,
          ready: Callable[[str], str | None] | None = None, timeout: float = 120.0
          ) -> tuple[subprocess.Popen[str], str]:
    """A child process and its base URL (its first stdout line, or what `ready` reads); its
    stderr (serve's log, a line per request: still written, as in use) goes to /dev/null."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    t0 = time.monotonic()
    for line in proc.stdout:
        url = ready(line) if ready else line.strip()
        if url and url.startswith("http"):
            return proc, url
        if time.monotonic() - t0 > timeout:
            break
    proc.kill()
    raise RuntimeError(f"{cmd[0]} did not start")


def litellm_proxy(upstream: str, python: str) -> tuple[subprocess.Popen[str], str] | str:
    """litellm's proxy (of the environment of `python`) forwarding model `bench` to the
    upstream, or why it cannot run here."""
    exe = shutil.which("litellm", path=str(Path(python).parent))
    if exe is None:
        return (f"litellm's proxy is not installed next to {python} (pip install "
                "'litellm[proxy]'; give another environment with --litellm-python)")
    check = subprocess.run([python, "-c", "import litellm.proxy.proxy_server"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["?"])[-1]
        return f"litellm's proxy cannot start: {last} (pip install 'litellm[proxy]')"
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = Path(tempfile.mkdtemp()) / "litellm.yaml"
    cfg.write_text(f"model_list:\n  - model_name: bench\n    litellm_params:\n"
                   f"      model: openai/sim\n      api_base: {upstream}\n      api_key: {KEY}\n"
                   f"general_settings:\n  master_key: {KEY}\n"
                   "litellm_settings:\n  drop_params: false\n")
    proc = subprocess.Popen([exe, "--config", str(cfg), "--host", "127.0.0.1", "--port",
                             str(port), "--num_workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "LITELLM_LOG": "ERROR",
                                 "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    import urllib.request

    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        time.sleep(0.5)
        if proc.poll() is not None:
            return f"litellm's proxy exited with status {proc.returncode} at start-up"
        try:
            urllib.request.urlopen(f"{url}/health/liveliness", timeout=2).read()
            return proc, f"{url}/v1"
        except OSError:
            continue
    proc.kill()
    return "litellm's proxy did not answer within 120 s"


async def load(client, model: str, tag: str, total: int, conc: int, n: int | None,
               check: Callable[[object], None]) -> float:
    """Requests per second of `total` chat completions, `conc` at a time."""
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            extra = {"n": n} if n else {}
            r = await client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt(tag, i)}], **extra)
            check(r)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    return total / (time.perf_counter() - t0)


async def measured(run: Callable[[], Awaitable[float]], pid: int | None
                   ) -> tuple[float, float | None]:
    """(requests per second, CPU seconds per request of process `pid`)."""
    c0 = cpu_seconds(pid) if pid else 0.0
    t0 = time.perf_counter()
    rps = await run()
    total = rps * (time.perf_counter() - t0)
    return rps, ((cpu_seconds(pid) - c0) / total if pid else None)


async def main(args: argparse.Namespace) -> None:
    from openai import AsyncOpenAI

    n, conc = args.n, args.concurrency
    with server_process("--latency", "0", "--seed", "0") as up:
        serve, serve_url = start(
            [sys.executable, "-m", "ensemble", "serve", "--model", "openai/sim", "--api-base",
             up, "--n", str(n), "--t", "1.0", "--choices", "L,R", "--max-concurrency",
             str(conc), "--name", "bench", "--port", "0", "--max-queue", "100000"],
            env={"OPENAI_API_KEY": KEY})
        proxy = (litellm_proxy(up, args.litellm_python) if not args.no_litellm
                 else "--no-litellm")
        why_not = proxy if isinstance(proxy, str) else None
        try:
            clients = {name: AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
                       for name, url in (("direct", up), ("serve", serve_url),
                                         ("litellm", None if why_not else proxy[1]))  # type: ignore[index]
                       if url}

            def samples(r: object) -> None:
                assert len(r.choices) == n, r  # type: ignore[attr-defined]

            def voted(r: object) -> None:
                assert r.model_extra["ensemble"]["samples"] == n, r  # type: ignore[attr-defined]

            paths = {"direct": ("sim", n, samples, None),
                     "serve": ("bench", None, voted, serve.pid)}
            if not why_not:
                paths["litellm"] = ("bench", n, samples, proxy[1] and proxy[0].pid)  # type: ignore[index]
            for name, (model, k, check, _) in paths.items():  # warm every path
                await load(clients[name], model, "warm", conc * 2, conc, k, check)
            rows: list[dict[str, tuple[float, float | None]]] = []
            for rep in range(args.repeats):
                row = {}
                for name, (model, k, check, pid) in paths.items():
                    row[name] = await measured(
                        lambda c=clients[name], m=model, k=k, ch=check, t=f"{name}{rep}":
                        load(c, m, t, args.requests, conc, k, ch), pid)
                rows.append(row)
                line = "  ".join(f"{nm} {v[0]:7.1f} req/s" + (f" ({v[1] * 1e3:.2f} ms CPU/req)"
                                                              if v[1] is not None else "")
                                 for nm, v in row.items())
                print(f"repeat {rep}: {line}  direct/serve "
                      f"{row['direct'][0] / row['serve'][0]:.2f}", flush=True)
            for c in clients.values():
                await c.close()
        finally:
            serve.terminate()
            serve.wait(10)
            if not why_not:
                proxy[0].terminate()  # type: ignore[index]
                proxy[0].wait(10)  # type: ignore[index]
    med = statistics.median
    print(f"\n{args.requests} requests x {args.repeats} repeats, n = {n} samples per request, "
          f"concurrency {conc}, one AsyncOpenAI client, zero-latency upstream in its own "
          f"process, {os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f})")
    for name in rows[0]:
        rps = med([r[name][0] for r in rows])
        cpu = [r[name][1] for r in rows if r[name][1] is not None]
        print(f"  {name:8s} {rps:7.1f} req/s" + (f", its process {med(cpu) * 1e3:.2f} ms CPU "
                                                  "per request" if cpu else ""))
    print(f"direct / serve requests per second (median of ratios): "
          f"{med([r['direct'][0] / r['serve'][0] for r in rows]):.2f} (target <= 1.3)")
    print(f"serve CPU per request: {med([r['serve'][1] for r in rows]) * 1e3:.2f} ms "  # type: ignore[operator]
          "(target <= 0.8)")
    if why_not:
        print(f"litellm proxy: not measured: {why_not}")
    else:
        print(f"litellm / serve requests per second: "
              f"{med([r['litellm'][0] / r['serve'][0] for r in rows]):.2f} (serve is at least "
              "as fast when <= 1)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-litellm", action="store_true", help="skip litellm's proxy")
    ap.add_argument("--litellm-python", default=sys.executable,
                    help="the Python of an environment with litellm[proxy] (its `litellm` "
                         "command is used); default: this one")
    asyncio.run(main(ap.parse_args()))
