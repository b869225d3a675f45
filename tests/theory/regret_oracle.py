"""A slow reference for the worst-case regret search (tests and tests/bench/bench_theory.py):
a much denser plain grid over the three-signal structures, then a local polish from its best
point. Independent of the search in `ensemble.theory.regret` but for the regret of one
structure (`regret_batch`) and the grid (`structure_grid`)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize

from ensemble.theory.regret import regret_batch, structure_grid
from ensemble.theory.structures import three_signal_reports

Array = NDArray[np.float64]


def _to_params(u: Array) -> tuple[Array, Array, Array]:
    """The unit cube onto (p, γ0, γ1) with γ0 + γ1 <= 1: γ0 = a, γ1 = (1 − a) b."""
    u = np.clip(u, 0.0, 1.0)
    return u[..., 0], u[..., 1], (1.0 - u[..., 1]) * u[..., 2]


def _from_params(p: float, g0: float, g1: float) -> Array:
    b = g1 / (1.0 - g0) if g0 < 1.0 else 0.0
    return np.array([p, g0, min(max(b, 0.0), 1.0)])


def dense_worst_case_regret(f: ArrayLike, lam: float, *, p_points: int = 401,
                            simplex_points: int = 201) -> float:
    """The largest regret of aggregator `f` (f[k]: P(report 1 | k votes for 1), ±1 units) over
    a dense grid of structures, polished by Nelder-Mead."""
    farr = np.asarray(f, dtype=float)
    n = farr.size - 1
    P, G0, G1 = structure_grid(p_points, simplex_points)
    best, best_u = -math.inf, None
    chunk = 200_000
    for s in range(0, P.size, chunk):
        mu, q0, q1 = three_signal_reports(P[s:s + chunk], G0[s:s + chunk], G1[s:s + chunk], lam)
        r = regret_batch(farr, mu, q0, q1, n)
        i = int(np.argmax(r))
        if r[i] > best:
            best = float(r[i])
            best_u = _from_params(float(P[s + i]), float(G0[s + i]), float(G1[s + i]))

    def neg(u: Array) -> float:
        p, g0, g1 = _to_params(np.asarray(u))
        mu, q0, q1 = three_signal_reports(p, g0, g1, lam)
        return -float(regret_batch(farr, mu, q0, q1, n))

    res = minimize(neg, best_u, method="Nelder-Mead",
                   options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000})
    return max(best, -float(res.fun))
