"""A run killed with SIGKILL halfway, then rerun: nothing lost, nothing paid twice."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

from ensemble.testing import SimulatedServer

SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from ensemble.sampling.sampler import Sampler
    from ensemble.sampling.types import SampleRequest
    from tasks import get_task
    t = get_task("boxball")
    qs = t.questions()[:40]
    reqs = [SampleRequest.of(q.prompt, temperature=1.0, k=5) for q in qs]
    async def main():
        async with Sampler("openai/sim-expert", api_base=sys.argv[1], store=sys.argv[2],
                           use_n=False, max_concurrency=2) as s:
            rows = await s.sample(reqs, parser=t.parse)
        print("".join(x.answer or "?" for r in rows for x in r))
    asyncio.run(main())
""")


def count(path):
    try:
        with sqlite3.connect(path, timeout=30) as c:
            return c.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
    except sqlite3.Error:
        return 0


def run(url, store, **kw):
    return subprocess.Popen([sys.executable, "-c", SCRIPT, url, str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_sigkill_then_rerun_finishes_without_rerequesting(tmp_path):
    store = tmp_path / "run.sqlite"
    with SimulatedServer(lam1=3.0, seed=9, latency=0.02) as srv:
        proc = run(srv.base_url, store)
        deadline = time.time() + 60
        while count(store) < 60 and time.time() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        stored_at_kill = count(store)
        assert 60 <= stored_at_kill < 200
        out, err = run(srv.base_url, store).communicate(timeout=120)
        assert err.strip() == "" or "Traceback" not in err
        served = srv.stats.served
        # every sample requested at most twice, and only the few in flight at the kill twice
        duplicates = sum(c - 1 for c in served.values())
        assert duplicates <= 2
        assert len(served) == 200
    assert count(store) == 200
    with SimulatedServer(lam1=3.0, seed=9) as ref:
        ref_out, _ = run(ref.base_url, tmp_path / "ref.sqlite").communicate(timeout=120)
    assert out.strip() == ref_out.strip() and len(out.strip()) == 200


def test_two_processes_share_one_store(tmp_path):
    store = tmp_path / "shared.sqlite"
    with SimulatedServer(lam1=3.0, seed=4) as srv:
        a, b = run(srv.base_url, store), run(srv.base_url, store)
        out_a, err_a = a.communicate(timeout=120)
        out_b, err_b = b.communicate(timeout=120)
    assert a.returncode == 0 and b.returncode == 0, err_a + err_b
    assert out_a == out_b and count(store) == 200
    with sqlite3.connect(store) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
