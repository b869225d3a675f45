"""A member the cost rule's pilot gives no vote is priced before its first sample (issue 40.2's
defect): one vote of the other members' mean length (completion tokens) at its own
`price_per_1k`, with the prompt's tokens; its own samples' mean cost replaces the estimate
once they are in. Two simulated members in-process, the store real SQLite."""

from __future__ import annotations

import pytest

from ensemble import Ensemble, Member
from ensemble.cost import JointPrior
from ensemble.cost.spec import CostSpec
from ensemble.errors import InputError
from ensemble.providers.registry import provider_for
from ensemble.sampling.online import prompt_tokens

CHOICES = ["red", "green", "blue"]
PROMPTS = [f"Question {i}: which colour? Answer with one of: red, green, blue"
           for i in range(12)]
CHEAP, DEAR = (0.0, 0.15e-3), (0.5e-3, 2.5e-3)  # USD per 1k (prompt, completion) tokens


def _members(cheap_and_dear, dear_price=DEAR):
    s1, s2 = cheap_and_dear
    extra = {} if dear_price is None else {"price_per_1k": dear_price}
    return [Member("openai/cheap", api_base="http://cheap/v1", transport=s1.transport(), n=6,
                   temperature=1.0, lam=1.5, price_per_1k=CHEAP),
            Member("openai/dear", api_base="http://dear/v1", transport=s2.transport(), n=3,
                   temperature=1.0, lam=6.0, **extra)]


def test_a_member_without_pilot_votes_is_priced_at_its_rates_for_the_others_length(
        cheap_and_dear, tmp_path):
    spec = CostSpec(pilot=(2, 0), pilot_questions=10, value_usd=0.004)
    with Ensemble(members=_members(cheap_and_dear), choices=CHOICES, store=tmp_path / "s.sqlite",
                  stop=spec) as ens:
        ds = ens.decide_many(PROMPTS)
        first = ens.cost_memory.rule
        mem = ens.cost_memory
        assert first is not None and all(d.decision in CHOICES for d in ds)
        # the cheap member's price is its pilot votes' mean cost; their mean length prices
        # the dear member's vote at the dear rates, with the prompts' tokens
        cheap_tokens = first.prices[0] / (CHEAP[1] / 1000)
        provider = provider_for("openai/dear", ens.members[1].options)
        prompt = sum(prompt_tokens(provider, ({"role": "user", "content": p},))
                     for p in PROMPTS) / len(PROMPTS)
        assert first.prices[1] == pytest.approx(
            (DEAR[0] * round(prompt) + DEAR[1] * round(cheap_tokens)) / 1000, rel=1e-9)
        assert first.prices[1] > DEAR[1] * cheap_tokens / 1000  # the prompt is paid for too
        # once the dear member's own samples are in, their mean cost is its price
        dear_votes = sum(d.cost_rule.drawn[1] for d in ds)
        own = mem.price(1)
        assert dear_votes > 0 and own is not None and own != first.prices[1]
        ens.decide_many([f"Another question {i}: red, green or blue?" for i in range(3)])
        assert ens.cost_memory.rule.prices[1] == pytest.approx(own, rel=1e-12)


def test_an_unknown_price_or_length_is_one_clear_error(cheap_and_dear, tmp_path):
    spec = CostSpec(pilot=(2, 0), pilot_questions=10, value_usd=0.004)
    with Ensemble(members=_members(cheap_and_dear, dear_price=None), choices=CHOICES,
                  store=tmp_path / "s.sqlite", stop=spec) as ens, \
            pytest.raises(InputError, match="member 1's price per vote.*price_per_1k"):
        ens.decide_many(PROMPTS)
    # a given prior draws no pilot: nothing tells a vote's length
    given = CostSpec(prior=JointPrior.of([[0.9, 0.95], [0.3, 0.9]]), value_usd=0.004)
    with pytest.raises(InputError, match="given prior draws no pilot.*prices="):
        Ensemble(members=_members(cheap_and_dear), choices=CHOICES, stop=given)
