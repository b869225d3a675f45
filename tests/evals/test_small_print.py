"""The evals' small print of issue 41, through `ensemble.cli.main` in-process against the
simulated server (real HTTP on 127.0.0.1): each refusal is one line on stderr, before any
request."""

from __future__ import annotations

import pytest

from ensemble.testing import SimulatedServer


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=8) as srv:
        yield srv


def _one_line(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.mark.parametrize("reps", ["-1", "0", "1", "5", "99"])
def test_eval_and_compare_take_at_least_100_bootstrap_resamples(reps, server, tmp_path,
                                                                 run_cli):
    """Item 24: eval took --bootstrap 5 (compare refused < 100), and said ">= 1" for 0 and
    ">= 2" for 1."""
    asked = server.stats.requests
    line = _one_line(run_cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                             server.base_url, "--t", "1", "--n", "1", "--limit", "2",
                             "--bootstrap", reps, "--out", tmp_path / "run"))
    assert f"--bootstrap must be an integer >= 100, got {reps}" in line
    assert server.stats.requests == asked and not (tmp_path / "run").exists()
    line = _one_line(run_cli("compare", tmp_path / "a", tmp_path / "b", "--bootstrap", reps))
    assert f"--bootstrap must be an integer >= 100, got {reps}" in line
