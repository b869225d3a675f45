"""`ensemble compare`: the runs' own numbers and their difference, on real run folders written by
evals against the simulated server; bad input in one line."""

import asyncio
import json
import shutil
import subprocess
import sys

import pytest

from ensemble.sampling.options import ProviderOptions
from ensemble.testing import SimulatedServer
from evals.compare import compare_runs, load_run
from evals.runner import EvalConfig, run_eval


def _run(tmp_path, name, lam1, *, seed, limit=15, samples=6, ns=(1, 3), temps=(0.5, 1.0)):
    with SimulatedServer(lam1=lam1, seed=seed) as srv:
        cfg = EvalConfig(task="boxball", model="openai/sim-expert",
                         provider=ProviderOptions(api_base=srv.base_url),
                         temperatures=temps, ns=ns, samples=samples, limit=limit, seed=0,
                         out=str(tmp_path / name), bootstrap=200)
        return asyncio.run(run_eval(cfg))


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


def test_cli_json_and_table(runs):
    tmp, _, _ = runs
    r = subprocess.run([sys.executable, "-m", "ensemble", "compare", str(tmp / "a"),
                        str(tmp / "b"), "--json", "--bootstrap", "200"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"t", "n", "aggregator", "a", "b", "diff", "ci", "items"} <= set(doc["results"][0])
    t = subprocess.run([sys.executable, "-m", "ensemble", "compare", str(tmp / "a"),
                        str(tmp / "b")], capture_output=True, text=True, timeout=120,
                       env={"COLUMNS": "160", "PATH": ""})
    assert t.returncode == 0, t.stderr
    assert "B − A" in t.stdout and "15 shared scenarios" in t.stdout
    assert "for these 15" in t.stdout and "random-follow" in t.stdout


def _one_line(*args):
    r = subprocess.run([sys.executable, "-m", "ensemble", "compare", *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_bad_input_is_one_line(runs, tmp_path):
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


def test_a_mixed_run_is_refused_in_one_line(tmp_path):

    for name in ("m", "s"):
        p = tmp_path / name
        p.mkdir()
        for f in ("questions.jsonl", "samples.jsonl"):
            (p / f).write_text("")
        doc = {"task": "boxball", "results": [], "ns": [1], "temperatures": [1.0]}
        if name == "m":
            doc["ensemble"] = {"members": []}
        (p / "summary.json").write_text(json.dumps(doc))
    for a, b in (("m", "s"), ("s", "m"), ("m", "m")):
        r = subprocess.run([sys.executable, "-m", "ensemble", "compare", str(tmp_path / a),
                            str(tmp_path / b)], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and "mixed-ensemble run" in lines[0]
