"""Issue 41 item 28: a count of one is said in the singular ("1 questions failed", "1 batches
submitted", "1 malformed data rows skipped", a replay "holds 1 samples", "the 1 replies so
far" were printed). Each message reached the way a user meets it: the CLI in-process against
the simulated server (real HTTP on 127.0.0.1), and a replay through `Ensemble`."""

from __future__ import annotations

import json
import re

import pytest

from ensemble import Ensemble
from ensemble.providers.replay import RecordingExhausted
from ensemble.testing import BatchPlan, FaultPlan, SimulatedServer
from ensemble.wording import counted


def test_counted_says_one_in_the_singular():
    assert counted(1, "question") == "1 question"
    assert [counted(k, "batch", "batches") for k in (0, 1, 2)] == [
        "0 batches", "1 batch", "2 batches"]
    assert counted(1, "reply", "replies") == "1 reply" and counted(3, "reply", "replies") == \
        "3 replies"


def test_a_replay_of_one_sample_holds_1_sample(tmp_path):
    rec = tmp_path / "rec.jsonl"
    rec.write_text(json.dumps({"prompt": "Yes or no?", "samples": ["<answer>yes</answer>"]}))
    with Ensemble(f"replay:{rec}", n=2, temperature=1.0, choices=["yes", "no"]) as ens, \
            pytest.raises(RecordingExhausted) as info:
        ens.decide("Yes or no?")
    msg = str(info.value)
    assert "holds 1 sample of" in msg and msg.endswith("at most 1 sample"), msg


def test_one_skipped_row_and_one_batch(tmp_path, run_cli):
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "a", "question": "Pick x or y.", "choices": "x|y", "answer": "x"}\n'
                    "{not json}\n"
                    '{"id": "b", "question": "Pick y or x.", "choices": "x|y", "answer": "y"}\n')
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.1)) as srv:
        r = run_cli("eval", "jsonl", "--data", data, "--skip-invalid", "--model",
                    "openai/sim-expert", "--api-base", srv.base_url, "--t", "1", "--n", "1",
                    "--bootstrap", "100", "--out", tmp_path / "run")
        assert r.returncode == 0, r.stderr
        assert "1 malformed data row skipped" in r.stdout + r.stderr, r.stdout
        r = run_cli("eval", "jsonl", "--data", data, "--skip-invalid", "--model",
                    "openai/sim-expert", "--api-base", srv.base_url, "--t", "1", "--n", "1",
                    "--limit", "1", "--bootstrap", "100", "--batch", "--batch-poll", "0.1",
                    "--out", tmp_path / "batch", "--json")
        assert r.returncode == 0, r.stderr
        notes = " ".join(json.loads(r.stdout)["notes"])
        assert "batch mode: 1 batch submitted" in notes, notes
        said = " ".join(r.stderr.split())
        assert "(1 request, 1 sample)" in said and ": 1 sample stored" in said, said
        # (progress fractions, "0/1 samples stored", read as "of 1": left as they are)
        assert not re.search(r"(?<![/\d])1 (samples|requests)\b", said), said


def test_a_stop_after_one_reply_and_one_failed_question(tmp_path, run_cli):
    """One request fails (500, no retry), the next is paid, and the one after it would pass
    the cap: the stop names "the 1 reply so far" and "1 question failed"."""
    with SimulatedServer(lam1=3.0, seed=2, faults=FaultPlan(first=1, kinds=("500",))) as srv:
        r = run_cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                    srv.base_url, "--t", "1", "--n", "1", "--samples", "3", "--limit", "10",
                    "--max-concurrency", "1", "--max-attempts", "1", "--bootstrap", "100",
                    "--price-per-1k-tokens", "0.5,1.5", "--max-cost", "0.2",
                    "--out", tmp_path / "run")
    assert r.returncode == 1, r.stderr
    err = " ".join(r.stderr.split())
    assert "1 reply so far" in err and "1 question failed" in err, err
    assert "1 replies" not in err and "1 questions" not in err
