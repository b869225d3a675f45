"""A rerun shows its progress bar from the start (defects3 item 3): the sampler read every
stored sample before it started the bar, so a rerun of a large run was silent for seconds
(80000 samples: ~2.5 s). The bar now starts first and the stored samples fill it under
"stored", then it counts what is drawn under "sampling". In a pseudo-terminal (the bar is drawn
only on a terminal), against the simulated server."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys

import pytest

from ensemble.testing import SimulatedServer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")


def _in_a_terminal(*args: str) -> str:
    """`ensemble ARGS` with stderr and stdout on a pseudo-terminal; what it wrote."""
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="100", TERM="xterm")
    p = subprocess.Popen([sys.executable, "-m", "ensemble", *args], stdin=subprocess.DEVNULL,
                         stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: the process is done
                break
            if not chunk:
                break
            out += chunk
        elif p.poll() is not None:
            break
    assert p.wait(timeout=120) == 0, out.decode(errors="replace")
    os.close(master)
    return out.decode(errors="replace")


def test_a_rerun_fills_the_bar_from_the_store_before_it_samples(tmp_path, run_cli):
    with SimulatedServer(lam1=3.0, seed=2) as srv:
        args = ("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                srv.base_url, "--t", "1", "--n", "1", "--samples", "2", "--limit", "30",
                "--bootstrap", "100", "--out", str(tmp_path / "run"))
        assert run_cli(*args).returncode == 0  # the first run, in this process (no terminal)
        served = srv.stats.requests
        again = _in_a_terminal(*args)
        assert srv.stats.requests == served  # everything came from the store
    # the rerun's bar is drawn while the store is read, and counts the stored samples, at no
    # rate (none was drawn)
    counts = re.findall(r"(\d+)/(\d+)", again)  # the bar's frames, first to last
    assert counts and counts[0][0] == "0" and counts[-1][0] == counts[-1][1], again
    assert "\x1b[1mstored" in again, again  # the bar's label while it reads
    assert not re.search(r"\d/s", again), again
