"""The simulated server stops quietly: nothing it started is left pending when it stops (no
"Task was destroyed but it is pending!" on stderr), neither on its background thread nor as
`ensemble testing serve` stopped by a signal.

Each case runs in a child process: the message comes from the garbage collector through the
asyncio logger, which pytest's log capture would swallow. What is left running at the stop: a
batch waiting out its completion window (the Batch API's own task) and a chat request held by
a "timeout" fault whose client has gone (a request handler aiohttp cancels at shutdown)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")

# upload a batch input, create a batch that waits 30 s, and leave a chat request hanging
BUSY = textwrap.dedent("""
    import json

    import httpx

    def busy(base):
        line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}
        f = httpx.post(base + "/files", data={"purpose": "batch"},
                       files={"file": ("in.jsonl", json.dumps(line) + "\\n")}).json()
        b = httpx.post(base + "/batches", json={"input_file_id": f["id"], "completion_window":
                                                 "24h", "endpoint": "/v1/chat/completions"})
        assert b.json()["status"] == "validating", b.text
        try:
            httpx.post(base + "/chat/completions", timeout=0.5, json={
                "model": "m", "messages": [{"role": "user", "content": "hang"}]})
        except httpx.TimeoutException:
            pass
        else:
            raise AssertionError("the timeout fault did not hold the request")
""")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_a_start_stop_cycle_on_the_background_thread_prints_nothing():
    script = BUSY + textwrap.dedent("""
        import gc

        from ensemble.testing import BatchPlan, FaultPlan, SimulatedServer

        srv = SimulatedServer(batch=BatchPlan(delay=30),
                              faults=FaultPlan(rate=1.0, kinds=("timeout",), hang=30))
        with srv:
            busy(srv.base_url)
        with srv:  # and a second cycle on the same server
            busy(srv.base_url)
        del srv
        gc.collect()
        print("stopped")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "stopped\n"
    assert done.stderr == ""


def test_testing_serve_stopped_by_a_signal_prints_nothing():
    for sig in (signal.SIGINT, signal.SIGTERM):
        proc = subprocess.Popen(
            [sys.executable, "-m", "ensemble", "testing", "serve", "--batch-delay", "30",
             "--fault-rate", "1", "--faults", "timeout"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        try:
            base = proc.stdout.readline().strip()
            assert base.startswith("http://127.0.0.1:"), proc.stderr.read()
            subprocess.run([sys.executable, "-c", BUSY + f"busy({base!r})"], check=True,
                           env=_env(), timeout=60)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, (sig, err)
        assert err == "", (sig, err)
