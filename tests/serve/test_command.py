"""`ensemble serve` as users run it: a process whose first line is its URL, a key from the
environment, JSON log lines on stderr without any key, and bad input as one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

UPSTREAM_KEY = "sk-upstream-for-the-command-0123456789"
SERVE_KEY = "serve-key-from-the-env-42"
QS = get_task("boxball").questions()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ENSEMBLE_SERVE_API_KEY"}
    env.update(extra)
    return env


def test_serves_prints_its_url_first_and_logs_without_keys():
    with SimulatedServer(lam1=3.0, seed=2, require_api_key=UPSTREAM_KEY) as up:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ensemble", "serve", "--model", "openai/sim-expert",
             "--api-base", up.base_url, "--upstream-key-env", "SIM_UPSTREAM_KEY", "--n", "3",
             "--t", "0.5", "--choices", "L,R", "--port", "0", "--log-json", "--name", "box"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(SIM_UPSTREAM_KEY=UPSTREAM_KEY, ENSEMBLE_SERVE_API_KEY=SERVE_KEY))
        try:
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
            auth = {"Authorization": f"Bearer {SERVE_KEY}"}
            prompt = next(q for q in QS if q.posterior > 0.95).prompt
            r = httpx.post(f"{url}/chat/completions", headers=auth, timeout=60,
                           json={"model": "box", "messages": [{"role": "user",
                                                               "content": prompt}]})
            assert r.status_code == 200 and r.json()["ensemble"]["decision"] == "L"
            bad = httpx.post(f"{url}/chat/completions", timeout=60,
                             headers={"Authorization": f"Bearer {UPSTREAM_KEY}"},
                             json={"model": "box", "messages": [{"role": "user",
                                                                 "content": prompt}]})
            assert bad.status_code == 401 and UPSTREAM_KEY not in bad.text
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    logs = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert [(d["status"], d.get("model")) for d in logs] == [(200, "box"), (401, None)]
    assert logs[0]["samples"] == 3 and logs[0]["decision"] == "L" and logs[0]["margin"] == 3
    for secret in (UPSTREAM_KEY, SERVE_KEY):
        assert secret not in out + err + r.text


def _taken_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


@pytest.mark.parametrize("case", ["no-model", "missing-config", "bad-yaml", "unknown-field",
                                  "unset-key", "short-key", "port-taken", "store",
                                  "robust-no-lam", "cost-one-model", "cost-no-price"])
def test_bad_input_is_one_line_and_a_nonzero_exit(case, tmp_path, capsys, monkeypatch):
    """In-process (`ensemble.cli.main`, what the command runs): each fails before serving."""
    from ensemble.cli import main

    monkeypatch.delenv("ENSEMBLE_SERVE_API_KEY", raising=False)
    args: list[str] = []
    expect = ""
    sock = None
    if case == "no-model":
        expect = "needs --model"
    elif case == "missing-config":
        args, expect = ["--config", str(tmp_path / "nope.yaml")], "cannot read the serve config"
    elif case == "bad-yaml":
        (tmp_path / "s.yaml").write_text("models:\n  a: [unclosed\n")
        args, expect = ["--config", str(tmp_path / "s.yaml")], "not valid YAML at line"
    elif case == "unknown-field":
        (tmp_path / "s.yaml").write_text("models:\n  a:\n    model: openai/x\n    tempreature: 1\n")
        args, expect = ["--config", str(tmp_path / "s.yaml")], "models.a.tempreature"
    elif case == "unset-key":
        args = ["--model", "openai/x", "--upstream-key-env", "NO_SUCH_VARIABLE_SET"]
        expect = "NO_SUCH_VARIABLE_SET, which is not set"
    elif case == "short-key":
        args, expect = ["--model", "openai/x", "--api-key", "abc"], "at least 8 characters"
    elif case == "port-taken":
        sock = _taken_port()
        args = ["--model", "openai/x", "--port", str(sock.getsockname()[1])]
        expect = "cannot serve on 127.0.0.1:"
    elif case == "store":  # issue 41 item 12: at start, not a 502 on every request
        (tmp_path / "file").write_text("not a folder")
        args = ["--model", "openai/x", "--store", str(tmp_path / "file" / "s.sqlite")]
        expect = "the endpoint's store (--store, store:)"
    elif case == "robust-no-lam":  # issue 41 item 18: serve's own options, not Python's
        args = ["--model", "openai/x", "--aggregator", "robust"]
        expect = "give --lam L or --calibration PROFILE"
    elif case == "cost-one-model":
        args, expect = ["--model", "openai/x", "--stop", "cost"], "serve a mixed ensemble"
    elif case == "cost-no-price":  # issue 41 item 3: refused at start, before paying
        (tmp_path / "s.yaml").write_text(
            "models:\n  m:\n    stop: cost\n    cost: {value_usd: 0.01}\n    members:\n"
            "      - {model: openai/cheap-x, n: 1}\n      - {model: openai/dear-y, n: 1}\n")
        args, expect = ["--config", str(tmp_path / "s.yaml")], "price of openai/cheap-x is unknown"
    try:
        code = main(["serve", *args])
    finally:
        if sock is not None:
            sock.close()
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ensemble: error:"), err
    assert expect in lines[0]
