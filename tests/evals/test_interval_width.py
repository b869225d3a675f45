"""No zero-width interval for sampled answers (issue 41 items 8 and 33): when every item has
the same value and no noise is measured, the bootstrap's interval is a point up to rounding,
and the Wilson fallback must still apply (`[0.600, 0.600]` with SEM 0.0000 came from a
`ci[0] == ci[1]` check missing by one ulp); and a difference of exactly 0 prints as 0, never
-0.0000."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble.evals.analysis import ItemValues
from ensemble.evals.intervals import summarise


def _flat(value: float, items: int) -> ItemValues:
    """`items` items of one value each, with one answer each (no noise measurable)."""
    return ItemValues(np.full(items, value), np.zeros((items, 1)), np.zeros((items, 1)),
                      False, np.ones(items, dtype=bool))


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (-1.0, 1.0)])
@pytest.mark.parametrize("items", [1, 2, 3, 5, 7, 10, 31, 216])
@pytest.mark.parametrize("value", [0.6, 0.2, 1 / 3, 0.7, 0.1 + 0.2])
def test_sampled_items_of_one_value_get_a_wilson_interval(value, items, bounds):
    s = summarise(_flat(value, items), population=216, rng=0, bounds=bounds)
    assert s.sem > 0 and s.ci[1] - s.ci[0] > 1e-6, (s.ci, s.sem)
    assert s.ci[0] <= value <= s.ci[1]


def test_a_difference_of_rounding_noise_is_zero_not_minus_zero():
    a, b = _flat(0.1 + 0.2, 30), _flat(0.3, 30)  # equal but for the last bit
    diff = b.minus(a, same_answers=True)
    assert (diff.values < 0).all()  # -5.6e-17 on every item
    s = summarise(diff, population=216, rng=0, bounds=(-1.0, 1.0), level=False)
    assert s.value == 0 and s.ci == (0, 0) and s.sem == 0
    assert f"{s.value:+.4f} [{s.ci[0]:.3f}, {s.ci[1]:.3f}]" == "+0.0000 [0.000, 0.000]"
