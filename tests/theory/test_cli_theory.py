import json

import pytest


@pytest.fixture
def run(run_cli):
    """`ensemble theory ARGS` in this process (the run_cli fixture of tests/conftest.py)."""
    return lambda *args, **kw: run_cli("theory", *args, **kw)


def test_threshold_json_shape(run):
    res = run("threshold", "--n-max", "4", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [d["n"] for d in doc] == [1, 2, 3, 4]
    assert doc[0]["g"] is None and doc[1]["g"] is None
    assert doc[2]["g"] == doc[3]["g"] > 2.6


def test_regret_robust_utility_json_shapes(run):
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
def test_bad_input_is_one_line(args, needle, run):
    res = run(*args)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.stderr


def test_plot(tmp_path, run):
    out = tmp_path / "g.png"
    assert run("threshold", "--n-max", "8", "--plot", str(out)).returncode == 0
    assert out.stat().st_size > 5000


# -- groups -------------------------------------------------------------------------------------
def test_group_robust_json_shape(run):
    res = run("robust", "--group", "1:2", "--group", "1:8", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert set(doc) == {"groups", "f", "worst_regret", "lower_bound", "majority_worst_regret",
                        "lam_weighted_worst_regret", "family_posteriors"}
    assert doc["groups"] == [{"n": 1, "lam": 2.0}, {"n": 1, "lam": 8.0}]
    # f[x1][x2]: follow the λ = 8 expert
    assert doc["f"] == [[0.0, 1.0], [0.0, 1.0]]
    assert doc["worst_regret"] < doc["majority_worst_regret"] - 0.04
    assert 0 <= doc["worst_regret"] - doc["lower_bound"] < 1e-4


def test_group_regret_json_shape_and_infinite_lambda(run):
    res = run("regret", "--group", "2:1", "--group", "1:inf", "--aggregator", "lam-weighted",
              "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert set(doc) == {"groups", "aggregator", "worst_regret", "argmax"}
    assert doc["groups"] == [{"n": 2, "lam": 1.0}, {"n": 1, "lam": None, "lam_inf": "+"}]
    arg = doc["argmax"]
    assert set(arg) == {"posteriors", "probs", "mu", "q0", "q1"}
    assert len(arg["q0"]) == len(arg["q1"]) == 2
    assert sum(arg["probs"]) == pytest.approx(1.0)
    mean = sum(p * t for p, t in zip(arg["posteriors"], arg["probs"], strict=True))
    assert mean == pytest.approx(arg["mu"])


def test_group_tables_print(run):
    res = run("robust", "--group", "1:1", "--group", "1:2", "--group", "1:4")
    assert res.returncode == 0, res.stderr
    assert "Certificate" in res.stdout and "lam-weighted" in res.stdout


@pytest.mark.parametrize("args,needle", [
    (["robust", "--group", "3"], "N:λ"),
    (["robust", "--group", "a:b"], "N:λ"),
    (["robust", "--group", "0:2"], "N:λ"),
    (["robust", "--group", "3:-1"], "N:λ"),
    (["regret", "--group", "3:2", "--n", "3"], "not both"),
    (["regret", "--group", "3:2", "--lam", "3"], "not both"),
    (["robust", "--n", "3"], "--lam"),
    (["robust"], "--n"),
    (["robust", "--n", "100000", "--lam", "3"], "too large"),
    (["regret", "--n", "100000", "--lam", "3"], "too large"),
    (["robust", "--group", "20:1", "--group", "20:2"], "too large"),
    (["threshold", "--n-max", "100000"], "limit is 10001"),
])
def test_bad_group_input_is_one_line(args, needle, run):
    res = run(*args)
    assert res.returncode in (1, 2)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.stderr
