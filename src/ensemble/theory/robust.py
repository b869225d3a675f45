"""The optimal robust (minimax-regret) aggregator, for one group or for groups of experts.

R(f, θ) is linear in f for each fixed structure θ, so min_f max_θ R(f, θ) is a linear program in
(f, t) with one constraint per structure. It is solved by constraint generation: an LP (HiGHS)
over a working set of structures, then the structures of largest regret for the current f (found
by the global search of `regret.SearchSpace`) and their ω-swapped images are added, until the
upper bound (the worst-case regret of the returned f) and the LP's lower bound agree within
`tol`. Every structure in the working set is feasible, so the LP value is a true lower bound on
the minimax regret; the upper bound is as good as the global search.

With several distinct λ > 0 the loop first generates constraints from the {0, p, 1} family
(fast), then checks the result against the sufficient K-posterior family and, if that finds more
regret, continues with it (see `regret` and docs/ensembles.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..qr import validate_lam
from .groups import (
    Group,
    group_majority_f,
    lam_weighted_f,
    validate_groups,
)
from .regret import (
    SearchSpace,
    check_size,
    search_space,
    structure_grid,
)
from .structures import signal_reports
from .utility import validate_n

__all__ = ["GroupRobustResult", "RobustResult", "group_robust_aggregator", "robust_aggregator"]

Array = NDArray[np.float64]
_LP_TOL = 1e-7  # HiGHS's default primal/dual feasibility tolerance


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


@dataclass(frozen=True)
class GroupRobustResult:
    """The minimax-regret aggregator for groups, with its certificate (regrets in ±1 units).

    `f` has shape (n_1+1, ..., n_G+1): f[x_1, ..., x_G] = P(decide 1) given x_g reports of 1 in
    group g (read-only). `worst_regret` is the upper bound (the worst-case regret of f found by
    the global search over `family_posteriors`-posterior structures), `lower_bound` the LP value
    (no aggregator of the counts does better). The worst-case regrets of majority over all
    votes and of the λ-weighted vote are given for comparison.
    """

    groups: tuple[Group, ...]
    f: Array
    worst_regret: float
    lower_bound: float
    majority_worst_regret: float
    lam_weighted_worst_regret: float
    iterations: int
    family_posteriors: int

    @property
    def gap(self) -> float:
        return self.worst_regret - self.lower_bound


def _lp(w: Array, monotone: bool = False) -> tuple[Array, float]:
    from scipy.optimize import linprog

    # minimise t  s.t.  Σ|w_j| − Σ_x w_jx (2 f_x − 1) <= t  for every structure j
    # (monotone, one group: also f_x <= f_{x+1})
    m, size = w.shape
    A = np.hstack([-2.0 * w, -np.ones((m, 1))])
    b = -np.abs(w).sum(axis=1) - w.sum(axis=1)
    if monotone:
        steps = np.zeros((size - 1, size + 1))
        steps[np.arange(size - 1), np.arange(size - 1)] = 1.0
        steps[np.arange(size - 1), np.arange(1, size)] = -1.0
        A, b = np.vstack([A, steps]), np.concatenate([b, np.zeros(size - 1)])
    c = np.zeros(size + 1)
    c[-1] = 1.0
    bounds = [(0.0, 1.0)] * size + [(None, None)]
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:  # pragma: no cover - HiGHS solves these small LPs
        raise RuntimeError(f"robust LP failed: {res.message}")
    return np.clip(res.x[:-1], 0.0, 1.0), float(res.x[-1])


def _swap(mu: Array, q0: Array, q1: Array) -> tuple[Array, Array, Array]:
    """The ω-swapped structure: also feasible (posterior s -> 1 − s), with X_g -> n_g − X_g."""
    return 1 - mu, 1 - q1, 1 - q0


def _structure_weights(space: SearchSpace, mu: Array, q0: Array, q1: Array) -> Array:
    sm, s0, s1 = _swap(mu, q0, q1)
    return np.concatenate([space.weights(mu, q0, q1), space.weights(sm, s0, s1)])


@dataclass(frozen=True)
class _Solution:
    f: Array
    upper: float
    lower: float
    majority_upper: float
    iterations: int


def _solve(space: SearchSpace, tol: float, max_iter: int, monotone: bool = False
           ) -> _Solution:
    """Constraint generation for one configuration (shared by one group and groups)."""
    maj = group_majority_f(space.groups).reshape(-1)
    maj_worst = space.worst(maj).value
    # The initial working set: a grid of {0, p, 1} structures, coarser for large count spaces
    # (the LP's cost grows with rows x count vectors; generated constraints do the rest).
    P, G0, G1 = structure_grid(*((41, 21) if space.size <= 32 else (21, 11)))
    W = space.weights3(P, G0, G1)
    full = False  # search the sufficient K-posterior family in every iteration
    upper, lower = math.inf, 0.0
    best_f, best_upper = maj, maj_worst
    it = 0
    while it < max_iter:
        it += 1
        f, lower = _lp(W, monotone)
        params, vals = space.candidates3(f)
        upper = float(vals.max())
        new = [space.reports3(params[:, 0], params[:, 1], params[:, 2])]
        if full:
            post, probs, fv = space.candidates_full(f, params)
            upper = max(upper, float(fv.max()))
            new.append(signal_reports(post, probs, space.lams))
        if upper < best_upper:
            best_f, best_upper = f, upper
        if best_upper - lower <= tol:
            if space.reduced_sufficient or full:
                break
            # converged on {0, p, 1}: check against the sufficient family
            post, probs, fv = space.candidates_full(best_f, space.candidates3(best_f)[0])
            if float(fv.max()) <= best_upper + tol:
                best_upper = max(best_upper, float(fv.max()))
                break
            full = True
            best_upper = float(fv.max())
            new.append(signal_reports(post, probs, space.lams))
        W = np.vstack([W] + [_structure_weights(space, *s) for s in new])
    if lower > best_upper + _LP_TOL:
        # The LP bound says the search missed part of f's worst case: search harder.
        best_upper = max(best_upper, space.worst(best_f, thorough=True).value)
    # Majority is often exactly optimal (λ <= g(n)); prefer it when it is as good.
    if maj_worst <= best_upper + tol:
        best_f, best_upper = maj, maj_worst
    if lower - best_upper <= _LP_TOL:  # within the LP solver's tolerance
        lower = min(lower, best_upper)
    return _Solution(best_f, max(best_upper, 0.0), max(lower, 0.0), maj_worst, it)


def robust_aggregator(n: int, lam: float, *, tol: float = 1e-6, max_iter: int = 60,
                      monotone: bool = False) -> RobustResult:
    """The minimax-regret aggregator for n c.i.i.d. experts with rationality λ (ψ_λ units).

    `monotone`: the best rule among those with f(x) non-decreasing in the reports of 1 (for
    n >= 9 the unconstrained optimum is not monotone, and the monotone one is worse: its LP
    lower bound lies above the unconstrained rule's worst case; docs/theory.md).
    Cached: repeated calls with the same arguments are free.
    """
    n = validate_n(n)
    lam = validate_lam(lam)
    check_size((Group(n, lam),), "robust")
    return _robust(n, lam, float(tol), int(max_iter), bool(monotone))


@lru_cache(maxsize=512)
def _robust(n: int, lam: float, tol: float, max_iter: int, monotone: bool = False
            ) -> RobustResult:
    sol = _solve(search_space(((n, lam),)), tol, max_iter, monotone)
    f_out = tuple(float(round(v, 12)) for v in sol.f)
    return RobustResult(n, lam, f_out, sol.upper, sol.lower, sol.majority_upper, sol.iterations)


def group_robust_aggregator(groups: Sequence[Any], *, tol: float = 1e-6, max_iter: int = 80
                            ) -> GroupRobustResult:
    """The minimax-regret aggregator of the per-group counts for groups (n_g, λ_g).

    `groups` is a list of `Group`, (n, λ) pairs or {"n", "lam"} dicts. One group gives the same
    rule as `robust_aggregator(n, λ)`. Refuses configurations whose search costs more than
    `regret.MAX_SEARCH_COST["robust"]`, with an InputError saying what they cost. Cached.
    """
    gs = validate_groups(groups)
    check_size(gs, "robust")
    return _group_robust(gs, float(tol), int(max_iter))


@lru_cache(maxsize=128)
def _group_robust(groups: tuple[Group, ...], tol: float, max_iter: int) -> GroupRobustResult:
    space = search_space(groups)
    sol = _solve(space, tol, max_iter)
    f = np.round(sol.f, 12).reshape(space.shape)
    f.flags.writeable = False
    lw = space.worst(lam_weighted_f(groups).reshape(-1)).value
    return GroupRobustResult(groups, f, sol.upper, sol.lower, sol.majority_upper, lw,
                             sol.iterations, space.k_full)
