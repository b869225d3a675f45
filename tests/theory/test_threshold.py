import math

import pytest

from ensemble.theory import threshold
from ensemble.theory.threshold import threshold_margin


def test_infinite_for_small_groups():
    assert math.isinf(threshold(1)) and math.isinf(threshold(2))


def test_even_equals_odd_below_and_decreasing():
    g = [threshold(n) for n in range(3, 21)]
    for k in range(2, 11):
        assert threshold(2 * k) == threshold(2 * k - 1)
    odd = g[::2]
    assert all(a > b for a, b in zip(odd, odd[1:], strict=False))


def test_threshold_is_the_boundary_of_the_inequality():
    for n in (3, 5, 9):
        g = threshold(n)
        assert threshold_margin(g * (1 - 1e-5), n) >= 0
        assert threshold_margin(g * (1 + 1e-5), n) < 0


def test_six_significant_digits_stable_under_grid_refinement():
    # the same bisection on a 10x denser grid agrees to 6 significant digits
    for n in (3, 7):
        lo, hi = 0.3, 4.0
        while hi - lo > 1e-10:
            mid = (lo + hi) / 2
            if threshold_margin(mid, n, points=40001) >= 0:
                lo = mid
            else:
                hi = mid
        assert threshold(n) == pytest.approx(lo, rel=1e-6)


def test_reference_values():
    # computed by this engine (`ensemble theory threshold --n-max 9 --json`), cross-checked by
    # test_majority_optimal_below_threshold (LP) and the grid-refinement test above
    assert threshold(3) == pytest.approx(2.64088, rel=1e-5)
    assert threshold(5) == pytest.approx(1.73682, rel=1e-5)
    assert threshold(9) == pytest.approx(1.17745, rel=1e-5)
