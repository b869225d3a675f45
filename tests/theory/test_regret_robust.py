"""Worst-case regret (global search) and the robust aggregator: the properties the paper proves."""

import math

import numpy as np
import pytest
from regret_oracle import dense_worst_case_regret

from ensemble.theory import (
    majority_f,
    omniscient_utility,
    random_follow_f,
    report_structure,
    robust_aggregator,
    threshold,
    worst_case_regret,
)
from ensemble.theory.structures import three_signal_reports
from ensemble.theory.utility import regret


@pytest.mark.parametrize("n,lam", [(1, 1.0), (3, 0.8), (3, 4.0), (5, 2.5)])
def test_global_search_matches_dense_grid(n, lam):
    fast = worst_case_regret(majority_f(n), lam).value
    slow = dense_worst_case_regret(majority_f(n), lam, p_points=201, simplex_points=101)
    assert fast >= slow - 1e-4  # never misses the maximum by more than 1e-4
    assert fast == pytest.approx(slow, abs=1e-4)


def test_worst_case_is_attained_by_the_reported_structure():
    wc = worst_case_regret(majority_f(3), 3.0)
    mu, q0, q1 = three_signal_reports(wc.p, wc.gamma0, wc.gamma1, 3.0)
    from ensemble.theory import ReportStructure

    r = regret(majority_f(3), ReportStructure(float(mu), float(q0), float(q1)), 3)
    assert r == pytest.approx(wc.value, abs=1e-12)
    assert wc.value > 0.1  # clearly positive: the paper's single-start code reported 0 here


@pytest.mark.parametrize("n", [3, 5])
def test_majority_optimal_below_threshold(n):
    g = threshold(n)
    for lam in (0.5 * g, 0.95 * g):
        res = robust_aggregator(n, lam)
        assert res.worst_regret == pytest.approx(res.majority_worst_regret, abs=1e-4)


@pytest.mark.parametrize("n,lam", [(3, 5.0), (5, 5.0), (5, 1.0), (4, 3.0), (2, 2.0)])
def test_robust_never_worse_than_majority_and_gap_small(n, lam):
    res = robust_aggregator(n, lam)
    assert res.worst_regret <= res.majority_worst_regret + 1e-9
    assert res.gap < 1e-4
    assert len(res.f) == n + 1 and all(0 <= v <= 1 for v in res.f)


def test_robust_beats_majority_for_n5_high_rationality():
    # paper, numerical study: for n = 5 and large λ a more complex aggregator wins
    res = robust_aggregator(5, 5.0)
    assert res.worst_regret < res.majority_worst_regret - 0.01


def test_rational_single_expert_never_beaten_at_n1():
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = rng.integers(2, 6)
        joint = rng.dirichlet(np.ones(2 * m)).reshape(m, 2)
        lam = float(rng.uniform(0, 10))
        best_bounded = omniscient_utility(report_structure(joint, lam), 1)
        rational = omniscient_utility(report_structure(joint, math.inf), 1)
        assert best_bounded <= rational + 1e-12


def test_random_follow_equals_majority_at_n1():
    assert worst_case_regret(random_follow_f(1), 2.0).value == pytest.approx(
        worst_case_regret(majority_f(1), 2.0).value)
