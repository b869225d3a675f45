"""A run killed with SIGKILL halfway, then rerun: nothing lost, nothing paid twice."""

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from ensemble.testing import SimulatedServer, prompt_key

pytestmark = pytest.mark.usefixtures("each_provider")  # both providers: conftest.py

SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from ensemble.sampling.sampler import Sampler
    from ensemble.sampling.types import SampleRequest
    from ensemble.tasks import get_task
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


def stored_pairs(path):
    """(server prompt key, sample index) of every sample in the store."""
    with sqlite3.connect(path, timeout=30) as c:
        reqs = {k: json.loads(r) for k, r in c.execute("SELECT key, request FROM prompts")}
        rows = c.execute("SELECT key, idx FROM samples").fetchall()
    return {(prompt_key(reqs[k]["messages"], reqs[k]["params"]["temperature"]), i)
            for k, i in rows}


async def sample(url, store):
    """SCRIPT's run in this process: the answers it prints."""
    ns: dict = {}
    exec(compile(SCRIPT.replace("asyncio.run(main())", ""), "<script>", "exec"), ns)
    async with ns["Sampler"]("openai/sim-expert", api_base=url, store=store, use_n=False,
                             max_concurrency=2) as s:
        rows = await s.sample(ns["reqs"], parser=ns["t"].parse)
    return "".join(x.answer or "?" for r in rows for x in r)


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
        proc.communicate()  # waits, and closes its pipes
        done_at_kill = stored_pairs(store)
        assert 60 <= len(done_at_kill) < 200
        # the rerun in this process (each_provider set the provider): what it resumes from is
        # the store the killed process left; a second process would only add an import
        out = asyncio.run(sample(srv.base_url, store))
        served = srv.stats.served
        # no sample stored before the kill was requested again; only the requests in flight at
        # the kill (at most max_concurrency = 2) may have been served twice
        assert all(served[pair] == 1 for pair in done_at_kill)
        assert sum(c - 1 for c in served.values()) <= 2
        assert len(served) == 200
    assert count(store) == 200
    # an unbroken run with the same seed
    with SimulatedServer(lam1=3.0, seed=9) as ref:
        ref_out = asyncio.run(sample(ref.base_url, tmp_path / "ref.sqlite"))
    assert out == ref_out and len(ref_out) == 200


# Which process claims a sample is the sampler's and the store's business, not the
# provider's: one provider is enough here (each provider's process is killed above).
@pytest.mark.parametrize("each_provider", ["openai"], indirect=True)
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
