"""Bootstrap estimates against exact values on small synthetic cases."""

from itertools import combinations
from math import comb

import numpy as np
import pytest

from ensemble.theory import expected_utility, majority_f, report_structure_from_probs
from evals.analysis import bootstrap_vote_accuracy, box_utility, box_utility_bootstrap


def exact_plurality(codes, correct, n, n_options):
    """Mean over all n-subsets of each question's answers, random tie-break (exact)."""
    accs = []
    for row, c in zip(codes, correct):
        tot = 0.0
        subs = list(combinations(range(len(row)), n))
        for s in subs:
            cnt = np.bincount([row[i] for i in s if row[i] >= 0], minlength=n_options)
            if cnt.max() == 0:
                continue
            top = np.flatnonzero(cnt == cnt.max())
            tot += (c in top) / len(top)
        accs.append(tot / len(subs))
    return float(np.mean(accs))


@pytest.mark.parametrize("n", [1, 3, 5])
def test_bootstrap_matches_exact_subset_average(n):
    g = np.random.default_rng(3)
    codes = g.choice([-1, 0, 1, 2], p=[0.1, 0.5, 0.25, 0.15], size=(60, 7))
    correct = g.integers(0, 3, size=60)
    exact = exact_plurality(codes, correct, n, 3)
    est = bootstrap_vote_accuracy(codes, correct, [n], n_options=3, reps=4000, rng=1)[n]
    e = est["plurality"]
    # the estimate is within 3 Monte-Carlo standard errors of the exact subset average
    assert abs(e.value - exact) < 3 * e.sem / np.sqrt(4000) + 0.004
    assert e.ci[0] < exact < e.ci[1]
    follow = est["random-follow"].value
    assert follow == pytest.approx(float(np.mean(codes == correct[:, None])), abs=0.01)


def test_box_utility_equals_theory():
    # one scenario: prior 0.4, red rates 0.8 (left) and 0.3 (right)
    joint = np.array([[[0.6 * 0.3, 0.4 * 0.8], [0.6 * 0.7, 0.4 * 0.2]]])
    r = np.array([[0.9, 0.2]])  # P(L | red), P(L | blue)
    for n in (1, 3, 5, 4):
        rs = report_structure_from_probs(joint[0], r[0])
        ref = expected_utility(majority_f(n), rs, n)
        assert box_utility(r, joint, n)[0] == pytest.approx(ref, abs=1e-12)


def test_box_bootstrap_point_is_exact_and_error_shrinks():
    joint = np.array([[[0.18, 0.32], [0.42, 0.08]]])
    small = box_utility_bootstrap(np.array([[9, 2]]), np.array([[10, 10]]), joint, [3], reps=500)
    big = box_utility_bootstrap(np.array([[90, 20]]), np.array([[100, 100]]), joint, [3],
                                reps=500)
    assert small[3]["majority"].value == pytest.approx(big[3]["majority"].value)
    assert big[3]["majority"].sem < small[3]["majority"].sem / 2
    binom = comb(3, 2)
    assert binom == 3
