"""The evals-side defects of issue 21, each through the real CLI against the simulated server
(real HTTP on 127.0.0.1): bad input is one line on stderr, a non-zero exit and no traceback,
checked before the first request, and nothing already stored is lost."""

from __future__ import annotations

import asyncio
import json
import os
import re

import pytest

from ensemble.evals.runner import RunOptions, run_eval
from ensemble.evals.spec import one_model
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer, answer_key_from_questions


@pytest.fixture
def _cli(run_cli):
    """`ensemble ...` in this process (the run_cli fixture of tests/conftest.py)."""

    def run(*args, columns: int | None = None):
        env = {**os.environ}
        if columns is not None:
            env["COLUMNS"] = str(columns)
        return run_cli(*map(str, args), env=env)

    return run


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=5) as srv:
        yield srv


@pytest.fixture(scope="module")
def run(server, tmp_path_factory):
    out = tmp_path_factory.mktemp("defects") / "run"
    spec = one_model("boxball", "openai/sim-expert", (0.5, 1.0), (1, 3),
                     api_base=server.base_url, samples=4, limit=4, seed=0, bootstrap=200)
    asyncio.run(run_eval(spec, RunOptions(out=str(out))))
    return out


def _requests(server) -> int:
    return server.stats.requests


def _eval(_cli, server, *args):
    return _cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base", server.base_url,
                "--limit", "2", "--samples", "3", *args)


def test_bad_options_are_refused_before_any_request(server, run, tmp_path, _cli):
    before = _requests(server)
    r = _eval(_cli, server, "--t", "1", "--n", "1", "--seed", "-1", "--out", tmp_path / "s")
    assert "--seed must be an integer >= 0" in r.refusal()
    r = _eval(_cli, server, "--t", "0.5", "0.5", "--n", "1", "--out", tmp_path / "d")
    assert "--t 0.5 is given twice" in r.refusal()
    line = _cli("calibrate", "--model", "openai/sim-expert", "--api-base",
                server.base_url, "--t", "0.5", "1", "--samples", "2", "--limit", "3",
                "--eval-dir", tmp_path / "nonexistent", "--out", tmp_path / "c").refusal()
    assert "--eval-dir" in line and "not an eval run folder" in line
    assert "is given twice" in _cli(
        "calibrate", "--model", "openai/sim-expert", "--api-base", server.base_url, "--t", "1",
        "1", "--samples", "2", "--limit", "3", "--out", tmp_path / "c2").refusal()
    assert _requests(server) == before  # nothing was asked of the provider
    assert not (tmp_path / "s").exists() and not (tmp_path / "c").exists()


def test_a_calibration_profile_is_checked_before_paying(server, tmp_path, _cli):
    prof = {"model": "openai/sim-expert", "lam1": -3.0, "fits": [], "questions": 1,
            "samples_per_question": 1, "valid_answers": 1, "seed": 0, "created": "x",
            "version": "x", "task": "boxball", "mode": "sample"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(prof))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**prof, "lam1": 2.0, "model": "openai/another-model"}))
    before = _requests(server)
    args = ("--t", "1", "--n", "1", "3", "--aggregator", "robust", "--out", tmp_path / "r")
    line = _eval(_cli, server, *args, "--calibration", bad).refusal()
    assert str(bad) in line and "λ₁ = -3" in line
    line = _eval(_cli, server, *args, "--calibration", other).refusal()
    assert str(other) in line and "openai/another-model" in line
    assert _requests(server) == before


def test_robust_rules_on_your_own_two_choice_data(tmp_path, _cli):
    # was: KeyError ('majority', 3) after paying for the samples
    data = tmp_path / "yn.jsonl"
    rows = [{"id": f"q{i}", "question": f"Is {i} even?", "choices": ["yes", "no"],
             "answer": "yes" if i % 2 == 0 else "no"} for i in range(8)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    key = answer_key_from_questions(get_task("jsonl", data=str(data)).questions())
    with SimulatedServer(lam1=2.0, seed=3, answer_key=key) as srv:
        r = _cli("eval", "jsonl", "--data", data, "--model", "openai/sim-expert", "--api-base",
                 srv.base_url, "--t", "1", "--n", "1", "3", "--samples", "4", "--aggregator",
                 "robust", "lam-weighted", "--lam", "2", "--bootstrap", "200", "--out",
                 tmp_path / "run", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    aggs = {(x["aggregator"], x["n"]) for x in doc["results"]}
    assert {("plurality", 3), ("robust", 3), ("lam-weighted", 3)} <= aggs
    diffs = [c for c in doc["contrasts"] if c["kind"] == "aggregator"]
    assert {c["vs_aggregator"] for c in diffs} == {"plurality"} and len(diffs) == 4


def test_an_out_folder_holds_one_run(server, run, tmp_path, _cli):
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    asked = _requests(server)
    line = _cli("calibrate", "--model", "openai/sim-expert", "--api-base",
                server.base_url, "--t", "1", "--samples", "2", "--limit", "3",
                "--out", run).refusal()
    assert str(run) in line and "ensemble eval of boxball with openai/sim-expert" in line
    line = _eval(_cli, server, "--t", "1", "--n", "1", "--out", run, "--model",
                 "openai/other").refusal()
    assert "holds another run" in line
    assert _requests(server) == asked
    after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert after == before  # nothing stored is lost or changed
    # a run against itself (or its copy) has no independent difference
    assert "same run" in _cli("compare", run, run).refusal()
    assert ">= 100, got 1" in _cli("compare", run, run, "--bootstrap", "1").refusal()


def test_output_fits_80_columns_without_cutting_a_number(server, run, tmp_path, _cli):
    asyncio.run(run_eval(one_model(
        "boxball", "openai/sim-expert", (0.5, 1.0), (1, 3), api_base=server.base_url,
        samples=4, limit=4, seed=0, bootstrap=200), RunOptions(out=str(tmp_path / "b"))))
    interval = re.compile(r"\[[+-]?\d\.\d{3}, [+-]?\d\.\d{3}\]")
    for columns in (80, None):  # None: piped, no $COLUMNS
        env_cols = columns
        r = _cli("compare", run, tmp_path / "b", columns=env_cols)
        assert r.returncode == 0, r.stderr
        assert "…" not in r.stdout and max(len(x) for x in r.stdout.splitlines()) <= 80
        doc = json.loads(_cli("compare", run, tmp_path / "b", "--json").stdout)
        rows = [x for x in r.stdout.splitlines() if interval.search(x)]
        assert len(rows) == len(doc["results"])  # every row whole, on one line
        e = _eval(_cli, server, "--t", "0.5", "1", "--n", "1", "3", "--samples", "4",
                  "--limit", "4", "--out", run, "--bootstrap", "200") if columns == 80 else None
        if e is not None:
            assert e.returncode == 0, e.stderr
            assert "…" not in e.stdout and max(len(x) for x in e.stdout.splitlines()) <= 80
            lines = e.stdout.splitlines()
            # no interval split over two lines: every "[" closes on its own line
            assert all(x.count("[") == x.count("]") for x in lines if "[" in x or "]" in x)
