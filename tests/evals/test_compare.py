"""`ensemble compare`: the runs' own numbers and their difference, on real run folders written by
evals against the simulated server; bad input in one line."""

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ensemble.evals.compare import compare_runs
from ensemble.evals.rundir import read_run as load_run
from ensemble.evals.runner import RunOptions, run_eval
from ensemble.evals.schemas import dump
from ensemble.evals.spec import load_spec, one_model
from ensemble.testing import SimulatedServer


def _run(tmp_path, name, lam1, *, seed, limit=15, samples=6, ns=(1, 3), temps=(0.5, 1.0),
         **kw):
    with SimulatedServer(lam1=lam1, seed=seed) as srv:
        spec = one_model("boxball", "openai/sim-expert", temps, ns, api_base=srv.base_url,
                         samples=samples, limit=limit, seed=0, bootstrap=200, **kw)
        return dump(asyncio.run(run_eval(spec, RunOptions(out=str(tmp_path / name)))))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cmp")
    a = _run(tmp, "a", 1.5, seed=1)
    b = _run(tmp, "b", 4.0, seed=2)
    return tmp, a, b


def _cell(summary, t, n, agg):
    return next(r for r in summary["results"]
                if r["t"] == t and r["n"] == n and r["aggregator"] == agg)


def test_differences_are_the_runs_own_numbers(runs):
    tmp, sa, sb = runs
    doc = compare_runs(load_run(tmp / "a"), load_run(tmp / "b"), reps=200)
    assert doc["shared"]["items"] == 15 and doc["shared"]["total"] == 216
    assert len(doc["results"]) == 2 * 3  # per t: majority at n = 1, 3 and random-follow
    for r in doc["results"]:
        ra, rb = _cell(sa, r["t"], r["n"], r["aggregator"]), _cell(sb, r["t"], r["n"],
                                                                   r["aggregator"])
        assert r["a"] == pytest.approx(ra["accuracy"], abs=1e-12)
        assert r["b"] == pytest.approx(rb["accuracy"], abs=1e-12)
        assert r["diff"] == pytest.approx(rb["accuracy"] - ra["accuracy"], abs=1e-12)
        assert r["utility_diff"] == pytest.approx(rb["utility"] - ra["utility"], abs=1e-12)
        assert r["ci"][0] <= r["diff"] <= r["ci"][1] and r["items"] == 15
        # 15 of 216 scenarios: the interval for the task is at least as wide
        assert r["sem"] >= r["sem_questions"]
    # a more rational expert (λ₁ = 4 vs 1.5) does better, clearly, at t = 1, n = 1
    assert _cell({"results": doc["results"]}, 1.0, 1, "majority")["ci_questions"][0] > 0


def test_cli_json_and_table(runs, run_cli):
    tmp, _, _ = runs
    r = run_cli("compare", str(tmp / "a"), str(tmp / "b"), "--json", "--bootstrap", "200")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"t", "n", "aggregator", "a", "b", "diff", "ci", "items"} <= set(doc["results"][0])
    # a real process (the command's end-to-end check), with a bare environment (but the
    # tree under test, when one is given: the package it wrote these runs with)
    tree = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    t = subprocess.run([sys.executable, "-m", "ensemble", "compare", str(tmp / "a"),
                        str(tmp / "b")], capture_output=True, text=True, timeout=120,
                       env={"COLUMNS": "160", "PATH": "", **tree})
    assert t.returncode == 0, t.stderr
    assert "B − A" in t.stdout and "15 shared scenarios" in t.stdout
    assert "for these 15" in t.stdout and "random-follow" in t.stdout


@pytest.fixture
def _one_line(run_cli):
    """`ensemble ...` in this process (the run_cli fixture of tests/conftest.py)."""

    def run(*args):
        return run_cli("compare", *map(str, args)).refusal()

    return run


def test_bad_input_is_one_line(runs, tmp_path, _one_line):
    tmp, _, _ = runs
    assert "not a folder" in _one_line(tmp_path / "nope", tmp / "b")
    (tmp_path / "empty").mkdir()
    assert "not an eval run folder (no summary.json)" in _one_line(tmp_path / "empty", tmp / "a")
    other = tmp_path / "other"
    shutil.copytree(tmp / "b", other)
    doc = json.loads((other / "summary.json").read_text())
    doc["task"] = "mathqa"
    (other / "summary.json").write_text(json.dumps(doc))
    assert "different tasks" in _one_line(tmp / "a", other)
    # the same run with every question renamed: nothing in common
    renamed = tmp_path / "renamed"
    shutil.copytree(tmp / "b", renamed)
    for name in ("questions.jsonl", "samples.jsonl"):
        rows = [json.loads(x) for x in (renamed / name).read_text().splitlines()]
        for x in rows:
            x["id"] = "x-" + x["id"]
        (renamed / name).write_text("".join(json.dumps(x) + "\n" for x in rows))
    assert "no question in common" in _one_line(tmp / "a", renamed)


def test_a_mixed_run_and_a_single_model_share_no_cell(tmp_path, mixed_runs, run_cli):
    # issue 22: compare pairs two mixed ensembles (below); a mixed ensemble against a single
    # model's run, or a run against itself, is still refused in one line
    _run(tmp_path, "s", 3.0, seed=1, limit=4, samples=3, ns=(1,), temps=(1.0,))
    paths = {"m": mixed_runs / "a", "s": tmp_path / "s"}
    for a, b, needle in (("m", "s", "mixed-ensemble run"), ("s", "m", "mixed-ensemble run"),
                         ("m", "m", "same run")):
        r = run_cli("compare", str(paths[a]),
                            str(paths[b]))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and needle in lines[0], r.stderr


@pytest.fixture(scope="module")
def mixed_runs(tmp_path_factory):
    """Two mixed ensembles of the same members' labels, through real HTTP: A's strong member
    at λ₁ = 2, B's at λ₁ = 8 (the weak one the same), three rules each."""

    base = tmp_path_factory.mktemp("mixed-cmp")
    with SimulatedServer(lam1=1.0, seed=1) as weak, SimulatedServer(lam1=2.0, seed=2) as s2, \
            SimulatedServer(lam1=8.0, seed=3) as s8:
        for name, strong in (("a", s2), ("b", s8)):
            (base / f"{name}.json").write_text(json.dumps({"members": [
                {"model": "openai/sim-weak", "api_base": weak.base_url, "n": 2,
                 "temperature": 1.0, "lam": 1.0, "label": "weak"},
                {"model": "openai/sim-strong", "api_base": strong.base_url, "n": 1,
                 "temperature": 0.5, "lam": 4.0, "label": "strong"}],
                "aggregators": ["majority", "lam-weighted", "robust"]}))
            spec = load_spec(str(base / f"{name}.json")).model_copy(update={
                "task": "boxball", "samples": 4, "limit": 12, "seed": 0, "bootstrap": 200})
            asyncio.run(run_eval(spec, RunOptions(out=str(base / name))))
    return base


def test_two_mixed_ensembles_pair_every_shared_cell(mixed_runs, run_cli):
    base = mixed_runs
    sa = json.loads((base / "a" / "summary.json").read_text())
    sb = json.loads((base / "b" / "summary.json").read_text())
    r = run_cli("compare", str(base / "a"),
                        str(base / "b"), "--json", "--bootstrap", "200")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    cells = {(x["member"], x["aggregator"]): x for x in doc["results"]}
    # the ensemble under each rule, and each member alone
    assert set(cells) == {("ensemble", "majority"), ("ensemble", "lam-weighted"),
                          ("ensemble", "robust"), ("weak", "majority"),
                          ("strong", "majority")}
    for x in doc["results"]:
        ra = next(y for y in sa["results"] if y.get("member") == x["member"]
                  and y["aggregator"] == x["aggregator"])
        rb = next(y for y in sb["results"] if y.get("member") == x["member"]
                  and y["aggregator"] == x["aggregator"])
        # on the same questions a and b are the runs' own numbers, diff their difference
        assert x["utility_a"] == pytest.approx(ra["utility"], abs=1e-12)
        assert x["utility_b"] == pytest.approx(rb["utility"], abs=1e-12)
        assert x["utility_diff"] == pytest.approx(rb["utility"] - ra["utility"], abs=1e-12)
        assert x["utility_ci"][0] <= x["utility_diff"] <= x["utility_ci"][1]
        assert x["ci_questions"][0] <= x["diff"] <= x["ci_questions"][1]
        assert x["items"] == 12
    # the weak member is the same server in both: its difference is answer noise only
    assert cells["weak", "majority"]["ci_questions"][0] <= 0 <= cells["weak", "majority"][
        "ci_questions"][1]
    # the table shows every cell with its whole interval, at 80 columns too
    t = run_cli("compare", str(base / "a"),
                        str(base / "b"), "--bootstrap", "200", env={**os.environ, "COLUMNS": "80"})
    assert t.returncode == 0, t.stderr
    for who in ("ensemble", "weak", "strong"):
        assert who in t.stdout
    assert t.stdout.count("lam-weighted") == 1 and "…" not in t.stdout
    assert len(re.findall(r"\[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]", t.stdout)) == 5
