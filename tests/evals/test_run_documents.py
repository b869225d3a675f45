"""One orchestration and typed run documents (issue 29), and the run-folder defects of issue 32
(items 2, 3 and 5), through `ensemble.cli.main` in-process against simulated servers (real
HTTP on 127.0.0.1): a single model and a mixed ensemble write summary.json with the same
fields, every document is read back through its model (`extra="forbid"`), a folder holds one
run (its whole spec), compare pairs every shared cell, and a calibration profile of another
endpoint is refused."""

from __future__ import annotations

import json

import pytest

from ensemble.evals.records import VoteRecord, read_votes
from ensemble.evals.rundir import read_run
from ensemble.evals.schemas import CalibrationSummary, EvalSummary
from ensemble.testing import SimulatedServer


@pytest.fixture(scope="module")
def servers():
    with SimulatedServer(lam1=3.0, seed=1) as a, SimulatedServer(lam1=3.0, seed=2) as b:
        yield a, b


def _one(server, out, *more):
    return ("eval", "boxball", "--model", "openai/sim-expert", "--api-base", server.base_url,
            "--t", "1", "--n", "1", "3", "--samples", "3", "--limit", "3", "--bootstrap", "100",
            "--out", out, *more)


def test_one_model_and_mixed_ensemble_write_the_same_fields(servers, tmp_path, cli):
    a, b = servers
    one = cli.ok(*_one(a, tmp_path / "one"))
    spec = tmp_path / "mixed.json"
    spec.write_text(json.dumps({"task": "boxball", "samples": 3, "limit": 3, "bootstrap": 100,
                                "members": [
                                    {"model": "openai/sim-expert", "api_base": a.base_url,
                                     "n": 2, "temperature": 1.0, "lam": 3.0},
                                    {"model": "openai/sim-expert", "api_base": b.base_url,
                                     "n": 1, "temperature": 1.0, "lam": 3.0, "label": "b"}]}))
    mixed = cli.ok("eval", "--spec", spec, "--out", tmp_path / "mixed")
    # one builder: every field of the model, in both, and nothing else
    assert set(one) == set(mixed) == set(EvalSummary.model_fields)
    assert one["ensemble"] is None and mixed["ensemble"]["members"][1]["label"] == "b"
    assert one["endpoint"] == a.base_url and one["served_by"] == "openai"
    assert mixed["endpoint"] is None and mixed["served_by"] == "openai"  # two endpoints
    assert [m["endpoint"] for m in mixed["ensemble"]["members"]] == [a.base_url, b.base_url]
    # read back typed, through the one reader
    for name, doc in (("one", one), ("mixed", mixed)):
        run = read_run(tmp_path / name)
        assert isinstance(run.doc, EvalSummary) and run.mixed == (name == "mixed")
        assert run.summary.model_dump(mode="json", exclude_unset=True)["results"] == json.loads(
            json.dumps(doc["results"]))
    assert EvalSummary.model_config["extra"] == VoteRecord.model_config["extra"] == "forbid"
    # the fields votes.jsonl writes are declared (no getattr): ties and the ensemble's P(first)
    votes = list(read_votes(tmp_path / "mixed"))
    assert {v.member for v in votes} == {"ensemble", "openai/sim-expert@t=1", "b"}
    assert all(v.p_first is not None for v in votes if v.member == "ensemble" and v.counts)
    assert all(isinstance(v.tie, bool) for v in votes)


def test_a_field_no_model_declares_is_refused_on_reading(servers, tmp_path, cli):
    a, _ = servers
    cli.ok(*_one(a, tmp_path / "r"))
    path = tmp_path / "r" / "summary.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "surprise": 1}))
    line = cli.refused("view", tmp_path / "r")
    assert "summary.json" in line and "surprise" in line and "rerun" in line
    path.write_text(json.dumps(doc))
    votes = tmp_path / "r" / "votes.jsonl"
    first, *rest = votes.read_text().splitlines()
    votes.write_text("\n".join([json.dumps({**json.loads(first), "extra": 2}), *rest]) + "\n")
    assert "not a valid VoteRecord" in cli.refused("view", tmp_path / "r")


def test_a_calibration_summary_is_typed(servers, tmp_path, cli):
    a, _ = servers
    doc = cli.ok("calibrate", "--model", "openai/sim-expert", "--api-base", a.base_url,
              "--t", "0.5", "1", "--samples", "3", "--limit", "12", "--out", tmp_path / "cal")
    assert set(doc) == set(CalibrationSummary.model_fields)
    run = read_run(tmp_path / "cal")
    assert isinstance(run.doc, CalibrationSummary) and run.kind == "calibration"
    assert [f.t for f in run.doc.fits] == [0.5, 1.0]


def test_out_holding_a_run_of_another_endpoint_is_refused(servers, tmp_path, cli):
    # issue 32, item 2: the second run overwrote summary.json, view.html and spec.json
    a, b = servers
    out = tmp_path / "shared"
    cli.ok(*_one(a, out))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    asked = b.stats.requests
    line = cli.refused(*_one(b, out))
    assert str(out) in line and "holds another run" in line and "api_base" in line
    assert a.base_url.rsplit(":", 1)[1] in line  # names the run that is there
    assert b.stats.requests == asked
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # the same run again resumes there; a higher spending cap continues it
    cli.ok(*_one(a, out))
    cli.ok(*_one(a, out, "--max-cost", "5"))


def test_out_holding_a_run_of_another_data_file_is_refused(servers, tmp_path, cli):
    a, _ = servers
    rows = [{"id": f"q{i}", "question": f"Is {i} even?", "choices": ["yes", "no"],
             "answer": "yes" if i % 2 == 0 else "no"} for i in range(4)]
    for name in ("q.jsonl", "q2.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = ("eval", "jsonl", "--model", "openai/sim-expert", "--api-base", a.base_url, "--t", "1",
           "--n", "1", "--samples", "1", "--bootstrap", "100", "--out", tmp_path / "run")
    cli.ok(*run, "--data", tmp_path / "q.jsonl")
    line = cli.refused(*run, "--data", tmp_path / "q2.jsonl")
    assert "holds another run" in line and "data" in line and "q.jsonl" in line


def test_compare_pairs_the_rules_beside_the_main_vote(servers, tmp_path, cli):
    # issue 32, item 3: the robust and lam-weighted cells vanished from compare
    a, b = servers
    rules = ("--aggregator", "robust", "lam-weighted", "--lam", "3")
    sa = cli.ok(*_one(a, tmp_path / "a", *rules))
    sb = cli.ok(*_one(b, tmp_path / "b", *rules))
    doc = cli.ok("compare", tmp_path / "a", tmp_path / "b")
    got = {(r["t"], r["n"], r["aggregator"]): r for r in doc["results"]}
    cells = {(r["t"], r["n"], r["aggregator"]) for r in sa["results"]}
    assert set(got) == cells  # every shared (t, n, rule) cell
    assert {k[2] for k in got} == {"majority", "robust", "lam-weighted", "random-follow"}
    for key in cells:  # on the same questions: each run's own number
        own_a = next(r for r in sa["results"] if (r["t"], r["n"], r["aggregator"]) == key)
        own_b = next(r for r in sb["results"] if (r["t"], r["n"], r["aggregator"]) == key)
        assert got[key]["utility_a"] == pytest.approx(own_a["utility"], abs=1e-12)
        assert got[key]["utility_b"] == pytest.approx(own_b["utility"], abs=1e-12)


def test_a_calibration_of_another_endpoint_is_refused(servers, tmp_path, cli):
    # issue 32, item 5: accepted silently; the Python API refuses the same mismatch
    a, b = servers
    prof = {"model": "openai/sim-expert", "api_base": a.base_url, "lam1": 3.0, "fits": [],
            "questions": 1, "samples_per_question": 1, "valid_answers": 1, "seed": 0,
            "created": "x", "version": "x", "task": "boxball", "mode": "sample"}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(prof))
    asked = b.stats.requests
    line = cli.refused(*_one(b, tmp_path / "r", "--aggregator", "robust",
                                  "--calibration", path))
    assert str(path) in line and "no calibration profile for openai/sim-expert at" in line
    assert a.base_url in line and b.base_url in line
    assert b.stats.requests == asked and not (tmp_path / "r").exists()
    from ensemble import Ensemble
    from ensemble.errors import InputError

    with pytest.raises(InputError, match="no calibration profile for openai/sim-expert at"):
        Ensemble("openai/sim-expert", api_base=b.base_url, calibration=path)
    # the profile of the endpoint evaluated gives its λ₁
    s = cli.ok(*_one(a, tmp_path / "ok", "--aggregator", "robust", "--calibration", path))
    assert s["lam1"] == 3.0 and "robust" in s["aggregators"]
