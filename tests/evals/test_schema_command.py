"""`ensemble schema NAME` prints the JSON schema that validates each file a run writes."""

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("name, title", [("eval-summary", "EvalSummary"),
                                         ("calibration", "CalibrationSummary"),
                                         ("profile", "CalibrationProfile"),
                                         ("ensemble-spec", "EnsembleSpec")])
def test_schema_names_the_model_and_its_fields(name, title, run_cli):
    out = run_cli("schema", name)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["title"] == title
    assert doc["properties"] and "required" in doc


def test_unknown_schema_is_one_line():
    # a real process: the command's end-to-end check (the others run in this process)
    out = subprocess.run([sys.executable, "-m", "ensemble", "schema", "nope"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "invalid choice" in out.stderr


def test_schema_accepts_json_like_every_reporting_command(run_cli):
    out = run_cli("schema", "profile", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["title"] == "CalibrationProfile"
