"""Full evals against the simulated server (real HTTP, litellm, the real MathQA data)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from ensemble.qr import psi
from ensemble.testing import SimulatedServer, answer_key_from_questions
from evals.analysis import box_utility
from evals.runner import EvalConfig, run_eval
from tasks import get_task
import asyncio


def res(summary, t, n, agg):
    return next(r for r in summary["results"]
                if r["t"] == t and r["n"] == n and r["aggregator"] == agg)


def test_mathqa_reproduces_the_papers_pattern(tmp_path, mathqa_path):
    task = get_task("mathqa", data=mathqa_path, limit=600, seed=0)
    key = answer_key_from_questions(task.questions())
    # planted model (ensemble.testing.server): reading accuracy ρ ~ Beta(4, 2), λ₁ = 0.7.
    # theory of that model: greedy accuracy E[ρ] = 0.667; one sample at t = 1 ≈ 0.56;
    # plurality of 5 at t = 0.5 ≈ P(ρ > 1/2) = 0.81 (less for finite n): higher t hurts at n = 1,
    # a moderate t helps at n = 5
    with SimulatedServer(lam1=0.7, seed=0, answer_key=key, mc_a=4, mc_b=2) as srv:
        cfg = EvalConfig(task="mathqa", model="openai/sim-expert", api_base=srv.base_url,
                         temperatures=(0.0, 0.5, 1.0), ns=(1, 3, 5), samples=5, limit=600,
                         data=str(mathqa_path), out=str(tmp_path / "run"), bootstrap=300)
        s = asyncio.run(run_eval(cfg))

    def gap(a, b):
        return a["accuracy"] - b["accuracy"], 2 * np.hypot(a["sem"], b["sem"])

    d, e = gap(res(s, 0.0, 1, "plurality"), res(s, 1.0, 1, "plurality"))
    assert d > e  # n = 1: higher t hurts
    d, e = gap(res(s, 0.5, 5, "plurality"), res(s, 0.0, 5, "plurality"))
    assert d > e  # n = 5: moderate t helps
    assert res(s, 0.5, 5, "plurality")["accuracy"] > res(s, 0.5, 5, "random-follow")["accuracy"]
    assert s["invalid_rate"] == 0 and s["requests"] == 1800
    out = tmp_path / "run"
    assert (out / "grid.csv").exists() and (out / "accuracy.png").stat().st_size > 5000
    assert json.loads((out / "summary.json").read_text())["results"] == s["results"]


def test_boxball_exact_utility_matches_planted_psi_and_resumes(tmp_path):
    lam1 = 4.0
    cmd = [sys.executable, "-m", "ensemble", "eval", "boxball", "--model", "openai/sim-expert",
           "--t", "0.5", "1", "--n", "1", "3", "--samples", "20", "--out", str(tmp_path / "b"),
           "--bootstrap", "200", "--json"]
    with SimulatedServer(lam1=lam1, seed=2) as srv:
        r1 = subprocess.run(cmd + ["--api-base", srv.base_url], capture_output=True, text=True,
                            timeout=300)
        assert r1.returncode == 0, r1.stderr
        n_req = srv.stats.requests
        r2 = subprocess.run(cmd + ["--api-base", srv.base_url], capture_output=True, text=True,
                            timeout=300)
        assert srv.stats.requests == n_req  # the rerun only recomputes
    s1, s2 = json.loads(r1.stdout), json.loads(r2.stdout)
    assert s2["requests"] == 0 and s2["results"] == s1["results"]
    qs = get_task("boxball").questions()
    scen = sorted({q.meta["scenario"] for q in qs})
    si = {s: i for i, s in enumerate(scen)}
    joint = np.zeros((len(scen), 2, 2))
    r = np.full((len(scen), 2), 0.5)
    for t in (0.5, 1.0):
        for q in qs:
            c = 0 if q.meta["colour"] == "red" else 1
            joint[si[q.meta["scenario"]], c] = q.meta["joint"]
            r[si[q.meta["scenario"]], c] = psi(q.posterior, lam1 / t)
        for n in (1, 3):
            exact = float(box_utility(r, joint, n).mean())
            got = res(s1, t, n, "majority")
            assert abs(got["utility"] - exact) < 4 * got["utility_sem"] + 1e-3


@pytest.mark.parametrize("args,needle", [
    (["eval", "nope", "--model", "m", "--t", "0.5", "--n", "1"], "unknown task"),
    (["eval", "boxball", "--model", "m", "--t", "-1", "--n", "1"], "--t"),
    (["eval", "boxball", "--model", "m", "--t", "x", "--n", "1"], "--t"),
    (["eval", "boxball", "--model", "m", "--t", "1", "--n", "0"], "--n"),
    (["eval", "mathqa", "--model", "m", "--t", "1", "--n", "1", "--data", "/nonexistent.json"],
     "file not found"),
    (["eval", "boxball", "--model", "m", "--t", "1", "--n", "5", "--samples", "3"], "--samples"),
    (["eval", "boxball", "--model", "openai/gpt-4o-mini", "--t", "1", "--n", "1", "--limit", "1"],
     "OPENAI_API_KEY"),
])
def test_bad_input_one_line(args, needle, tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    r = subprocess.run([sys.executable, "-m", "ensemble", *args, "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120, env=env)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and needle in lines[0], r.stderr
