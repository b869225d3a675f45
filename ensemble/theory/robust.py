"""The optimal robust (minimax-regret) aggregator for n experts with rationality λ.

R(f, θ) is linear in f for each fixed structure θ, so min_f max_θ R(f, θ) is a linear program in
(f, t) with one constraint per structure. It is solved by constraint generation: an LP (HiGHS)
over a working set of structures, then the structures of largest regret for the current f (found
by the global search of `regret.candidates`) are added, until the upper bound (the worst-case
regret of the returned f) and the LP's lower bound agree within `tol`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from ..qr import validate_lam
from .regret import candidates, regret_batch, structure_grid, worst_case_regret
from .structures import three_signal_reports
from .utility import count_weights, majority_f, validate_n

__all__ = ["RobustResult", "robust_aggregator"]


@dataclass(frozen=True)
class RobustResult:
    """The minimax-regret aggregator f(0..n) with its certificate (all regrets in ±1 units)."""

    n: int
    lam: float
    f: tuple[float, ...]
    worst_regret: float  # upper bound: worst-case regret of f (global search)
    lower_bound: float  # LP value over the working set: no aggregator does better
    majority_worst_regret: float
    iterations: int

    @property
    def gap(self) -> float:
        return self.worst_regret - self.lower_bound


def _lp(w: NDArray[np.float64], n: int) -> tuple[NDArray[np.float64], float]:
    from scipy.optimize import linprog

    # minimise t  s.t.  Σ|w_j| − Σ_x w_jx (2 f_x − 1) <= t  for every structure j
    m = w.shape[0]
    A = np.hstack([-2.0 * w, -np.ones((m, 1))])
    b = -np.abs(w).sum(axis=1) - w.sum(axis=1)
    c = np.zeros(n + 2)
    c[-1] = 1.0
    bounds = [(0.0, 1.0)] * (n + 1) + [(None, None)]
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:  # pragma: no cover - HiGHS solves these small LPs
        raise RuntimeError(f"robust LP failed: {res.message}")
    return np.clip(res.x[:-1], 0.0, 1.0), float(res.x[-1])


def _swap(mu, q0, q1):  # type: ignore[no-untyped-def]
    """The ω-swapped structure: also feasible, with X -> n − X."""
    return 1 - mu, 1 - q1, 1 - q0


def robust_aggregator(n: int, lam: float, *, tol: float = 1e-6, max_iter: int = 60
                      ) -> RobustResult:
    """The minimax-regret aggregator for n c.i.i.d. experts with rationality λ (ψ_λ units).

    Cached: repeated calls with the same (n, λ) are free.
    """
    return _robust(validate_n(n), validate_lam(lam), float(tol), int(max_iter))


@lru_cache(maxsize=512)
def _robust(n: int, lam: float, tol: float, max_iter: int) -> RobustResult:
    maj = majority_f(n)
    maj_worst = worst_case_regret(maj, lam).value
    P, G0, G1 = structure_grid(41, 21)
    mu, q0, q1 = three_signal_reports(P, G0, G1, lam)
    W = count_weights(mu, q0, q1, n)
    f = maj
    upper, lower = math.inf, 0.0
    best_f, best_upper = maj, maj_worst
    it = 0
    for it in range(1, max_iter + 1):
        f, lower = _lp(W, n)
        params, vals = candidates(f, lam, n)
        upper = float(vals.max())
        if upper < best_upper:
            best_f, best_upper = f, upper
        if best_upper - lower <= tol:
            break
        pm, p0, p1 = three_signal_reports(params[:, 0], params[:, 1], params[:, 2], lam)
        sm, s0, s1 = _swap(pm, p0, p1)
        new = np.concatenate([count_weights(pm, p0, p1, n), count_weights(sm, s0, s1, n)])
        W = np.vstack([W, new])
    # Majority is often exactly optimal (λ <= g(n)); prefer it when it is as good.
    if maj_worst <= best_upper + tol:
        best_f, best_upper = maj, maj_worst
    f_out = tuple(float(round(v, 12)) for v in best_f)
    return RobustResult(n, lam, f_out, max(best_upper, 0.0), max(min(lower, best_upper), 0.0),
                        maj_worst, it)


def robust_worst_regret_batch(f: NDArray[np.float64], lam: float, n: int) -> float:
    """Convenience: worst-case regret of f (used by tests to cross-check)."""
    params, vals = candidates(f, lam, n)
    return float(vals.max())


__all__ += ["robust_worst_regret_batch"]
_ = regret_batch  # re-exported name kept for callers importing it from here
