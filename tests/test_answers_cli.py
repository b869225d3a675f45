"""Open answers from the shell: bad input is one line on stderr, a non-zero exit, no traceback;
`ensemble sample --answer number` counts the spellings of one number as one answer."""

import json
import os
import subprocess
import sys
import time

import pytest


@pytest.fixture
def _cli(run_cli):
    """`ensemble ARGS` in this process (the run_cli fixture of tests/conftest.py)."""
    return lambda args, **kw: run_cli(*args, **kw)


@pytest.mark.parametrize("args,needle", [
    (["eval", "boxball", "--model", "m", "--t", "1", "--n", "1", "--open"], "takes no --open"),
    (["eval", "boxball", "--model", "m", "--t", "1", "--n", "1", "--answer", "number"],
     "takes no --answer"),
    (["sample", "--model", "m", "--answer", "choice", "hello"], "needs choices"),
    (["testing", "serve", "--open-answers", "/nonexistent.json"], "--open-answers"),
    (["testing", "serve", "--structured", "{oops"], "--structured is not JSON"),
])
def test_bad_input_one_line(args, needle, tmp_path, _cli):
    r = _cli(args, cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_sample_answer_number_through_the_served_open_mode(tmp_path, _cli):
    key = tmp_path / "open.json"
    key.write_text(json.dumps({"What is 25 times 50?": 1250}))
    srv = subprocess.Popen([sys.executable, "-m", "ensemble", "testing", "serve",
                            "--open-answers", str(key), "--open-accuracy", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = srv.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        r = _cli(["sample", "--model", "openai/sim-expert", "--api-base", url, "--t", "0.7",
                  "-k", "8", "--answer", "number", "--json",
                  "### Question:\nWhat is 25 times 50?\n\nAnswer in <answer></answer>."],
                 env={k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")})
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["answer"] == "number" and doc["counts"] == {"1250": 8}
        assert len(doc["spellings"]["1250"]) >= 3  # 1,250 / $1,250 / \boxed{1250} / ...
    finally:
        srv.terminate()
        t0 = time.time()
        while srv.poll() is None and time.time() - t0 < 10:
            time.sleep(0.05)
        if srv.poll() is None:
            srv.kill()
