"""Ctrl-C keeps the replies already paid for (issue 41 item 5): the requests in flight at the
interrupt are waited for (briefly) and stored, the command says how many there were, and the
rerun pays for none of them again. A real process (a signal), against the simulated server over
real HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from ensemble.testing import SimulatedServer


def _eval(url, out):
    return [sys.executable, "-m", "ensemble", "eval", "boxball", "--model", "openai/sim-expert",
            "--api-base", url, "--t", "1", "--n", "1", "--samples", "2", "--limit", "10",
            "--max-concurrency", "8", "--bootstrap", "100", "--out", str(out)]


def test_ctrl_c_stores_the_replies_in_flight_and_the_rerun_pays_none_twice(tmp_path, run_cli):
    out = tmp_path / "run"
    with SimulatedServer(lam1=3.0, seed=3, latency=2.0) as srv:
        proc = subprocess.Popen(_eval(srv.base_url, out), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 60
        # interrupt while the server holds requests: after 16 replies and with the next ones in
        # (on a loaded machine the client may not have sent them yet at the 16th reply)
        while ((srv.stats.completions < 16 or srv.stats.in_flight < 1)
               and time.monotonic() < deadline):
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "Traceback" not in err, err
        m = re.search(r"(\d+) requests? in flight", err)
        assert m and 1 <= int(m.group(1)) <= 8, err
        assert f"stored the replies of all {m.group(1)}" in err, err
        r = run_cli(*_eval(srv.base_url, out)[3:])
        assert r.returncode == 0, r.stderr
        twice = sum(c - 1 for c in srv.stats.served.values())
    assert twice == 0, err  # every sample drawn, none paid for twice
