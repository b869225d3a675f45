"""Worst-case regret of an aggregator over all conditionally i.i.d. signal structures.

By the paper's dimension-reduction lemma every feasible report structure for λ > 0 comes from a
structure with at most three posteriors {0, p, 1}, parametrised by (p, γ0, γ1). The worst case is
found globally: a dense vectorised grid over (p, γ0, γ1), then a vectorised pattern search that
zooms in around the best few grid points (robust to the kinks |w_x| puts into the regret, where
gradient or single-start local optimisers stall; the paper's own code reported 0 at some λ where
the worst-case regret is clearly positive). λ = 0 and λ = ∞ use the same family (the lemma's
representation also covers these limits: ψ is constant, resp. a step, in the posterior).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..qr import validate_lam
from .structures import three_signal_reports
from .utility import count_weights, validate_f

__all__ = ["WorstCase", "candidates", "regret_batch", "structure_grid", "worst_case_regret"]


@dataclass(frozen=True)
class WorstCase:
    """The worst-case regret (±1 units) of an aggregator and the structure attaining it."""

    value: float
    p: float
    gamma0: float
    gamma1: float
    mu: float
    q0: float
    q1: float

    def argmax(self) -> dict[str, float]:
        return {"p": self.p, "gamma0": self.gamma0, "gamma1": self.gamma1,
                "mu": self.mu, "q0": self.q0, "q1": self.q1}


def regret_batch(f: NDArray[np.float64], mu: ArrayLike, q0: ArrayLike, q1: ArrayLike,
                 n: int) -> NDArray[np.float64]:
    """R(f, θ) for many report structures at once."""
    w = count_weights(mu, q0, q1, n)
    return np.abs(w).sum(axis=-1) - w @ (2 * f - 1)


def structure_grid(p_points: int = 81, simplex_points: int = 41
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """A grid over (p, γ0, γ1) with γ0 + γ1 <= 1, boundaries and p = 1/2 included."""
    p = np.linspace(0.0, 1.0, p_points)
    if p_points % 2 == 0:
        p = np.sort(np.append(p, 0.5))
    s = np.linspace(0.0, 1.0, simplex_points)
    g0, g1 = np.meshgrid(s, s, indexing="ij")
    keep = g0 + g1 <= 1.0 + 1e-12
    g0, g1 = g0[keep], g1[keep]
    P = np.repeat(p, g0.size)
    G0 = np.tile(g0, p.size)
    G1 = np.tile(g1, p.size)
    return P, G0, G1


def _to_params(u: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
    """Map the unit cube to (p, γ0, γ1): γ0 = a, γ1 = (1 − a) b (onto the simplex)."""
    u = np.clip(u, 0.0, 1.0)
    return u[..., 0], u[..., 1], (1.0 - u[..., 1]) * u[..., 2]


def _from_params(p: NDArray[np.float64], g0: NDArray[np.float64], g1: NDArray[np.float64]
                 ) -> NDArray[np.float64]:
    with np.errstate(invalid="ignore", divide="ignore"):
        b = np.where(g0 < 1.0, g1 / np.where(g0 < 1.0, 1.0 - g0, 1.0), 0.0)
    return np.stack([p, g0, np.clip(b, 0.0, 1.0)], axis=-1)


def candidates(f: NDArray[np.float64], lam: float, n: int, *, top: int = 6,
               grid: tuple[int, int] = (61, 31), zoom_steps: int = 14
               ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The `top` locally-refined structures of largest regret: (params (k, 3), regrets (k,))."""
    P, G0, G1 = structure_grid(*grid)
    mu, q0, q1 = three_signal_reports(P, G0, G1, lam)
    r = regret_batch(f, mu, q0, q1, n)
    order = np.argsort(r)[::-1]
    # keep distinct starting points (not all neighbours of one peak)
    starts: list[int] = []
    seen: list[NDArray[np.float64]] = []
    pts = np.stack([P, G0, G1], axis=-1)
    for i in order:
        if len(starts) >= top:
            break
        if all(np.abs(pts[i] - s).max() > 0.1 for s in seen):
            starts.append(int(i))
            seen.append(pts[i])
    u = _from_params(P[starts], G0[starts], G1[starts])
    best = r[starts]
    h = np.full(u.shape[0], 1.0 / (grid[1] - 1))
    offs = np.array(np.meshgrid(*[np.linspace(-1, 1, 5)] * 3, indexing="ij")).reshape(3, -1).T
    for _ in range(zoom_steps):
        trial = np.clip(u[:, None, :] + h[:, None, None] * offs[None, :, :], 0.0, 1.0)
        tp, t0, t1 = _to_params(trial)
        mu, q0, q1 = three_signal_reports(tp, t0, t1, lam)
        rt = regret_batch(f, mu, q0, q1, n)
        j = np.argmax(rt, axis=1)
        rows = np.arange(u.shape[0])
        improved = rt[rows, j] > best
        u = np.where(improved[:, None], trial[rows, j], u)
        best = np.maximum(best, rt[rows, j])
        h = np.where(improved & (j != offs.shape[0] // 2), h, h / 2.0)
    p, g0, g1 = _to_params(u)
    return np.stack([p, g0, g1], axis=-1), best


def worst_case_regret(f: ArrayLike, lam: float, *, n: int | None = None) -> WorstCase:
    """max over c.i.i.d. structures of R(f, θ) for experts with rationality λ (ψ_λ units).

    `f` has n + 1 entries f(0..n). Returns the value (±1 units) and the maximising structure.
    """
    lam = validate_lam(lam)
    farr = np.asarray(f, dtype=float)
    n = farr.size - 1 if n is None else n
    farr = validate_f(farr, n)
    params, vals = candidates(farr, lam, n)
    i = int(np.argmax(vals))
    p, g0, g1 = params[i]
    mu, q0, q1 = three_signal_reports(p, g0, g1, lam)
    value = max(float(vals[i]), 0.0)
    return WorstCase(value, float(p), float(g0), float(g1), float(mu), float(q0), float(q1))


def dense_worst_case_regret(f: ArrayLike, lam: float, *, p_points: int = 401,
                            simplex_points: int = 201) -> float:
    """A slow reference: a much denser plain grid followed by a local polish (for benchmarks/tests)."""
    from scipy.optimize import minimize

    farr = np.asarray(f, dtype=float)
    n = farr.size - 1
    P, G0, G1 = structure_grid(p_points, simplex_points)
    best = -math.inf
    best_u = None
    chunk = 200_000
    for s in range(0, P.size, chunk):
        mu, q0, q1 = three_signal_reports(P[s:s + chunk], G0[s:s + chunk], G1[s:s + chunk], lam)
        r = regret_batch(farr, mu, q0, q1, n)
        i = int(np.argmax(r))
        if r[i] > best:
            best = float(r[i])
            best_u = _from_params(P[s + i], G0[s + i], G1[s + i])

    def neg(u: NDArray[np.float64]) -> float:
        p, g0, g1 = _to_params(np.asarray(u))
        mu, q0, q1 = three_signal_reports(p, g0, g1, lam)
        return -float(regret_batch(farr, mu, q0, q1, n))

    res = minimize(neg, best_u, method="Nelder-Mead",
                   options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000})
    return max(best, -float(res.fun))
