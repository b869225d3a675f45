"""Calibration profiles: written by `ensemble calibrate`, loaded back, used for λ at any t."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import warnings

import pytest

from ensemble import CalibrationProfile
from ensemble.errors import InputError
from ensemble.evals.calibrate import run_calibration
from ensemble.evals.runner import RunOptions
from ensemble.evals.schemas import dump
from ensemble.evals.spec import calibration_spec
from ensemble.profile import TemperatureFit, public_api_base
from ensemble.providers.options import ProviderOptions
from ensemble.testing import SimulatedServer


def _profile(**kw) -> CalibrationProfile:
    base = dict(model="openai/m", api_base="http://127.0.0.1:1/v1", lam1=4.0,
                lam1_ci=(3.5, 4.5), lam1_se=0.25, lam1_source="joint", lrt_pvalue=0.4,
                law_holds=True, bias=-0.1,
                fits=[TemperatureFit(t=0.0, lam=math.inf, ci=(80.0, math.inf), separated=True,
                                     n_questions=400, n_valid=4000),
                      TemperatureFit(t=1.0, lam=4.1, ci=(3.7, 4.5), se=0.2, bias=-0.1,
                                     n_questions=400, n_valid=3990)],
                questions=400, samples_per_question=10, valid_answers=7990, seed=0,
                created="2026-01-01T00:00:00+00:00", version="0.1.0")
    base.update(kw)
    return CalibrationProfile(**base)


def test_round_trip_keeps_infinities_with_their_sign(tmp_path):
    prof = _profile(fits=[TemperatureFit(t=0.0, lam=math.inf, ci=(80.0, math.inf),
                                         separated=True),
                          TemperatureFit(t=2.0, lam=-math.inf, ci=(-math.inf, -3.0),
                                         separated=True)])
    path = prof.save(tmp_path / "profile.json")
    doc = json.loads(path.read_text())  # strict JSON: no Infinity tokens
    assert doc["fits"][0]["lam"] is None and doc["fits"][0]["lam_inf"] == "+"
    assert doc["fits"][1]["lam_inf"] == "-" and doc["fits"][1]["ci_inf"] == ["-", None]
    again = CalibrationProfile.load(path)
    assert again == prof
    assert CalibrationProfile.load(tmp_path) == prof  # a calibration folder works too


def test_lam_at_is_lam1_over_t_and_infinite_at_zero():
    prof = _profile()
    assert prof.lam_at(0) == math.inf
    assert prof.lam_at(0.5) == pytest.approx(8.0) and prof.lam_at(2.0) == pytest.approx(2.0)
    assert prof.fit_at(1.0).lam == 4.1 and prof.fit_at(0.7) is None
    with pytest.raises(InputError, match="temperature"):
        prof.lam_at(-1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prof.lam_at(1.0)  # the law holds: no warning
    rejected = _profile(law_holds=False, lrt_pvalue=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rejected.lam_at(1.0) == 4.1  # λ₁/t rejected, t measured: the measured λ
    with pytest.warns(UserWarning, match="rejected.*did not measure t = 0.7"):
        assert rejected.lam_at(0.7) == pytest.approx(4.0 / 0.7)  # not measured: λ₁/t, warned
    with pytest.raises(InputError, match="no λ₁"):
        _profile(lam1=None, lam1_ci=None).lam_at(1.0)


def test_a_rejected_law_uses_the_lambda_measured_at_a_calibrated_temperature():
    """The issue's run: λ₁/t rejected (p = 0.035), λ₁ = 3.883, λ measured 7.105 at t = 0.5.
    The report recommends the measured λ; the profile (and so a Member) must give the same."""
    prof = _profile(lam1=3.883, law_holds=False, lrt_pvalue=0.035,
                    fits=[TemperatureFit(t=0.0, lam=math.inf, ci=(80.0, math.inf),
                                         separated=True),
                          TemperatureFit(t=0.5, lam=7.105, ci=(6.3, 8.0), se=0.43),
                          TemperatureFit(t=1.0, lam=4.085, ci=(3.74, 4.47), se=0.19)])
    lam, source = prof.lam_choice(0.5)
    assert lam == 7.105 and "measured at t = 0.5" in source
    assert prof.lam_at(1.0) == 4.085 and prof.lam_at(0) == math.inf
    assert _profile(lam1=3.883).lam_at(0.5) == pytest.approx(7.766)  # law holds: λ₁/t


@pytest.mark.parametrize("content,needle", [
    (None, "not found"),
    ("{not json", "is not JSON"),
    ('{"model": "m"}', "malformed: created"),
    ('{"model": "m", "created": "x", "version": "1", "fits": [{"t": "hot"}]}',
     "malformed: fits.0"),
])
def test_load_errors_are_one_clear_line(tmp_path, content, needle):
    path = tmp_path / "profile.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError) as err:
        CalibrationProfile.load(path)
    msg = str(err.value)
    assert needle in msg and "\n" not in msg and ("ensemble calibrate" in msg)


def test_schema_names_the_fields():
    schema = CalibrationProfile.json_schema()
    for key in ("model", "api_base", "lam1", "lam1_ci", "fits", "bias", "task", "questions",
                "samples_per_question", "created", "version"):
        assert key in schema["properties"], key
    assert set(schema["required"]) == {"model", "created", "version"}


def test_api_base_never_keeps_credentials():
    assert public_api_base("https://user:sk-secret@host.example:8443/v1?api-key=sk-x#f") == \
        "https://host.example:8443/v1"
    assert public_api_base("http://[::1]:8080/v1") == "http://[::1]:8080/v1"
    assert public_api_base(None) is None


def test_import_is_light():
    code = ("import sys, ensemble; ensemble.CalibrationProfile; "
            "print(any(m.startswith('litellm') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_calibrate_writes_a_profile_that_covers_the_planted_lambda(tmp_path):
    """Simulated expert with planted λ₁ = 3 (no bias), 200 questions x 10 samples at t = 0.5
    and 1: the profile's λ₁ interval (joint fit) covers 3 (seeded: deterministic), its
    per-temperature fits are calibration.json's, and nothing secret is in it."""
    with SimulatedServer(lam1=3.0, seed=3) as srv:
        spec = calibration_spec("openai/sim-expert", (0.5, 1.0), samples=10, limit=200,
                                n_budget=3)
        opts = RunOptions(provider=ProviderOptions(api_base=srv.base_url,
                                                   api_key="sk-supersecret-123"),
                          out=str(tmp_path / "cal"))
        doc = dump(asyncio.run(run_calibration(spec, opts)))
    text = (tmp_path / "cal" / "profile.json").read_text()
    assert "sk-supersecret" not in text
    prof = CalibrationProfile.load(tmp_path / "cal" / "profile.json")
    assert prof.model == "openai/sim-expert" and prof.api_base == srv.base_url
    assert prof.lam1_source == "joint" and prof.lam1 == pytest.approx(doc["joint"]["lam1"])
    assert prof.lam1_ci[0] <= 3.0 <= prof.lam1_ci[1]
    assert [f.t for f in prof.fits] == [0.5, 1.0]
    for f, g in zip(prof.fits, doc["fits"], strict=True):
        assert f.lam == pytest.approx(g["lam"]) and f.ci == pytest.approx(tuple(g["ci"]))
    assert prof.questions == 200 and prof.samples_per_question == 10
    assert prof.valid_answers == sum(g["n_valid"] for g in doc["fits"])
    assert prof.task == "boxball" and prof.version and prof.created.startswith("20")
    assert prof.lam_at(0.5) == pytest.approx(2 * prof.lam1)
    # the report's recommendation can be pasted: it builds an Ensemble (no request is sent)
    ns: dict = {}
    exec("from ensemble import Ensemble\nens = " + doc["recommendation"]["ensemble"], ns)
    assert ns["ens"].n == 3 and ns["ens"].temperature == doc["recommendation"]["t"]
