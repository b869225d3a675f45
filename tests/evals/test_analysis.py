"""Estimators against exact references: brute-force subsets, full enumeration of the
multinomial law of the counts (unbiasedness), explicit delete-one jackknife, and theory."""

from itertools import combinations, permutations, product
from math import factorial

import numpy as np
import pytest

from ensemble.errors import InputError
from ensemble.evals.analysis import (
    box_utility,
    box_values,
    plurality_counts_estimate,
    plurality_exact,
    vote_values,
)
from ensemble.evals.intervals import summarise
from ensemble.theory import expected_utility, majority_f, report_structure_from_probs

# one scenario where both colours can show, one where red shows only in the right box
JOINT = np.array([[[0.18, 0.32], [0.42, 0.08]], [[0.3, 0.0], [0.3, 0.4]]])


def credit(votes, right, n_options):
    """Plurality credit of a list of votes (−1 invalid): 1/(ties) if right is among the top."""
    cnt = np.bincount([v for v in votes if v >= 0], minlength=n_options)
    if cnt.max() == 0:
        return 0.0
    top = np.flatnonzero(cnt == cnt.max())
    return (right in top) / len(top)


def subset_average(row, right, n, n_options):
    subs = list(combinations(range(len(row)), n))
    return sum(credit([row[i] for i in s], right, n_options) for s in subs) / len(subs)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_plurality_estimate_is_the_average_over_all_n_subsets(n):
    g = np.random.default_rng(3)
    codes = g.choice([-1, 0, 1, 2, 3], p=[0.1, 0.4, 0.2, 0.2, 0.1], size=(40, 8))
    right = g.integers(0, 4, size=40)
    got = vote_values(codes, right, [n], n_options=4)["plurality", n].values
    ref = [subset_average(codes[i], right[i], n, 4) for i in range(40)]
    np.testing.assert_allclose(got, ref, atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_plurality_exact_by_enumerating_answer_sequences(n):
    g = np.random.default_rng(4)
    probs = g.dirichlet(np.ones(5), size=8)  # 4 options + invalid
    right = g.integers(0, 4, size=8)
    ref = [sum(np.prod([p[s] for s in seq]) * credit([s if s < 4 else -1 for s in seq], r, 4)
               for seq in product(range(5), repeat=n)) for p, r in zip(probs, right, strict=True)]
    np.testing.assert_allclose(plurality_exact(probs, right, n), ref, atol=1e-12)


def test_plurality_estimate_is_unbiased():
    # E over the multinomial law of K = 5 answers' counts equals the exact accuracy of n fresh
    # answers, for every n <= K (enumerated exactly, no simulation)
    p = np.array([0.35, 0.3, 0.2, 0.15])  # right option 0, wrong 1 and 2, invalid
    k = 5
    configs = [c for c in product(range(k + 1), repeat=4) if sum(c) == k]
    counts = np.array(configs)
    law = np.array([factorial(k) / np.prod([factorial(x) for x in c])
                    * np.prod(p ** np.array(c)) for c in configs])
    for n in range(1, k + 1):
        est = plurality_counts_estimate(counts, np.zeros(len(configs), dtype=int), n)
        assert law @ est == pytest.approx(plurality_exact(p[None], np.array([0]), n)[0],
                                          abs=1e-12)


def test_vote_jackknife_is_the_delete_one_jackknife():
    g = np.random.default_rng(5)
    codes = g.choice([-1, 0, 1, 2], p=[0.1, 0.5, 0.3, 0.1], size=(12, 7))
    right = g.integers(0, 3, size=12)
    vals = vote_values(codes, right, [3], n_options=3)
    for key, n in ((("plurality", 3), 3), (("random-follow", 1), 1)):
        ref = []
        for row, r in zip(codes, right, strict=True):
            loo = np.array([subset_average(np.delete(row, i), r, n, 3) for i in range(7)])
            ref.append(6 / 7 * np.sum((loo - loo.mean()) ** 2))
        np.testing.assert_allclose(vals[key].cond_var(), ref, atol=1e-12)
        assert vals[key].jackknife


def test_follow_is_the_hit_rate_and_no_jackknife_when_samples_equal_n():
    codes = np.array([[0, 0, 1, -1], [2, 2, 2, 2]])
    vals = vote_values(codes, np.array([0, 2]), [1, 4], n_options=3)
    assert list(vals["random-follow", 1].values) == [0.5, 1.0]
    assert vals["plurality", 1].jackknife and not vals["plurality", 4].jackknife
    assert list(vals["plurality", 4].identical) == [False, True]


def test_box_utility_equals_theory():
    joint = np.array([[[0.6 * 0.3, 0.4 * 0.8], [0.6 * 0.7, 0.4 * 0.2]]])
    r = np.array([[0.9, 0.2]])  # P(L | red), P(L | blue)
    for n in (1, 3, 5, 4):
        rs = report_structure_from_probs(joint[0], r[0])
        ref = expected_utility(majority_f(n), rs, n)
        assert box_utility(r, joint, n)[0] == pytest.approx(ref, abs=1e-12)


def test_box_utility_with_invalid_answers_by_enumeration():
    # per colour P(L), P(R), invalid the rest; majority of valid votes, ties a coin, no valid
    # vote = wrong. Reference: enumerate every colour and answer of 3 experts.
    joint = JOINT[:1]
    a, b = np.array([[0.7, 0.1]]), np.array([[0.2, 0.6]])
    ref = 0.0
    for w in (0, 1):
        pw = joint[0, :, w].sum()
        for combo in product(range(2), repeat=3):
            pc = np.prod([joint[0, c, w] / pw for c in combo])
            for ans in product("LRI", repeat=3):
                pa = np.prod([{"L": a[0, c], "R": b[0, c], "I": 1 - a[0, c] - b[0, c]}[x]
                              for c, x in zip(combo, ans, strict=True)])
                nl, nr = ans.count("L"), ans.count("R")
                u = -1.0 if nl + nr == 0 else np.sign(nl - nr) * (1 if w == 1 else -1)
                ref += pw * pc * pa * u
    assert box_utility(a, joint, 3, r_right=b)[0] == pytest.approx(ref, abs=1e-12)
    follow = box_utility(a, joint, 1, rule="random-follow", r_right=b)[0]
    assert follow == pytest.approx(box_utility(a, joint, 1, r_right=b)[0], abs=1e-12)


def majority_estimate(counts, joint, n):
    """The per-scenario majority utility the evals report at n (what box_values computes)."""
    return box_values(counts, joint, [n])["majority", n].values


def test_box_estimate_is_unbiased_for_every_n_up_to_the_samples():
    # exact expectation over the multinomial law of each colour's K = 4 counts
    a = np.array([[0.7, 0.1], [0.6, 0.3]])
    b = np.array([[0.2, 0.6], [0.3, 0.5]])
    i = 1 - a - b
    k = 4
    trip = [(x, y, k - x - y) for x in range(k + 1) for y in range(k + 1 - x)]

    def pmf(t, p):
        return (factorial(k) / np.prod([factorial(v) for v in t])
                * np.prod([q ** v for q, v in zip(p, t, strict=True)]))

    for n in range(1, k + 1):
        exp = np.zeros(2)
        for s in range(2):
            for t1, t2 in product(trip, trip):
                pr = pmf(t1, (a[s, 0], b[s, 0], i[s, 0])) * pmf(t2, (a[s, 1], b[s, 1], i[s, 1]))
                cnt = np.zeros((2, 2, 3), dtype=int)
                cnt[s] = (t1, t2)
                cnt[1 - s] = (k, 0, 0)
                exp[s] += pr * majority_estimate(cnt, JOINT, n)[s]
        np.testing.assert_allclose(exp, box_utility(a, JOINT, n, r_right=b), atol=1e-12)
        if n > 1:  # the plug-in is biased (Jensen): the reason for the estimator
            plug = sum(pmf(t1, (a[0, 0], b[0, 0], i[0, 0])) * pmf(t2, (a[0, 1], b[0, 1], i[0, 1]))
                       * box_utility(np.array([[t1[0], t2[0]]]) / k, JOINT[:1], n,
                                     r_right=np.array([[t1[1], t2[1]]]) / k)[0]
                       for t1, t2 in product(trip, trip))
            assert abs(plug - exp[0]) > 1e-3


def test_box_estimate_draws_each_colour_without_replacement():
    cnt = np.array([[[3, 1, 1], [1, 2, 2]]])
    pools = [list("LLLRI"), list("LRRII")]
    joint = JOINT[:1]
    mu = joint[0, :, 1].sum()
    n, ref = 3, 0.0
    for w, pw in ((1, mu), (0, 1 - mu)):
        wc = joint[0, :, w] / pw
        for cols in product(range(2), repeat=n):
            nr = cols.count(0)
            vals = []
            for sr in permutations(range(5), nr):
                for sb in permutations(range(5), n - nr):
                    ans = [pools[0][x] for x in sr] + [pools[1][x] for x in sb]
                    nl, nrr = ans.count("L"), ans.count("R")
                    d = np.sign(nl - nrr)
                    vals.append(-1.0 if nl + nrr == 0 else (d if w == 1 else -d))
            ref += pw * np.prod([wc[c] for c in cols]) * np.mean(vals)
    assert majority_estimate(cnt, joint, n)[0] == pytest.approx(ref, abs=1e-12)


def test_box_jackknife_is_the_two_sample_delete_one_jackknife():
    cnt = np.array([[[3, 1, 1], [1, 2, 2]]])
    joint = JOINT[:1]
    vals = box_values(cnt, joint, [2, 4, 5])
    ref = 0.0
    for col in range(2):
        loo = []
        for cat in range(3):
            for _ in range(cnt[0, col, cat]):
                c = cnt[0].copy()
                c[col, cat] -= 1
                loo.append(majority_estimate(c[None], joint, 2)[0])
        loo = np.array(loo)
        ref += 4 / 5 * np.sum((loo - loo.mean()) ** 2)
    assert vals["majority", 2].cond_var()[0] == pytest.approx(ref, abs=1e-12)
    assert vals["majority", 4].jackknife and not vals["majority", 5].jackknife


def test_box_refuses_n_above_the_samples():
    cnt = np.array([[[3, 1, 0], [1, 2, 1]]])
    with pytest.raises(InputError, match="n = 5 needs at least 5 answers"):
        box_values(cnt, JOINT[:1], [1, 5])
    with pytest.raises(InputError, match="--samples"):
        plurality_counts_estimate(np.array([[1, 1, 0]]), np.array([0]), 3)


def test_intervals_for_the_task_shrink_to_those_for_the_questions_when_all_are_run():
    g = np.random.default_rng(6)
    easy = g.random(60)  # questions differ: P(right) from 0 to 1
    codes = np.where(g.random((60, 9)) < easy[:, None], 0, g.integers(1, 3, size=(60, 9)))
    iv = vote_values(codes, np.zeros(60, dtype=int), [3], n_options=3)["plurality", 3]
    full = summarise(iv, population=60, rng=1)
    part = summarise(iv, population=6000, rng=1)
    assert full.ci == full.ci_questions and full.sem == pytest.approx(full.sem_questions)
    # a small subset of a big task: the usual s/√Q, much wider than the answers' noise
    assert part.sem == pytest.approx(iv.values.std(ddof=1) / np.sqrt(60), rel=0.01)
    assert part.sem > 2 * part.sem_questions
    assert part.ci[0] < full.ci[0] and part.ci[1] > full.ci[1]
    assert part.ci_questions == full.ci_questions
    assert part.ci[0] == pytest.approx(part.value - 1.96 * part.sem, abs=part.sem / 4)


def test_identical_answers_have_no_noise_and_k_equal_n_falls_back_to_the_task_interval():
    codes = np.repeat(np.array([[0], [1], [0], [2]]), 3, axis=1)  # t = 0: all samples equal
    iv = vote_values(codes, np.zeros(4, dtype=int), [3], n_options=3)["plurality", 3]
    s = summarise(iv, population=4, sampled=False)
    assert s.identical and s.sem == 0 and s.ci == (0.5, 0.5) and s.questions_exact
    g = np.random.default_rng(7)
    codes = g.choice([0, 1], size=(30, 3))
    iv = vote_values(codes, np.zeros(30, dtype=int), [3], n_options=2)["plurality", 3]
    s = summarise(iv, population=30, rng=0, bounds=(0, 1))
    assert not s.questions_exact and s.ci_questions == s.ci
    assert s.sem == pytest.approx(iv.values.std(ddof=1) / np.sqrt(30))


def test_a_scenario_missing_a_question_is_left_out_with_a_warning():
    from ensemble.evals.grid import analyse
    from ensemble.evals.plan import resolve
    from ensemble.evals.spec import one_model

    plan = resolve(one_model("boxball", "m", (1.0,), (1, 3), samples=5, limit=10, seed=1))
    qs = plan.questions[1:]  # the first question failed for good
    g = np.random.default_rng(0)
    answers = np.where(g.random((1, len(qs), 5)) < 0.7, "L", "R").astype(object)
    s = analyse(plan, qs, answers)
    assert s.population.items == 9
    assert s.warnings == ["1 scenario left out: the question of a colour it can show is "
                          "missing (a vote's utility needs both)"]
