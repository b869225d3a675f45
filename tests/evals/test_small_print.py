"""The evals' small print of issue 41, through `ensemble.cli.main` in-process against the
simulated server (real HTTP on 127.0.0.1): each refusal is one line on stderr, before any
request."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ensemble.testing import SimulatedServer


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=8) as srv:
        yield srv


@pytest.mark.parametrize("reps", ["-1", "0", "1", "5", "99"])
def test_eval_and_compare_take_at_least_100_bootstrap_resamples(reps, server, tmp_path,
                                                                 run_cli):
    """Item 24: eval took --bootstrap 5 (compare refused < 100), and said ">= 1" for 0 and
    ">= 2" for 1."""
    asked = server.stats.requests
    line = run_cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                   server.base_url, "--t", "1", "--n", "1", "--limit", "2",
                   "--bootstrap", reps, "--out", tmp_path / "run").refusal()
    assert f"--bootstrap must be an integer >= 100, got {reps}" in line
    assert server.stats.requests == asked and not (tmp_path / "run").exists()
    line = run_cli("compare", tmp_path / "a", tmp_path / "b", "--bootstrap", reps).refusal()
    assert f"--bootstrap must be an integer >= 100, got {reps}" in line



def test_identical_cells_get_identical_intervals(server, tmp_path, run_cli):
    """Item 25: robust and majority at n = 1 (the same votes: value 0.6610, SEM 0.0581)
    printed [0.551, 0.774] and [0.541, 0.773]. Each row drew its own normals for the answers'
    noise, and the --aggregator rows their own resamples (seed + 1). Same values, same
    interval: here majority, robust and random-follow at n = 1, and, being one expert's vote,
    their paired differences are exactly 0."""
    r = run_cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base", server.base_url,
                "--t", "0.5", "--n", "1", "3", "--samples", "4", "--limit", "30",
                "--aggregator", "majority", "robust", "--lam", "3", "--json",
                "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    rows = [row for row in json.loads(r.stdout)["results"] if row["n"] == 1]
    assert {row["aggregator"] for row in rows} == {"majority", "robust", "random-follow"}
    first = rows[0]
    for row in rows[1:]:
        for key in ("accuracy", "sem", "ci", "sem_questions", "ci_questions", "utility",
                    "utility_sem", "utility_ci"):
            assert row[key] == first[key], (row["aggregator"], key, row[key], first[key])
    assert first["ci"][0] < first["accuracy"] < first["ci"][1]


def test_rows_of_the_same_values_share_their_draws():
    """Item 25 below the CLI: two rows of one table with the same per-item values (here a
    mathqa-like vote at n = 1) get the same interval, for the task and for the questions."""
    from ensemble.evals.analysis import vote_values
    from ensemble.evals.scoring import run_rows
    from ensemble.tasks import layout_of

    g = np.random.default_rng(3)
    easy = g.random(40)
    codes = np.where(g.random((40, 6)) < easy[:, None], 0, g.integers(1, 3, size=(40, 6)))
    iv = vote_values(codes, np.zeros(40, dtype=int), [1], n_options=3)["plurality", 1]
    rows = run_rows(layout_of("mathqa"), items=40, total=500, seed=0, bootstrap=1000)
    a = rows.result(iv, t=0.5, n=1, aggregator="majority")
    b = rows.result(iv, t=0.5, n=1, aggregator="robust")
    assert a.sem == b.sem and a.ci == b.ci and a.ci_questions == b.ci_questions
    assert a.ci[0] < a.accuracy < a.ci[1]
