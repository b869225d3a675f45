"""Aggregators against hand-computed cases, tie rules and abstention policies."""

from collections import Counter

import numpy as np
import pytest

from ensemble.aggregators import (
    aggregator_f,
    get_aggregator,
    majority_credit,
    plurality_credit,
    plurality_winner,
)
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
    rs = ReportStructure(mu=0.25, q0=0.2, q1=0.6)
    v = get_aggregator("omniscient", structure=rs)(["L", "L", "R"], choices=["L", "R"])
    assert v.decision in ("L", "R")


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
