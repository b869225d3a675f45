"""Expected utility, the omniscient aggregator and regret, in ±1 units.

An aggregator is f: {0..n} -> [0, 1], the probability of deciding 1 given x reports of 1.
With w_x = P(X=x, ω=1) − P(X=x, ω=0): U(f) = Σ_x w_x (2f(x) − 1), U(opt) = Σ_x |w_x| and
R(f) = U(opt) − U(f). Binomial probabilities are computed in log space, so n = 101 and beyond
stay accurate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, xlog1py, xlogy

from ..errors import InputError
from ._checks import validate_n
from .structures import ReportStructure

__all__ = [
    "binom_pmf",
    "count_weights",
    "expected_utility",
    "group_regret",
    "group_utility",
    "group_weights",
    "majority_f",
    "omniscient",
    "omniscient_utility",
    "random_follow_f",
    "regret",
    "validate_f",
    "validate_n",
]


def validate_f(f: ArrayLike, n: int) -> NDArray[np.float64]:
    arr = np.asarray(f, dtype=float)
    if arr.shape != (n + 1,):
        raise InputError(f"an aggregator for n = {n} needs {n + 1} values f(0..n), got {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        raise InputError("aggregator values f(x) must lie in [0, 1]")
    return arr


def binom_pmf(n: int, q: ArrayLike) -> NDArray[np.float64]:
    """P(Binomial(n, q) = x) for x = 0..n, vectorised over q: shape q.shape + (n+1,)."""
    qq = np.clip(np.asarray(q, dtype=float), 0.0, 1.0)[..., None]
    x = np.arange(n + 1, dtype=float)
    logc = gammaln(n + 1) - gammaln(x + 1) - gammaln(n - x + 1)
    return np.exp(logc + xlogy(x, qq) + xlog1py(n - x, -qq))


def count_weights(mu: ArrayLike, q0: ArrayLike, q1: ArrayLike, n: int) -> NDArray[np.float64]:
    """w_x = μ P(X=x | ω=1) − (1−μ) P(X=x | ω=0), vectorised: shape broadcast + (n+1,).

    The one-group case of `group_weights`.
    """
    return group_weights(mu, np.asarray(q0, dtype=float)[..., None],
                         np.asarray(q1, dtype=float)[..., None], (n,))


def group_weights(mu: ArrayLike, q0: ArrayLike, q1: ArrayLike, ns: Sequence[int]
                  ) -> NDArray[np.float64]:
    """w_x = P(X = x, ω=1) − P(X = x, ω=0) for every count vector x = (x_1, ..., x_G).

    Given ω the counts are independent Binomial(n_g, q_{g,ω}). `q0`, `q1` have shape (..., G),
    `mu` broadcasts against (...,); the result has shape (..., ∏(n_g + 1)) with the count
    vectors flattened in C order (reshape to (..., n_1+1, ..., n_G+1) to index f[x_1]...[x_G]).
    """
    mu = np.asarray(mu, dtype=float)
    q0 = np.asarray(q0, dtype=float)
    q1 = np.asarray(q1, dtype=float)
    if q0.shape[-1:] != (len(ns),) or q1.shape[-1:] != (len(ns),):
        raise InputError(f"q0 and q1 need a last axis with one entry per group ({len(ns)})")
    p1 = p0 = None
    for g, n in enumerate(ns):
        b1 = binom_pmf(n, q1[..., g])
        b0 = binom_pmf(n, q0[..., g])
        if p1 is None or p0 is None:
            p1, p0 = b1, b0
        else:
            p1 = (p1[..., :, None] * b1[..., None, :]).reshape(*np.broadcast_shapes(
                p1.shape[:-1], b1.shape[:-1]), -1)
            p0 = (p0[..., :, None] * b0[..., None, :]).reshape(*np.broadcast_shapes(
                p0.shape[:-1], b0.shape[:-1]), -1)
    assert p1 is not None and p0 is not None
    m = mu[..., None]
    return m * p1 - (1 - m) * p0


def group_utility(f: ArrayLike, mu: ArrayLike, q0: ArrayLike, q1: ArrayLike,
                  ns: Sequence[int]) -> NDArray[np.float64]:
    """U(f) = Σ_x w_x (2 f(x) − 1) in ±1 units, vectorised over structures (scenarios).

    `f` has shape (n_1+1, ..., n_G+1) (or is flat in C order); `q0`, `q1` have shape
    (..., G) (per-group probabilities of reporting 1 given ω = 0, 1) and `mu` shape (...).
    Returns shape (...). With G = 1 this is `expected_utility` for many structures.
    """
    w = group_weights(mu, q0, q1, ns)
    farr = np.asarray(f, dtype=float).reshape(-1)
    if farr.size != w.shape[-1]:
        raise InputError(f"f has {farr.size} entries; groups of sizes {list(ns)} need "
                         f"{w.shape[-1]} (shape {tuple(n + 1 for n in ns)})")
    return w @ (2 * farr - 1)


def group_regret(f: ArrayLike, mu: ArrayLike, q0: ArrayLike, q1: ArrayLike,
                 ns: Sequence[int]) -> NDArray[np.float64]:
    """R(f, θ) = Σ_x |w_x| − U(f) >= 0 in ±1 units, vectorised like `group_utility`."""
    w = group_weights(mu, q0, q1, ns)
    farr = np.asarray(f, dtype=float).reshape(-1)
    if farr.size != w.shape[-1]:
        raise InputError(f"f has {farr.size} entries; groups of sizes {list(ns)} need "
                         f"{w.shape[-1]}")
    return np.abs(w).sum(axis=-1) - w @ (2 * farr - 1)


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
