"""Two servers that share a model name are two sources of samples (issue 21).

Before: the store keyed samples by (model, messages, parameters), so calibrating a second
simulated expert under the same model name reported the FIRST server's λ, "from store", and the
default run folder `runs/calibrate-MODEL` did not separate them either. Now the store key holds
the endpoint (the normalised api_base) and the default folder names it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ensemble.testing import SimulatedServer

MODEL = "openai/sim-expert"  # one name, two servers


@pytest.fixture
def calibrate(run_cli):
    """`ensemble ...` in this process (the run_cli fixture of tests/conftest.py)."""

    def run(cwd: Path, base: str, *extra: str) -> dict:
        r = run_cli("calibrate", "--model", MODEL,
                            "--api-base", base, "--t", "1", "--samples", "5", "--limit", "120",
                            "--json", *extra, cwd=cwd)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    return run


def lam_at_1(doc: dict) -> tuple[float, tuple[float, float]]:
    f = doc["fits"][0]
    return f["lam"], tuple(f["ci"])


def test_two_servers_one_model_name_each_draws_and_reports_its_own_lambda(tmp_path, calibrate,
                                                                          run_cli):
    with SimulatedServer(lam1=4.0, seed=1) as a, SimulatedServer(lam1=1.5, seed=2) as b:
        doc_a = calibrate(tmp_path, a.base_url)
        served_a = a.stats.requests
        doc_b = calibrate(tmp_path, b.base_url)  # the default folder: separate by endpoint
        served_b = b.stats.requests
        # the same --out for the second server is another run: refused, naming the run there
        # (issue 32); beside the first server's samples in one store, its own are drawn
        a_dir = tmp_path / doc_a["meta"]["run_dir"]
        r = run_cli("calibrate", "--model", MODEL,
                            "--api-base", b.base_url, "--t", "1", "--samples", "5", "--limit",
                            "120", "--out", str(a_dir), cwd=tmp_path)
        assert r.returncode == 1 and "holds another run" in r.stderr and a.base_url in r.stderr
        assert b.stats.requests == served_b
        shared = tmp_path / "shared"
        shared.mkdir()
        shutil.copy(a_dir / "samples.sqlite", shared / "samples.sqlite")
        doc_b2 = calibrate(tmp_path, b.base_url, "--out", str(shared))
        served_b2 = b.stats.requests - served_b
    assert served_a > 0 and served_b == served_a and served_b2 == served_a
    assert doc_a["meta"]["run_dir"] != doc_b["meta"]["run_dir"]
    assert doc_a["endpoint"] != doc_b["endpoint"] and doc_b["endpoint"] == doc_b2["endpoint"]
    lam_a, ci_a = lam_at_1(doc_a)
    for doc in (doc_b, doc_b2):
        lam_b, ci_b = lam_at_1(doc)
        assert ci_b[0] <= 1.5 <= ci_b[1] and ci_b[1] < 4.0, (lam_b, ci_b)
    assert ci_a[0] <= 4.0 <= ci_a[1], (lam_a, ci_a)
    profile = json.loads((tmp_path / doc_b2["meta"]["run_dir"] / "profile.json").read_text())
    assert profile["endpoint"] == doc_b["endpoint"] and profile["api_base"] == b.base_url
