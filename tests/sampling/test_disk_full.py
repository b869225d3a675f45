"""A store that cannot be written mid-run (a full disk; here the process's file-size limit,
RLIMIT_FSIZE, which fails SQLite's writes the same way without a special file system): the run
stops drawing at the first failed write, keeps what arrives until it can be written, and says
how many samples it could not store (issue 41 item 6); the rerun pays again for those only. A
real process against the simulated server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import re
import resource
import sqlite3
import subprocess
import sys

import pytest

from ensemble.testing import SimulatedServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")

LIMIT = 160_000  # bytes per file: the store's write-ahead log reaches it after a few replies


def _eval(url, out):
    return ["eval", "boxball", "--model", "openai/sim-expert", "--api-base", url, "--t", "1",
            "--n", "1", "--samples", "5", "--limit", "100", "--max-concurrency", "8",
            "--bootstrap", "100", "--out", str(out)]


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def _stored(path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0]


def test_a_store_that_cannot_be_written_stops_the_run_and_says_what_was_lost(tmp_path,
                                                                              run_cli):
    out = tmp_path / "run"
    with SimulatedServer(lam1=3.0, seed=4, latency=0.05) as srv:
        proc = subprocess.run([sys.executable, "-m", "ensemble", *_eval(srv.base_url, out)],
                              capture_output=True, text=True, timeout=300,
                              preexec_fn=_limited)
        err = proc.stderr
        served = sum(srv.stats.served.values())
        errors = [x for x in err.strip().splitlines() if x.startswith("ensemble: error:")]
        assert proc.returncode != 0 and "Traceback" not in err, err
        assert len(errors) == 1 and "samples.sqlite" in errors[0], err
        assert "stopped new requests" in errors[0], err
        m = re.search(r"(\d+) of (\d+) samples drawn could not be stored", errors[0])
        lost = int(m.group(1)) if m else 0
        assert m or "every sample drawn was stored" in errors[0], err
        stored = _stored(out / "samples.sqlite")
        assert stored + lost == served, (stored, lost, served, err)  # every one accounted for
        r = run_cli(*_eval(srv.base_url, out))
        assert r.returncode == 0, r.stderr
        twice = sum(c - 1 for c in srv.stats.served.values())
        total = len(srv.stats.served)
    assert 0 < served < total / 2  # it stopped drawing soon after the first failed write
    assert twice == lost  # the rerun paid again for the samples it said were lost, no more
