"""The cost rule over members: planted-truth checks (its joint prior recovers a planted one;
what it expects of itself under the prior is what a simulation measures), whom it asks, and
bad input."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble.cost import CostRule, JointPrior, fit_joint_prior, member_counts
from ensemble.errors import InputError

# easy questions, traps where the cheap member agrees on a distractor, and split ones
NODES = np.array([[0.9, 0.97], [0.2, 0.93], [0.55, 0.75]])
WEIGHTS = np.array([0.7, 0.2, 0.1])
PLANTED = JointPrior.of(NODES, WEIGHTS)
PRICES = [0.06, 1.0]  # per vote: the expensive member costs 16.7 cheap ones
LAMS = [1.5, 6.0]


def _questions(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """q per question (labels flipped at random: the prior is symmetric) and the reference."""
    k = rng.choice(len(WEIGHTS), p=WEIGHTS, size=n)
    q = NODES[k]
    flip = rng.random(n) < 0.5
    return np.where(flip[:, None], 1 - q, q), np.where(flip, 0, 1)  # 1: answer 1 is right


def _simulate(rule: CostRule, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Run the rule's policy on n questions drawn from the planted prior, vote by vote:
    (right per question, dollars per question)."""
    g = np.random.default_rng(seed)
    q, ref = _questions(n, g)
    act, win = rule.policy()
    G = len(rule.max_n)
    a = np.zeros((n, G), dtype=int)
    b = np.zeros((n, G), dtype=int)
    cost = np.zeros(n)
    stride = rule.states.stride
    active = np.ones(n, dtype=bool)
    while active.any():
        m = a + b
        s = ((m * (m + 1) // 2 + a) * stride).sum(axis=1)
        who = np.where(active, act[s], -1)
        active &= who >= 0
        for member in range(G):
            sel = who == member
            vote1 = g.random(sel.sum()) < q[sel, member]
            a[sel, member] += vote1
            b[sel, member] += ~vote1
            cost[sel] += rule.prices[member]
    m = a + b
    s = ((m * (m + 1) // 2 + a) * stride).sum(axis=1)
    decide1 = win[s] >= 0.5
    right = np.where(win[s] == 0.5, 0.5, (decide1 == (ref == 1)).astype(float))
    return right, cost


@pytest.mark.parametrize("value", [3.0, 12.0, 40.0])
def test_expected_accuracy_and_cost_match_simulation(value):
    rule = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=value)
    right, cost = _simulate(rule, 40_000, seed=int(value))
    se_acc = right.std() / np.sqrt(right.size)
    se_cost = cost.std() / np.sqrt(cost.size)
    assert abs(right.mean() - rule.summary.accuracy) < 4 * se_acc + 1e-9
    assert abs(cost.mean() - rule.summary.mean_cost_usd) < 4 * se_cost + 1e-9
    assert rule.summary.mean_cost_usd == pytest.approx(
        np.dot(rule.summary.mean_samples, PRICES))


def test_fitted_joint_prior_recovers_a_planted_one():
    g = np.random.default_rng(3)
    q, _ = _questions(6000, g)
    n = np.array([12, 8])
    a = g.binomial(n, q)
    fit = fit_joint_prior(a, n - a)
    fq, fw = fit.nodes()
    # label each node by the expensive member's favourite (the reference) and compare the
    # mixture's moments with the planted ones
    up = fq[:, 1] > 0.5
    qc = np.where(up, fq[:, 0], 1 - fq[:, 0])
    qe = np.where(up, fq[:, 1], 1 - fq[:, 1])
    assert fw @ qc == pytest.approx(WEIGHTS @ NODES[:, 0], abs=0.02)
    assert fw @ qe == pytest.approx(WEIGHTS @ NODES[:, 1], abs=0.02)
    assert fw @ (qc < 0.5) == pytest.approx(0.2, abs=0.03)  # the traps
    # what the rule expects under the fitted prior is close to under the planted one
    kw = dict(prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=12.0)
    fitted, planted = CostRule(prior=fit, **kw), CostRule(prior=PLANTED, **kw)
    assert fitted.summary.accuracy == pytest.approx(planted.summary.accuracy, abs=0.01)


def test_a_split_cheap_vote_calls_the_expensive_member():
    rule = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=4.0)
    assert rule.next_member([0, 0], [0, 0]) == 0           # start cheap
    assert rule.next_member([1, 0], [1, 0]) == 1           # cheap split: ask the dear one
    assert rule.next_member([2, 0], [0, 0]) is None        # cheap agree: decide
    # worth more, a right decision buys the dear vote even after two agreeing cheap ones
    dearer = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=12.0)
    assert dearer.next_member([2, 0], [0, 0]) == 1
    assert rule.next_member([1, 0], [1, 0], [True, False]) in (0, None)  # no budget left
    # a dear vote outweighs cheap ones: the trap says the cheap majority may be wrong
    assert rule.decide([2, 0], [1, 1]) == 2
    # the same prior with a cheap member as dear as the other: never worth asking first
    flat = CostRule(prior=PLANTED, prices=[1.0, 1.0], max_n=[8, 3], lams=LAMS, value_usd=12.0)
    assert flat.next_member([0, 0], [0, 0]) == 1


def test_target_loss_is_met_under_the_prior():
    rule = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, target_loss=0.005)
    assert rule.summary.loss <= 0.005 + 1e-12
    assert rule.summary.reference_accuracy == pytest.approx(PLANTED.accuracy_alone(1, LAMS))
    fixed = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, target_loss=0.01,
                     reference="fixed")
    assert fixed.summary.loss <= 0.01 + 1e-12
    assert fixed.summary.reference_accuracy > rule.summary.reference_accuracy


def test_member_counts_label_the_leaders_by_weighted_votes():
    a, b, leaders = member_counts([["x", "x", "y", None], ["y"]], [1.0, 6.0])
    assert leaders == ("y", "x") and a == [1, 1] and b == [2, 0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(prices=[1.0], max_n=[3, 3], value_usd=1.0), "one price"),
    (dict(prices=[1.0, 1.0], max_n=[3], value_usd=1.0), "most votes"),
    (dict(prices=[1.0, 1.0], max_n=[3, 3]), "value_usd"),
    (dict(prices=[1.0, 1.0], max_n=[3, 3], value_usd=1.0, target_loss=0.1), "value_usd"),
    (dict(prices=[1.0, 1.0], max_n=[3, 3], value_usd=-1.0), "value_usd"),
    (dict(prices=[1.0, 1.0], max_n=[3, 3], value_usd=1.0, reference="x"), "reference"),
    (dict(prices=[1.0, 1.0], max_n=[200, 200], value_usd=1.0), "states"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(InputError, match=match):
        CostRule(prior=PLANTED, **kwargs)


def test_a_decision_rests_on_at_least_one_vote():
    # votes worth far less than their price: the rule still asks once, the cheapest member
    rule = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=0.01)
    assert rule.next_member([0, 0], [0, 0]) == 0
    assert rule.next_member([1, 0], [0, 0]) is None
    assert sum(rule.summary.mean_samples) == pytest.approx(1.0)
