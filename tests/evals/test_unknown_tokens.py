"""Issue 41 item 16: unknown token counts were shown as 0 (a reply reporting negative usage, a
replay of a recording without counts, a replay's prompt tokens, which samples.jsonl does not
keep), and a replay said "cost now $2.4600" though it sent nothing. Unknown is null in
summary.json and "unknown" in the terminal; a replay's cost is what was recorded, said so.
Through `ensemble eval` in this process against the simulated server (127.0.0.1)."""

from __future__ import annotations

import json

import pytest

from ensemble.testing import SimulatedServer

ARGS = ["--t", "1", "--n", "1", "--samples", "2", "--limit", "4", "--bootstrap", "100"]


def _eval(run_cli, *args) -> tuple[dict, str]:
    r = run_cli("eval", "boxball", *args, *ARGS, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    r = run_cli("eval", "boxball", *args, *ARGS)  # the same run again: its line, from store
    assert r.returncode == 0, r.stderr
    return doc, r.stdout


def test_usage_that_cannot_be_true_is_unknown_not_0(run_cli, tmp_path):
    with SimulatedServer(lam1=3.0, seed=8, usage=(-50, -7)) as srv:
        doc, _ = _eval(run_cli, "--model", "openai/sim-expert", "--api-base", srv.base_url,
                       "--out", tmp_path / "run")
        r = run_cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                    srv.base_url, *ARGS, "--out", tmp_path / "other")
    assert doc["tokens"] == {"prompt": None, "completion": None}
    assert doc["tokens_samples"] == {"prompt": None, "completion": None}
    assert "tokens unknown" in " ".join(r.stdout.split())


def test_a_replay_pays_nothing_and_says_what_was_recorded(run_cli, tmp_path):
    with SimulatedServer(lam1=3.0, seed=8) as srv:
        first, _ = _eval(run_cli, "--model", "openai/sim-expert", "--api-base", srv.base_url,
                         "--price-per-1k-tokens", "0.5,1.5", "--out", tmp_path / "run")
    assert first["tokens"]["prompt"] > 0 and first["cost"]["now_usd"] > 0
    r = run_cli("eval", "boxball", "--model", f"replay/{tmp_path / 'run'}", *ARGS, "--json",
                "--out", tmp_path / "replayed")
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["cost"]["now_usd"] == 0 == again["cost_usd"]
    assert again["cost"]["recorded_usd"] == pytest.approx(first["cost"]["now_usd"])
    assert again["cost"]["samples_usd"] == pytest.approx(first["cost"]["samples_usd"])
    # nothing paid now; the samples' completion tokens as recorded, their prompt tokens were
    # not (samples.jsonl keeps a sample's completion tokens only)
    assert again["tokens"] == {"prompt": 0, "completion": 0}
    assert again["tokens_samples"] == {"prompt": None,
                                       "completion": first["tokens_samples"]["completion"]}
    r = run_cli("eval", "boxball", "--model", f"replay/{tmp_path / 'run'}", *ARGS,
                "--out", tmp_path / "replayed2")
    line = " ".join(r.stdout.split())
    had = f"${first['cost']['now_usd']:.4f}"
    assert f"cost now $0 (a replay: its replies had cost {had} when recorded)" in line, line
    assert "(prompt unknown)" in line and "cost now $" + had[1:] not in line


def test_a_recording_without_counts_has_unknown_tokens(run_cli, tmp_path):
    rec = tmp_path / "rec.jsonl"
    rec.write_text(json.dumps({"prompt": "Is it yes or no?",
                               "samples": ["<answer>yes</answer>"] * 3}) + "\n")
    r = run_cli("sample", "--model", f"replay/{rec}", "-k", "3", "--choices", "yes,no",
                "Is it yes or no?", "--json")
    assert r.returncode == 0, r.stderr
    r = run_cli("sample", "--model", f"replay/{rec}", "-k", "3", "--choices", "yes,no",
                "Is it yes or no?")
    assert r.returncode == 0, r.stderr
    assert "cost $0.0000 (a replay: its replies had cost unknown when recorded)" in \
        " ".join(r.stdout.split())
