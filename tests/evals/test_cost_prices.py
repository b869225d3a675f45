"""The cost rule in an eval needs every member's price (issue 41 item 4): a spec with
`"adaptive": ["cost"]` and a member without one is refused before any request (it drew every
sample, then could not score them); and a price given later prices the samples already stored
from their tokens, so such a folder is scored without a new request. Through `ensemble.cli.main`
in-process against the simulated server (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import json

import pytest

from ensemble.testing import SimulatedServer


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=6) as srv:
        yield srv


def _spec(path, url, *, prices, adaptive=True):
    members = [{"model": "openai/sim-expert", "api_base": url, "n": 3, "temperature": 1.0,
                "lam": 3.0, "label": "cheap"},
               {"model": "openai/sim-expert", "api_base": url, "n": 1, "temperature": 0.5,
                "lam": 6.0, "label": "dear"}]
    for m, price in zip(members, prices, strict=True):
        if price is not None:
            m["price_per_1k"] = price
    doc = {"task": "boxball", "samples": 4, "limit": 4, "bootstrap": 100, "members": members}
    if adaptive:
        doc["adaptive"] = ["cost"]
    path.write_text(json.dumps(doc))
    return path


def test_a_member_without_a_price_is_refused_before_drawing(server, tmp_path, run_cli):
    spec = _spec(tmp_path / "spec.json", server.base_url, prices=[[0.15, 0.6], None])
    asked = server.stats.requests
    line = run_cli("eval", "--spec", spec, "--out", tmp_path / "run").refusal()
    assert "dear" in line and "price_per_1k" in line and "cost" in line
    assert server.stats.requests == asked  # nothing drawn, nothing paid


def test_a_price_given_later_prices_the_stored_samples(server, tmp_path, run_cli):
    out = tmp_path / "run"
    plain = _spec(tmp_path / "plain.json", server.base_url, prices=[None, None],
                  adaptive=False)
    r = run_cli("eval", "--spec", plain, "--out", out)  # drawn without prices: no cost stored
    assert r.returncode == 0, r.stderr
    asked = server.stats.requests
    priced = _spec(tmp_path / "priced.json", server.base_url,
                   prices=[[0.15, 0.6], [2.5, 10.0]])
    r = run_cli("eval", "--spec", priced, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    assert server.stats.requests == asked  # scored from the store
    (row,) = [x for x in json.loads(r.stdout)["adaptive"] if x.get("stop") == "cost"]
    assert row["mean_cost_usd"] > 0
