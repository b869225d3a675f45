"""The cost rule scored on a mixed run (`ensemble eval --spec` with "adaptive": ["cost"]):
its row reports votes, dollars and accuracy; a rerun asks nothing; and the same run replayed
from its samples.jsonl (`replay/RUN#member`) gives the same row with no request sent."""

from __future__ import annotations

import json

from ensemble.cli import main
from ensemble.testing import SimulatedServer
from ensemble.testing.expert import MCModel, SimulatedExpert


def _spec(path, urls, models, value=None, credit=None):
    members = [{"model": models[0], "n": 5, "samples": 5, "temperature": 1.0, "lam": 1.5,
                "price_per_1k": [0.0, 0.00015], "label": "cheap"},
               {"model": models[1], "n": 2, "samples": 2, "temperature": 1.0, "lam": 6.0,
                "price_per_1k": [0.0, 0.0025], "label": "dear"}]
    for m, url in zip(members, urls, strict=True):
        if url:
            m["api_base"] = url
    doc = {"task": "boxball", "limit": 12, "members": members, "adaptive": ["cost"],
           "aggregators": ["majority"]}
    if value is not None:
        doc["value_usd"] = value
    if credit is not None:
        doc["cost_credit"] = credit
    path.write_text(json.dumps(doc))
    return str(path)


def _run(capsys, *args):
    capsys.readouterr()
    assert main(["eval", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cost_rule_row_of_a_mixed_run_and_its_replay(tmp_path, capsys):
    cheap = SimulatedExpert(lam1=1.5, mc_model=MCModel(4, 1), seed=1, difficulty_seed=3)
    dear = SimulatedExpert(lam1=6.0, mc_model=MCModel(12, 1), seed=2, difficulty_seed=3)
    run = tmp_path / "run"
    with SimulatedServer(expert=cheap) as s1, SimulatedServer(expert=dear) as s2:
        spec = _spec(tmp_path / "spec.json", [s1.base_url, s2.base_url],
                     ["openai/cheap", "openai/dear"], value=0.0002)
        first = _run(capsys, "--spec", spec, "--out", str(run))
        sent = s1.stats.requests + s2.stats.requests
        again = _run(capsys, "--spec", spec, "--out", str(run))
        assert s1.stats.requests + s2.stats.requests == sent  # a rerun asks nothing
    (row,) = first["adaptive"]
    assert again["adaptive"] == first["adaptive"]
    assert row["stop"] == "cost" and row["t"] is None and row["n"] == 7
    assert {"mean_samples", "mean_cost_usd", "accuracy"} <= set(row)
    cheap_v, dear_v = row["mean_samples_by_member"]
    assert 0 < cheap_v <= 5 and 0 <= dear_v <= 2
    assert abs(cheap_v + dear_v - row["mean_samples"]) < 1e-9
    # its dollars are the recorded samples' own: each vote at its member's price per sample
    samples = [json.loads(x) for x in (run / "samples.jsonl").open()]
    price = {m: {s["cost_usd"] for s in samples if s["member"] == m} for m in ("cheap", "dear")}
    assert all(len(p) == 1 for p in price.values())  # equal replies: one price per member
    expect = cheap_v * price["cheap"].pop() + dear_v * price["dear"].pop()
    assert abs(row["mean_cost_usd"] - expect) < 1e-12
    # the same run from its recording: the same row, no server at all
    spec2 = _spec(tmp_path / "replay.json", [None, None],
                  [f"replay/{run}#cheap", f"replay/{run}#dear"], value=0.0002)
    replayed = _run(capsys, "--spec", spec2, "--out", str(tmp_path / "replayed"))
    assert replayed["adaptive"] == first["adaptive"]
    assert row["credit"] == "reference"
    # scored by P(ω = decision), box-and-ball's own credit: the rule reads it through the λ
    spec3 = _spec(tmp_path / "qr.json", [None, None],
                  [f"replay/{run}#cheap", f"replay/{run}#dear"], value=0.0002, credit="qr")
    (qr,) = _run(capsys, "--spec", spec3, "--out", str(tmp_path / "qr"))["adaptive"]
    assert qr["credit"] == "qr" and qr["stop"] == "cost"
    assert 0 < qr["mean_samples"] <= 7 and 0 <= qr["accuracy"] <= 1
