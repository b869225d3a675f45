import json
import subprocess
import sys

from ensemble.testing import SimulatedServer


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "ensemble", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_sample_counts_json(box_questions):
    q = next(q for q in box_questions if 0.4 < q.posterior < 0.6)
    with SimulatedServer(lam1=1.0, seed=2) as srv:
        res = cli("sample", "--model", "openai/sim-expert", "--api-base", srv.base_url,
                  "--t", "1", "-k", "30", "--choices", "L,R", "--json", q.prompt)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert sum(doc["counts"].values()) == 30 and set(doc["counts"]) <= {"L", "R", "(invalid)"}


def test_missing_key_and_bad_model_are_one_line(monkeypatch):
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
        proc.wait(10)
        time.sleep(0.1)
