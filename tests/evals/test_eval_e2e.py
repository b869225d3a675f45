"""Full evals against the simulated server (real HTTP, litellm, SQLite, the real MathQA data)."""

import asyncio
import csv
import itertools
import json
import os
from math import factorial

import numpy as np
import pytest
from scipy import stats

from ensemble.evals.analysis import box_utility
from ensemble.evals.plan import resolve
from ensemble.evals.runner import RunOptions, run_eval
from ensemble.evals.schemas import dump
from ensemble.evals.spec import one_model
from ensemble.providers.options import ProviderOptions
from ensemble.qr import psi
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer, answer_key_from_questions


def res(summary, t, n, agg):
    return next(r for r in summary["results"]
                if r["t"] == t and r["n"] == n and r["aggregator"] == agg)


def contrast(summary, t, n, agg="plurality", kind="temperature"):
    return next(c for c in summary["contrasts"]
                if c["kind"] == kind and c["t"] == t and c["n"] == n and c["aggregator"] == agg)


def _plurality(p, n):
    """Exact plurality accuracy of n i.i.d. answers with option probabilities p (p[0] right)."""
    tot = 0.0
    for c in itertools.product(range(n + 1), repeat=len(p)):
        if sum(c) != n:
            continue
        pr = float(factorial(n))
        for ci, pi in zip(c, p, strict=True):
            pr *= pi ** ci / factorial(ci)
        top = [i for i, ci in enumerate(c) if ci == max(c)]
        tot += pr / len(top) if 0 in top else 0.0
    return tot


def sim_theory(lam1, t, n, a, b, grid=200):
    """Accuracy the simulated server's documented MC model implies (ensemble.testing.server):
    reading accuracy ρ ~ Beta(a, b); at t > 0 a sample reads correctly w.p. ρ (else the
    distractor) and picks the option read w.p. 1/(1 + 4 exp(−4λ)), λ = λ₁/t (quantal response,
    u = ±1, ψ_λ units), each other option w.p. the rest / 4; at t = 0 one frozen reading."""
    rho = (np.arange(grid) + 0.5) / grid
    w = stats.beta.pdf(rho, a, b)
    w /= w.sum()
    if t == 0:
        return float(w @ rho)
    keep = 1 / (1 + 4 * np.exp(-4 * lam1 / t))
    acc = [_plurality([r * keep + (1 - r) * (1 - keep) / 4, (1 - r) * keep + r * (1 - keep) / 4]
                      + [(1 - keep) / 4] * 3, n) for r in rho]
    return float(w @ np.array(acc))


def test_mathqa_reproduces_the_papers_pattern(tmp_path, mathqa_path):
    # ρ ~ Beta(8, 4): E[ρ] = 2/3 but P(ρ > 1/2) = 0.89, so a vote of samples beats the frozen
    # greedy reading. The model says: n = 1: 0.667 (t=0) > 0.553 (t=1); n = 5: 0.667 (t=0) <
    # 0.755 (t=0.5): higher t hurts one answer, a moderate t helps a vote of five. With 500
    # questions the paired SEM of a difference is ~0.025, so both effects are ~4 SEM.
    lam1, a, b, q = 0.7, 8.0, 4.0, 500
    th = {(t, n): sim_theory(lam1, t, n, a, b) for t in (0.0, 0.5, 1.0) for n in (1, 5)}
    assert th[0.0, 1] - th[1.0, 1] > 0.1 and th[0.5, 5] - th[0.0, 5] > 0.08
    task = get_task("mathqa", data=mathqa_path, limit=q, seed=0)
    key = answer_key_from_questions(task.questions())
    with SimulatedServer(lam1=lam1, seed=0, answer_key=key, mc_a=a, mc_b=b) as srv:
        cfg = one_model("mathqa", "openai/sim-expert", (0.0, 0.5, 1.0), (1, 3, 5),
                        api_base=srv.base_url, samples=10, limit=q, data=str(mathqa_path),
                        bootstrap=400)
        opts = RunOptions(out=str(tmp_path / "run"))
        s = dump(asyncio.run(run_eval(cfg, opts)))
        assert srv.stats.requests == s["requests"] == 3 * q
        again = dump(asyncio.run(run_eval(cfg, opts)))  # resumed from the store: no request
        assert srv.stats.requests == 3 * q and again["requests"] == 0
    assert again["results"] == s["results"]
    # paired differences (same questions at each t) beyond 2 of their reported SEMs
    d = contrast(s, 1.0, 1)
    assert -d["difference"] > 2 * d["sem"]  # n = 1: higher t hurts
    d = contrast(s, 0.5, 5)
    assert d["difference"] > 2 * d["sem"]  # n = 5: a moderate t helps
    # and every cell agrees with the model's exact value within 3 SEM (+ the 1/√K slack of
    # estimating from K = 10 draws per question)
    for (t, n), v in th.items():
        r = res(s, t, n, "plurality")
        assert abs(r["accuracy"] - v) < 3 * r["sem"] + 0.01, (t, n, r, v)
    assert res(s, 0.5, 5, "plurality")["accuracy"] > res(s, 0.5, 1, "random-follow")["accuracy"]
    assert s["invalid_rate"] == 0 and s["samples_per_question"] == 10
    out = tmp_path / "run"
    assert (out / "samples.sqlite").exists() and (out / "accuracy.png").stat().st_size > 5000
    assert json.loads((out / "summary.json").read_text())["results"] == s["results"]
    with open(out / "grid.csv") as fh:  # per t: plurality at each n, one random-follow row
        assert len(list(csv.DictReader(fh))) == len(s["results"]) == 3 * (3 + 1)
    # the 500 questions are a random subset of the 2985: the task's interval is the wider one
    assert s["population"] == {"items": 500, "total": 2985, "unit": "questions", "limit": 500,
                               "fraction": 500 / 2985}
    r = res(s, 0.5, 5, "plurality")
    assert r["sem"] > r["sem_questions"]
    assert r["ci"][1] - r["ci"][0] > r["ci_questions"][1] - r["ci_questions"][0]
    # a vote of five beats one answer at t = 0.5 (ensemble contrast, same answers)
    e = contrast(s, 0.5, 5, kind="ensemble")
    assert e["vs_n"] == 1 and e["ci"][0] > 0
    assert e["difference"] == pytest.approx(r["accuracy"] - res(s, 0.5, 1, "plurality")["accuracy"])


def test_boxball_exact_utility_matches_planted_psi_and_resumes(tmp_path, run_cli):
    # the command in this process (tests/conftest.py's run_cli; each run as a process was
    # ~2 s of CPU start-up: the command's real-process runs are in tests/sampling)
    lam1, limit = 4.0, 80
    cmd = ["eval", "boxball", "--model", "openai/sim-expert",
           "--t", "0.5", "1", "--n", "1", "3", "--samples", "20", "--limit", str(limit),
           "--out", str(tmp_path / "b"), "--bootstrap", "300", "--json"]
    with SimulatedServer(lam1=lam1, seed=2) as srv:
        r1 = run_cli(*cmd, "--api-base", srv.base_url)
        assert r1.returncode == 0, r1.stderr
        n_req = srv.stats.requests
        r2 = run_cli(*cmd, "--api-base", srv.base_url)
        assert r2.returncode == 0, r2.stderr
        assert srv.stats.requests == n_req  # the rerun only recomputes
    s1, s2 = json.loads(r1.stdout), json.loads(r2.stdout)
    assert s2["requests"] == 0 and s2["results"] == s1["results"]
    assert {"task", "model", "results", "invalid_rate", "requests", "cost_usd"} <= set(s1)
    qs = resolve(one_model("boxball", "m", (0.5, 1.0), (1, 3), limit=limit)).questions
    scen = sorted({q.meta["scenario"] for q in qs})
    assert res(s1, 0.5, 1, "majority")["items"] == len(scen) == limit
    si = {s: i for i, s in enumerate(scen)}
    joint = np.zeros((len(scen), 2, 2))
    r = np.full((len(scen), 2), 0.5)
    for t in (0.5, 1.0):
        for q in qs:
            c = 0 if q.meta["colour"] == "red" else 1
            joint[si[q.meta["scenario"]], c] = q.meta["joint"]
            r[si[q.meta["scenario"]], c] = psi(q.posterior, lam1 / t)
        for n in (1, 3):
            exact = float(box_utility(r, joint, n).mean())  # from the planted ψ, no sampling
            got = res(s1, t, n, "majority")
            # within 3 SEM of the answers' noise on these scenarios
            assert abs(got["utility"] - exact) < 3 * got["utility_sem_questions"], (t, n, got)
            assert got["accuracy"] == pytest.approx((1 + got["utility"]) / 2)
    # box-ball has contrasts too: temperatures and ensembles
    kinds = {(c["kind"], c["t"], c["n"], c["aggregator"]) for c in s1["contrasts"]}
    assert kinds == {("temperature", 1.0, 1, "majority"), ("temperature", 1.0, 3, "majority"),
                     ("temperature", 1.0, 1, "random-follow"), ("ensemble", 0.5, 3, "majority"),
                     ("ensemble", 1.0, 3, "majority")}
    assert [r["n"] for r in s1["results"] if r["aggregator"] == "random-follow"] == [1, 1]


def test_invalid_answers_counted(tmp_path):
    # the server replies without an <answer> to a fraction of samples
    with SimulatedServer(lam1=4.0, seed=1, invalid_rate=0.3) as srv:
        cfg = one_model("boxball", "openai/sim-expert", (1.0,), (1, 3), api_base=srv.base_url,
                        samples=10, limit=20, bootstrap=100)
        s = dump(asyncio.run(run_eval(cfg, RunOptions(out=str(tmp_path / "i")))))
    assert 0.2 < s["invalid_rate"] < 0.4
    assert s["invalid_rate_by_t"][0]["invalid_rate"] == s["invalid_rate"]
    # invalid answers cost utility: an abstaining expert never beats a valid one here
    assert res(s, 1.0, 1, "majority")["utility"] < res(s, 1.0, 3, "majority")["utility"]


@pytest.fixture
def _cli(run_cli):
    """`ensemble ...` in this process (the run_cli fixture of tests/conftest.py)."""

    def run(args, env=None):
        return run_cli(*args, env=env)

    return run


@pytest.mark.parametrize("args,needle", [
    (["eval", "nope", "--model", "m", "--t", "0.5", "--n", "1"], "unknown task"),
    (["eval", "boxball", "--model", "m", "--t", "-1", "--n", "1"], "--t"),
    (["eval", "boxball", "--model", "m", "--t", "x", "--n", "1"], "--t"),
    (["eval", "boxball", "--model", "m", "--t", "1", "--n", "0"], "--n"),
    (["eval", "mathqa", "--model", "m", "--t", "1", "--n", "1", "--data", "/nonexistent.json"],
     "file not found"),
    (["eval", "mathqa", "--model", "m", "--t", "1", "--n", "1"], "--data"),
    (["eval", "boxball", "--model", "m", "--t", "1", "--n", "5", "--samples", "3"], "--samples"),
    (["eval", "boxball", "--model", "openai/gpt-4o-mini", "--t", "1", "--n", "1", "--limit", "1"],
     "OPENAI_API_KEY"),
])
def test_bad_input_one_line(args, needle, tmp_path, _cli):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    r = _cli([*args, "--out", str(tmp_path / "o")], env=env)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_malformed_data_and_unknown_model_lose_nothing(tmp_path, _cli):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x", "choices": ["a", "b"], "answer": "a"}\n{oops\n')
    r = _cli(["eval", "jsonl", "--model", "m", "--t", "1", "--n", "1", "--data", str(bad),
              "--out", str(tmp_path / "o")])
    assert r.returncode == 1 and r.stderr.strip() == (
        f"ensemble: error: {bad}, row 2: not valid JSON (Expecting property name enclosed in "
        "double quotes at column 2)")
    good = tmp_path / "good.jsonl"
    good.write_text('{"question": "Is it L or R?", "choices": ["L", "R"], "answer": "L"}\n')
    out = tmp_path / "run"
    with SimulatedServer(lam1=4.0, seed=0) as srv:
        ok = _cli(["eval", "jsonl", "--model", "openai/sim-expert", "--api-base", srv.base_url,
                   "--t", "1", "--n", "1", "--samples", "3", "--data", str(good), "--out",
                   str(out), "--bootstrap", "100", "--json"])
        assert ok.returncode == 0, ok.stderr
        store = (out / "samples.sqlite").read_bytes()
        # an unknown model: one line, and the samples already stored are untouched
        r = _cli(["eval", "jsonl", "--model", "nosuchprovider/x", "--api-base", srv.base_url,
                  "--t", "1", "--n", "1", "--data", str(good), "--out", str(out)])
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    import sqlite3

    with sqlite3.connect(out / "samples.sqlite") as db:
        rows = db.execute("select count(*) from samples").fetchone()[0]
    assert rows >= 3 and len(store) > 0


@pytest.mark.local_model
def test_real_local_model_on_mathqa(tmp_path, mathqa_path, smollm2_path):
    pytest.importorskip("xllamacpp", reason="xllamacpp not installed (pip install '.[local]')")
    # one question: reading a MathQA prompt is most of the CPU (5.4 -> 3.5 s for 2 -> 1)
    cfg = one_model("mathqa", f"local/{smollm2_path}", (0.7,), (1, 2), samples=2, limit=1,
                    data=str(mathqa_path), bootstrap=100, max_tokens=24)
    s = dump(asyncio.run(run_eval(cfg, RunOptions(out=str(tmp_path / "local"),
                                             provider=ProviderOptions(max_concurrency=2)))))
    # a 135M model mostly fails the format; what matters: the samples arrived and were scored
    assert s["requests"] >= 1 and s["tokens"]["completion"] > 0
    assert 0.0 <= s["invalid_rate"] <= 1.0
    assert {r["n"] for r in s["results"]} == {1, 2}
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in s["results"])


def test_adaptive_eval_over_a_fixed_store_makes_no_request(tmp_path, _cli):
    """Issue 16: the adaptive rows replay the samples a fixed run drew; nothing is sampled."""
    base = ["eval", "boxball", "--model", "openai/sim-expert", "--t", "1", "--n", "1", "5",
            "--samples", "12", "--limit", "20", "--out", str(tmp_path / "run"),
            "--bootstrap", "200", "--json"]
    with SimulatedServer(lam1=3.0, seed=4) as srv:
        fixed = _cli([*base, "--api-base", srv.base_url])
        assert fixed.returncode == 0, fixed.stderr
        paid = srv.stats.requests
        assert paid > 0
        adaptive = _cli([*base, "--api-base", srv.base_url, "--adaptive", "bayes", "beta"])
        assert adaptive.returncode == 0, adaptive.stderr
        assert srv.stats.requests == paid  # counted at the server
    doc = json.loads(adaptive.stdout)
    assert doc["requests"] == 0
    rows = {r["stop"]: r for r in doc["adaptive"]}
    assert set(rows) == {"bayes", "beta"}
    for r in rows.values():
        assert r["n"] == 12 and 1 <= r["mean_samples"] <= 12 and 0 <= r["accuracy"] <= 1
