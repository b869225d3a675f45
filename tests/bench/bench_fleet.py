"""A fleet of `ensemble serve` replicas sharing one upstream budget through a real redis-server
(issue 39's "Done when"). Each scenario runs real processes: the replicas (`ensemble serve
--config`), redis-server, and the simulated upstream (in this process for the rate scenarios,
where it records each accepted request's time; in its own process for the throughput one).

    python tests/bench/bench_fleet.py rate        # 3 replicas x 20 req/s each, driven at 60/s
    python tests/bench/bench_fleet.py tokens      # the same limit as tokens/min
    python tests/bench/bench_fleet.py outage      # rate, with Redis killed for 10 s mid-run
    python tests/bench/bench_fleet.py throughput  # one replica, C = 32, n = 5: Redis vs local
    python tests/bench/bench_fleet.py all [--seconds 60]

Run it niced on a shared machine (`nice -n 10`); every figure is measured in the same run as
its baseline, and the throughput comparison alternates its two arms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from tempfile import TemporaryDirectory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "serve"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _servers import server_process, server_stats  # noqa: E402
from fleet_helpers import replicas, windows, write_config  # noqa: E402

from ensemble.tasks import get_task  # noqa: E402
from ensemble.testing import SimulatedServer  # noqa: E402
from ensemble.testing.redisserver import RedisServer  # noqa: E402

PROMPT = next(q for q in get_task("boxball").questions() if q.posterior > 0.95).prompt
LIMIT = 20.0  # requests per second the fleet may send upstream
TOKENS = (100, 50)  # what the upstream reports per request (prompt, completion)


async def _open_loop(urls: list[str], rate: float, seconds: float) -> list[tuple[float, int]]:
    """POST at `rate` per second in total, round-robin; (send time, status or -1 on error)."""
    import aiohttp

    out: list[tuple[float, int]] = []
    conn = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
        async def one(i: int, at: float) -> None:
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            body = {"model": "box", "messages": [{"role": "user",
                                                   "content": f"{PROMPT}\n(request {i})"}]}
            try:
                async with session.post(f"{urls[i % len(urls)]}/chat/completions",
                                        json=body) as r:
                    await r.read()
                    out.append((at, r.status))
            except Exception:  # noqa: BLE001 - counted as an unanswered request
                out.append((at, -1))

        t0 = time.monotonic() + 0.5
        n = int(rate * seconds)
        await asyncio.gather(*(one(i, t0 + i / rate) for i in range(n)))
    return out


class _Grants(threading.Thread):
    """The fleet's grants at Redis's clock, read with MONITOR: each admission adds its lease to
    the in-flight set (a ZADD without XX from a script; renewals carry XX). What the limiter
    let through, apart from when each request reached the upstream."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.times: list[float] = []
        self.ready = threading.Event()

    def run(self) -> None:
        import redis

        try:
            with redis.Redis.from_url(self.url).monitor() as m:
                self.ready.set()
                for cmd in m.listen():
                    c = str(cmd.get("command", ""))
                    if cmd.get("client_type") == "lua" and c.startswith("ZADD ") \
                            and ":in-flight " in c and " XX " not in c:
                        self.times.append(float(cmd["time"]))
        except Exception:  # noqa: BLE001 - Redis stopped: the grants so far are kept
            self.ready.set()


def _rates(times: list[float], t0: float, t1: float, width: float = 5.0) -> dict[str, float]:
    inside = [t for t in times if t0 <= t < t1]
    return {"requests": len(inside), "mean_per_s": round(len(inside) / max(t1 - t0, 1e-9), 2),
            "max_per_s_in_5s": round(windows(inside, width) / width, 2)}


def scenario_rate(seconds: float, *, tokens: bool = False, outage: bool = False) -> dict:
    """Three replicas, each configured for the whole limit, driven at 3x it round-robin."""
    limit = {"tpm": LIMIT * sum(TOKENS) * 60} if tokens else {"rpm": LIMIT * 60}
    with RedisServer() as redis, TemporaryDirectory() as tmp, \
            SimulatedServer(lam1=3.0, seed=1, rate_limit=(1_000_000, 1.0),
                            usage=TOKENS) as up:
        cfg = write_config(Path(tmp) / "fleet.yaml", up.base_url, redis_url=redis.url,
                           fleet={"replicas": 3}, **limit)
        with replicas(cfg, 3) as reps:
            urls = [u for _, u in reps]
            asyncio.run(_open_loop(urls, 3.0, 1.0))  # warm up: imports, connections
            if tokens:  # the replicas' token estimate comes from replies; settle it
                time.sleep(1.0)
            marks: dict[str, float] = {}

            def kill_and_revive() -> None:
                time.sleep(seconds / 3)
                marks["down"] = time.monotonic()
                redis.stop()
                time.sleep(10.0)
                redis.start()
                marks["up"] = time.monotonic()

            killer = threading.Thread(target=kill_and_revive) if outage else None
            grants = None if outage else _Grants(redis.url)
            if grants is not None:
                grants.start()
                grants.ready.wait(10)
            start, start_wall = time.monotonic(), time.time()
            if killer is not None:
                killer.start()
            sent = asyncio.run(_open_loop(urls, 3 * LIMIT, seconds))
            end = time.monotonic()
            if killer is not None:
                killer.join()
        lines = [ln for p, _ in reps for ln in p.stderr_text.splitlines()  # type: ignore[attr-defined]
                 if "Redis" in ln]
        times = list(up.stats.accepted_times)
        statuses = up.stats.statuses
    codes: dict[int, int] = {}
    for _, c in sent:
        codes[c] = codes.get(c, 0) + 1
    doc: dict = {"scenario": "tokens" if tokens else ("outage" if outage else "rate"),
                 "seconds": seconds, "driven_per_s": 3 * LIMIT, "limit_per_s": LIMIT,
                 "client_statuses": codes, "upstream_429": statuses.get(429, 0),
                 "whole_run": _rates(times, start, end)}
    doc["replica_lines"] = sorted(set(lines))  # Redis lost and back, as each replica saw it
    if grants is not None:  # Redis's clock is this machine's wall clock
        g = [t - start_wall + start for t in grants.times]
        doc["limiter_grants"] = _rates(g, start, end)
    if tokens:
        w = doc["whole_run"]
        doc["tokens_per_min_limit"] = limit["tpm"]
        doc["tokens_per_min_mean"] = round(w["mean_per_s"] * sum(TOKENS) * 60)
        doc["tokens_per_min_max_in_5s"] = round(w["max_per_s_in_5s"] * sum(TOKENS) * 60)
    if outage:
        down, back = marks["down"], marks["up"]
        doc["before_outage"] = _rates(times, start, down)
        doc["during_outage"] = _rates(times, down, back)
        doc["after_outage"] = _rates(times, back, end)
        doc["after_outage_from_5s"] = _rates(times, back + 5.0, end)
        # the first 5 s window starting at or after Redis returned that is back under 21/s
        recovered = None
        for k in range(0, int((end - back) * 10)):
            t = back + k / 10
            if t + 5.0 > end:
                break
            if windows([x for x in times if t <= x < t + 5.0], 5.0) / 5.0 <= LIMIT * 1.05:
                recovered = round(k / 10, 1)
                break
        doc["back_under_limit_after_s"] = recovered
        doc["per_s_around_return"] = [sum(1 for x in times if back + k <= x < back + k + 1)
                                      for k in range(-3, 10)]
    return doc


async def _closed_loop(url: str, concurrency: int, seconds: float) -> float:
    import aiohttp

    done = 0
    stop = time.monotonic() + seconds
    conn = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
        async def worker(w: int) -> None:
            nonlocal done
            i = 0
            while time.monotonic() < stop:
                body = {"model": "box", "messages": [{"role": "user",
                                                       "content": f"{PROMPT} ({w}.{i})"}]}
                try:
                    async with session.post(f"{url}/chat/completions", json=body) as r:
                        await r.read()
                        if r.status == 200:
                            done += 1
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    print(f"bench: a request failed: {type(exc).__name__}: {exc}",
                          file=sys.stderr)
                i += 1

        t0 = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        return done / (time.monotonic() - t0)


def scenario_throughput(seconds: float, rounds: int = 3) -> dict:
    """One replica at C = 32, n = 5, zero-latency upstream: Redis limits vs in-process."""
    per = max(5.0, seconds / (2 * rounds))
    import psutil

    out: dict[str, list[float]] = {"local": [], "redis": []}
    cpu: dict[str, list[float]] = {"local": [], "redis": [], "redis-server": []}
    with server_process("--lam", "3.0", "--port", "0") as up, RedisServer() as redis, \
            TemporaryDirectory() as tmp:
        cfgs = {"local": write_config(Path(tmp) / "local.yaml", up, redis_url=None, n=5,
                                      max_concurrency=64, rpm=6_000_000),
                "redis": write_config(Path(tmp) / "redis.yaml", up, redis_url=redis.url, n=5,
                                      max_concurrency=64, rpm=6_000_000)}
        for _ in range(rounds):
            for arm in ("local", "redis"):
                with replicas(cfgs[arm], 1) as reps:
                    url = reps[0][1]
                    asyncio.run(_closed_loop(url, 32, 1.0))  # warm up
                    me = psutil.Process(reps[0][0].pid)
                    rd = psutil.Process(redis.proc.pid) if redis.proc else None
                    c0, r0 = me.cpu_times(), rd.cpu_times() if rd else None
                    rate = asyncio.run(_closed_loop(url, 32, per))
                    c1, r1 = me.cpu_times(), rd.cpu_times() if rd else None
                    out[arm].append(rate)
                    n = max(1.0, rate * per)
                    cpu[arm].append(1000 * (c1.user + c1.system - c0.user - c0.system) / n)
                    if arm == "redis" and r0 is not None and r1 is not None:
                        cpu["redis-server"].append(
                            1000 * (r1.user + r1.system - r0.user - r0.system) / n)
        served = server_stats(up)
    local, redis_ = statistics.median(out["local"]), statistics.median(out["redis"])
    return {"scenario": "throughput", "concurrency": 32, "n": 5, "seconds_per_arm": per,
            "local_req_per_s": [round(x, 1) for x in out["local"]],
            "redis_req_per_s": [round(x, 1) for x in out["redis"]],
            "median_local": round(local, 1), "median_redis": round(redis_, 1),
            "ratio_redis_over_local": round(redis_ / local, 3),
            "replica_cpu_ms_per_request": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
            "cpu_ratio_local_over_redis": round(statistics.median(cpu["local"])
                                                / statistics.median(cpu["redis"]), 3),
            "upstream_requests": served["requests"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("scenario", choices=("rate", "tokens", "outage", "throughput", "all"))
    ap.add_argument("--seconds", type=float, default=60.0)
    a = ap.parse_args()
    todo = ["rate", "tokens", "outage", "throughput"] if a.scenario == "all" else [a.scenario]
    for s in todo:
        if s == "throughput":
            doc = scenario_throughput(a.seconds)
        else:
            doc = scenario_rate(a.seconds, tokens=s == "tokens", outage=s == "outage")
        print(json.dumps(doc), flush=True)


if __name__ == "__main__":
    main()
