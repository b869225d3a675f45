"""Replay of recorded samples (`replay/<path>`): a finished run's tables again from its
samples.jsonl with no request sent, the minimal JSONL recording, and one clear error past the
end of a recording."""

from __future__ import annotations

import json

import pytest

from ensemble import Ensemble
from ensemble.cli import main
from ensemble.providers.replay import RecordingExhausted, ReplayProvider, load_recording
from ensemble.testing import SimulatedServer

COMMON = ["--t", "1", "--n", "1", "3", "--samples", "5", "--limit", "8", "--json",
          "--adaptive", "bayes", "beta"]


def _eval(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["eval", "boxball", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_replay_reproduces_a_finished_run_without_a_request(tmp_path, capsys):
    with SimulatedServer(lam1=3.0, seed=5) as srv:
        first = _eval(capsys, "--model", "openai/sim-expert", "--api-base", srv.base_url,
                      "--out", str(tmp_path / "run"), "--price-per-1k-tokens", "0.5,1.5",
                      *COMMON)
        sent = srv.stats.requests
        again = _eval(capsys, "--model", f"replay/{tmp_path / 'run'}", "--out",
                      str(tmp_path / "replayed"), *COMMON)
        assert srv.stats.requests == sent  # the replay sent nothing
    assert again["served_by"] == "replay"
    # the fixed-n table, its contrasts and the stopping rules replayed on it: identical
    for key in ("results", "contrasts", "adaptive"):
        assert again[key] == first[key], key
    assert {r["stop"] for r in again["adaptive"]} == {"bayes", "beta"}
    # the recorded costs travel with the samples; nothing is paid now (issue 41 item 16)
    assert again["cost"]["samples_usd"] == pytest.approx(first["cost_usd"])
    assert again["cost"]["recorded_usd"] == pytest.approx(first["cost_usd"])
    assert again["cost_usd"] == 0
    recorded = [json.loads(x)
                for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    replayed = [json.loads(x)
                for x in (tmp_path / "replayed" / "samples.jsonl").read_text().splitlines()]
    assert [(r["id"], r["sample"], r["text"]) for r in recorded] == \
        [(r["id"], r["sample"], r["text"]) for r in replayed]


def test_past_the_end_of_a_recording_is_one_clear_error(tmp_path, capsys):
    with SimulatedServer(lam1=3.0) as srv:
        _eval(capsys, "--model", "openai/sim-expert", "--api-base", srv.base_url, "--out",
              str(tmp_path / "run"), *COMMON)
    capsys.readouterr()
    rc = main(["eval", "boxball", "--model", f"replay/{tmp_path / 'run'}", "--t", "1", "--n",
               "1", "--samples", "7", "--limit", "8", "--out", str(tmp_path / "more")])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "Traceback" not in err and len(err.splitlines()) == 1
    assert "holds 5 samples" in err and "never invents" in err


def test_minimal_jsonl_recording_serves_sample_i_as_recorded_sample_i(tmp_path):
    rec = tmp_path / "rec.jsonl"
    rec.write_text("\n".join(json.dumps(d) for d in [
        {"prompt": "Is it yes or no?", "samples": ["<answer>yes</answer>", "<answer>no</answer>",
                                                    {"text": "<answer>no</answer>",
                                                     "tokens": 3, "cost_usd": 0.5}]},
        {"id": "q2", "t": 0.7, "samples": ["<answer>yes</answer>"] * 4},
    ]) + "\n")
    (tmp_path / "questions.jsonl").write_text(json.dumps({"id": "q2", "prompt": "Second?"}))
    recording = load_recording(f"replay/{rec}")
    assert len(recording.get("Is it yes or no?", 0.3) or ()) == 3  # no t: every temperature
    assert recording.get("Second?", 1.0) is None and len(recording.get("Second?", 0.7) or ()) == 4
    with Ensemble(f"replay/{rec}", n=3, temperature=1.0, choices=["yes", "no"],
                  store=tmp_path / "s.sqlite") as ens:
        d = ens.decide("Is it yes or no?")
        assert [s.answer for s in d.samples] == ["yes", "no", "no"] and d.decision == "no"
    with Ensemble(f"replay:{rec}", n=4, temperature=1.0, choices=["yes", "no"]) as ens, \
            pytest.raises(RecordingExhausted, match="holds 3 samples"):
        ens.decide("Is it yes or no?")
    with Ensemble(f"replay/{rec}", n=1, temperature=1.0, choices=["yes", "no"]) as ens, \
            pytest.raises(RecordingExhausted, match="holds no samples"):
        ens.decide("Never recorded?")


def test_a_mixed_run_is_replayed_member_by_member(tmp_path):
    (tmp_path / "questions.jsonl").write_text(json.dumps({"id": "a", "prompt": "P?"}) + "\n")
    (tmp_path / "samples.jsonl").write_text("\n".join(json.dumps(
        {"id": "a", "t": 1.0, "sample": i, "text": f"<answer>{x}</answer>", "member": m,
         "tokens": 2, "cost_usd": None})
        for m, xs in (("cheap", "LLR"), ("dear", "R")) for i, x in enumerate(xs)) + "\n")
    with pytest.raises(Exception, match="mixed run: name its member"):
        ReplayProvider(f"replay/{tmp_path}")
    with pytest.raises(Exception, match="no member 'other'"):
        ReplayProvider(f"replay/{tmp_path}#other")
    cheap = ReplayProvider(f"replay/{tmp_path}#cheap")
    assert [s.text for s in cheap.recording.get("P?", 1.0) or ()] == \
        ["<answer>L</answer>", "<answer>L</answer>", "<answer>R</answer>"]


def test_a_recordings_compact_logprobs_are_served_back_when_asked(tmp_path):
    """A recording's per-sample "lp" reaches the samples of a request that asks for logprobs
    (as drawn: the same answer span and top-k), not one that does not; a recording without
    them refuses a request for them in one line instead of serving samples without."""
    import asyncio

    from ensemble.sampling.parsing import choice_parser
    from ensemble.sampling.sampler import Sampler
    from ensemble.sampling.types import SampleRequest

    lp = {"s": "Yes", "at": 0, "lp": [-0.2], "top": [["Yes", -0.2], ["No", -1.8]],
          "trace": [3, -0.4, 1.2, 1.2, 1.2]}
    rec = tmp_path / "rec.jsonl"
    rec.write_text(json.dumps({"prompt": "Is it? Answer yes or no.", "t": 1.0, "samples": [
        {"text": "Yes.", "tokens": 3, "lp": lp}, {"text": "No", "tokens": 1, "lp": None}]}) + "\n"
        + json.dumps({"prompt": "Bare?", "samples": ["yes", "no"]}) + "\n")
    parse = choice_parser(["yes", "no"])

    async def draw(prompt, **params):
        async with Sampler(f"replay/{rec}", store=None) as s:
            rows = await s.sample([SampleRequest.of(prompt, temperature=1.0, k=1, **params)],
                                  parser=parse)
            return rows[0][0]

    got = asyncio.run(draw("Is it? Answer yes or no.", logprobs=True, top_logprobs=5))
    assert got.answer == "yes" and got.answer_lp == lp
    assert asyncio.run(draw("Is it? Answer yes or no.")).answer_lp is None
    with pytest.raises(RecordingExhausted, match="holds no logprobs"):
        asyncio.run(draw("Bare?", logprobs=True))
