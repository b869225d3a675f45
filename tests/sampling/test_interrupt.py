"""Ctrl-C keeps the replies already paid for (issue 41 item 5): the requests in flight at the
interrupt are waited for (briefly) and stored, the command says how many there were, and the
rerun pays for none of them again. SIGTERM (`kill`, `docker stop`, a cancelled CI job) does the
same and exits 143. A real process (a signal), against the simulated server over real HTTP on
127.0.0.1.

The processes a test interrupts start with SIGINT's default action (the `interruptible`
fixture, tests/conftest.py): a test process started in the background by a non-interactive
shell ignores SIGINT, and so would the `ensemble` it starts (the last test shows both)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ensemble.testing import SimulatedServer

# the commands start from the state their process inherits; a loaded machine (the full suite
# on 2 shared cores) can take tens of seconds to import and start one
DEADLINE = 120.0


def _eval(url, out):
    return ["eval", "boxball", "--model", "openai/sim-expert", "--api-base", url, "--t", "1",
            "--n", "1", "--samples", "2", "--limit", "10", "--max-concurrency", "8",
            "--bootstrap", "100", "--out", str(out)]


def wait_until(what, ready, proc):
    """Wait (polling) until `ready()`, at most DEADLINE s; fail naming `what` if the process
    ended first or the deadline passed (never interrupt at the wrong moment and go on)."""
    deadline = time.monotonic() + DEADLINE
    while not ready():
        if proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}: "
                                 f"{err}")
        if time.monotonic() > deadline:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"not {what} within {DEADLINE:g} s: {err}")
        time.sleep(0.02)


@pytest.mark.parametrize(("sig", "code", "said"), [
    (signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
    ids=["ctrl_c", "sigterm"])
def test_a_stop_signal_stores_the_replies_in_flight_and_the_rerun_pays_none_twice(
        tmp_path, run_cli, interruptible, sig, code, said):
    out = tmp_path / "run"
    with SimulatedServer(lam1=3.0, seed=3, latency=2.0) as srv:
        proc = subprocess.Popen(interruptible(*_eval(srv.base_url, out)),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        # interrupt while the server holds requests: after 16 replies and with the next ones in
        # (on a loaded machine the client may not have sent them yet at the 16th reply)
        wait_until("16 replies with more requests in flight",
                   lambda: srv.stats.completions >= 16 and srv.stats.in_flight >= 1, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
        assert proc.returncode == code and "Traceback" not in err, err
        m = re.search(rf"{re.escape(said)}: waiting up to 15 s for the (\d+) requests? in flight",
                      err)
        assert m and 1 <= int(m.group(1)) <= 8, err
        assert f"stored the replies of all {m.group(1)}" in err, err
        r = run_cli(*_eval(srv.base_url, out))
        assert r.returncode == 0, r.stderr
        twice = sum(c - 1 for c in srv.stats.served.values())
    assert twice == 0, err  # every sample drawn, none paid for twice


@pytest.mark.parametrize(("first", "second", "code", "said"), [
    (signal.SIGTERM, signal.SIGTERM, 143, "terminated (SIGTERM)"),
    (signal.SIGTERM, signal.SIGINT, 143, "terminated (SIGTERM)"),
    (signal.SIGINT, signal.SIGTERM, 130, "interrupted")],
    ids=["term_term", "term_int", "int_term"])
def test_a_second_stop_signal_drops_the_wait_for_the_replies_in_flight(
        tmp_path, interruptible, first, second, code, said):
    """The first signal waits for the request in flight (its reply never comes here); a second
    one, SIGTERM or Ctrl-C, ends the wait at once: the command says the request was dropped
    and exits as the first signal asks (143 for SIGTERM, 130 for Ctrl-C)."""
    with SimulatedServer(lam1=3.0, latency=600.0) as srv:  # the reply never comes in the test
        proc = subprocess.Popen(
            interruptible("sample", "--model", "openai/sim-expert", "--api-base", srv.base_url,
                          "-k", "1", "--store", tmp_path / "s.db", "hello there"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            wait_until("its request was sent", lambda: srv.stats.in_flight >= 1, proc)
            proc.send_signal(first)
            lines: list[str] = []
            assert proc.stderr is not None
            for line in proc.stderr:  # the first signal's wait has begun: signal again
                lines.append(line)
                if "waiting up to 15 s" in line:
                    break
            assert lines and f"{said}: waiting up to 15 s for the 1 request in flight" \
                in lines[-1], lines
            proc.send_signal(second)
            _, err = proc.communicate(timeout=DEADLINE)
            err = "".join(lines) + err
            assert proc.returncode == code and "Traceback" not in err, err
            # the wait ended by the signal (at 15 s it would say "0 of the 1 ... returned")
            assert "dropped 1 request of the 1 in flight" in err, err
            assert f"ensemble: {said}; completed samples are kept in the store" in err, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_sigterm_without_a_store_exits_143_at_once_and_says_nothing_is_kept(
        tmp_path, interruptible):
    """Without --store nothing waits: SIGTERM exits 143 at once and says nothing is kept."""
    with SimulatedServer(lam1=3.0, latency=600.0) as srv:
        proc = subprocess.Popen(
            interruptible("sample", "--model", "openai/sim-expert", "--api-base", srv.base_url,
                          "-k", "1", "hello there"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until("its request was sent", lambda: srv.stats.in_flight >= 1, proc)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=DEADLINE)
            assert proc.returncode == 143 and "Traceback" not in err, err
            assert "ensemble: terminated (SIGTERM); no --store was given" in err, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


IGNORING = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "os.execv(sys.argv[1], sys.argv[1:])")  # as a shell starts a job with `&`


def test_sigint_ignored_by_the_parent_stays_ignored_but_not_in_an_interruptible_run(
        tmp_path, interruptible):
    """What failed the Ctrl-C tests on main's full runs (exit 0: the run finished): started
    from a shell's background job, `python -m ensemble` inherits SIGINT ignored and keeps it,
    as every program does (the shell asked for it: a Ctrl-C meant for the script must not stop
    its background jobs); the tests' `interruptible` process is interrupted all the same."""
    with SimulatedServer(lam1=3.0, latency=600.0) as srv:  # replies never come in the test
        sample = ["sample", "--model", "openai/sim-expert", "--api-base", srv.base_url, "-k",
                  "2", "hello there"]
        for argv, interrupted in (([sys.executable, "-m", "ensemble", *sample], False),
                                  (interruptible(*sample), True)):
            sent = srv.stats.requests
            proc = subprocess.Popen([sys.executable, "-c", IGNORING, *argv],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                wait_until("its request was sent",
                           lambda sent=sent: srv.stats.requests > sent, proc)
                proc.send_signal(signal.SIGINT)
                if interrupted:
                    _, err = proc.communicate(timeout=DEADLINE)
                    assert proc.returncode == 130 and "interrupted" in err, err
                else:  # still waiting for its reply: the signal was ignored
                    time.sleep(1.0)
                    assert proc.poll() is None, proc.communicate()
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.communicate()


IGNORING_TERM = ("import os, signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                 "os.execv(sys.argv[1], sys.argv[1:])")  # as `trap '' TERM` or nohup-like


def test_sigterm_ignored_by_the_parent_stays_ignored(tmp_path, interruptible):
    """A command its parent started with SIGTERM ignored keeps ignoring it (the handler is
    installed only over the default action, as asyncio.run does for SIGINT)."""
    with SimulatedServer(lam1=3.0, latency=600.0) as srv:  # the reply never comes in the test
        proc = subprocess.Popen(
            [sys.executable, "-c", IGNORING_TERM,
             *interruptible("sample", "--model", "openai/sim-expert", "--api-base",
                            srv.base_url, "-k", "1", "hello there")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until("its request was sent", lambda: srv.stats.in_flight >= 1, proc)
            proc.send_signal(signal.SIGTERM)
            time.sleep(1.0)  # still waiting for its reply: the signal was ignored
            assert proc.poll() is None, proc.communicate()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
