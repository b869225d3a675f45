"""Aggregators against hand-computed cases, tie rules and abstention policies."""

import math
from collections import Counter

import numpy as np
import pytest

from ensemble.aggregators import aggregator_names, get_aggregator
from ensemble.credit import aggregator_f, majority_credit, plurality_credit, plurality_winner
from ensemble.errors import InputError
from ensemble.theory import ReportStructure, threshold


def test_plurality_clear_winner_and_invalid_ignored():
    v = get_aggregator("plurality")(["A", "B", "A", None, "C"])
    assert v.decision == "A" and v.counts == {"A": 2, "B": 1, "C": 1}
    assert v.n == 4 and v.n_invalid == 1 and v.margin == 1 and not v.tie


def test_plurality_tie_is_random_not_list_order():
    agg = get_aggregator("plurality", rng=123)
    wins = Counter(agg(["B", "A"]).decision for _ in range(400))
    assert 150 < wins["A"] < 250 and 150 < wins["B"] < 250  # both orders win about half
    a1 = get_aggregator("plurality", rng=7)
    a2 = get_aggregator("plurality", rng=7)
    assert [a1(["B", "A", "C"]).decision for _ in range(20)] == \
        [a2(["B", "A", "C"]).decision for _ in range(20)]


def test_fractional_credit_on_ties():
    v = get_aggregator("plurality", tie="fractional")(["A", "B", "C", "A", "B"])
    assert v.tie and v.credit == {"A": 0.5, "B": 0.5}


def test_single_letter_answers_survive():
    assert get_aggregator("plurality")(["A", "A", "b"]).decision == "A"


def test_majority_binary_with_abstentions():
    maj = get_aggregator("majority", invalid="abstain", tie="fractional")
    v = maj(["L", "L", None, "R", None], choices=["L", "R"])
    # n = 5 with abstentions: 2 votes for L is not a majority -> tie
    assert v.n == 5 and v.tie and v.credit == {"L": 0.5, "R": 0.5}
    v2 = get_aggregator("majority")(["L", "L", None, "R", None], choices=["L", "R"])
    assert v2.n == 3 and v2.decision == "L"
    with pytest.raises(InputError, match="invalid"):
        get_aggregator("majority", invalid="fail")(["L", None], choices=["L", "R"])


def test_random_follow_credit_is_vote_share():
    v = get_aggregator("random-follow", rng=0)(["L", "L", "R", "L"], choices=["L", "R"])
    assert v.credit == {"L": 0.75, "R": 0.25}


def test_weighted_uses_weights():
    v = get_aggregator("weighted")(["A", "B", "B"], weights=[0.9, 0.3, 0.3])
    assert v.decision == "A"
    with pytest.raises(InputError):
        get_aggregator("weighted")(["A"], weights=[-1])


@pytest.mark.parametrize("n", [3, 5])
def test_robust_rule_is_majority_below_threshold(n):
    lam = 0.9 * threshold(n)
    np.testing.assert_allclose(aggregator_f("robust", n, lam=lam), aggregator_f("majority", n))


def test_robust_rule_randomises_above_threshold():
    f = aggregator_f("robust", 5, lam=5.0)
    assert ((f > 0.01) & (f < 0.99)).any()
    v = get_aggregator("robust", lam=5.0, rng=0)(["L", "L", "R", "R", "R"], choices=["L", "R"])
    assert v.credit["L"] == pytest.approx(f[2])


def test_omniscient_needs_structure():
    with pytest.raises(InputError):
        get_aggregator("omniscient")
    # w_x = P(X=x, ω=1) − P(X=x, ω=0), X ~ Bin(3, q_ω): x = 2: 0.25·0.432 − 0.75·0.096 > 0,
    # so two reports of 1 ("L") decide L; x = 1: 0.25·0.288 − 0.75·0.384 < 0, so one decides R
    rs = ReportStructure(mu=0.25, q0=0.2, q1=0.6)
    omni = get_aggregator("omniscient", structure=rs)
    assert omni(["L", "L", "R"], choices=["L", "R"]).decision == "L"
    assert omni(["L", "R", "R"], choices=["L", "R"]).decision == "R"


def test_unknown_aggregator():
    with pytest.raises(InputError, match="unknown aggregator"):
        get_aggregator("borda")


def test_vectorised_forms_match_scalar():
    counts = np.array([[2, 2, 1], [0, 3, 2], [1, 1, 1], [0, 0, 0]])
    correct = np.array([0, 1, 2, 0])
    np.testing.assert_allclose(plurality_credit(counts, correct), [0.5, 1, 1 / 3, 0])
    w = plurality_winner(np.tile(counts[:1], (4000, 1)), rng=0)
    assert set(np.unique(w)) == {0, 1} and abs((w == 0).mean() - 0.5) < 0.05
    np.testing.assert_allclose(majority_credit([2, 1, 2], [3, 3, 4], [1, 1, 0]), [1, 0, 0.5])


# -- mixed ensembles: votes labelled by group ----------------------------------------------------
def test_pooled_rules_report_counts_per_group():
    v = get_aggregator("majority")(["L", "L", "R", None], choices=["L", "R"], groups=[0, 1, 1, 1])
    assert v.decision == "L" and v.counts == {"L": 2, "R": 1}
    assert v.group_counts == ({"L": 1}, {"L": 1, "R": 1})
    v = get_aggregator("plurality")(["a", "b", "b"], groups=[2, 0, 0])
    assert v.decision == "b" and v.group_counts == ({"b": 2}, {}, {"a": 1})
    assert get_aggregator("plurality")(["a"]).group_counts == ()
    with pytest.raises(InputError, match="label every vote"):
        get_aggregator("plurality")(["a", "b"], groups=[0])
    with pytest.raises(InputError, match="integers >= 0"):
        get_aggregator("plurality")(["a"], groups=[-1])


def test_lam_weighted_vote_by_hand():
    agg = get_aggregator("lam-weighted", lams=[2.0, 8.0])
    # 3 votes at λ = 2 (weight 4 each) against 2 at λ = 8 (16 each): the λ = 8 pair wins
    v = agg(["L", "L", "L", "R", "R"], groups=[0, 0, 0, 1, 1], choices=["L", "R"])
    assert v.decision == "R" and v.credit == {"R": 1.0} and not v.tie
    # split pair: the triple decides
    v = agg(["L", "L", "R", "R", "L"], groups=[0, 0, 0, 1, 1], choices=["L", "R"])
    assert v.decision == "L"
    # any number of options; equal weights are plurality
    v = get_aggregator("lam-weighted", lam=1.0)(["a", "c", "c", "e"])
    assert v.decision == "c"
    # rational votes outrank any finite weight; λ = 0 votes weigh nothing
    agg = get_aggregator("lam-weighted", lams=[math.inf, 50.0, 0.0])
    assert agg(["a", "b", "b", "b"], groups=[0, 1, 1, 1]).decision == "a"
    v = get_aggregator("lam-weighted", lams=[0.0, 1.0], tie="fractional")(
        ["a", "a", "a", "b", "c"], groups=[0, 0, 0, 1, 1])
    assert v.tie and v.credit == {"b": 0.5, "c": 0.5}


def test_lam_weighted_needs_lambda_and_labels():
    with pytest.raises(InputError, match="lams="):
        get_aggregator("lam-weighted")
    with pytest.raises(InputError, match="not both"):
        get_aggregator("lam-weighted", lam=1.0, lams=[1.0])
    with pytest.raises(InputError, match="groups="):
        get_aggregator("lam-weighted", lams=[1.0, 2.0])(["a", "b"])
    with pytest.raises(InputError, match="out of range"):
        get_aggregator("lam-weighted", lams=[1.0, 2.0])(["a", "b"], groups=[0, 2])
    with pytest.raises(InputError, match="lam"):
        get_aggregator("lam-weighted", lams=[1.0, -2.0])


def test_group_robust_vote_uses_the_group_rule():
    from ensemble.theory import group_robust_aggregator

    f = group_robust_aggregator([(3, 2.0), (2, 8.0)]).f
    agg = get_aggregator("robust", lams=[2.0, 8.0], rng=0)
    v = agg(["L", "L", "R", "R", "L"], groups=[0, 0, 0, 1, 1], choices=["L", "R"])
    assert v.credit["L"] == pytest.approx(f[2, 1])
    assert 0 < f[2, 1] < 1 and v.tie  # randomised here
    # seeded: the same seed, the same decisions
    a, b = (get_aggregator("robust", lams=[2.0, 8.0], rng=5) for _ in range(2))
    votes = (["L", "R", "R", "L", "R"], [0, 0, 0, 1, 1])
    assert [a(votes[0], groups=votes[1], choices=["L", "R"]).decision for _ in range(20)] == \
        [b(votes[0], groups=votes[1], choices=["L", "R"]).decision for _ in range(20)]
    # an invalid vote shrinks its group (policy "ignore"): group 1 has one valid vote
    g = group_robust_aggregator([(3, 2.0), (1, 8.0)]).f
    v = agg(["L", "L", "R", None, "R"], groups=[0, 0, 0, 1, 1], choices=["L", "R"])
    assert v.credit["L"] == pytest.approx(g[2, 0])
    # a group without valid votes drops out
    v = agg(["L", "R", "R", None, None], groups=[0, 0, 0, 1, 1], choices=["L", "R"])
    assert v.credit["L"] == pytest.approx(aggregator_f("robust", 3, lam=2.0)[1])


def test_rules_refuse_tasks_they_cannot_apply_to():
    with pytest.raises(InputError, match="two options; this task has 5"):
        get_aggregator("robust", lam=2.0, choices=["a", "b", "c", "d", "e"])
    with pytest.raises(InputError, match="two options"):
        get_aggregator("majority", n_options=5)
    with pytest.raises(InputError, match="needs the experts' rationality"):
        get_aggregator("robust", choices=["L", "R"])
    assert get_aggregator("lam-weighted", lams=[1.0], n_options=5).name == "lam-weighted"
    assert get_aggregator("robust", lam=1.0, choices=["L", "R"]).name == "robust"
    from ensemble.aggregators import aggregator_info
    from ensemble.rules import rules

    assert set(rules.names()) == set(aggregator_names())
    assert aggregator_info("robust").binary and not aggregator_info("lam-weighted").binary


def test_group_vectorised_forms():
    from ensemble.credit import (
        group_aggregator_f,
        group_credit,
        group_utility,
        lam_weighted_credit,
    )
    from ensemble.theory import expected_utility

    f = group_aggregator_f("lam-weighted", [3, 2], [2.0, 8.0])
    assert f.shape == (4, 3) and not f.flags.writeable
    np.testing.assert_array_equal(group_aggregator_f("majority", [4], [1.0]),
                                  aggregator_f("majority", 4))
    # utility for many scenarios at once equals the one-group formula, scenario by scenario
    mu = np.array([0.2, 0.5, 0.9])
    q0 = np.array([[0.1], [0.4], [0.3]])
    q1 = np.array([[0.8], [0.6], [0.35]])
    fr = group_aggregator_f("robust", [3], [4.0])
    u = group_utility(fr, mu, q0, q1, [3])
    for i in range(3):
        rs = ReportStructure(mu=mu[i], q0=q0[i, 0], q1=q1[i, 0])
        assert u[i] == pytest.approx(expected_utility(fr, rs, 3), abs=1e-14)
    np.testing.assert_allclose(group_credit(f, [[3, 0], [0, 2], [1, 1]], [1, 1, 0]),
                               [0.0, 1.0, 1.0])
    counts = np.array([[[2, 1, 0], [0, 0, 1]],   # λ = 1: two a, one b; λ = 5: one c -> c
                       [[0, 3, 0], [1, 0, 1]],   # b: 6 vs a: 10, c: 10 -> a/c tie
                       [[0, 0, 0], [0, 0, 0]]])  # no votes
    got = lam_weighted_credit(counts, [2, 0, 0], [1.0, 5.0])
    np.testing.assert_allclose(got, [1.0, 0.5, 0.0])


def test_group_utility_with_invalid_answers():
    from ensemble.credit import group_aggregator_f, group_utility, group_utility_with_invalid

    ns, lams = [2, 1], [1.0, 8.0]
    mu = np.array([0.3, 0.6])
    yes1 = np.array([[0.6, 0.8], [0.5, 0.7]])
    yes0 = np.array([[0.3, 0.1], [0.4, 0.2]])
    # without invalid answers: the plain formula
    for rule in ("majority", "lam-weighted", "robust"):
        got = group_utility_with_invalid(rule, ns, lams, mu, yes0, 1 - yes0, yes1, 1 - yes1)
        f = group_aggregator_f(rule, ns, lams)
        np.testing.assert_allclose(got, group_utility(f, mu, yes0, yes1, ns), atol=1e-12)
    # with invalid answers: against a simulation of the votes through the scalar rule
    no1, no0 = 0.6 * (1 - yes1), 0.7 * (1 - yes0)
    exact = group_utility_with_invalid("robust", ns, lams, mu, yes0, no0, yes1, no1)
    rng = np.random.default_rng(1)
    agg = get_aggregator("robust", lams=lams, rng=rng)
    labels = [0, 0, 1]
    for s in range(2):
        total, reps = 0.0, 4000
        for _ in range(reps):
            omega = int(rng.random() < mu[s])
            yes, no = (yes1, no1) if omega else (yes0, no0)
            answers = []
            for g in labels:
                u = rng.random()
                answers.append("1" if u < yes[s, g] else "0" if u < yes[s, g] + no[s, g] else None)
            v = agg(answers, groups=labels, choices=["1", "0"])
            credit = v.credit.get(str(omega), 0.0) if v.decision is not None else 0.0
            total += 2 * credit - 1
        # 4000 draws: standard error below 0.016
        assert abs(total / reps - exact[s]) < 0.05


# -- rules that weigh each sample by its logprobs ----------------------------------------------
def _box_prompt():
    from ensemble.tasks import get_task

    q = next(q for q in get_task("boxball").questions() if 0.3 < q.posterior < 0.7)
    return q.prompt


def test_weighted_draws_the_logprobs_it_reads_and_its_weights_are_a_hand_recount():
    """`Ensemble(aggregator="weighted")` without logprobs=True asks the server for them (it
    voted as plain plurality before: every weight 1); each vote weighs exp(mean token
    logprob) of the reply the server planted, and the highest summed weight decides."""
    from ensemble import Ensemble
    from ensemble.testing import SimulatedServer

    with SimulatedServer(lam1=1.0, seed=7, keep_replies=True) as srv:
        with Ensemble("openai/sim", api_base="http://sim/v1", transport=srv.transport(), n=9,
                      temperature=1.0, choices=["L", "R"], aggregator="weighted") as ens:
            d = ens.decide(_box_prompt())
        served = {i: lp for r in srv.stats.replies for i, lp in zip(r.indices, r.logprobs,
                                                                   strict=True)}
    assert sorted(served) == list(range(9))  # every reply came with its logprobs
    by_hand = []
    for s in d.samples:
        lps = [t["logprob"] for t in served[s.index]["content"]]
        by_hand.append(math.exp(sum(lps) / len(lps)))
    assert d.weights == pytest.approx(by_hand, rel=1e-12)
    assert len(set(by_hand)) > 1 and max(by_hand) < 1  # planted per sample, not all 1
    scores = Counter()
    for s, w in zip(d.samples, by_hand, strict=True):
        scores[s.answer] += w
    assert d.scores == pytest.approx(dict(scores), rel=1e-12)
    assert d.decision == max(scores, key=scores.get) and d.aggregator == "weighted"
    assert d.to_dict()["weights"] == pytest.approx(by_hand, rel=1e-12)


class _NoLogprobs:
    """A provider that cannot return logprobs: the fake expert's replies without them."""

    def __init__(self):
        from ensemble.testing import FakeExpertProvider

        self.inner = FakeExpertProvider(lam1=2.0, seed=3)
        for a in ("name", "model", "api_base", "capabilities", "endpoint", "identity",
                  "start", "aclose", "price", "count_tokens"):
            setattr(self, a, getattr(self.inner, a))

    async def complete(self, messages, params, **kw):
        from dataclasses import replace

        c = await self.inner.complete(messages, params, **kw)
        return replace(c, choices=tuple(replace(ch, logprobs=None) for ch in c.choices))


def test_a_rule_whose_logprobs_cannot_be_had_is_refused_in_one_line_never_counted_plainly():
    from ensemble import Ensemble

    with Ensemble("sim", provider=_NoLogprobs(), n=3, choices=["L", "R"],
                  aggregator="weighted") as ens:
        with pytest.raises(InputError) as e:
            ens.decide(_box_prompt())
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("weighted weighs each vote by the reply's token logprobs and 3 of 3 "
                          "replies came without the reply's token logprobs")
    with pytest.raises(InputError, match="weighted weighs each vote by the reply's token "
                                         "logprobs, so it draws logprobs: drop logprobs=False"):
        Ensemble("openai/sim", aggregator="weighted", logprobs=False)
    # the per-vote form: no evidence, no weights: refused (it used to need weights= only)
    with pytest.raises(InputError, match="give evidence="):
        get_aggregator("weighted")(["A", "B"])


def test_a_weighing_rule_declares_what_it_reads_and_decides_by_summed_shares():
    """A plug-in's soft vote: it reads the top logprobs at the answer position and each sample
    spreads its weight over the options (`Ballots.shares`), so an option sampled once can win."""
    from ensemble.aggregators import RuleBase
    from ensemble.rules import Ballots, Evidence, Requests, register_rule, rules

    @register_rule(summary="each sample's distribution over the options, summed",
                   requests=Requests(top_logprobs=2), scorable=False, name="test-soft")
    class Soft(RuleBase):
        def weigh(self, evidence, *, groups):
            shares = []
            for e in evidence:
                p = {o: math.exp(v) for o, v in e.options.items()}
                shares.append({o: v / sum(p.values()) for o, v in p.items()})
            return Ballots(tuple(1.0 for _ in evidence), tuple(shares))

    try:
        assert rules.get("test-soft").requests.sampling() == {"logprobs": True,
                                                              "top_logprobs": 2}
        ev = [Evidence(options={"A": math.log(0.55), "B": math.log(0.45)}),
              Evidence(options={"A": math.log(0.51), "B": math.log(0.49)}),
              Evidence(options={"A": math.log(0.02), "B": math.log(0.98)})]
        v = get_aggregator("test-soft")(["A", "A", "B"], evidence=ev)
        assert v.decision == "B" and v.counts == {"A": 2, "B": 1}  # 1.92 > 1.08
        assert v.scores == pytest.approx({"A": 1.08, "B": 1.92})
        with pytest.raises(InputError, match="1 of 3 replies came without the top 2 logprobs"):
            get_aggregator("test-soft")(["A", "A", "B"], evidence=[*ev[:2], Evidence()])
    finally:
        rules.remove("test-soft")


def test_the_roles_the_evals_give_rules_are_declared_and_only_built_ins_hold_them():
    """The evals ask the declarations (`RuleInfo.vote`, `baseline`, `default`), never a name:
    the main vote, the baseline and the rules scored without being asked; a rule registered
    from outside the package that declares a role does not take it."""
    from ensemble.aggregators import RuleBase
    from ensemble.evals.scoring import default_aggregators
    from ensemble.rules import aggregator_info, baseline, main_vote, register_rule, rules

    assert (main_vote(True), main_vote(False), baseline()) == ("majority", "plurality",
                                                               "random-follow")
    assert aggregator_info(main_vote(True)).binary and aggregator_info(baseline()).baseline
    assert default_aggregators([2.0], binary=True) == ["majority", "lam-weighted", "robust"]
    assert default_aggregators([2.0], binary=False) == ["plurality", "lam-weighted"]
    assert default_aggregators([None], binary=True) == ["majority"]

    @register_rule(summary="a would-be baseline", vote=True, baseline=True, default=True,
                   name="test-usurper")
    class Usurper(RuleBase):
        pass

    try:
        main_vote.cache_clear()
        baseline.cache_clear()
        assert (main_vote(False), baseline()) == ("plurality", "random-follow")
        assert "test-usurper" not in default_aggregators([2.0], binary=False)
    finally:
        rules.remove("test-usurper")
