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


def test_bootstrap_sem_is_the_binomial_sem_of_the_exact_accuracy():
    # each bootstrap term is a Bernoulli(A) draw (random question, random subset, random
    # tie-break), so the replicate means are Binomial(Q, A) / Q: SEM = sqrt(A (1 − A) / Q)
    g = np.random.default_rng(5)
    codes = g.choice([0, 1, 2, 3, 4], p=[0.4, 0.3, 0.1, 0.1, 0.1], size=(80, 8))
    correct = np.zeros(80, dtype=int)
    exact = exact_plurality(codes, correct, 3, 5)
    e = bootstrap_vote_accuracy(codes, correct, [3], n_options=5, reps=3000, rng=2)[3]
    ref = np.sqrt(exact * (1 - exact) / 80)
    assert e["plurality"].sem == pytest.approx(ref, rel=0.08)  # 3000 reps: ~1.3% rel. error


def test_box_utility_with_invalid_answers_by_enumeration():
    # one scenario; per colour P(L), P(R), invalid the rest; majority of valid votes, ties a
    # coin, no valid vote = wrong. Reference: enumerate every colour and answer of 3 experts.
    from itertools import product

    joint = np.array([[[0.18, 0.32], [0.42, 0.08]]])
    a, b = np.array([[0.7, 0.1]]), np.array([[0.2, 0.6]])
    ref = 0.0
    for w in (0, 1):
        pw = joint[0, :, w].sum()
        for combo in product(range(2), repeat=3):  # colours
            pc = np.prod([joint[0, c, w] / pw for c in combo])
            for ans in product("LRI", repeat=3):
                pa = np.prod([{"L": a[0, c], "R": b[0, c], "I": 1 - a[0, c] - b[0, c]}[x]
                              for c, x in zip(combo, ans)])
                nl, nr = ans.count("L"), ans.count("R")
                if nl + nr == 0:
                    u = -1.0
                else:
                    d = np.sign(nl - nr)
                    u = d if w == 1 else -d
                ref += pw * pc * pa * u
    assert box_utility(a, joint, 3, r_right=b)[0] == pytest.approx(ref, abs=1e-12)
