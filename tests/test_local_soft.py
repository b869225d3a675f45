"""`soft` on the real local model (issue 37): `Ensemble("local:...", aggregator="soft")` draws
SmolLM2's answer-token logprobs from the real llama.cpp server and decides by them; the
weights and scores equal a hand recount of the top-k the server returned at each sample's
answer position (as stored, to 4 decimals)."""

from __future__ import annotations

import math

import pytest

from ensemble import Ensemble

CHOICES = ["yes", "no"]
PROMPTS = ("Is the sun hot? Answer yes or no.", "Is fire hot? Answer with only yes or no.",
           "Is ice cold? Answer yes or no.", "Is snow white? Answer yes or no.")


def _recount(lp: dict) -> dict[str, float]:
    """P(option) at the answer position, by hand: the server's top-k tokens there, each read
    as the option it spells (case and surrounding spaces aside), summed per option."""
    out: dict[str, float] = {}
    for token, logprob in lp["top"]:
        word = token.strip().lower()
        if word in CHOICES:
            out[word] = out.get(word, 0.0) + math.exp(logprob)
    return out


@pytest.mark.local_model
def test_soft_decides_on_the_real_models_logprobs(smollm2_path):
    pytest.importorskip("xllamacpp", reason="xllamacpp not installed (pip install '.[local]')")
    with Ensemble(f"local:{smollm2_path}", temperature=1.0, n=4, choices=CHOICES,
                  max_tokens=4, aggregator="soft") as ens:
        assert ens.params.logprobs and ens.params.top_logprobs == 5
        ens.aggregator.check = None  # trust the logprobs (the rule's check, off: one prompt)
        # SmolLM2 at t = 1 starts 30-45% of its replies with prose ("The sun is ...", measured
        # over 20 samples a prompt), so 4 samples all lack a yes/no about 1 time in 50: the
        # first of a few prompts whose decision has an answer is the one checked
        for prompt in PROMPTS:
            d = ens.decide(prompt)
            valid = [s for s in d.samples if s.answer is not None]
            if valid:
                break
    assert valid and all(s.answer_lp is not None and s.answer_lp.get("top") for s in valid)
    assert d.weights == (1.0,) * len(d.samples)
    want: dict[str, float] = {}
    for s in valid:
        for option, p in _recount(s.answer_lp).items():
            want[option] = want.get(option, 0.0) + p
    assert d.scores == pytest.approx(want, abs=1e-3)
    assert d.decision == max(want, key=want.get)
