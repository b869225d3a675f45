"""Stopping rules: optimality against brute force, monotonicity, lossless batches, the prior
fit, and Adaptive-Consistency's Beta rule against the `adaptiveconsistency` package."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import beta as beta_dist

from ensemble.errors import InputError
from ensemble.stopping import (
    DEFAULT_COST,
    BayesRule,
    BetaPrior,
    BetaRule,
    FixedRule,
    GridPrior,
    StopSpec,
    answer_counts,
    expected_performance,
    fit_prior,
    get_stopping_rule,
    prior_from_calibration,
)

FIXTURE = Path(__file__).parent / "fixtures" / "adaptiveconsistency_beta.json"


# -- brute force over every deterministic policy -------------------------------------------------
def _policy_value(stop, atoms, weights, N, cost):
    """Expected reward − cost × samples of a policy stop[(m, a)] (m < N; a = votes for answer
    1), by enumerating every answer sequence under each atom q of a discrete prior. Reward:
    deciding the leader is right iff it is the side of q (1/2 at q = 1/2 or at a tied stop)."""
    total = 0.0
    for q, w in zip(atoms, weights, strict=True):
        for seq in itertools.product((0, 1), repeat=N):
            prob = math.prod(q if x else 1 - q for x in seq)
            a = 0
            for m in range(N + 1):
                if m == N or stop[(m, a)]:
                    break
                a += seq[m]
            lead = 1 if 2 * a > m else (0 if 2 * a < m else None)
            if lead is None or q == 0.5:
                reward = 0.5
            else:
                reward = 1.0 if (q > 0.5) == (lead == 1) else 0.0
            total += w * prob * (reward - cost * m)
    return total


@pytest.mark.parametrize("cost", [0.0, 0.01, 0.03, 0.08])
def test_backward_induction_is_optimal_against_every_policy(cost):
    N = 4
    prior = GridPrior.of([0.15, 0.4, 0.5, 0.8], [0.4, 0.2, 0.1, 0.3])
    atoms, weights = prior.q, prior.w
    states = [(m, a) for m in range(N) for a in range(m + 1)]
    best = -math.inf
    for bits in itertools.product((False, True), repeat=len(states)):
        policy = dict(zip(states, bits, strict=True))
        best = max(best, _policy_value(policy, atoms, weights, N, cost))
    rule = BayesRule(max_n=N, prior=prior, cost=cost, pilot=0)
    ours = {(m, a): rule.stops(drawn=m, top=max(a, m - a), second=min(a, m - a))
            for m, a in states}
    assert _policy_value(ours, atoms, weights, N, cost) == pytest.approx(best, abs=1e-12)
    # its own account of itself agrees with the enumeration
    s = expected_performance(rule, prior)
    assert s.accuracy - cost * s.mean_samples == pytest.approx(best, abs=1e-12)


def test_beta_prior_posterior_quantities_match_scipy():
    prior = BetaPrior(0.7)
    pred, win = prior.state_tables(6)
    for m in range(7):
        for a in range(m + 1):
            post = beta_dist(0.7 + a, 0.7 + m - a)
            assert pred[m, a] == pytest.approx(post.mean(), rel=1e-12)
            assert win[m, a] == pytest.approx(post.sf(0.5), rel=1e-9)


def test_grid_prior_approximates_beta_prior_policy():
    # a fine grid of a Beta(0.5, 0.5) gives the same decisions as the exact Beta form
    nodes = np.sin(np.pi * (np.arange(4000) + 0.5) / 8000) ** 2
    grid = GridPrior.of(nodes, beta_dist(0.5, 0.5).pdf(nodes) * np.gradient(nodes))
    a = BayesRule(max_n=12, prior=BetaPrior(0.5), cost=0.003)
    b = BayesRule(max_n=12, prior=grid, cost=0.003)
    assert (a.table == b.table).mean() > 0.995
    assert expected_performance(a, BetaPrior(0.5)).mean_samples == pytest.approx(
        expected_performance(b, BetaPrior(0.5)).mean_samples, rel=0.02)


# -- monotonicity -------------------------------------------------------------------------------
PRIORS = [BetaPrior(0.1), BetaPrior(0.5), BetaPrior(1.0), BetaPrior(3.0),
          prior_from_calibration(3.0, np.linspace(0, 1, 41))]


def _binary_stop(rule, M):
    return {(n, a): rule.stops(drawn=n, top=a, second=n - a)
            for n in range(M + 1) for a in range((n + 1) // 2, n + 1)}


@pytest.mark.parametrize("prior", PRIORS, ids=repr)
def test_policy_is_monotone(prior):
    M = 20
    costs = [0.0005, 0.002, 0.008, 0.03]
    rules = [BayesRule(max_n=M, prior=prior, cost=c) for c in costs]
    for r in rules:
        S = r.table == 0
        n, a, b = np.meshgrid(*[np.arange(M + 1)] * 3, indexing="ij")
        valid = (b <= a) & (a + b <= n)
        # fewer samples left (more drawn, same votes) never turns a stop into a draw:
        # going on is an option whose value only grows with the budget
        later = valid[:-1] & valid[1:]
        assert not (S[:-1] & ~S[1:] & later).any()
        # a larger lead never turns a stop into a draw (binary: same drawn, one vote moves
        # from the runner-up to the leader)
        st = _binary_stop(r, M)
        for (nn, aa), stop in st.items():
            if stop and (nn, aa + 1) in st:
                assert st[(nn, aa + 1)]
    # a dearer sample never turns a stop into a draw
    for cheap, dear in itertools.pairwise(rules):
        assert not ((cheap.table == 0) & (dear.table != 0)).any()


def test_never_stops_before_the_pilot_and_always_at_max_n():
    r = BayesRule(max_n=10, prior=BetaPrior(0.05), cost=0.05, pilot=3)
    assert r.more([]) == 3 and r.more(["A"]) == 2 and r.more(["A", "A"]) == 1
    assert r.more(["A"] * 10) == 0 and r.more(["A", "B"] * 5) == 0
    assert r.more(["A"] * 12) == 0


# -- lossless batches ---------------------------------------------------------------------------
@pytest.mark.parametrize("rule", [
    BayesRule(max_n=12, prior=BetaPrior(0.3), cost=0.004),
    BayesRule(max_n=12, prior=BetaPrior(2.0), cost=0.001, pilot=3),
    BetaRule(max_n=12, threshold=0.95),
    FixedRule(max_n=12),
], ids=lambda r: r.name)
def test_batch_size_is_lossless_and_tight_for_binary_answers(rule):
    # from every binary state, no sequence of fewer than k draws reaches a stop, and (binary,
    # no invalid answers) some sequence of exactly k draws does
    M = rule.max_n
    for n in range(M):
        for a in range((n + 1) // 2, n + 1):
            k = rule.more_counts(drawn=n, top=a, second=n - a)
            if k == 0:
                continue
            assert 1 <= k <= M - n
            reach = {(a, n - a)}
            for j in range(1, k + 1):
                reach = {s for x, y in reach for s in ((x + 1, y), (x, y + 1))}
                stops = [rule.stops(drawn=n + j, top=max(s), second=min(s)) for s in reach]
                assert any(stops) == (j == k)


def test_batch_size_with_other_answers_is_lossless():
    rule = BayesRule(max_n=10, prior=BetaPrior(0.3), cost=0.004)
    g = np.random.default_rng(0)
    for _ in range(200):
        answers = list(g.choice(["A", "B", "C", None], size=int(g.integers(0, 9))))
        answers = [None if a == "None" else a for a in answers]
        k = rule.more(answers)
        if k == 0:
            continue
        # every continuation of fewer than k draws leaves the rule drawing
        for j in range(1, k):
            for tail in itertools.product(["A", "B", "C", "D", None], repeat=j):
                assert rule.more(answers + list(tail)) > 0


# -- the prior ----------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.2, 0.6, 3.0])
def test_fit_recovers_a_planted_beta_from_pilots_of_two(alpha):
    g = np.random.default_rng(1)
    q = g.beta(alpha, alpha, size=40_000)
    ones = g.binomial(2, q)
    fit = fit_prior(np.maximum(ones, 2 - ones), np.minimum(ones, 2 - ones))
    assert isinstance(fit, BetaPrior)
    # split share E[2q(1−q)] = α/(2α+1) has SE ~ 0.0025 here; α within ~4 SE of that
    assert fit.alpha == pytest.approx(alpha, rel=0.08)


def test_fit_recovers_a_planted_beta_from_uneven_counts():
    # counts of any size (a pilot plus whatever was drawn after) give the same α
    g = np.random.default_rng(2)
    q = g.beta(0.4, 0.4, size=20_000)
    m = g.integers(2, 12, size=q.size)
    ones = g.binomial(m, q)
    fit = fit_prior(np.maximum(ones, m - ones), np.minimum(ones, m - ones))
    assert fit.alpha == pytest.approx(0.4, rel=0.06)


def test_grid_fit_recovers_a_planted_u_shape_with_a_bump():
    # a box-and-ball-like spread: most questions settled (q near 0 or 1), a cluster at 0.25
    g = np.random.default_rng(3)
    true_q = np.array([0.02, 0.25, 0.75, 0.98])
    true_w = np.array([0.35, 0.15, 0.15, 0.35])
    q = g.choice(true_q, p=true_w, size=8000)
    ones = g.binomial(20, q)
    fit = fit_prior(np.maximum(ones, 20 - ones), np.minimum(ones, 20 - ones), family="grid")
    assert isinstance(fit, GridPrior)
    nodes, w = np.array(fit.q), np.array(fit.w)
    # mass in the right places: near the ends, and around 0.25 / 0.75
    assert w[(nodes < 0.08) | (nodes > 0.92)].sum() == pytest.approx(0.70, abs=0.04)
    assert w[((nodes > 0.15) & (nodes < 0.35)) | ((nodes > 0.65) & (nodes < 0.85))].sum() \
        == pytest.approx(0.30, abs=0.04)
    assert fit.mean_split() == pytest.approx(float(true_w @ (2 * true_q * (1 - true_q))),
                                             abs=0.01)


def test_fit_needs_an_informative_pilot():
    with pytest.raises(InputError, match="larger pilot"):
        fit_prior([1, 1, 0], [0, 0, 0])
    with pytest.raises(InputError, match="second <= top"):
        fit_prior([1, 2], [2, 0])


def test_prior_from_calibration_is_the_qr_pushforward():
    from ensemble.qr import psi

    p = np.array([0.1, 0.3, 0.5, 0.9])
    prior = prior_from_calibration(2.0, p)
    q = psi(p, 2.0)
    assert set(np.round(prior.q, 9)) == set(np.round(np.concatenate([q, 1 - q]), 9))
    assert sum(prior.w) == pytest.approx(1.0)
    assert prior.mean_split() == pytest.approx(float(np.mean(2 * q * (1 - q))))


# -- the Beta rule against the adaptiveconsistency package --------------------------------------
def _fixture():
    return json.loads(FIXTURE.read_text())


def test_beta_rule_equals_recorded_package_decisions():
    doc = _fixture()
    assert "adaptiveconsistency" in doc["provenance"]
    cases = doc["cases"]
    assert len(cases) > 900
    for case in cases:
        rule = BetaRule(max_n=200, threshold=case["threshold"], count_invalid=True)
        answers = case["answers"]
        assert (rule.more(answers) == 0) == case["stop"], answers
        n, top, second = answer_counts(answers, count_invalid=True)
        assert rule.probability(top=top, second=second) == pytest.approx(case["prob"],
                                                                          abs=1e-5)


def test_beta_rule_ignores_invalid_answers_by_default():
    rule = BetaRule(max_n=50)
    # the package counts the six Nones as the leading "answer" (6 to 1 stops at 0.95); we
    # count one vote for A
    assert rule.more([None] * 6 + ["A"]) > 0
    assert BetaRule(max_n=50, count_invalid=True).more([None] * 6 + ["A"]) == 0
    assert rule.more(["A", None, "A", "A", "A"]) == 0


def test_beta_rule_minimum_and_other_answers():
    rule = BetaRule(max_n=30)  # 0.95: the first possible stop is 4 agreeing answers
    assert [rule.more(["A"] * i) for i in range(6)] == [4, 3, 2, 1, 0, 0]
    # answers beyond the top two are ignored: 6 to 1 stops (P = 1 − 9/256) whatever else was
    # said, 6 to 2 does not (P = 1 − 46/512)
    assert rule.more(["A"] * 6 + ["B", "C", "D", "E"]) == 0
    assert rule.more(["A"] * 6 + ["B", "B"]) > 0


def test_beta_rule_equals_the_installed_package():
    ac = pytest.importorskip("adaptive_consistency",
                             reason="the adaptiveconsistency package is not installed "
                                    "(pip install adaptiveconsistency)")
    g = np.random.default_rng(11)
    for th in (0.7, 0.9, 0.95, 0.99):
        crit = ac.BetaStoppingCriteria(conf_thresh=th)
        ours = BetaRule(max_n=100, threshold=th, count_invalid=True)
        for _ in range(400):
            opts = ["A", "B", "C", None][: int(g.integers(2, 5))]
            answers = [opts[i] for i in g.integers(0, len(opts), size=int(g.integers(1, 40)))]
            assert (ours.more(answers) == 0) == crit.should_stop(answers)["stop"], answers


# -- interface ----------------------------------------------------------------------------------
def test_make_rule_and_spec():
    assert get_stopping_rule("fixed", max_n=5).more(["A"]) == 4
    assert get_stopping_rule("beta", max_n=20, threshold=0.9).more(["A"] * 2) == 1  # 1 − 2⁻³ < 0.9
    rule = get_stopping_rule("bayes", max_n=20, prior=BetaPrior(0.3))
    assert rule.cost == DEFAULT_COST
    spec = StopSpec("bayes", max_n=20)
    assert spec.needs_pilot and spec.first_draw() == 2
    built = spec.rule([["A", "A"], ["A", "B"], ["B", "B"], ["C", "C"]])
    assert isinstance(built, BayesRule) and isinstance(built.prior, BetaPrior)
    assert StopSpec("beta", max_n=20).first_draw() == 4
    assert StopSpec("fixed", max_n=7).first_draw() == 7


def test_target_loss_picks_the_cost():
    prior = BetaPrior(0.3)
    r = BayesRule(max_n=20, prior=prior, target_loss=0.002)
    assert r.summary.loss <= 0.002
    # a slightly dearer sample would lose more than the target
    assert BayesRule(max_n=20, prior=prior, cost=r.cost * 1.05).summary.loss > 0.002 or \
        BayesRule(max_n=20, prior=prior, cost=r.cost * 1.05).summary.mean_samples == \
        r.summary.mean_samples


def test_tables_are_cached_and_read_only():
    a = BayesRule(max_n=20, prior=BetaPrior(0.25), cost=0.003)
    b = BayesRule(max_n=20, prior=BetaPrior(0.25), cost=0.003)
    assert a.table is b.table
    with pytest.raises(ValueError):
        a.table[0, 0, 0] = 1


@pytest.mark.parametrize("bad", [
    lambda: FixedRule(max_n=0),
    lambda: BetaRule(max_n=10, threshold=0.4),
    lambda: BayesRule(max_n=10, prior=BetaPrior(0.3), cost=-1),
    lambda: BayesRule(max_n=10, prior=BetaPrior(0.3), cost=0.01, target_loss=0.01),
    lambda: BayesRule(max_n=10, prior=None),  # type: ignore[arg-type]
    lambda: BetaPrior(0),
    lambda: get_stopping_rule("sprt", max_n=10),
    lambda: StopSpec("bayes", max_n=10).build(),
    lambda: FixedRule(max_n=10).more_counts(drawn=3, top=2, second=2),
])
def test_bad_input_raises_input_error(bad):
    with pytest.raises(InputError):
        bad()


def test_bayes_on_a_handful_of_pilots_takes_the_default_prior():
    """Issue 40.4: fewer than `fit_after` (30) questions with an informative pilot, e.g. a
    fresh Ensemble's first decision, are not fitted on: two agreeing votes would put every
    question at q = 0 or 1 and the rule would stop at 2 whatever the question. The rule takes
    the spec's default prior (uniform unless given) and says so; from 30 on, the fit."""
    from ensemble.stopping import FIT_AFTER, UNIFORM, PriorUsed

    spec = StopSpec(stop="bayes", max_n=20)
    assert FIT_AFTER == 30 and spec.fit_after == 30 and spec.default_prior == UNIFORM
    one = spec.rule_from_counts([2], [0])  # one question, its pilot agreed
    assert isinstance(one, BayesRule) and one.prior == BetaPrior(1.0)
    assert one.prior_used == PriorUsed("default", BetaPrior(1.0), 1, 30)
    assert "default until 30 questions' pilots are seen (1 so far)" in str(one.prior_used)
    assert one.more(["L", "L"]) > 0 and one.more(["L"] * 4) == 0  # not 2 votes: 4
    what_a_fit_did = BayesRule(max_n=20, prior=fit_prior([2], [0]))
    assert what_a_fit_did.more(["L", "L"]) == 0
    # the pilots of 29 questions: still the default; of 30 (all agreeing): the fit
    assert spec.prior_for([2] * 29, [0] * 29).source == "default"
    fitted = spec.rule_from_counts([2] * 30, [0] * 30)
    assert fitted.prior_used.source == "fitted" and fitted.prior_used.questions == 30
    assert fitted.prior == fit_prior([2] * 30, [0] * 30)
    # pilots without 2 valid votes (invalid replies) do not count; nothing to fit: the default
    # prior, which draws on past an invalid pilot rather than stop or draw the whole budget
    none = spec.rule_from_counts([0, 1] * 20, [0, 0] * 20)
    assert none.prior_used == PriorUsed("default", UNIFORM, 0, 30)
    assert 0 < none.more([None, None]) < 18
    # another documented default: e.g. a prior from a calibration, or fitted on an earlier run
    mine = StopSpec("bayes", max_n=20, default_prior=BetaPrior(0.3), fit_after=5)
    assert mine.rule_from_counts([2, 2], [0, 0]).prior == BetaPrior(0.3)
    assert mine.prior_for([2] * 5, [0] * 5).source == "fitted"
    given = StopSpec("bayes", max_n=20, prior=BetaPrior(0.5)).rule_from_counts([2], [0])
    assert given.prior_used is None or given.prior_used.source == "given"
    assert str(StopSpec("bayes", max_n=20, prior=BetaPrior(0.5)).prior_for([2], [0])) == \
        "Beta(α, α), α = 0.5, given"


@pytest.mark.parametrize("bad", [{"fit_after": 0}, {"fit_after": 2.5},
                                 {"default_prior": "uniform"}])
def test_bad_default_prior_settings(bad):
    with pytest.raises(InputError):
        StopSpec("bayes", max_n=20, **bad)


def test_bayes_on_pilots_split_as_often_as_coin_flips_takes_the_uniform_prior():
    """Half or more of the pilots of 2 split: the Beta fit reaches its upper end (every q at
    1/2, where the rule would stop at the pilot whatever the answers), which no spread over q
    explains; the pilot's two answers are then often not the question's two leaders (many open
    answers), so the pilot says nothing about the spread and the rule takes the uniform prior:
    it goes on past the pilot on a split and stops on agreement. A third of the pilots split:
    the fitted prior."""
    from ensemble.stopping import BayesRule, StopSpec, fit_prior
    from ensemble.stopping.priors import ALPHA_MAX, BetaPrior
    from ensemble.stopping.spec import UNINFORMED

    spec = StopSpec(stop="bayes", max_n=20)
    split = [1] * 60 + [2] * 40, [1] * 60 + [0] * 40
    assert fit_prior(*split).alpha == pytest.approx(ALPHA_MAX)
    at_bound = BayesRule(max_n=20, prior=fit_prior(*split), cost=spec.cost)
    # what the fitted prior did: stop as soon as a leader shows, even on two agreeing votes
    assert at_bound.more(["7", "7"]) == 0 and at_bound.more(["7", "12", "7"]) == 0
    rule = spec.rule_from_counts(*split)
    assert isinstance(rule, BayesRule) and rule.prior == UNINFORMED == BetaPrior(1.0)
    assert rule.prior_used.source == "uninformative" and rule.prior_used.questions == 100
    assert rule.more(["7", "7"]) > 0 and rule.more(["7", "12", "7"]) > 0
    assert rule.more(["7"] * 6) == 0
    some = [1] * 30 + [2] * 70, [1] * 30 + [0] * 70
    fitted = spec.rule_from_counts(*some)
    assert isinstance(fitted, BayesRule) and fitted.prior != UNINFORMED


# -- the stop-rule interface: plans, policies, what a question has drawn -----------------------
def test_drawn_reduces_a_questions_samples_to_what_rules_read():
    from ensemble.stopping import Drawn, Observation

    d = Drawn(((Observation("A", tokens=10, cost_usd=1.0), Observation(None, tokens=5,
                                                                       cost_usd=0.5)),
               (Observation("B", tokens=7, cost_usd=2.0), Observation("A", tokens=3,
                                                                      cost_usd=2.0))),
              budgets=(4, 2))
    assert d.drawn == 4 and d.counts() == (2, 2) and d.left() == (2, 0) and d.budget == 6
    assert d.top_two() == (4, 2, 1) and d.top_two(count_invalid=True) == (4, 2, 1)
    assert d.tokens == 25 and d.cost_usd == pytest.approx(5.5)
    assert d.tallies() == {"A": 2.0, "B": 1.0}
    a, b, leaders = d.member_counts([1.0, 5.0])  # A: 1 + 5, B: 5
    assert leaders == ("A", "B") and (a, b) == ([1, 1], [0, 1])
    assert d.member_counts([1.0, 1.0])[2] == ("A", "B")
    assert d.head((1, 0)).pooled() == ["A"]
    # soft evidence: a sample adds weight x its shares; unknown tokens or dollars are unknown
    soft = Drawn(((Observation("A", shares={"A": 0.6, "B": 0.4}),
                   Observation("B", weight=0.5)),), budgets=(5,))
    assert soft.tallies() == pytest.approx({"A": 0.6, "B": 0.9})
    assert soft.tokens is None and soft.cost_usd is None
    with pytest.raises(InputError):
        Drawn(((),), budgets=(1, 2))


def test_every_table_rule_answers_next_for_one_member_or_pooled_members():
    """One member: the rule's lossless k, at most the budget left; several: while the rule
    reads the pooled votes and goes on, a round of one vote from each member with budget."""
    from ensemble.stopping import Drawn

    rules = [FixedRule(max_n=8), BetaRule(max_n=8), BayesRule(max_n=8, prior=BetaPrior(0.3))]
    for rule in rules:
        for keys in ([], ["A"], ["A", "A"], ["A", "B"], ["A", "A", "A", "A"], [None, "A"]):
            one = Drawn.of([keys], [8])
            assert rule.next(one) == (min(rule.more(keys), 8 - len(keys)),)
        pooled = Drawn.of([["A", "A"], ["A"]], [2, 6])
        k = rule.more(["A", "A", "A"])
        assert rule.next(pooled) == ((0, 1) if k else (0, 0))
    assert BetaRule(max_n=8).next(Drawn.of([["A"] * 5, ["A"]], [5, 3])) == (0, 0)


def test_the_stop_spec_as_a_plan_pilots_fits_on_its_memory_and_remembers():
    from ensemble.stopping import Drawn, FitContext, StopMemory, plan_for

    spec = StopSpec("bayes", max_n=20)
    memory = StopMemory()
    assert spec.budgets([20]) == (20,) and spec.budgets([6, 6]) == (6, 6)
    assert spec.pilot_draw(0, (20,), memory) == (2,)
    assert spec.pilot_draw(0, (6, 6), memory) == (1, 1)  # one round reaches 2 pooled votes
    assert spec.pilot_draw(0, (6, 6, 6), memory) == (1, 1, 1)
    assert spec.pilot_draw(0, (0, 6), memory) == (0, 2)  # a member without budget sits out
    ctx = FitContext(budgets=(20,), lams=(None,))
    pilots = [Drawn.of([["A", "A"]], [20]) for _ in range(10)]
    first = spec.fit(pilots, memory, ctx)
    assert first.prior_used.source == "default" and first.prior_used.questions == 10
    for p in pilots:  # a complete pilot is kept; one whose pilot is short is not
        spec.remember(memory, p, p)
    spec.remember(memory, Drawn.of([["A"]], [20]), Drawn.of([["A"]], [20]))
    assert list(memory.get("pilots:bayes")) == [(2, 0)] * 10
    now = [Drawn.of([["A", "B"]], [20])] * 5 + [Drawn.of([["B", "B"]], [20])] * 15
    later = spec.fit(now, memory, ctx)
    assert later.prior_used.source == "fitted" and later.prior_used.questions == 30
    assert later.prior == fit_prior([1] * 5 + [2] * 25, [1] * 5 + [0] * 25)
    assert spec.fit([None, *pilots], memory, ctx).prior_used.questions == 20  # None: failed
    # a rule without a prior needs no pilot to be fitted on
    beta = StopSpec("beta", max_n=20)
    assert beta.pilot_draw(0, (20,), memory) == (4,)
    assert isinstance(beta.fit([], memory, ctx), BetaRule)
    # a name stands for its plan; the cost rule's is its own spec
    from ensemble.cost.spec import CostSpec

    assert plan_for("bayes", max_n=9) == StopSpec("bayes", max_n=9)
    assert plan_for("cost", max_n=9) == CostSpec()
    with pytest.raises(InputError, match="bayes"):
        plan_for("nope", max_n=9)


def test_fixed_n_is_the_plan_that_draws_every_budget_at_once():
    from ensemble.stopping import Drawn, FitContext, StopMemory, fixed_plan

    plan = fixed_plan()
    memory = StopMemory()
    assert plan.budgets([3, 5]) == (3, 5) and plan.pilot_draw(7, (3, 5), memory) == (3, 5)
    policy = plan.fit([], memory, FitContext(budgets=(3, 5), lams=(None, None)))
    assert policy.next(Drawn.of([["A"] * 3, ["B"] * 5], [3, 5])) == (0, 0)
    assert policy.next(Drawn.of([["A"], []], [3, 5])) == (2, 5)


def test_every_stopping_and_cost_module_imports_first_in_a_fresh_process():
    """The built-in stopping rules register on the first look-up, which imports the cost
    rule's spec, which imports `ensemble.stopping`: whichever of these modules a program
    imports first, the import completes (13b89b1 broke `import ensemble.cost` that way)."""
    import subprocess
    import sys

    src = Path(__file__).resolve().parents[1] / "src"
    mods = sorted({f"ensemble.{p.parent.name}.{p.stem}".removesuffix(".__init__")
                   for d in ("stopping", "cost") for p in (src / "ensemble" / d).glob("*.py")}
                  | {"ensemble.spending", "ensemble.drawing", "ensemble.evals.costeval",
                     "ensemble.evals.adaptive"})
    code = ("import importlib, sys\n"
            f"for m in {mods!r}:\n"
            "    for k in [k for k in sys.modules if k.split('.')[0] == 'ensemble']:\n"
            "        del sys.modules[k]\n"
            "    importlib.import_module(m)\n"
            "    importlib.import_module('ensemble.stopping').plan_for('cost', max_n=3)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(src)}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert len(mods) >= 14
