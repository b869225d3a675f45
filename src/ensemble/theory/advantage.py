"""Utility under a given signal structure: the bounded-rationality advantage (paper, sec. 3.2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from numpy.typing import ArrayLike

from ..qr import validate_lam
from .structures import report_structure, validate_joint
from .utility import expected_utility, majority_f, omniscient_utility, validate_n

__all__ = ["UtilityComparison", "utility_under"]


@dataclass(frozen=True)
class UtilityComparison:
    """Expected utilities (±1 units) of n experts with rationality λ under one signal structure."""

    n: int
    lam: float
    majority: float
    omniscient: float
    rational_omniscient: float


def utility_under(joint: ArrayLike, lam: float, n: int) -> UtilityComparison:
    """Majority and omniscient utility of λ-experts, and omniscient utility of rational experts."""
    arr = validate_joint(joint)
    lam = validate_lam(lam)
    n = validate_n(n)
    rs = report_structure(arr, lam)
    rs_inf = report_structure(arr, math.inf)
    return UtilityComparison(
        n=n,
        lam=lam,
        majority=expected_utility(majority_f(n), rs, n),
        omniscient=omniscient_utility(rs, n),
        rational_omniscient=omniscient_utility(rs_inf, n),
    )
