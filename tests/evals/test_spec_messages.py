"""Issue 41 item 19: spec messages that sent the user in circles. A spec without members plus
--t said "drop --t" and without --t "members: field required"; `"members": []` with --model
said "drop --model"; spec fields were named as flags ("--n 1 is given twice"); duplicate labels
said "give each a label" and named --ensemble for a --spec. Through `ensemble eval` in this
process; every refusal is one line, before any request."""

from __future__ import annotations

import json

import pytest

from ensemble.testing import SimulatedServer

TWO = [{"model": "openai/a", "temperature": 1, "n": 1, "label": "x"},
       {"model": "openai/b", "temperature": 0.5, "n": 1, "label": "x"}]
SAME = [{"model": "openai/a", "temperature": 1, "n": 1},
        {"model": "openai/a", "temperature": 1, "n": 2}]


def _spec(tmp_path, **doc) -> str:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"task": "boxball", **doc}))
    return str(path)


@pytest.mark.parametrize("members", [None, []], ids=["none", "empty"])
def test_a_spec_without_members_takes_them_from_the_command_line(members, tmp_path, run_cli):
    doc = {"samples": 2, "limit": 2, "bootstrap": 100, "n": [1]}
    spec = _spec(tmp_path, **doc, **({} if members is None else {"members": members}))
    line = run_cli("eval", "--spec", spec).refusal()
    assert "members" in line and "--model" in line and "--t" in line and "drop" not in line
    line = run_cli("eval", "--spec", spec, "--t", "1").refusal()
    assert "--model" in line and "drop" not in line
    line = run_cli("eval", "--spec", spec, "--model", "openai/a").refusal()
    assert "--t" in line and "drop" not in line
    with SimulatedServer(lam1=3.0, seed=1) as srv:
        r = run_cli("eval", "--spec", spec, "--model", "openai/sim-expert", "--api-base",
                    srv.base_url, "--t", "1", "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    recorded = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert [(m["model"], m["temperature"]) for m in recorded["members"]] == \
        [("openai/sim-expert", 1.0)]


@pytest.mark.parametrize("field, value, said", [
    ("n", [1, 1], "n: 1 is given twice"),
    ("samples", 1, "samples 1 is smaller than the largest n (3)"),
    ("max_n", 9, "max_n 9 is more than the samples drawn per question (samples 3)"),
])
def test_spec_fields_are_named_as_fields(field, value, said, tmp_path, run_cli):
    doc = {"members": [{"model": "openai/a", "temperature": 1}], "n": [1, 3], "samples": 3}
    spec = _spec(tmp_path, **{**doc, field: value})
    line = run_cli("eval", "--spec", spec).refusal()
    assert f"--spec {spec}: {said}" in line, line
    assert "--n " not in line and "--samples" not in line and "--max-n" not in line


@pytest.mark.parametrize("members, said", [
    (TWO, "members 0 and 1 have the same label 'x': give each member its own \"label\""),
    (SAME, "members 0 and 1 are openai/a at t = 1"),
])
def test_duplicate_members_name_the_spec_file(members, said, tmp_path, run_cli):
    spec = _spec(tmp_path, members=members)
    line = run_cli("eval", "--spec", spec).refusal()
    assert f"--spec {spec}: {said}" in line and "--ensemble" not in line, line
    line = run_cli("eval", "--ensemble", spec).refusal()
    assert f"--ensemble {spec}: {said}" in line, line
