import json
import subprocess
import sys

import pytest

from ensemble.testing import SimulatedServer

pytestmark = pytest.mark.usefixtures("each_provider")  # both providers: conftest.py


@pytest.fixture
def cli(run_cli):
    """`ensemble ARGS` in this process (the run_cli fixture of tests/conftest.py)."""
    return run_cli


def test_sample_counts_json(box_questions, cli):
    q = next(q for q in box_questions if 0.4 < q.posterior < 0.6)
    with SimulatedServer(lam1=1.0, seed=2) as srv:
        res = cli("sample", "--model", "openai/sim-expert", "--api-base", srv.base_url,
                  "--t", "1", "-k", "30", "--choices", "L,R", "--json", q.prompt)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert sum(doc["counts"].values()) == 30 and set(doc["counts"]) <= {"L", "R", "(invalid)"}


def test_missing_key_and_bad_model_are_one_line(monkeypatch, cli):
    import os

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    for model, needle in [("openai/gpt-4o-mini", "OPENAI_API_KEY"), ("nonsense", "unknown model")]:
        res = cli("sample", "--model", model, "--t", "1", "-k", "2", "hello", env=env)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 1 and len(lines) == 1 and needle in lines[0], res.stderr
        assert "Traceback" not in res.stderr


def test_serve_prints_base_url_first():
    import time

    proc = subprocess.Popen([sys.executable, "-m", "ensemble", "testing", "serve", "--lam", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("http://127.0.0.1:") and line.endswith("/v1")
        import httpx

        r = httpx.get(line + "/models", timeout=10)
        assert r.status_code == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # waits, and closes its pipes
        time.sleep(0.1)


def test_a_closed_port_is_named_as_a_refused_connection_without_retries(tmp_path, cli):
    # issue 21: through the CLI (run_sync) a refused connection read as "failed (500)" after 6
    # attempts, because the coroutine ran inside `except RuntimeError:` and the event loop's
    # re-raise replaced litellm's exception chain with "no running event loop"
    import socket
    import time

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    res = cli("sample", "--model", "openai/sim", "--api-base", f"http://127.0.0.1:{port}/v1",
              "--t", "0.7", "-k", "3", "--store", str(tmp_path / "s.sqlite"), "hello",
              "--choices", "L,R")
    elapsed = time.monotonic() - t0
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "connection refused" in lines[0], lines[0]
    assert "(500)" not in lines[0] and "gave up after" not in lines[0]  # one attempt, no retries
    assert "Traceback" not in res.stderr
    assert elapsed < 60  # litellm's import dominates; retries would add seconds per attempt
