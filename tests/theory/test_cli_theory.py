import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "ensemble", "theory", *args],
                          capture_output=True, text=True, timeout=120)


def test_threshold_json_shape():
    res = run("threshold", "--n-max", "4", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [d["n"] for d in doc] == [1, 2, 3, 4]
    assert doc[0]["g"] is None and doc[1]["g"] is None
    assert doc[2]["g"] == doc[3]["g"] > 2.6


def test_regret_robust_utility_json_shapes():
    r = json.loads(run("regret", "--n", "3", "--lam", "2", "--aggregator", "majority",
                       "--json").stdout)
    assert set(r) == {"n", "lam", "aggregator", "worst_regret", "argmax"}
    assert set(r["argmax"]) == {"p", "gamma0", "gamma1", "mu", "q0", "q1"}
    o = json.loads(run("robust", "--n", "3", "--lam", "1", "--json").stdout)
    assert set(o) == {"n", "lam", "f", "worst_regret", "lower_bound", "majority_worst_regret"}
    assert o["f"] == [0.0, 0.0, 1.0, 1.0]
    u = json.loads(run("utility", "--joint", "[[0.375, 0], [0.375, 0.25]]", "--lam", "2.5",
                       "--n", "2", "--json").stdout)
    assert round(u["omniscient"], 6) == 0.507674
    inf = json.loads(run("regret", "--n", "1", "--lam", "inf", "--json").stdout)
    assert inf["lam"] is None


@pytest.mark.parametrize("args,needle", [
    (["regret", "--n", "0", "--lam", "1"], "--n"),
    (["regret", "--n", "3", "--lam", "-2"], "--lam"),
    (["regret", "--n", "3", "--lam", "x"], "--lam"),
    (["utility", "--joint", "[[0.5, 0.5], [0.5, 0]]", "--lam", "1", "--n", "3"], "sums to"),
    (["utility", "--joint", "[[1.5, -0.5]]", "--lam", "1", "--n", "3"], "negative"),
    (["utility", "--joint", "not json", "--lam", "1", "--n", "3"], "JSON"),
])
def test_bad_input_is_one_line(args, needle):
    res = run(*args)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.stderr


def test_plot(tmp_path):
    out = tmp_path / "g.png"
    assert run("threshold", "--n-max", "8", "--plot", str(out)).returncode == 0
    assert out.stat().st_size > 5000
