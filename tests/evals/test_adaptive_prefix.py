"""A rule that says where it stops along whole orders (`PrefixPolicy`: bayes-soft) is replayed
by the evals with one call per order, and the replay equals the replay through `next`, step
by step, on a real recording: the same stops per question and order, the same votes, the same
mean samples and accuracy (issue 37's leftover: the eval replayed bayes-soft through `next`,
~150 s for 200 questions x 20 samples)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ensemble.evals.adaptive import adaptive_eval, replay
from ensemble.stopping import StopSpec
from ensemble.stopping.plan import PrefixPolicy

RECORDING = (Path(__file__).resolve().parents[1] / "bench" / "data" / "smollm2-yesno-lp-t05"
             / "recording.jsonl")
OPTIONS = ["yes", "no"]


def _recorded(questions: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, shares, correct) of the recording's first `questions` prompts x 20 samples:
    the reply's first word as yes/no (else invalid), P(option) from the answer position's top
    tokens (NaN where a sample has none), and each question's right code."""
    codes, shares, correct = [], [], []
    with open(RECORDING.with_name("yesno.jsonl")) as fh:
        target = {json.loads(x)["q"]: json.loads(x)["target"] for x in fh}
    with open(RECORDING) as fh:
        for line in list(fh)[:questions]:
            rec = json.loads(line)
            correct.append(OPTIONS.index(target[rec["prompt"].removesuffix(" Answer yes or no.")]))
            row_c, row_s = [], []
            for s in rec["samples"][:20]:
                word = (s.get("text") or "").strip().split(" ")[0].strip(".,!").lower()
                row_c.append(OPTIONS.index(word) if word in OPTIONS else -1)
                lp = s.get("lp")
                share = [math.nan, math.nan]
                if lp and lp.get("top"):
                    share = [0.0, 0.0]
                    for tok, v in lp["top"]:
                        if tok.strip().lower() in OPTIONS:
                            share[OPTIONS.index(tok.strip().lower())] += math.exp(v)
                row_s.append(share)
            codes.append(row_c)
            shares.append(row_s)
    return np.array(codes), np.array(shares), np.array(correct)


class _Stepwise:
    """The same plan, its policy asked through `next` only (as a plug-in's policy is)."""

    def __init__(self, spec: StopSpec) -> None:
        self.spec = spec
        self.stop = spec.stop
        self.fits: list = []

    def budgets(self, ns):
        return self.spec.budgets(ns)

    def pilot_draw(self, i, budgets, memory):
        return self.spec.pilot_draw(i, budgets, memory)

    def fit(self, pilots, memory, context):
        policy = self.spec.fit(pilots, memory, context)
        self.fits.append(policy)
        return _NextOnly(policy)

    def remember(self, memory, pilot, drawn):
        return self.spec.remember(memory, pilot, drawn)


class _NextOnly:
    def __init__(self, policy) -> None:
        self.policy = policy
        self.gain = policy.gain
        self.notes = policy.notes

    def next(self, drawn):
        return self.policy.next(drawn)


@pytest.mark.parametrize("questions, soft", [(60, True), (20, False)])
def test_bayes_soft_replayed_along_orders_equals_its_step_by_step_replay(questions, soft):
    codes, shares, correct = _recorded(questions)
    assert codes.shape == (questions, 20) and (codes >= 0).mean() > 0.7
    spec = StopSpec("bayes-soft", max_n=20)
    stepwise = _Stepwise(spec)
    fast = replay(codes, spec, n_options=2, orders=12, fixed_ns=(1, 3, 5), rng=3,
                  shares=shares)
    slow = replay(codes, stepwise, n_options=2, orders=12, fixed_ns=(1, 3, 5), rng=3,
                  shares=shares)
    assert all(isinstance(p, PrefixPolicy) for p in fast.rules)
    assert not any(isinstance(p, PrefixPolicy) for p in slow.rules)
    # soft evidence read (60 questions: the fit is on in most orders) or not (20: fewer than
    # the 30 pilots it fits on: the hard table)
    on = sum(p.gain.on for p in stepwise.fits)
    assert (on >= 6) if soft else (on == 0)
    np.testing.assert_array_equal(fast.used, slow.used)
    np.testing.assert_array_equal(fast.counts, slow.counts)
    for n in (1, 3, 5):
        np.testing.assert_array_equal(fast.fixed[n], slow.fixed[n])
    assert 2 < fast.used.mean() < 20  # it stops early on some, not at once on all
    a = adaptive_eval(codes, spec, correct=correct, n_options=2,
                      orders=12, fixed_ns=(3,), reps=200, rng=5, shares=shares[None])[0]
    b = adaptive_eval(codes, _Stepwise(spec), correct=correct,
                      n_options=2, orders=12, fixed_ns=(3,), reps=200, rng=5,
                      shares=shares[None])[0]
    assert a.mean_samples == b.mean_samples and a.accuracy == b.accuracy
    assert a.difference == b.difference and a.fixed == b.fixed and a.notes == b.notes
