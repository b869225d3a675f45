"""Ensemble.decide() from many threads (each its own event loop) prints nothing of litellm's
success-logging worker, which is bound to the first loop: stderr captured from a real process
against the simulated server."""

import subprocess
import sys

SCRIPT = r"""
import threading
from ensemble import Ensemble
from ensemble.testing import SimulatedServer
with SimulatedServer(lam1=3.0) as srv:
    ens = Ensemble(model="openai/sim-expert", api_base=srv.base_url, temperature=1.0, n=3)
    out = []
    def go(i):
        out.append(ens.decide(f"Which box? {i}").n_invalid >= 0)
    ts = [threading.Thread(target=go, args=(i,)) for i in range(20)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    print(len(out), srv.stats.requests)
"""


def test_decide_from_twenty_threads_prints_no_logging_worker_tracebacks():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    decided, requests = (int(x) for x in r.stdout.split())
    assert decided == 20 and requests >= 20
    assert "LoggingWorker" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
