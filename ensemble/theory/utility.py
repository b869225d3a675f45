"""Expected utility, the omniscient aggregator and regret, in ±1 units.

An aggregator is f: {0..n} -> [0, 1], the probability of deciding 1 given x reports of 1.
With w_x = P(X=x, ω=1) − P(X=x, ω=0): U(f) = Σ_x w_x (2f(x) − 1), U(opt) = Σ_x |w_x| and
R(f) = U(opt) − U(f). Binomial probabilities are computed in log space, so n = 101 and beyond
stay accurate.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, xlog1py, xlogy

from ..errors import InputError
from .structures import ReportStructure

__all__ = [
    "binom_pmf",
    "count_weights",
    "expected_utility",
    "majority_f",
    "omniscient",
    "omniscient_utility",
    "random_follow_f",
    "regret",
    "validate_f",
    "validate_n",
]


def validate_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n must be an integer >= 1, got {n!r}")
    return int(n)


def validate_f(f: ArrayLike, n: int) -> NDArray[np.float64]:
    arr = np.asarray(f, dtype=float)
    if arr.shape != (n + 1,):
        raise InputError(f"an aggregator for n = {n} needs {n + 1} values f(0..n), got {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        raise InputError("aggregator values f(x) must lie in [0, 1]")
    return arr


def binom_pmf(n: int, q: ArrayLike) -> NDArray[np.float64]:
    """P(Binomial(n, q) = x) for x = 0..n, vectorised over q: shape q.shape + (n+1,)."""
    q = np.clip(np.asarray(q, dtype=float), 0.0, 1.0)[..., None]
    x = np.arange(n + 1, dtype=float)
    logc = gammaln(n + 1) - gammaln(x + 1) - gammaln(n - x + 1)
    return np.exp(logc + xlogy(x, q) + xlog1py(n - x, -q))


def count_weights(mu: ArrayLike, q0: ArrayLike, q1: ArrayLike, n: int) -> NDArray[np.float64]:
    """w_x = μ P(X=x | ω=1) − (1−μ) P(X=x | ω=0), vectorised: shape broadcast + (n+1,)."""
    mu = np.asarray(mu, dtype=float)[..., None]
    return mu * binom_pmf(n, q1) - (1 - mu) * binom_pmf(n, q0)


def _w(rs: ReportStructure, n: int) -> NDArray[np.float64]:
    return count_weights(rs.mu, rs.q0, rs.q1, validate_n(n))


def expected_utility(f: ArrayLike, rs: ReportStructure, n: int) -> float:
    """U(f) in ±1 units."""
    w = _w(rs, n)
    return float(w @ (2 * validate_f(f, n) - 1))


def omniscient(rs: ReportStructure, n: int) -> NDArray[np.float64]:
    """The omniscient aggregator: 1 where P(ω=1 | X=x) > 1/2, 0 where < 1/2, 1/2 on ties."""
    w = _w(rs, n)
    return np.where(w > 0, 1.0, np.where(w < 0, 0.0, 0.5))


def omniscient_utility(rs: ReportStructure, n: int) -> float:
    return float(np.abs(_w(rs, n)).sum())


def regret(f: ArrayLike, rs: ReportStructure, n: int) -> float:
    """R(f, θ) = U(opt_θ) − U(f) >= 0, in ±1 units."""
    w = _w(rs, n)
    return float(np.abs(w).sum() - w @ (2 * validate_f(f, n) - 1))


def majority_f(n: int) -> NDArray[np.float64]:
    """Majority: 1 above n/2, 0 below, 1/2 on a tie."""
    n = validate_n(n)
    x = np.arange(n + 1)
    return np.where(2 * x > n, 1.0, np.where(2 * x < n, 0.0, 0.5))


def random_follow_f(n: int) -> NDArray[np.float64]:
    """Follow one expert chosen uniformly at random: f(x) = x / n."""
    n = validate_n(n)
    return np.arange(n + 1) / n
