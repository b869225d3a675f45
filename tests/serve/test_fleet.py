"""A fleet of real `ensemble serve` processes sharing one real redis-server: one upstream
budget, one idempotent vote cache, one spend ledger; /metrics, /ready and the drain.
The tests marked `fleet` (several replicas, 8-20 s each on a loaded machine) are not in the
default run: `python -m pytest -m fleet tests/serve/test_fleet.py`. Their short guards in the
default run are in-process (tests/fleet). The minute-long runs of issue 39's "Done when" are
tests/bench/bench_fleet.py."""

from __future__ import annotations

import concurrent.futures as cf
import signal
import subprocess
import sys
import time

import httpx
import pytest
from fleet_helpers import replicas, wait_for, windows, write_config

from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

pytest.importorskip("prometheus_client", reason="the fleet extra is not installed")

PROMPT = next(q for q in get_task("boxball").questions() if q.posterior > 0.95).prompt


def _ask(url: str, *, key: str | None = None, prompt: str = PROMPT, timeout: float = 60,
         client: httpx.Client | None = None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    body = {"model": "box", "messages": [{"role": "user", "content": prompt}]}
    if client is not None:
        return client.post(f"{url}/chat/completions", json=body, headers=headers,
                           timeout=timeout)
    return httpx.post(f"{url}/chat/completions", json=body, headers=headers, timeout=timeout)


def _drive(urls: list[str], rate: float, seconds: float, *, workers: int = 24
           ) -> list[httpx.Response | BaseException]:
    """Requests at `rate` per second in total for `seconds`, round-robin over `urls`."""
    n = int(rate * seconds)
    t0 = time.monotonic()
    clients = [httpx.Client() for _ in urls]

    def one(i: int) -> httpx.Response | BaseException:
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            return _ask(urls[i % len(urls)], prompt=f"{PROMPT}\n(request {i})",
                        client=clients[i % len(urls)])
        except Exception as exc:  # noqa: BLE001 - counted by the caller
            return exc

    with cf.ThreadPoolExecutor(workers) as pool:
        out = list(pool.map(one, range(n)))
    for c in clients:
        c.close()
    return out


@pytest.mark.fleet
def test_three_replicas_share_one_request_rate(redis_server, tmp_path):
    # each replica is configured for 10 requests/s; driven at 30/s in total, the upstream
    # sees 10/s (without the fleet: about 30/s, one budget per replica)
    with SimulatedServer(lam1=3.0, seed=1, rate_limit=(10_000, 1.0)) as up:
        cfg = write_config(tmp_path / "fleet.yaml", up.base_url, redis_url=redis_server.url,
                           rpm=600)
        with replicas(cfg, 3) as reps:
            urls = [u for _, u in reps]
            _ask(urls[0])  # warm: first requests pay imports and connections
            start = time.monotonic()
            got = _drive(urls, rate=30, seconds=2.5)
            span = time.monotonic() - start
        times = [t for t in up.stats.accepted_times if t >= start]
    assert all(isinstance(r, httpx.Response) and r.status_code == 200 for r in got)
    # GCRA's tolerance is one request; arrivals at the upstream jitter with the machine's load
    assert windows(times, 2.0) <= 2 * 10 + 3, windows(times, 2.0)
    assert len(times) >= 0.85 * 10 * min(span, 2.5), (len(times), span)


@pytest.mark.fleet
def test_an_idempotent_request_retried_on_another_replica_is_paid_once(redis_server, tmp_path):
    with SimulatedServer(lam1=3.0, seed=2, latency=0.4) as up:
        cfg = write_config(tmp_path / "fleet.yaml", up.base_url, redis_url=redis_server.url)
        with replicas(cfg, 2) as reps:
            (_, a), (_, b) = reps
            # the retry arrives at B while A still decides: B waits for A's answer
            with cf.ThreadPoolExecutor(2) as pool:
                first = pool.submit(_ask, a, key="order-17")
                time.sleep(0.15)
                retry = pool.submit(_ask, b, key="order-17")
                r1, r2 = first.result(), retry.result()
            later = _ask(b, key="order-17")  # and long after, from the cache
            reused = _ask(a, key="order-17", prompt="another question")
        served = up.stats.requests
    assert r1.status_code == r2.status_code == later.status_code == 200
    assert r1.json() == r2.json() == later.json()  # the same reply, id included
    # one of the two decided (the one that arrived first), the other was answered from it
    assert sorted(r.headers.get("Idempotent-Replayed", "") for r in (r1, r2)) == ["", "true"]
    assert later.headers.get("Idempotent-Replayed") == "true"
    assert served == 1  # paid once
    assert reused.status_code == 422 and "Idempotency-Key" in reused.json()["error"]["message"]


@pytest.mark.fleet
def test_a_replica_killed_mid_vote_its_retry_is_answered_once(redis_server, tmp_path):
    with SimulatedServer(lam1=3.0, seed=3, latency=1.5) as up:
        cfg = write_config(tmp_path / "fleet.yaml", up.base_url, redis_url=redis_server.url,
                           fleet={"lease_ttl": 1.5})
        with replicas(cfg, 2) as reps:
            (pa, a), (_, b) = reps
            with cf.ThreadPoolExecutor(1) as pool:
                doomed = pool.submit(_ask, a, key="job-9")
                assert wait_for(lambda: up.stats.requests >= 1, 10)
                pa.kill()  # mid-vote: its claim expires after lease_ttl
                with pytest.raises(httpx.TransportError):
                    doomed.result()
            r = _ask(b, key="job-9")
            again = _ask(a if pa.poll() is None else b, key="job-9")
            other = _ask(b)  # the fleet carries on
        assert r.status_code == 200 and again.json() == r.json()
        assert other.status_code == 200
        assert up.stats.requests == 3  # the killed vote's, the retry's, the other's


def test_metrics_parse_and_match_the_upstream_and_health_and_ready(redis_server, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    with SimulatedServer(lam1=3.0, seed=4) as up:
        cfg = write_config(tmp_path / "fleet.yaml", up.base_url, redis_url=redis_server.url)
        with replicas(cfg, 1) as reps:
            url = reps[0][1]
            base = url.rsplit("/v1", 1)[0]
            for i in range(5):
                assert _ask(url, prompt=f"{PROMPT} ({i})").status_code == 200
            text = httpx.get(f"{base}/metrics").text
            health = httpx.get(f"{base}/health").json()
            ready = httpx.get(f"{base}/ready")
        served = up.stats.requests
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    def total(name: str, **labels: str) -> float:
        return sum(s.value for s in fams[name].samples
                   if s.name == name + "_total" and all(s.labels.get(k) == v
                                                         for k, v in labels.items()))
    assert total("ensemble_upstream_requests", outcome="ok") == served == 5
    assert total("ensemble_votes", model="box") == 5
    assert total("ensemble_samples", model="box") == 15
    assert total("ensemble_cost_usd", model="box") > 0
    assert total("ensemble_requests", route="/v1/chat/completions", status="200") == 5
    assert "ensemble_limiter_wait_seconds" in fams and "ensemble_request_seconds" in fams
    assert health["fleet"]["state"] == "ok" and health["fleet"]["redis"] == redis_server.url
    assert ready.status_code == 200 and ready.json()["ready"] is True


def test_sigterm_drains_accepted_votes_and_refuses_new_ones(tmp_path):
    with SimulatedServer(lam1=3.0, seed=5, latency=1.0) as up:
        cfg = write_config(tmp_path / "one.yaml", up.base_url, redis_url=None,
                           drain_timeout=20)
        with replicas(cfg, 1) as reps:
            proc, url = reps[0]
            with cf.ThreadPoolExecutor(6) as pool:
                futs = [pool.submit(_ask, url, prompt=f"{PROMPT} [{i}]") for i in range(6)]
                assert wait_for(lambda: up.stats.requests >= 6, 10)  # all six accepted
                proc.send_signal(signal.SIGTERM)
                time.sleep(0.2)
                with pytest.raises(httpx.TransportError):  # no longer listening
                    httpx.get(url.rsplit("/v1", 1)[0] + "/health", timeout=2)
                codes = [f.result().status_code for f in futs]
            proc.wait(30)
    assert codes == [200] * 6
    assert proc.returncode == 0
    assert "draining: 6 accepted requests" in proc.stderr_text  # type: ignore[attr-defined]
    assert "drained in" in proc.stderr_text  # type: ignore[attr-defined]


@pytest.mark.fleet
def test_the_spend_cap_holds_across_the_fleet(redis_server, tmp_path):
    with SimulatedServer(lam1=3.0, seed=6) as up:
        # price $1 per 1k tokens both ways: a 3-sample vote of this prompt costs ~$0.21
        cfg = write_config(tmp_path / "fleet.yaml", up.base_url, redis_url=redis_server.url,
                           max_cost=1.0)
        with replicas(cfg, 2) as reps:
            urls = [u for _, u in reps]
            codes = []
            for i in range(12):
                r = _ask(urls[i % 2], prompt=f"{PROMPT} <{i}>")
                codes.append(r.status_code)
                if r.status_code != 200:
                    err = r.json()["error"]
                    break
            # a heartbeat later every replica has flushed and read the ledger back
            def spends() -> list[float]:
                return [httpx.get(u.rsplit("/v1", 1)[0] + "/health").json()["spend"]["spent"]
                        for u in urls]
            assert wait_for(lambda: len(set(spends())) == 1, 15, step=0.2), spends()
            after = [_ask(u, prompt=f"{PROMPT} <after {i}>") for i, u in enumerate(urls * 2)]
            h = [httpx.get(u.rsplit("/v1", 1)[0] + "/health").json() for u in urls]
    assert codes[0] == 200 and codes[-1] == 429 and len(codes) >= 4, codes
    assert err["code"] == "insufficient_quota" and "spend cap of $1" in err["message"]
    assert "\n" not in err["message"]
    assert [r.status_code for r in after] == [429] * 4  # refused on every replica
    assert "spend cap of $1" in after[-1].json()["error"]["message"]
    # what was spent stays within one vote per replica of the cap
    spent = max(x["spend"]["spent"] for x in h)
    assert 0.6 < spent <= 1.0 + 2 * 0.25, spent


def test_redis_down_at_start_is_one_line_or_local_shares(redis_server, tmp_path):
    url = redis_server.url
    redis_server.stop()
    with SimulatedServer(lam1=3.0, seed=7) as up:
        cfg = write_config(tmp_path / "fleet.yaml", up.base_url, redis_url=url)
        out = subprocess.run([sys.executable, "-m", "ensemble", "serve", "--config", str(cfg)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode != 0 and "Traceback" not in out.stderr
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "cannot reach Redis at redis://127.0.0.1" in lines[0]
        assert "on_redis_down: local" in lines[0]
        with replicas(cfg, 1, args=["--on-redis-down", "local", "--replicas", "2"]) as reps:
            base = reps[0][1].rsplit("/v1", 1)[0]
            assert _ask(reps[0][1]).status_code == 200
            health = httpx.get(f"{base}/health").json()
            ready = httpx.get(f"{base}/ready").status_code
    assert health["fleet"]["state"] == "down" and "÷ 2" in health["fleet"]["limits"]
    assert ready == 200
