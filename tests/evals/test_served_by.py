"""A run says which provider drew its samples: `openai/...` goes through the official SDK unless
ENSEMBLE_PROVIDER=litellm (issue 25), and summary.json / calibration.json record which."""

from __future__ import annotations

import json
import os

import pytest

from ensemble.testing import SimulatedServer


@pytest.fixture
def run(run_cli):
    """`ensemble ...` in this process (the run_cli fixture of tests/conftest.py)."""

    def run(*args: str, env: dict[str, str]) -> dict:
        r = run_cli(*args, "--json", env=env)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    return run


def test_eval_and_calibrate_name_the_provider_that_drew_the_samples(tmp_path, run):
    plain = {k: v for k, v in os.environ.items() if k != "ENSEMBLE_PROVIDER"}
    forced = {**plain, "ENSEMBLE_PROVIDER": "litellm"}
    with SimulatedServer(lam1=3.0) as srv:
        common = ["--model", "openai/sim-expert", "--api-base", srv.base_url, "--t", "1",
                  "--limit", "8"]
        for env, name in ((plain, "openai"), (forced, "litellm")):
            before = srv.stats.requests
            out = tmp_path / f"eval-{name}"
            doc = run("eval", "boxball", *common, "--n", "1", "--samples", "1", "--out",
                      str(out), env=env)
            assert doc["served_by"] == name and srv.stats.requests > before
            assert json.loads((out / "summary.json").read_text())["served_by"] == name
        cal = run("calibrate", *common, "--samples", "2", "--out", str(tmp_path / "cal"),
                  env=plain)
        assert cal["meta"]["served_by"] == "openai"
