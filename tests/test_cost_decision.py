"""With `stop="cost"` the Decision is the cost rule's own (`ensemble.cost.choice`): the answer
more likely to be the reference given every vote drawn, the members weighed by λ through the
joint prior fitted on the pilots, not the Ensemble's aggregator over the same votes.

The members are simulated experts in-process (`server.transport()`), the store real SQLite. The
cheap member (λ = 1.5 as a Member; planted: a reading accuracy of U-shaped Beta(0.02, 0.02)
and near-certain answers once read) reads most questions either always right or always the
question's one distractor: on a trap question its five votes agree on a wrong answer; the dear
member (λ = 6, one vote) reads every question right. Plurality (5 to 1) and even the λ-weighted vote
(7.5 to 6) follow the cheap votes there; the rule, whose prior learned from the pilots that the
cheap member's agreement goes with the dear member's dissent on a share of questions, follows
the dear vote.
"""

from __future__ import annotations

import itertools

import pytest

from ensemble import Ensemble, Member
from ensemble.cost import CostRule, JointPrior, cost_choice
from ensemble.cost.spec import CostSpec
from ensemble.errors import InputError
from ensemble.spending import CostVote
from ensemble.testing import SimulatedServer
from ensemble.testing.expert import MCModel, SimulatedExpert

CHOICES = ["red", "green", "blue"]
PROMPTS = [f"Question {i}: which colour? Answer with one of: red, green, blue"
           for i in range(12)]  # every one a pilot question (_spec)


@pytest.fixture(scope="module")
def experts():
    cheap = SimulatedExpert(lam1=50.0, mc_model=MCModel(0.02, 0.02), seed=1, difficulty_seed=3)
    dear = SimulatedExpert(lam1=50.0, mc_model=MCModel(50.0, 0.01), seed=2, difficulty_seed=3)
    with SimulatedServer(expert=cheap) as s1, SimulatedServer(expert=dear) as s2:
        yield s1, s2


def _members(experts):
    s1, s2 = experts
    return [Member("openai/cheap", api_base="http://cheap/v1", transport=s1.transport(), n=5,
                   temperature=1.0, lam=1.5, price_per_1k=(0.0, 0.15e-3)),
            Member("openai/dear", api_base="http://dear/v1", transport=s2.transport(), n=1,
                   temperature=1.0, lam=6.0, price_per_1k=(0.0, 2.5e-3))]


def _spec(questions: int = 12):
    return CostSpec(value_usd=0.05, pilot=(5, 1), pilot_questions=questions)


def _ensemble(experts, store, aggregator="plurality"):
    return Ensemble(members=_members(experts), aggregator=aggregator, choices=CHOICES,
                    store=store, stop=_spec())


def _votes(d):
    """(the cheap member's answers, the dear member's answer) of a decision."""
    cheap, dear = d.member_votes
    assert sum(cheap.values()) == 5 and len(dear) == 1
    return cheap, next(iter(dear))


@pytest.mark.parametrize("aggregator", ["plurality", "lam-weighted"])
def test_the_rule_follows_the_dear_vote_that_its_aggregator_outvotes(experts, tmp_path,
                                                                     aggregator):
    s1, s2 = experts
    with _ensemble(experts, tmp_path / "s.sqlite", aggregator) as ens:
        ds = ens.decide_many(PROMPTS)
        asked = s1.stats.requests, s2.stats.requests
    traps = 0
    for d in ds:
        cheap, dear = _votes(d)
        assert d.stop == "cost" and d.aggregator == "cost"
        out = d.cost_rule
        assert out is not None and out.drawn == (5, 1) and out.aggregator == aggregator
        assert d.decision == dear and out.win > 0.8  # the rule follows the dear vote
        assert d.to_dict()["cost_rule"]["win"] == out.win
        if cheap.get(dear, 0) == 0 and len(cheap) == 1:  # five cheap votes against it
            traps += 1
            # the aggregator, reported alongside, follows them (even λ-weighted: 7.5 > 6)
            assert out.aggregator_decision == next(iter(cheap)) != d.decision
    assert 2 <= traps <= len(PROMPTS) - 2  # the planted mixture: traps and agreement

    # deciding again over the same store asks nothing and gives the same answers
    with _ensemble(experts, tmp_path / "s.sqlite", aggregator) as ens:
        again = ens.decide_many(PROMPTS)
    assert (s1.stats.requests, s2.stats.requests) == asked
    assert [(d.decision, d.cost_rule.win) for d in again] == \
        [(d.decision, d.cost_rule.win) for d in ds]


def test_one_prompt_at_a_time_async_and_the_decorator_decide_by_the_rule(experts, tmp_path):
    import asyncio

    from ensemble import vote

    store = tmp_path / "s.sqlite"
    with _ensemble(experts, store) as ens:
        ds = ens.decide_many(PROMPTS)
    trap = next(i for i, d in enumerate(ds) if d.cost_rule.aggregator_decision != d.decision)
    with _ensemble(experts, store) as ens:
        ens.decide_many(PROMPTS[:trap] + PROMPTS[trap + 1:])  # the same pilots, in its memory
        one = asyncio.run(ens.adecide(PROMPTS[trap]))
    assert one.decision == ds[trap].decision == _votes(ds[trap])[1]
    ask = vote(members=_members(experts), choices=CHOICES, store=store, stop=_spec(1))(
        lambda i: PROMPTS[i])
    with ask.ensemble:
        assert ask(trap).decision == ds[trap].decision


# -- the decision's definition over the rule's state (ensemble.cost.choice) ---------------------
@pytest.fixture(scope="module")
def rule():
    # one member, a symmetric prior: a member whose votes split is split on the reference too;
    # answers beyond two (A, B, C, ...): not two fixed choices
    prior = JointPrior.of([[0.8], [0.55]], [0.5, 0.5])
    return CostRule(prior=prior, prices=[1e-4], max_n=[6], lams=[1.0], value_usd=1.0,
                    two_choices=False)


def test_the_rule_decides_between_its_two_leaders(rule):
    c = cost_choice(rule, [["A", "B", "A", None, "A"]])
    assert c.decision == "A" and c.tied == () and c.leaders == ("A", "B")
    assert c.win["A"] == pytest.approx(rule.win([3], [1])) and c.win["A"] > 0.5
    assert c.win["B"] == pytest.approx(1 - c.win["A"])
    # invalid replies vote for nothing; a symmetric state is a tie of the two
    assert cost_choice(rule, [["A", None, "B"]]).tied == ("A", "B")
    assert cost_choice(rule, [[None, None]]).decision is None
    # one answer seen: it is the decision
    c = cost_choice(rule, [["C", None]])
    assert c.decision == "C" and c.leaders == ("C", None)


def test_a_lone_answer_the_prior_doubts_gives_way_to_the_other_of_two_options():
    # most questions are traps: the cheap member agrees on an answer the dear one rejects
    prior = JointPrior.of([[0.9, 0.05], [0.9, 0.95]], [0.8, 0.2])
    kw = dict(prior=prior, prices=[1e-6, 1e-4], max_n=[3, 1], lams=[1.5, 6.0], value_usd=1.0)
    rule = CostRule(**kw)  # two fixed choices
    votes = [["L", "L", "L"], []]
    w = rule.win([3, 0], [0, 0])
    assert w < 0.5
    c = cost_choice(rule, votes, options=["L", "R"])
    assert c.decision == "R" and c.win["R"] == pytest.approx(1 - w)
    assert rule.decide([3, 0], [0, 0]) == 2  # as the rule's own induction valued stopping
    with pytest.raises(InputError, match="two fixed choices"):
        cost_choice(rule, votes)  # built for two choices: their names are needed
    # with more options the other answer has no name: the rule knows it (two_choices=False),
    # so the one seen is decided, doubted, as its induction valued it (w), whatever options
    # are named
    more = CostRule(**kw, two_choices=False)
    for options in (["L", "R", "S"], None, ["L", "R"]):
        c = cost_choice(more, votes, options=options)
        assert c.decision == "L" and c.win == {"L": w}
    assert more.decide([3, 0], [0, 0]) == 1


def test_answers_tied_in_the_ranks_are_compared_by_the_rule_whatever_their_order(rule):
    # C ranks below the leaders: never decided, whatever its position
    for order in set(itertools.permutations(["A", "A", "A", "B", "B", "C"])):
        c = cost_choice(rule, [list(order)])
        assert c.decision == "A" and c.leaders == ("A", "B") and "C" not in c.win
    # three answers with one vote each: which two the state names depends on the order, the
    # decision does not: the rule cannot tell any of them apart
    for order in itertools.permutations(["A", "B", "C"]):
        c = cost_choice(rule, [list(order)])
        assert c.decision is None and set(c.tied) == {"A", "B", "C"}
        assert all(w == pytest.approx(0.5) for w in c.win.values())
    # A leads, B and C tie for second: the group is all three, and A beats both
    for order in set(itertools.permutations(["A", "A", "B", "C"])):
        c = cost_choice(rule, [list(order)])
        assert c.decision == "A" and set(c.win) == {"A", "B", "C"}
        assert c.win["A"] == pytest.approx(rule.win([2], [1]))


def test_a_tie_of_the_rule_is_broken_by_the_ensembles_tie_rule(rule):
    picks = set()
    for seed in range(8):
        v = CostVote(rule, tie="random", rng=seed)(["A", "B", "C"], groups=[0, 0, 0])
        assert v.tie and v.decision in {"A", "B", "C"} and v.rule == "cost"
        picks.add(v.decision)
    assert len(picks) > 1  # a seeded coin, not list order
    v = CostVote(rule, tie="fractional", rng=0)(["B", "A"], groups=[0, 0])
    assert v.credit == {"A": 0.5, "B": 0.5}
    v = CostVote(rule, tie="random", rng=0)(["A", "A", "A", "B", "C"], groups=[0] * 5)
    assert v.decision == "A" and not v.tie and v.credit == {"A": 1.0}
    with pytest.raises(InputError, match="invalid"):
        CostVote(rule, invalid="fail")(["A", None], groups=[0, 0])


def test_a_fresh_ensembles_cost_rule_does_not_believe_its_first_votes():
    """Issue 40.4: a fresh Ensemble(stop="cost") fitted its joint prior on the one decision's
    pilot and reported `win 0.9999999` after two agreeing votes. Until `pilot_questions`
    decisions are in it decides with the default joint prior (the members read the same
    question: the strongest member's q uniform, the other's following under quantal
    response), and the Decision says so; its win is what that prior supports (at most 0.87
    here), not certainty."""
    from ensemble.tasks import get_task

    question = min(get_task("boxball").questions(), key=lambda x: abs(x.posterior - 0.53))

    async def run(seed: int):
        cheap = SimulatedServer(lam1=2.0, seed=seed)
        dear = SimulatedServer(lam1=8.0, seed=seed + 100)
        members = [Member("openai/cheap", api_base="http://cheap/v1",
                          transport=cheap.transport(), n=6, temperature=1.0, lam=2.0,
                          price_per_1k=(0.0, 0.15e-3)),
                   Member("openai/dear", api_base="http://dear/v1", transport=dear.transport(),
                          n=2, temperature=1.0, lam=8.0, price_per_1k=(0.0, 2.5e-3))]
        async with Ensemble(members=members, stop="cost", choices=["L", "R"]) as ens:
            return await ens.adecide(question.prompt)

    import asyncio

    for seed in range(4):
        d = asyncio.run(run(seed))
        assert d.stop == "cost" and d.cost_rule is not None and d.cost_rule.win is not None
        assert d.cost_rule.win < 0.95, d.cost_rule
        assert d.stop_prior is not None and d.stop_prior.source == "default"
        assert d.stop_prior.questions == 1 and d.stop_prior.needed == 30
        assert d.stop_prior.prior.members == 2 and len(d.stop_prior.prior.w) == 41
