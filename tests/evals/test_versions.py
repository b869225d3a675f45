"""Every document a run writes says its format under one name (`schema_version`), and its
reader migrates an older one or refuses a newer one in one line (issue 36, item 2).

The run folders of tests/evals/data/legacy were written by earlier commits (its README says
how); they are read here through the one reader, the viewer and compare, as a user's old runs
would be. Runs go through `ensemble.cli.main` in this process against the simulated server."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from ensemble.cli import main
from ensemble.evals.compare import compare_runs
from ensemble.evals.records import RECORDS_VERSION
from ensemble.evals.rundir import read_run
from ensemble.evals.schemas import CALIBRATION_VERSION, SUMMARY_VERSION, EvalSummary
from ensemble.evals.spec import SPEC_VERSION
from ensemble.profile import SCHEMA_VERSION as PROFILE_VERSION, CalibrationProfile
from ensemble.testing import SimulatedServer

LEGACY = Path(__file__).parent / "data" / "legacy"
READABLE = sorted(p.name for p in LEGACY.iterdir() if p.is_dir() and "fc85605" not in p.name)


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=1) as s:
        yield s


def _eval(server, out, *more) -> tuple[str, ...]:
    return ("eval", "boxball", "--model", "openai/sim-expert", "--api-base", server.base_url,
            "--t", "1", "--n", "1", "3", "--samples", "3", "--limit", "2", "--bootstrap", "100",
            "--out", out, *more)


@pytest.fixture(scope="module")
def runs(server, tmp_path_factory):
    """An eval and a calibration written by this version."""
    base = tmp_path_factory.mktemp("runs")
    assert main([str(a) for a in _eval(server, base / "eval", "--json")]) == 0
    assert main(["calibrate", "--model", "openai/sim-expert", "--api-base", server.base_url,
                 "--t", "0.5", "1", "--samples", "2", "--limit", "8", "--out",
                 str(base / "cal"), "--json"]) == 0
    return base


def test_every_document_a_run_writes_says_its_format(runs):
    ev, cal = runs / "eval", runs / "cal"
    assert json.loads((ev / "summary.json").read_text())["schema_version"] == SUMMARY_VERSION
    assert json.loads((ev / "spec.json").read_text())["schema_version"] == SPEC_VERSION
    assert (json.loads((cal / "calibration.json").read_text())["schema_version"]
            == CALIBRATION_VERSION)
    assert json.loads((cal / "profile.json").read_text())["schema_version"] == PROFILE_VERSION
    for folder, names in ((ev, ("questions", "samples", "votes")), (cal, ("questions", "samples"))):
        for name in names:
            lines = (folder / f"{name}.jsonl").read_text().splitlines()
            assert lines and all(json.loads(x)["schema_version"] == RECORDS_VERSION
                                 for x in lines), name
    assert read_run(ev).doc.schema_version == SUMMARY_VERSION


def test_the_json_document_of_eval_says_its_format_too(server, tmp_path, cli):
    doc = cli.ok(*_eval(server, tmp_path / "r"))
    assert doc["schema_version"] == SUMMARY_VERSION and set(doc) == set(EvalSummary.model_fields)


@pytest.mark.parametrize("name", READABLE)
def test_run_folders_of_earlier_versions_still_read(name, tmp_path, cli):
    folder = shutil.copytree(LEGACY / name, tmp_path / name)
    run = read_run(folder)
    assert run.doc.schema_version == (SUMMARY_VERSION if run.kind == "eval"
                                      else CALIBRATION_VERSION)
    assert run.samples and run.questions
    r = cli("view", folder, "--out", tmp_path / "page.html")
    assert r.returncode == 0 and (tmp_path / "page.html").stat().st_size > 0, r.stderr
    if run.kind == "calibration":
        assert run.doc.endpoint == "http://127.0.0.1:18765/v1" == run.doc.meta.endpoint
        prof = CalibrationProfile.load(folder)  # written by that version
        assert prof.lam1 is not None and prof.lam1 > 0
        return
    doc = run.summary
    assert doc.aggregators[0] == "majority" and doc.layout.vote_rule == "majority"
    assert doc.provider.max_concurrency > 0
    if run.mixed:
        assert doc.ensemble is not None
        assert all(m.endpoint == "http://127.0.0.1:18765/v1" for m in doc.ensemble.members)
    else:  # one model: compared with another version's run, cell by cell
        assert doc.endpoint == "http://127.0.0.1:18765/v1"
        other = ("eval-2026-11-23-326481a" if name != "eval-2026-11-23-326481a"
                 else "eval-2026-11-27-7c8369f")
        cmp = compare_runs(run, read_run(LEGACY / other))
        assert len(cmp["results"]) == len(doc.results)


def test_an_infinite_member_lambda_of_the_first_mixed_runs_stays_infinite():
    # 2026-11-23 wrote λ = ∞ as "lam": null, "lam_inf": true; null alone is "unknown"
    doc = read_run(LEGACY / "mixed-2026-11-23-92fedda").summary
    assert doc.ensemble is not None
    lams = {m.label: m.lam for m in doc.ensemble.members}
    assert lams["greedy"] == math.inf and lams["openai/sim-expert@t=1"] == 3.0
    assert doc.aggregators == ["majority", "lam-weighted", "robust"]
    assert doc.endpoint == "http://127.0.0.1:18765/v1"  # both members drew from one server


def test_a_summary_too_early_to_migrate_is_one_line_and_its_command_rewrites_it(
        server, tmp_path, cli):
    folder = shutil.copytree(LEGACY / "eval-2026-11-23-fc85605", tmp_path / "old")
    line = cli.refused("view", folder)
    assert "summary.json" in line and "early version" in line and "rerun" in line
    # the rerun it advises is not refused by the folder check that reads the same document
    assert cli.ok(*_eval(server, folder))["schema_version"] == SUMMARY_VERSION
    assert read_run(folder).summary.schema_version == SUMMARY_VERSION


def _bump(path: Path, **more) -> None:
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "schema_version": 99, **more}))


def test_documents_of_a_newer_version_are_one_line(runs, tmp_path, cli):
    ev = shutil.copytree(runs / "eval", tmp_path / "eval")
    cal = shutil.copytree(runs / "cal", tmp_path / "cal")
    _bump(ev / "summary.json", surprise=1)  # a newer format may have fields this one lacks
    line = cli.refused("view", ev)
    assert "summary.json" in line and "newer" in line and "99" in line and "upgrade" in line
    # and the folder is not overwritten by an older ensemble's run
    assert "newer" in cli.refused("eval", "boxball", "--model", "openai/sim-expert",
                               "--t", "1", "--n", "1", "--out", ev)
    _bump(cal / "calibration.json")
    assert "newer" in cli.refused("view", cal)
    _bump(cal / "profile.json", lam2=1.0)
    line = cli.refused("eval", "boxball", "--model", "openai/sim-expert", "--t", "1",
                    "--n", "1", "--aggregator", "robust", "--calibration", cal, "--dry-run")
    assert "profile.json" in line and "newer" in line


def test_a_record_line_of_a_newer_version_is_one_line(runs, tmp_path, cli):
    ev = shutil.copytree(runs / "eval", tmp_path / "eval")
    lines = (ev / "samples.jsonl").read_text().splitlines()
    lines[1] = json.dumps({**json.loads(lines[1]), "schema_version": 2, "weight": 0.5})
    (ev / "samples.jsonl").write_text("\n".join(lines) + "\n")
    line = cli.refused("view", ev)
    assert "samples.jsonl, row 2" in line and "newer" in line


def test_a_spec_without_a_version_runs_and_one_of_a_newer_version_is_refused(
        server, tmp_path, cli):
    spec = {"task": "boxball", "n": [1], "samples": 2, "limit": 2, "bootstrap": 100,
            "members": [{"model": "openai/sim-expert", "api_base": server.base_url,
                         "temperature": 1.0}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    cli.ok("eval", "--spec", tmp_path / "spec.json", "--out", tmp_path / "run")
    recorded = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert recorded["schema_version"] == SPEC_VERSION
    (tmp_path / "newer.json").write_text(json.dumps({**spec, "schema_version": 99}))
    line = cli.refused("eval", "--spec", tmp_path / "newer.json")
    assert "newer.json" in line and "newer" in line and "schema_version 99" in line
    (tmp_path / "bad.json").write_text(json.dumps({**spec, "schema_version": "one"}))
    assert "not a format number" in cli.refused("eval", "--spec", tmp_path / "bad.json")
