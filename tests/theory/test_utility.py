"""Reproduce the paper's numbers under θ* (paper section 3.2 and appendix)."""

import math

import numpy as np
import pytest

from ensemble.errors import InputError
from ensemble.theory import (
    count_weights,
    expected_utility,
    majority_f,
    omniscient_utility,
    report_structure,
    utility_under,
)

# θ*: P(S=0, ω=0) = 3/8, P(S=1, ω=0) = 3/8, P(S=1, ω=1) = 1/4 (rows: signals; cols: ω=0, ω=1)
THETA_STAR = [[3 / 8, 0.0], [3 / 8, 1 / 4]]


def test_rational_expert_earns_half():
    rs = report_structure(THETA_STAR, math.inf)
    assert expected_utility(majority_f(1), rs, 1) == pytest.approx(0.5, abs=1e-12)


def test_one_bounded_expert_earns_about_043():
    # paper introduction: "John ... earns lower at 0.43"; exact value by hand:
    # 3/8 (1 − 2ψ(0)) + 5/8 · 0.2 (1 − 2ψ(0.4)), ψ(0) = 1/(1+e^5), ψ(0.4) = 1/(1+e)
    psi0, psi4 = 1 / (1 + math.exp(5)), 1 / (1 + math.e)
    exact = 3 / 8 * (1 - 2 * psi0) + 5 / 8 * 0.2 * (1 - 2 * psi4)
    got = utility_under(THETA_STAR, 2.5, 1).majority
    assert got == pytest.approx(exact, rel=1e-12)
    assert round(got, 2) == 0.43


def test_two_bounded_experts_omniscient_0507674():
    # paper appendix (n = 2, λ = 2.5): U(opt) ≈ 0.507674 > 0.5
    cmp_ = utility_under(THETA_STAR, 2.5, 2)
    assert round(cmp_.omniscient, 6) == 0.507674
    assert cmp_.rational_omniscient == pytest.approx(0.5)


@pytest.mark.parametrize("n", [3, 5, 7])
def test_majority_of_bounded_experts_beats_rational(n):
    cmp_ = utility_under(THETA_STAR, 2.5, n)
    assert cmp_.majority > 0.5 >= cmp_.rational_omniscient - 1e-12


def test_even_group_majority_equals_odd_below():
    # paper lemma: U(maj, 2k experts) = U(maj, 2k − 1 experts)
    for k in (1, 2, 3):
        a = utility_under(THETA_STAR, 2.5, 2 * k).majority
        b = utility_under(THETA_STAR, 2.5, 2 * k - 1).majority
        assert a == pytest.approx(b, abs=1e-12)


def test_weights_stable_for_large_n():
    w = count_weights(0.3, 0.2, 0.6, 151)
    assert np.isfinite(w).all()
    # Σ_x w_x = μ − (1 − μ)
    assert w.sum() == pytest.approx(0.3 - 0.7, abs=1e-12)
    assert omniscient_utility(report_structure([[0.5, 0.1], [0.1, 0.3]], 1.0), 101) <= 1.0


@pytest.mark.parametrize("joint,msg", [
    ([[0.5, 0.5], [0.1, 0.0]], "sums to"),
    ([[-0.1, 0.6], [0.25, 0.25]], "negative"),
    ([0.5, 0.5], "rows"),
])
def test_bad_joint_tables(joint, msg):
    with pytest.raises(InputError, match=msg):
        utility_under(joint, 1.0, 3)
