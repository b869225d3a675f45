"""`Ensemble(stop="cost")`: the cost rule asks members one vote at a time through the real
wire (two simulated servers), within each member's n, and deciding again over the store asks
nothing."""

from __future__ import annotations

import pytest

from ensemble import Ensemble, Member
from ensemble.cost.spec import CostSpec
from ensemble.errors import InputError
from ensemble.testing import SimulatedServer
from ensemble.testing.expert import SimulatedExpert

CHOICES = ["red", "green", "blue"]
PROMPTS = [f"Question {i}: which colour? Answer with one of: red, green, blue"
           for i in range(30)]


def _ensemble(s1, s2, store, *, price=True, **spec):
    prices = ({"price_per_1k": (0.0, 0.15e-3)}, {"price_per_1k": (0.0, 2.5e-3)}) if price \
        else ({}, {})
    return Ensemble(members=[Member("openai/cheap", api_base=s1.base_url, n=6, temperature=1.0,
                                    lam=1.5, **prices[0]),
                             Member("openai/dear", api_base=s2.base_url, n=3, temperature=1.0,
                                    lam=6.0, **prices[1])],
                    aggregator="lam-weighted", choices=CHOICES, store=store,
                    stop=CostSpec(pilot_questions=10, **spec))


def test_cost_rule_draws_within_budgets_and_a_rerun_asks_nothing(cheap_and_dear, tmp_path):
    s1, s2 = cheap_and_dear
    before = s1.stats.requests, s2.stats.requests
    with _ensemble(s1, s2, tmp_path / "s.sqlite", value_usd=0.004) as ens:
        ds = ens.decide_many(PROMPTS)
        rule = ens.cost_memory.rule
    assert rule is not None and all(d.stop == "cost" for d in ds)
    assert not rule.two_choices  # three choices: a lone answer's other has no name
    for d in ds:
        cheap, dear = (sum(v.values()) for v in d.member_votes)
        assert cheap <= 6 and dear <= 3 and d.decision in CHOICES
    # the first 10 questions got the full pilot, 2 votes of each member
    assert all(sum(ds[i].member_votes[1].values()) >= 2 for i in range(10))
    # its prices per vote are the members' token usage at their price
    assert rule.prices[1] / rule.prices[0] == pytest.approx(2.5 / 0.15, rel=0.05)
    spent = sum(d.cost_usd for d in ds)
    asked = s1.stats.requests - before[0], s2.stats.requests - before[1]
    with _ensemble(s1, s2, tmp_path / "s.sqlite", value_usd=0.004) as ens:
        again = ens.decide_many(PROMPTS)
    assert (s1.stats.requests - before[0], s2.stats.requests - before[1]) == asked
    assert [d.decision for d in again] == [d.decision for d in ds]
    assert sum(d.cost_usd for d in again) == pytest.approx(spent)


def test_two_choices_build_a_rule_that_can_decide_the_other_one(cheap_and_dear, tmp_path):
    s1, s2 = cheap_and_dear
    prompts = [f"Question {i}: which colour? Answer with one of: red, green" for i in range(12)]
    with Ensemble(members=[Member("openai/cheap", api_base=s1.base_url, n=4, temperature=1.0,
                                  lam=1.5, price_per_1k=(0.0, 0.15e-3)),
                           Member("openai/dear", api_base=s2.base_url, n=1, temperature=1.0,
                                  lam=6.0, price_per_1k=(0.0, 2.5e-3))],
                  choices=["red", "green"], store=tmp_path / "s.sqlite",
                  stop=CostSpec(pilot_questions=10, value_usd=0.004)) as ens:
        ds = ens.decide_many(prompts)
        rule = ens.cost_memory.rule
    assert rule is not None and rule.two_choices
    assert all(d.decision in ("red", "green") for d in ds)


def test_cost_rule_without_a_price_is_one_clear_error(cheap_and_dear, tmp_path):
    s1, s2 = cheap_and_dear
    with _ensemble(s1, s2, None, price=False, value_usd=0.01) as ens, \
            pytest.raises(InputError, match="price_per_1k"):
        ens.decide_many(PROMPTS[:12])


def test_stop_cost_by_name_takes_the_default_spec():
    ens = Ensemble(members=[Member("openai/a", n=2, temperature=1.0),
                            Member("openai/b", n=1, temperature=1.0)], stop="cost")
    assert isinstance(ens.stop_spec, CostSpec) and ens.stop_spec.target_loss is None


def test_one_prompt_per_call_reuses_the_rule_until_the_data_grows(cheap_and_dear, tmp_path):
    s1, s2 = cheap_and_dear
    with _ensemble(s1, s2, tmp_path / "s.sqlite", value_usd=0.004) as ens:
        mem = ens.cost_memory
        ens.decide_many(PROMPTS[:20])
        assert mem.fitted_on == 10  # the 10 pilot questions
        ens.decide(PROMPTS[20])  # 20 decisions now: refitted on them
        assert mem.fitted_on == 20
        rule = mem.rule
        ens.decide(PROMPTS[21])  # 21 <= 22: the same rule serves again
        ens.decide_many(PROMPTS[22:26])  # 22: still
        assert mem.rule is rule
        ens.decide(PROMPTS[26])  # 26 > 22: refitted
        assert mem.rule is not rule and mem.fitted_on == 26


# -- open answers: the rule's state counts the answers the Decision counts ---------------------
OPEN_PROMPTS = [f"### Question: How many apples are in basket {i}?\n" for i in range(24)]


def test_open_answers_merged_by_a_tolerance_are_one_answer_while_drawing(tmp_path):
    from ensemble.answers import Number
    from ensemble.cost import member_counts
    from ensemble.testing.openexpert import OpenAnswers

    # the cheap member reads 3 (right most of the time, else 4.0 or 2.0), the dear one writes
    # the same answer as 3.0001: within Number(rel_tol=1e-3) they are one answer
    qs = [p.split(": ", 1)[1].strip() for p in OPEN_PROMPTS]
    cheap = SimulatedExpert(lam1=1.5, seed=1, open_answers=OpenAnswers(
        {q: 3.0 for q in qs}, accuracy=0.8))
    dear = SimulatedExpert(lam1=6.0, seed=2, open_answers=OpenAnswers(
        {q: 3.0001 for q in qs}, accuracy=1.0))
    with SimulatedServer(expert=cheap) as s1, SimulatedServer(expert=dear) as s2, Ensemble(
            members=[Member("openai/cheap", api_base=s1.base_url, n=4, temperature=1.0,
                            lam=1.5, price_per_1k=(0.0, 0.15e-3)),
                     Member("openai/dear", api_base=s2.base_url, n=2, temperature=1.0,
                            lam=6.0, price_per_1k=(0.0, 2.5e-3))],
            answer=Number(rel_tol=1e-3), store=tmp_path / "s.sqlite",
            stop=CostSpec(value_usd=0.0005, pilot=(2, 1), pilot_questions=8)) as ens:
        ds = ens.decide_many(OPEN_PROMPTS)
        rule, counts = ens.cost_memory.rule, list(ens.cost_memory.counts)
    assert rule is not None and not rule.two_choices  # open answers: not two fixed choices
    assert len(counts) == len(ds)
    spelled = 0
    for d, (a, b) in zip(ds, counts, strict=True):
        n_cheap = d.cost_rule.drawn[0]
        raw = ({s.answer for s in d.samples[:n_cheap]}, {s.answer for s in d.samples[n_cheap:]})
        spelled += "3" in raw[0] and "3.0001" in raw[1]
        # the state the rule drew by is the Decision's, over the merged answers
        merged = [[x for x, c in v.items() for _ in range(c)] for v in d.member_votes]
        assert (list(a), list(b)) == tuple(member_counts(merged, rule.lams)[:2])
    assert spelled >= 4  # pilots with two spellings of one answer
    assert sum(abs(d.decision - 3.0) < 0.01 for d in ds) >= len(ds) - 2
    # having learned from the pilots that the dear member agrees with the cheap majority, the
    # rule asks it on few later questions
    later = [sum(d.member_votes[1].values()) for d in ds[8:]]
    assert sum(later) <= len(later) // 2
