"""Soft votes (issue 37): `soft`, `confidence` and `deepconf` through `Ensemble` against the
simulated server, their weights recounted by hand from the logprobs the server planted, the
no-signal fallback on the simulator's noise beliefs, and deepconf's refusal on short replies."""

from __future__ import annotations

import json
import math

import pytest

from ensemble import Ensemble
from ensemble.errors import InputError
from ensemble.soft import agreement_pairs, fit_temperature, signal_z
from ensemble.testing import ChainBeliefs, SimulatedServer


def _question(box_questions):
    return next(q for q in box_questions if 0.6 < q.posterior < 0.7)


def _spread(box_questions, k=12):
    """k questions whose posteriors spread over (0.1, 0.9): the signal check compares
    samples across questions of different difficulty, as a run's do."""
    qs = sorted((q for q in box_questions if 0.1 < q.posterior < 0.9), key=lambda q: q.posterior)
    return [qs[i * (len(qs) - 1) // (k - 1)] for i in range(k)]


def _planted(srv, k):
    """{token: prob} of the answer token of the last k samples the server served."""
    lps = [lp for r in srv.stats.replies for lp in r.logprobs][-k:]
    return [{d["token"]: math.exp(d["logprob"]) for d in lp["content"][0]["top_logprobs"]}
            for lp in lps]


def test_soft_scores_are_a_recount_of_the_planted_beliefs(box_questions):
    """Until its samples have shown a signal `soft` counts hard votes, and says so; trusting
    the logprobs, its scores are the sums of each sample's planted belief (hand recount, to
    the 4 decimals stored)."""
    q = _question(box_questions)
    with SimulatedServer(lam1=1.0, seed=2, keep_replies=True) as srv, \
            Ensemble("openai/sim-expert", api_base=srv.base_url, temperature=1.0, n=7,
                     aggregator="soft", choices=["L", "R"], transport=srv.transport()) as ens:
        first = ens.decide(q.prompt)
        assert "not yet shown a signal" in " ".join(first.notes)
        assert first.scores == pytest.approx({a: float(c) for a, c in first.votes.items()})
        ens.aggregator.check = None  # trust the logprobs (the rule's check, off)
        d = ens.decide(q.prompt)
        planted = _planted(srv, 7)
    assert not d.notes and d.weights == (1.0,) * 7
    for option in ("L", "R"):
        assert d.scores[option] == pytest.approx(sum(p[option] for p in planted), abs=1e-3)
    assert d.decision == max(d.scores, key=d.scores.get)


def test_confidence_weights_are_softmax_of_the_answers_logprob(box_questions):
    q = _question(box_questions)
    with SimulatedServer(lam1=1.0, seed=4, keep_replies=True) as srv, \
            Ensemble("openai/sim-expert", api_base=srv.base_url, temperature=1.0, n=5,
                     aggregator="confidence", choices=["L", "R"],
                     transport=srv.transport()) as ens:
        ens.aggregator.check = None
        d = ens.decide(q.prompt)
        planted = _planted(srv, 5)
    answers = [s.answer for s in d.samples]
    own = [p[a] for p, a in zip(planted, answers, strict=True)]
    assert d.weights == pytest.approx(tuple(p / max(own) for p in own), abs=1e-3)


def test_noise_beliefs_leave_soft_a_plurality(box_questions):
    """On the simulator's noise beliefs the check never turns on: every decision is the hard
    vote, with a note saying why."""
    with SimulatedServer(lam1=1.0, seed=5, beliefs=ChainBeliefs(mode="noise")) as srv, \
            Ensemble("openai/sim-expert", api_base=srv.base_url, temperature=1.0, n=5,
                     aggregator="soft", choices=["L", "R"], transport=srv.transport()) as ens:
        ds = [ens.decide(other.prompt) for other in _spread(box_questions, 16)]
    assert not ens.aggregator.check.on
    assert all(d.scores == pytest.approx({a: float(c) for a, c in d.votes.items()}) for d in ds)
    assert "no signal" in " ".join(ds[-1].notes)


def test_deepconf_is_refused_on_replies_of_a_few_tokens(box_questions):
    q = _question(box_questions)
    with SimulatedServer(lam1=1.0) as srv, \
            Ensemble("openai/sim-expert", api_base=srv.base_url, temperature=1.0, n=3,
                     aggregator="deepconf", choices=["L", "R"],
                     transport=srv.transport()) as ens, \
            pytest.raises(InputError, match="median of 2 tokens"):
        ens.decide(q.prompt)


def test_the_signal_statistic_and_the_label_free_temperature():
    assert agreement_pairs(["a", "a", "b", None], [0.9, 0.8, 0.6, 0.99]) == [
        (0.9, 0.5), (0.8, 0.5), (0.6, 0.0)]
    together = [[(0.9, 1.0), (0.3, 0.0)], [(0.8, 0.9), (0.2, 0.1)], [(0.7, 1.0), (0.4, 0.0)]]
    assert signal_z(together) > 1.5 and signal_z([[(0.5, 0.5)] * 10]) == 0.0
    # confidences that pick out the pseudo-label win at a small T
    conf = [[-0.1, -3.0, -3.0]] * 4
    answers = [["a", "b", "b", "a", "a", "a"]] * 4
    assert fit_temperature(conf, answers, n=3) == 2.0  # the largest T at which "a" wins


def test_serve_with_the_soft_rule_votes_on_the_planted_beliefs(box_questions):
    """`ensemble serve` with `aggregator: soft` answers through the rule: the served ensemble
    draws the logprobs it reads from the simulated upstream (a rule whose logprobs were
    missing would refuse the request)."""
    import openai

    from ensemble.serve import VotingServer, parse_config

    q = _question(box_questions)
    with SimulatedServer(lam1=1.0, seed=3, keep_replies=True) as up:
        cfg = parse_config({"port": 0, "models": {"soft": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 5,
            "temperature": 1.0, "choices": ["L", "R"], "aggregator": "soft"}}})
        with VotingServer(cfg) as srv:
            c = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
            raw = c.chat.completions.with_raw_response.create(model="soft", messages=[
                {"role": "user", "content": q.prompt}])
            doc = raw.parse().model_extra["ensemble"]
        asked = [r for r in up.stats.replies]
    assert doc["aggregator"] == "soft" and asked
    assert sum(doc["votes"].values()) == 5 and doc["decision"] in ("L", "R")
    assert all(r.logprobs for r in asked)  # drawn with the logprobs the rule reads
    # the reply says how the rule weighed the vote: a fresh rule's first decision is counted
    # as hard votes (its signal check has too few samples), and it says so
    assert doc["weights"] == [1.0] * 5
    assert doc["scores"] == {a: float(k) for a, k in doc["votes"].items()}
    assert len(doc["notes"]) == 1 and "counted as hard votes" in doc["notes"][0]
    assert raw.headers["x-ensemble-notes"] == doc["notes"][0]
    assert json.loads(raw.headers["x-ensemble-scores"]) == doc["scores"]


def test_the_held_out_gain_turns_a_misleading_soft_vote_off():
    """Confidence that goes with agreement can still mislead: a rule whose weighed vote of the
    first half agrees less with the second half's plurality than the plain count does is
    counted as hard votes, and says why."""
    from ensemble.soft import MIN_GAINS, SignalCheck, heldout_gain

    answers = ["a", "a", "b", "a", "a", "b"]
    fooled = [{"a": 0.1}, {"a": 0.1}, {"b": 5.0}, None, None, None]  # b over-weighed
    assert heldout_gain(answers, [{"a": 1.0}, {"a": 1.0}, {"b": 1.0}] + [None] * 3) == 0.0
    assert heldout_gain(answers, fooled) == -1.0  # hard: a, as the second half; weighed: b
    assert heldout_gain(answers[:3], fooled[:3]) is None
    check = SignalCheck()
    for _ in range(MIN_GAINS):  # covariance strongly positive, held-out gain negative
        check.add([(0.9, 1.0), (0.1, 0.0), (0.8, 1.0), (0.2, 0.0)], gain=-0.5)
    assert check.z > 3.09 and not check.on
    assert "agree less with the other half" in check.note("soft")
