"""Benchmark: what `ensemble serve` costs a client, against the same client calling the upstream
directly and against litellm's proxy, in one run.

The upstream is the simulated server with zero latency, in its own process, answering with real
votes to cast: box-and-ball questions (`<answer>L</answer>` or R), tool calls (its tool plan:
a tool and arguments per prompt, right 80% of the time per part) and structured outputs (its
structured plan, per field). One client, the official `openai.AsyncOpenAI`, sends `--requests`
chat completions, the three kinds in turn, with `--concurrency` in flight, three ways,
interleaved, `--repeats` times:

- direct:  to the upstream itself, asking n = `--n` samples per request (`n=5`): what a client
           that wants n samples pays without any endpoint in between;
- serve:   to `ensemble serve` in its own process at its default configuration (n = `--n`
           samples, voted, one reply; no --choices: the request's own format is voted, and
           the default upstream concurrency; `--max-concurrency` sets one), every decision
           checked not null (a null one fails the bench: it would measure no vote);
- litellm: to litellm's proxy (`litellm --config`, the peer a user would put there) in its own
           process, forwarding `n` to the same upstream without voting; skipped with the reason
           when `litellm[proxy]` is not installed. litellm 1.110's `proxy` extra needs the
           `litellm-proxy` package, which the package index here does not have: install
           `litellm[proxy]==1.108.7` (the proxy still inside litellm) in a venv of its own and
           give its Python with `--litellm-python`.

Printed per repeat and as medians (the arms alternate their order from one repeat to the
next): requests per second of each path, and the CPU seconds per request of every process in
the run (the client, the upstream, the endpoint), read from /proc. The verdict on the targets
(C = 32, n = 5): serve's own CPU per request at most 0.8 ms, and serve / direct requests per
second at least 0.8, given two ways: measured, and the CPU-bound prediction direct_cpu /
(direct_cpu + serve_cpu) per request, which is what a quiet 2-core machine gives (every
process runs flat out against a zero-latency upstream). On a shared machine the measured
ratio is flattered (serve, a process of its own, gets its own share of the cores while the
client waits); the prediction does not move with the load: read it first. With `--pin` the
endpoint runs on core 1 and the client and the upstream on core 0, in every arm: the
measured ratio is then what a deployment sees, where the endpoint has CPU of its own and the
client and the provider are other machines (labelled as such in the output).

    python tests/bench/bench_serve.py [--requests 400] [--concurrency 32] [--n 5] [--repeats 5]
        [--kinds choice,tools,json] [--max-concurrency C] [--no-litellm] [--pin]
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
from dataclasses import dataclass
from pathlib import Path

KEY = "sk-bench-0123456789abcdef0123456789abcdef"  # every endpoint's key (the proxy's master key)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


KINDS = ("choice", "tools", "json")
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": "integer"}}, "required": ["city", "unit", "days"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
VERDICT = {"type": "json_schema", "json_schema": {"name": "Verdict", "schema": {
    "type": "object", "properties": {
        "label": {"type": "string", "enum": ["yes", "no", "maybe"]},
        "score": {"type": "integer"}, "city": {"type": "string"}},
    "required": ["label", "score", "city"], "additionalProperties": False}}}
PLANTED = '{"label": "no", "score": 7, "city": "paris"}'
_BOX: list[str] = []


def request(tag: str, i: int, kinds: tuple[str, ...]) -> dict[str, object]:
    """Request i: a box-and-ball question, a tool-call step or a structured output, in turn."""
    if not _BOX:
        from ensemble.tasks import get_task

        _BOX.extend(q.prompt for q in get_task("boxball").questions())
    kind = kinds[i % len(kinds)]
    if kind == "choice":
        return {"messages": [{"role": "user", "content": _BOX[i % len(_BOX)]}]}
    msg = [{"role": "user", "content": f"Step {tag}-{i}: what do we look up?"}]
    if kind == "tools":
        return {"messages": msg, "tools": [WEATHER, TIME]}
    return {"messages": [{"role": "user", "content": f"Review {tag}-{i}: label, score, city."}],
            "response_format": VERDICT}


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
               check: Callable[[object], None], kinds: tuple[str, ...] = KINDS) -> float:
    """Requests per second of `total` chat completions, `conc` at a time."""
    sem = asyncio.Semaphore(conc)

    async def one(i: int) -> None:
        async with sem:
            extra = {"n": n} if n else {}
            r = await client.chat.completions.create(model=model, **request(tag, i, kinds),
                                                     **extra)
            check(r)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(total)))
    return total / (time.perf_counter() - t0)


@dataclass(frozen=True)
class Arm:
    """One path's figures in one repeat: requests per second and the CPU seconds per request
    of every process in the run (the client, this process; the upstream; the endpoint between
    them, None for direct), read from /proc."""

    rps: float
    client: float
    upstream: float
    endpoint: float | None

    @property
    def total(self) -> float:
        """All the CPU one request costs the machine on this path."""
        return self.client + self.upstream + (self.endpoint or 0.0)


async def measured(run: Callable[[], Awaitable[float]], upstream: int, endpoint: int | None
                   ) -> Arm:
    """One arm's rate and CPU seconds per request of each process."""
    pids = [os.getpid(), upstream, *([endpoint] if endpoint else [])]
    c0 = [cpu_seconds(p) for p in pids]
    t0 = time.perf_counter()
    rps = await run()
    total = rps * (time.perf_counter() - t0)
    per = [(cpu_seconds(p) - c) / total for p, c in zip(pids, c0, strict=True)]
    return Arm(rps, per[0], per[1], per[2] if endpoint else None)


def pin(pid: int, cores: set[int]) -> None:
    """Every thread of process `pid` on `cores` (Linux: each thread has its own affinity)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), cores)


def predicted(direct: Arm, serve: Arm) -> float:
    """serve / direct requests per second on a CPU-bound machine (2 cores, zero-latency
    upstream: every process runs flat out): direct's CPU per request over direct's plus
    serve's own, direct_cpu / (direct_cpu + serve_cpu). A shared machine gives serve, a
    process of its own, its own share of the cores, which flatters the measured ratio: this
    one does not move with the load."""
    return direct.total / (direct.total + (serve.endpoint or 0.0))


async def main(args: argparse.Namespace) -> None:
    from openai import AsyncOpenAI

    n, conc = args.n, args.concurrency
    kinds = tuple(args.kinds.split(","))
    # the upstream in its own process, its pid read for its CPU
    up_proc, up = start([sys.executable, "-m", "ensemble", "testing", "serve", "--latency",
                         "0", "--seed", "0", "--tools", "--structured", PLANTED])
    serve: subprocess.Popen[str] | None = None
    proxy: tuple[subprocess.Popen[str], str] | str = "--no-litellm"
    try:
        limit = ["--max-concurrency", str(args.max_concurrency)] if args.max_concurrency else []
        serve, serve_url = start(
            [sys.executable, "-m", "ensemble", "serve", "--model", "openai/sim", "--api-base",
             up, "--n", str(n), "--t", "1.0", "--name", "bench", "--port", "0", *limit],
            env={"OPENAI_API_KEY": KEY})
        if not args.no_litellm:
            proxy = litellm_proxy(up, args.litellm_python)
        why_not = proxy if isinstance(proxy, str) else None
        urls = {"direct": up, "serve": serve_url}
        if not isinstance(proxy, str):
            urls["litellm"] = proxy[1]
        clients = {name: AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)
                   for name, url in urls.items()}
        if args.pin:  # the endpoint on a core of its own, as it is deployed
            for pid in (os.getpid(), up_proc.pid):
                pin(pid, {0})
            for pid in (serve.pid, *(() if isinstance(proxy, str) else (proxy[0].pid,))):
                pin(pid, {1})

        def samples(r: object) -> None:
            assert len(r.choices) == n, r  # type: ignore[attr-defined]

        def voted(r: object) -> None:
            ens = r.model_extra["ensemble"]  # type: ignore[attr-defined]
            assert ens["samples"] == n, r
            assert ens["decision"] is not None, ens  # a vote was measured, not a null

        paths: dict[str, tuple[str, int | None, Callable[[object], None], int | None]] = {
            "direct": ("sim", n, samples, None), "serve": ("bench", None, voted, serve.pid)}
        if not isinstance(proxy, str):
            paths["litellm"] = ("bench", n, samples, proxy[0].pid)
        for name, (model, k, check, _) in paths.items():  # warm every path
            await load(clients[name], model, "warm", conc * 2, conc, k, check, kinds)
        rows: list[dict[str, Arm]] = []
        for rep in range(args.repeats):
            row = {}
            order = list(paths) if rep % 2 == 0 else list(paths)[::-1]  # arms alternated
            for name in order:
                model, k, check, pid = paths[name]
                row[name] = await measured(
                    lambda c=clients[name], m=model, k=k, ch=check, t=f"{name}{rep}":
                    load(c, m, t, args.requests, conc, k, ch, kinds), up_proc.pid, pid)
            rows.append({name: row[name] for name in paths})
            print(f"repeat {rep}: " + "  ".join(
                f"{nm} {a.rps:6.1f} req/s (CPU ms/req: client {a.client * 1e3:.2f}, upstream "
                f"{a.upstream * 1e3:.2f}" + (f", endpoint {a.endpoint * 1e3:.2f}"
                                            if a.endpoint is not None else "") + ")"
                for nm, a in rows[-1].items())
                + f"  serve/direct {row['serve'].rps / row['direct'].rps:.2f} measured, "
                f"{predicted(row['direct'], row['serve']):.2f} CPU-bound", flush=True)
        for c in clients.values():
            await c.close()
    finally:
        for proc in (serve, None if isinstance(proxy, str) else proxy[0], up_proc):
            if proc is not None:
                proc.terminate()
                proc.wait(10)
    report(args, rows, kinds, why_not)


def report(args: argparse.Namespace, rows: list[dict[str, Arm]], kinds: tuple[str, ...],
           why_not: str | None) -> None:
    """The medians over the repeats, and the verdict on each target."""
    med = statistics.median
    at = (f"--max-concurrency {args.max_concurrency}" if args.max_concurrency
          else "its default configuration")
    where = ("the endpoint pinned to core 1, the client and the upstream to core 0 (--pin: "
             "the endpoint's own core, as deployed; the measured ratio is then what a client "
             "sees when only the endpoint is added)" if args.pin else
             "every process on either core")
    print(f"\n{args.requests} requests x {args.repeats} repeats ({', '.join(kinds)} in turn; "
          f"every served decision not null), n = {args.n} samples per request, concurrency "
          f"{args.concurrency}, serve at {at}, one AsyncOpenAI client, zero-latency upstream "
          f"in its own process, arms alternated, {os.cpu_count()} cores (load average "
          f"{os.getloadavg()[0]:.1f}), {where}; medians; CPU per request of each process "
          "from /proc:")
    for name in rows[0]:
        arm = [r[name] for r in rows]
        end = [a.endpoint for a in arm if a.endpoint is not None]
        print(f"  {name:8s} {med(a.rps for a in arm):7.1f} req/s; CPU ms per request: client "
              f"{med(a.client for a in arm) * 1e3:.2f}, upstream "
              f"{med(a.upstream for a in arm) * 1e3:.2f}"
              + (f", {name} {med(end) * 1e3:.2f}" if end else "")
              + f", all {med(a.total for a in arm) * 1e3:.2f}")
    measured_ratio = med(r["serve"].rps / r["direct"].rps for r in rows)
    cpu_ratio = med(predicted(r["direct"], r["serve"]) for r in rows)
    print(f"serve / direct requests per second: CPU-bound prediction {cpu_ratio:.2f} "
          f"(direct_cpu / (direct_cpu + serve_cpu): what a quiet 2-core machine gives), "
          f"measured {measured_ratio:.2f} "
          + ("(the endpoint on a core of its own; other work on the machine shares both cores); "
             if args.pin else "(flattered when other work shares the cores); ")
          + "target >= 0.8")
    print(f"serve CPU per request: {med(r['serve'].endpoint for r in rows) * 1e3:.2f} ms "  # type: ignore[type-var]
          "(target <= 0.8)")
    if why_not:
        print(f"litellm proxy: not measured: {why_not}")
    else:
        print(f"litellm / serve requests per second: "
              f"{med(r['litellm'].rps / r['serve'].rps for r in rows):.2f} (serve is at least "
              "as fast when <= 1)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help=f"the requests' kinds, in turn (default {','.join(KINDS)})")
    ap.add_argument("--max-concurrency", type=int, default=None,
                    help="serve's --max-concurrency (default: serve's own default)")
    ap.add_argument("--no-litellm", action="store_true", help="skip litellm's proxy")
    ap.add_argument("--pin", action="store_true",
                    help="pin the endpoint (serve, the proxy) to core 1 and the client and the "
                         "upstream to core 0, in every arm: the endpoint on a core of its own")
    ap.add_argument("--litellm-python", default=sys.executable,
                    help="the Python of an environment with litellm[proxy] (its `litellm` "
                         "command is used); default: this one")
    asyncio.run(main(ap.parse_args()))
