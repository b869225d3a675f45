"""The drawing entry points of the Python API (`runner.run_eval`, `calibrate.run_calibration`)
refuse, in one InputError line naming the way that works, a spec of the other kind and a dry
run (`runner.estimate_run` plans those), before any request: both are `plan.resolve_to_draw`."""

from __future__ import annotations

import asyncio

import pytest

from ensemble.errors import InputError
from ensemble.evals.calibrate import run_calibration
from ensemble.evals.plan import RunOptions
from ensemble.evals.runner import run_eval
from ensemble.evals.spec import calibration_spec, one_model

# no server answers there: a refusal that came after a request would fail otherwise
NOWHERE = "http://127.0.0.1:9/v1"


def _refusal(call) -> str:
    with pytest.raises(InputError) as info:
        asyncio.run(call)
    return str(info.value)


def test_run_eval_refuses_a_calibration_spec_and_a_dry_run(tmp_path):
    cal = calibration_spec("openai/m", [1.0], api_base=NOWHERE, limit=3)
    wrong_kind = _refusal(run_eval(cal, RunOptions(out=str(tmp_path / "a"))))
    assert "ensemble calibrate --spec" in wrong_kind
    ev = one_model("boxball", "openai/m", [1.0], [1], api_base=NOWHERE, limit=3)
    dry = _refusal(run_eval(ev, RunOptions(out=str(tmp_path / "b"), dry_run=True)))
    assert "dry run" in dry and "estimate_run" in dry


def test_run_calibration_refuses_an_eval_spec_and_a_dry_run(tmp_path):
    ev = one_model("boxball", "openai/m", [1.0], [1], api_base=NOWHERE, limit=3)
    wrong_kind = _refusal(run_calibration(ev, RunOptions(out=str(tmp_path / "a"))))
    assert "ensemble eval --spec" in wrong_kind
    cal = calibration_spec("openai/m", [1.0], api_base=NOWHERE, limit=3)
    dry = _refusal(run_calibration(cal, RunOptions(out=str(tmp_path / "b"), dry_run=True)))
    assert "dry run" in dry and "estimate_run" in dry
    assert not any(tmp_path.iterdir())  # nothing written
