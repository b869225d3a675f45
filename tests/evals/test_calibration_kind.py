"""Calibration is a run kind on the evals' one orchestration (issue 36, item 8): its spec is a
run spec (`"kind": "calibration"`), resolved into a plan and drawn by the same steps as an
eval's; it records its spec, repeats from it, and its `--limit` counts questions (docs/
statistics.md). Through `ensemble.cli.main` in this process against the simulated server."""

from __future__ import annotations

import json

import pytest

from ensemble.evals.plan import resolve
from ensemble.evals.spec import calibration_spec, one_model
from ensemble.testing import SimulatedServer


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=4) as s:
        yield s


def _calibrate(server, out, *more) -> tuple[str, ...]:
    return ("calibrate", "--model", "openai/sim-expert", "--api-base", server.base_url,
            "--t", "0.5", "1", "--samples", "3", "--limit", "12", "--out", out, *more)


def test_a_calibration_records_its_spec_and_repeats_from_it(server, tmp_path, cli):
    out = tmp_path / "cal"
    first = cli.ok(*_calibrate(server, out, "--n-budget", "3"))
    spec = json.loads((out / "spec.json").read_text())
    assert spec["kind"] == "calibration" and spec["schema_version"] == 2
    assert spec["fit"]["n_budget"] == 3 and spec["samples"] == 3 and spec["limit"] == 12
    assert [m["temperature"] for m in spec["members"]] == [0.5, 1.0]
    asked = server.stats.requests
    again = cli.ok("calibrate", "--spec", out)  # runs in its folder, from its store
    assert server.stats.requests == asked and again["requests"] == 0
    assert again["fits"] == first["fits"] and again["recommendation"] == first["recommendation"]
    # a flag given replaces the file's field; the run is still the same one (more samples)
    more = cli.ok("calibrate", "--spec", out, "--samples", "4")
    assert more["meta"]["samples_per_question"] == 4 and more["requests"] > 0


def test_the_two_kinds_refuse_each_others_specs_in_one_line(server, tmp_path, cli):
    cal = tmp_path / "cal"
    cli.ok(*_calibrate(server, cal))
    line = cli.refused("eval", "--spec", cal)
    assert "calibration's spec" in line and "ensemble calibrate --spec" in line
    ev = tmp_path / "ev"
    cli.ok("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
        server.base_url, "--t", "1", "--n", "1", "--samples", "1", "--limit", "2",
        "--bootstrap", "100", "--out", ev)
    line = cli.refused("calibrate", "--spec", ev)
    assert "an eval's spec" in line and "ensemble eval --spec" in line
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "calibration", "n": [1, 3],
                               "members": [{"model": "openai/sim-expert", "temperature": 1}]}))
    assert "a calibration takes no n" in cli.refused("calibrate", "--spec", bad)
    bad.write_text(json.dumps({"task": "boxball", "n": [1], "fit": {"mode": "logprob"},
                               "members": [{"model": "openai/sim-expert", "temperature": 1}]}))
    assert "fit is a calibration's" in cli.refused("eval", "--spec", bad)
    assert "give --model, --t" in cli.refused("calibrate")


def test_a_calibration_stopped_before_its_summary_is_its_own_run(server, tmp_path, cli):
    out = tmp_path / "cal"
    cli.ok(*_calibrate(server, out))
    (out / "calibration.json").unlink()  # as if it stopped after the draw
    line = cli.refused("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                    server.base_url, "--t", "1", "--n", "1", "--out", out)
    assert "ensemble calibrate, stopped before its summary" in line
    asked = server.stats.requests
    assert cli.ok(*_calibrate(server, out))["requests"] == 0
    assert server.stats.requests == asked


def test_limit_counts_questions_in_a_calibration_and_items_in_an_eval():
    # box-ball: a calibration's --limit L is L of its 400 questions (each one observation of
    # the fit); an eval's is L of its 216 scenarios (both colours: the vote's utility needs them)
    cal = resolve(calibration_spec("m", [1.0], limit=12, seed=3))
    ev = resolve(one_model("boxball", "m", [1.0], [1], limit=12, seed=3))
    assert len(cal.questions) == 12
    assert len({q.meta["scenario"] for q in ev.questions}) == 12 < len(ev.questions)
    assert cal.members[0].samples == 20  # a calibration's default samples
    logprob = resolve(calibration_spec("m", [1.0], mode="logprob"))
    assert logprob.members[0].samples == 1 and logprob.build(logprob.questions[0], 1.0, 1).k == 1


def test_api_base_is_refused_for_a_calibration_spec_whose_members_name_theirs(tmp_path, cli):
    spec = calibration_spec("openai/sim-expert", [1.0], api_base="http://127.0.0.1:9/v1",
                            limit=2)
    (tmp_path / "spec.json").write_text(spec.model_dump_json(exclude_none=True))
    line = cli.refused("calibrate", "--spec", tmp_path / "spec.json", "--api-base",
                       "http://127.0.0.1:8/v1")
    assert "every member of --spec" in line and "drop --api-base" in line
