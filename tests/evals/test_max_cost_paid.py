"""--max-cost says what was paid and counts what the run already spent (issue 41 item 7): the
stop names the dollars actually paid (the requests in flight at the stop included: what the
store holds), and an identical rerun does not spend the cap a second time: the samples of the
run already in the store count towards it. Through `ensemble.cli.main` in-process against the
simulated server (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import re
import sqlite3

from ensemble.testing import SimulatedServer

PRICE = ("--price-per-1k-tokens", "0.5,1.5")  # about $0.15 a request of 3 samples
CAP, CAP_USD = "1.5", 1.5


def _eval(url, out, *extra):
    return ("eval", "boxball", "--model", "openai/sim-expert", "--api-base", url, "--t", "1",
            "--n", "1", "--samples", "3", "--limit", "30", "--max-concurrency", "8",
            "--bootstrap", "100", "--out", str(out), *PRICE, *extra)


def _stored_usd(out) -> float:
    with sqlite3.connect(out / "samples.sqlite") as conn:
        return float(conn.execute("SELECT SUM(cost_usd) FROM samples").fetchone()[0] or 0.0)


def _error(r) -> str:
    lines = [x for x in r.stderr.strip().splitlines() if x.startswith("ensemble: error:")]
    assert r.returncode == 1 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_the_cap_reports_what_was_paid_and_counts_what_the_run_spent(tmp_path, run_cli):
    out = tmp_path / "run"
    with SimulatedServer(lam1=3.0, seed=2, latency=0.2) as srv:
        line = _error(run_cli(*_eval(srv.base_url, out, "--max-cost", CAP)))
        paid = _stored_usd(out)
        m = re.search(r"paid \$(\d+\.\d+)", line)
        assert m and abs(float(m.group(1)) - paid) < 5e-5, (line, paid)
        assert paid <= CAP_USD + 0.25  # at most about one request past it
        sent = srv.stats.requests
        again = _error(run_cli(*_eval(srv.base_url, out, "--max-cost", CAP)))
        assert srv.stats.requests - sent <= 1, again  # the cap is the run's, not per call
        assert _stored_usd(out) <= CAP_USD + 0.25
        assert "already" in again and f"${paid:.4f}" in again, again
        done = run_cli(*_eval(srv.base_url, out, "--max-cost", "100"))  # a higher cap goes on
        assert done.returncode == 0, done.stderr
