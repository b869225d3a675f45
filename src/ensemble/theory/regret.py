"""Worst-case regret of an aggregator over all conditionally i.i.d. signal structures.

One engine for one group and for groups of experts with different λ (`SearchSpace`). Two
families of signal structures are searched:

- {0, p, 1}: the paper's three-posterior structures, parametrised by (p, γ0, γ1). For one λ
  (more precisely: at most one distinct λ > 0 among the groups) the paper's dimension-reduction
  lemma shows every feasible report structure comes from this family, so it is sufficient.
- K free posteriors with free probabilities, K = 2G' + 2 for G' distinct λ > 0. The report
  structure is a linear image of the distribution τ of posteriors, a point of the convex hull of
  the curve s -> (s, ψ_g(s), s ψ_g(s))_g in R^(1+2G'); by Carathéodory K points suffice, so this
  family is sufficient for any λ's. It is searched whenever G' >= 2, where {0, p, 1} is not
  sufficient (docs/ensembles.md gives a counterexample).

The search is global: a dense vectorised grid over (p, γ0, γ1) (a bank kept per configuration),
then a vectorised pattern search that zooms in around the best few distinct grid points (robust
to the kinks |w_x| puts into the regret, where gradient or single-start local optimisers stall;
the paper's own code reported 0 at some λ where the worst-case regret is clearly positive).
Beyond n = 5 experts in all, dense grids on the faces of two-posterior structures {0, p} and
{p, 1} join it (the peaks narrow like 1/√n); with a rational group (λ = ∞, a jump of ψ at 1/2),
so do the lines p = 1/2 and 1/2 ± 1e-9. For G' >= 2, a pattern search in the K-posterior family
follows, started from the refined {0, p, 1} optima and from the best of a seeded random bank of
K-posterior structures. λ = 0 and λ = ∞ use the same families (ψ constant, resp. a step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InputError
from ..qr import validate_lam
from .groups import Group, count_shape, validate_group_f, validate_groups
from .structures import signal_reports, three_signal_group_reports, three_signal_reports
from .utility import count_weights, group_weights, validate_f

__all__ = [
    "MAX_SEARCH_COST",
    "GroupWorstCase",
    "SearchSpace",
    "WorstCase",
    "candidates",
    "check_size",
    "face_points",
    "group_worst_case_regret",
    "regret_batch",
    "search_space",
    "structure_grid",
    "worst_case_regret",
]

Array = NDArray[np.float64]

# Structures x count vectors above this many weights are not kept in memory between calls.
_BANK_BUDGET = 8_000_000
# Largest search cost (structures x count vectors per pass of the worst-case search) accepted.
# Measured on 2 shared cores (docs/ensembles.md): one group of n = 100 (cost 2.9e7) takes
# ~50 s for `robust` (~15 passes plus LPs); n = 255 (1.8e8) ~20 s for one worst-case search.
MAX_SEARCH_COST = {"robust": 30_000_000, "regret": 200_000_000}
_GRID_STRUCTURES = 61 * 496  # the 3-D bank: structure_grid(61, 31)


def face_points(n_total: int) -> int:
    """Points per axis of the two-posterior face grids: none up to n = 5 in all (the 3-D grid
    alone then matches a dense search to 1e-7), then growing like √n as the regret's peaks
    narrow."""
    return 0 if n_total <= 5 else max(61, 2 * math.ceil(18 * math.sqrt(n_total)) + 1)


def search_cost(groups: Sequence[Group]) -> int:
    """Weights computed per pass of the worst-case search: structures x count vectors."""
    n_tot = sum(g.n for g in groups)
    distinct = len({g.lam for g in groups if g.lam > 0})
    structures = _GRID_STRUCTURES + 2 * face_points(n_tot) ** 2
    if distinct >= 2:
        structures += 4000 * (2 * distinct + 1)
    return structures * math.prod(count_shape(groups))


def check_size(groups: Sequence[Group], what: str) -> None:
    """Refuse configurations whose search cannot finish in reasonable time (InputError saying
    what they cost). `what` is "robust" (LP with constraint generation) or "regret"."""
    cost = search_cost(groups)
    cap = MAX_SEARCH_COST[what]
    if cost > cap:
        shape = count_shape(groups)
        size = math.prod(shape)
        if len(groups) == 1:
            desc = f"{groups[0].n} experts ({size} count vectors)"
        else:
            desc = (f"groups of {', '.join(str(g.n) for g in groups)} experts "
                    f"({' x '.join(str(v) for v in shape)} = {size} count vectors)")
        what_desc = ("the robust LP repeats it ~10-30 times" if what == "robust"
                     else "one worst-case search")
        raise InputError(
            f"{what}: {desc} is too large: each pass of the worst-case search computes "
            f"{cost:.2g} weights (limit {cap:.2g}; {what_desc}, ~1 min at the limit); use fewer "
            "experts")


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


@dataclass(frozen=True)
class GroupWorstCase:
    """The worst-case regret (±1 units) of a group aggregator and a structure attaining it.

    The structure is a distribution of posteriors (`posteriors`, `probs`; zero-probability
    posteriors dropped) with its report structure: μ and per group q0 = P(X=1 | ω=0),
    q1 = P(X=1 | ω=1). `family` names the family the maximiser was found in.
    """

    value: float
    posteriors: tuple[float, ...]
    probs: tuple[float, ...]
    mu: float
    q0: tuple[float, ...]
    q1: tuple[float, ...]
    family: str

    def argmax(self) -> dict[str, Any]:
        return {"posteriors": list(self.posteriors), "probs": list(self.probs), "mu": self.mu,
                "q0": list(self.q0), "q1": list(self.q1)}


def regret_batch(f: Array, mu: ArrayLike, q0: ArrayLike, q1: ArrayLike, n: int) -> Array:
    """R(f, θ) for many one-group report structures at once."""
    w = count_weights(mu, q0, q1, n)
    return np.abs(w).sum(axis=-1) - w @ (2 * f - 1)


def structure_grid(p_points: int = 81, simplex_points: int = 41) -> tuple[Array, Array, Array]:
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


def _to_params(u: Array) -> tuple[Array, Array, Array]:
    """Map the unit cube to (p, γ0, γ1): γ0 = a, γ1 = (1 − a) b (onto the simplex)."""
    u = np.clip(u, 0.0, 1.0)
    return u[..., 0], u[..., 1], (1.0 - u[..., 1]) * u[..., 2]


def _from_params(p: Array, g0: Array, g1: Array) -> Array:
    with np.errstate(invalid="ignore", divide="ignore"):
        b = np.where(g0 < 1.0, g1 / np.where(g0 < 1.0, 1.0 - g0, 1.0), 0.0)
    return np.stack([p, g0, np.clip(b, 0.0, 1.0)], axis=-1)


def _tau_from_unit(u: Array, k: int) -> tuple[Array, Array]:
    """Unit cube (..., 2K−1) -> K posteriors and their probabilities (stick-breaking; a uniform
    u gives a uniform point of the simplex)."""
    u = np.clip(u, 0.0, 1.0)
    post = u[..., :k]
    rem = np.ones(u.shape[:-1])
    probs = []
    for j in range(k - 1):
        b = 1.0 - (1.0 - u[..., k + j]) ** (1.0 / (k - 1 - j))
        probs.append(rem * b)
        rem = rem * (1.0 - b)
    probs.append(rem)
    return post, np.stack(probs, axis=-1)


def _unit_from_tau(post: Array, probs: Array) -> Array:
    k = post.shape[-1]
    rem = np.ones(post.shape[:-1])
    v = []
    for j in range(k - 1):
        with np.errstate(invalid="ignore", divide="ignore"):
            b = np.where(rem > 1e-15, probs[..., j] / np.where(rem > 1e-15, rem, 1.0), 0.0)
        b = np.clip(b, 0.0, 1.0)
        v.append(1.0 - (1.0 - b) ** (k - 1 - j))
        rem = rem * (1.0 - b)
    return np.concatenate([post, np.stack(v, axis=-1)], axis=-1)


def _pattern_search(value: Any, u: Array, best: Array, h: Array, offsets: Array, steps: int,
                    *, grow: float = 1.0, h_max: float = 1.0, h_min: float = 0.0
                    ) -> tuple[Array, Array]:
    """Vectorised pattern search from several starts at once, maximising `value(u)`.

    Each step tries u + h * offset for every offset, moves each start to its best trial if
    that improves, and otherwise halves its step h (also when the best offset is the zero
    offset); an improving step multiplies h by `grow`.
    """
    centre = np.flatnonzero(~offsets.any(axis=1))
    rows = np.arange(u.shape[0])
    for _ in range(steps):
        trial = np.clip(u[:, None, :] + h[:, None, None] * offsets[None, :, :], 0.0, 1.0)
        rt = value(trial)
        j = np.argmax(rt, axis=1)
        improved = rt[rows, j] > best
        u = np.where(improved[:, None], trial[rows, j], u)
        best = np.maximum(best, rt[rows, j])
        moved = improved & ~np.isin(j, centre)
        h = np.where(moved, np.minimum(h * grow, h_max), h / 2.0)
        if h.max() < h_min:
            break
    return u, best


class SearchSpace:
    """The worst-case search for one configuration of groups (n_g, λ_g); see the module doc.

    Get one with `search_space(groups)` (cached): the grid bank is computed once per
    configuration and reused by every call (the robust LP calls it once per iteration).
    """

    grid = (61, 31)

    def __init__(self, groups: Sequence[Group]) -> None:
        self.groups = tuple(groups)
        self.ns = tuple(g.n for g in self.groups)
        self.lams = tuple(g.lam for g in self.groups)
        self.shape = count_shape(self.groups)
        self.size = math.prod(self.shape)
        informative = sorted({lam for lam in self.lams if lam > 0})
        # The {0, p, 1} family is sufficient (the paper's lemma) with one distinct λ > 0;
        # λ = 0 groups report 1/2 whatever the structure, so they add no dimension.
        self.k_full = 3 if len(informative) <= 1 else 2 * len(informative) + 2
        self.reduced_sufficient = len(informative) <= 1
        self.face_points = face_points(sum(self.ns))
        self.has_rational = any(math.isinf(lam) for lam in self.lams)

    # -- the {0, p, 1} family ------------------------------------------------------------------
    def reports3(self, p: Array, g0: Array, g1: Array) -> tuple[Array, Array, Array]:
        """(μ, q0 (..., G), q1 (..., G)) of {0, p, 1} structures."""
        return three_signal_group_reports(p, g0, g1, self.lams)

    def weights(self, mu: Array, q0: Array, q1: Array) -> Array:
        return group_weights(mu, q0, q1, self.ns)

    def weights3(self, p: Array, g0: Array, g1: Array) -> Array:
        return self.weights(*self.reports3(p, g0, g1))

    @cached_property
    def _bank(self) -> tuple[Array, Array | None, Array | None]:
        return self._make_bank(np.stack(structure_grid(*self.grid), axis=-1))

    @cached_property
    def _face_bank(self) -> tuple[Array, Array | None, Array | None]:
        """Dense grids on the two faces of two-posterior structures {0, p} and {p, 1}.

        With one λ, the worst cases of larger groups sat on these faces in every case we
        examined, as peaks of width ~ 1/√n that the 3-D grid can step over (docs/ensembles.md).
        """
        m = self.face_points
        axes = np.meshgrid(np.linspace(0.0, 1.0, m), np.linspace(0.0, 1.0, m), indexing="ij")
        p, g = axes[0].ravel(), axes[1].ravel()
        zero = np.zeros_like(p)
        # (p, γ0, γ1): {0, p} has γ0 + γ1 = 1, {p, 1} has γ0 = 0
        return self._make_bank(np.concatenate([np.stack([p, g, 1.0 - g], axis=-1),
                                               np.stack([p, zero, g], axis=-1)]))

    def _make_bank(self, params: Array) -> tuple[Array, Array | None, Array | None]:
        """(params (S, 3) as (p, γ0, γ1), their weights and Σ|w| if they fit the budget)."""
        if params.shape[0] * self.size > _BANK_BUDGET:
            return params, None, None
        W = self.weights3(*params.T)
        return params, W, np.abs(W).sum(axis=-1)

    def _bank_regrets(self, f: Array, bank: tuple[Array, Array | None, Array | None]
                      ) -> tuple[Array, Array]:
        params, W, absw = bank
        if W is not None and absw is not None:
            return params, absw - W @ (2 * f - 1)
        out = np.empty(params.shape[0])
        chunk = max(1, _BANK_BUDGET // (4 * self.size))
        for s in range(0, params.shape[0], chunk):
            w = self.weights3(*params[s:s + chunk].T)
            out[s:s + chunk] = np.abs(w).sum(axis=-1) - w @ (2 * f - 1)
        return params, out

    def regret3(self, f: Array, u: Array) -> Array:
        """Regret of f at unit-cube points u (..., 3) of the {0, p, 1} family."""
        w = self.weights3(*_to_params(u))
        return np.abs(w).sum(axis=-1) - w @ (2 * f - 1)

    @staticmethod
    def _distinct(u: Array, r: Array, top: int, radius: float) -> list[int]:
        """Indices of the `top` largest regrets, pairwise more than `radius` apart."""
        starts: list[int] = []
        for i in np.argsort(r)[::-1]:
            if len(starts) >= top:
                break
            if all(np.abs(u[i] - u[j]).max() > radius for j in starts):
                starts.append(int(i))
        return starts

    def _zoom(self, f: Array, params: Array, r: Array, starts: list[int], h0: float,
              steps: int, *, stencil: Array | None = None) -> tuple[Array, Array]:
        u = _from_params(params[starts, 0], params[starts, 1], params[starts, 2])
        h = np.full(len(starts), h0)
        offs = _STENCIL3 if stencil is None else stencil
        return _pattern_search(lambda t: self.regret3(f, t), u, r[starts], h, offs, steps)

    @cached_property
    def _half_bank(self) -> tuple[Array, Array | None, Array | None]:
        """{0, p, 1} structures with p = 1/2 and p = 1/2 ± 1e-9: a dense grid over (γ0, γ1).

        At λ = ∞ the report jumps at posterior 1/2 (a coin flip there, 0 or 1 on either side),
        and the worst case is often the limit p -> 1/2 from one side, which a zoom towards the
        jump approaches only slowly; 1e-9 away the other groups' ψ differ by < 1e-8.
        """
        s = np.linspace(0.0, 1.0, 121)
        g0, g1 = np.meshgrid(s, s, indexing="ij")
        keep = g0 + g1 <= 1.0 + 1e-12
        g0, g1 = g0[keep], g1[keep]
        rows = [np.stack([np.full(g0.size, p), g0, g1], axis=-1)
                for p in (0.5 - 1e-9, 0.5, 0.5 + 1e-9)]
        return self._make_bank(np.concatenate(rows))

    def candidates3(self, f: Array, *, top: int = 6, grid: tuple[int, int] | None = None,
                    zoom_steps: int = 14) -> tuple[Array, Array]:
        """Locally refined {0, p, 1} structures of largest regret: (params (k, 3) as
        (p, γ0, γ1), regrets (k,)); the `top` best of the 3-D grid, then (for Σ n_g > 5) the
        best of the dense two-posterior faces."""
        grid = self.grid if grid is None else grid
        if grid == self.grid:
            bank = self._bank
        else:
            bank = self._make_bank(np.stack(structure_grid(*grid), axis=-1))
        params, r = self._bank_regrets(f, bank)
        starts = self._distinct(params, r, top, 0.1)
        us, best = self._zoom(f, params, r, starts, 1.0 / (grid[1] - 1), zoom_steps)
        if self.has_rational:
            # λ = ∞ reports a coin flip at posterior 1/2 exactly and 0 or 1 on either side:
            # the line p = 1/2 is searched on its own (the zoom keeps p there)
            params, r = self._bank_regrets(f, self._half_bank)
            starts = self._distinct(params, r, 6, 0.1)
            uh, bh = self._zoom(f, params, r, starts, 1.0 / 120, 20, stencil=_STENCIL_HALF)
            us, best = np.concatenate([us, uh]), np.concatenate([best, bh])
        if self.face_points:
            params, r = self._bank_regrets(f, self._face_bank)
            n_tot = sum(self.ns)
            starts = self._distinct(params, r, math.ceil(2 * math.sqrt(n_tot)),
                                    0.5 / math.sqrt(n_tot))
            uf, bf = self._zoom(f, params, r, starts, 1.0 / (self.face_points - 1), 20)
            us, best = np.concatenate([us, uf]), np.concatenate([best, bf])
        p, g0, g1 = _to_params(us)
        return np.stack([p, g0, g1], axis=-1), best

    # -- the K-posterior family ----------------------------------------------------------------
    def regret_tau(self, f: Array, u: Array) -> Array:
        post, probs = _tau_from_unit(u, self.k_full)
        w = self.weights(*signal_reports(post, probs, self.lams))
        return np.abs(w).sum(axis=-1) - w @ (2 * f - 1)

    @cached_property
    def _random_bank(self) -> tuple[Array, Array | None, Array | None]:
        """Random K-posterior structures (support sizes 2..K) as unit-cube points, with their
        weights when they fit the budget; seeded, so every call sees the same bank."""
        k = self.k_full
        rng = np.random.default_rng(20240615)
        m = 4000 * (k - 1)
        post = rng.random((m, k))
        probs = rng.dirichlet(np.ones(k), size=m)
        support = rng.integers(2, k + 1, size=m)
        mask = np.argsort(rng.random((m, k)), axis=1) < support[:, None]
        probs = probs * mask
        probs /= probs.sum(axis=1, keepdims=True)
        u = _unit_from_tau(post, probs)
        if m * self.size > _BANK_BUDGET:
            return u, None, None
        W = self.weights(*signal_reports(post, probs, self.lams))
        return u, W, np.abs(W).sum(axis=-1)

    def candidates_full(self, f: Array, seeds3: Array, *, top: int = 4, steps: int = 100
                        ) -> tuple[Array, Array, Array]:
        """Pattern search in the K-posterior family from the best `top` of the given
        {0, p, 1} structures (p, γ0, γ1) and from the best `top` distinct members of a random
        bank.

        Returns (posteriors (k, K), probs (k, K), regrets (k,)).
        """
        k = self.k_full
        rng = np.random.default_rng(7)
        seeds3 = np.asarray(seeds3[np.argsort(self._regret_params3(f, seeds3))[::-1][:top]])
        # {0, p, 1} embedded: the other posteriors start anywhere with probability 0
        n3 = seeds3.shape[0]
        post = np.concatenate([np.zeros((n3, 1)), seeds3[:, :1], np.ones((n3, 1)),
                               rng.random((n3, k - 3))], axis=1)
        probs = np.concatenate([seeds3[:, 1:2], seeds3[:, 2:3],
                                np.clip(1 - seeds3[:, 1:2] - seeds3[:, 2:3], 0, 1),
                                np.zeros((n3, k - 3))], axis=1)
        u_seed = _unit_from_tau(post, probs)
        bank, W, absw = self._random_bank
        if W is not None and absw is not None:
            rb = absw - W @ (2 * f - 1)
        else:
            rb = np.concatenate([self.regret_tau(f, bank[s:s + 20000])
                                 for s in range(0, bank.shape[0], 20000)])
        picks = self._distinct(bank, rb, top, 0.2)
        u = np.concatenate([u_seed, bank[picks]])
        best = self.regret_tau(f, u)
        d = u.shape[1]
        eye = np.eye(d)
        dirs = rng.normal(size=(d, d))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        offs = np.concatenate([np.zeros((1, d)), eye, -eye, dirs, -dirs])
        h = np.concatenate([np.full(n3, 0.02), np.full(len(picks), 0.05)])
        u, best = _pattern_search(lambda t: self.regret_tau(f, t), u, best, h, offs, steps,
                                  grow=1.5, h_max=0.25, h_min=1e-9)
        post, probs = _tau_from_unit(u, k)
        return post, probs, best

    def _regret_params3(self, f: Array, params: Array) -> Array:
        w = self.weights3(params[:, 0], params[:, 1], params[:, 2])
        return np.abs(w).sum(axis=-1) - w @ (2 * f - 1)

    # -- the worst case ------------------------------------------------------------------------
    def worst(self, f: Array, *, thorough: bool = False) -> GroupWorstCase:
        """max over all c.i.i.d. structures of R(f, θ), with a structure attaining it.

        `thorough` searches a finer grid from more starts (several times slower).
        """
        f = np.asarray(f, dtype=float).reshape(-1)
        if thorough:
            params, vals = self.candidates3(f, top=30, grid=(121, 61))
        else:
            params, vals = self.candidates3(f)
        i = int(np.argmax(vals))
        p, g0, g1 = params[i]
        best = _case(self, float(vals[i]), np.array([0.0, p, 1.0]),
                     np.array([g0, g1, max(0.0, 1 - g0 - g1)]), "{0, p, 1}")
        if not self.reduced_sufficient:
            post, probs, fv = self.candidates_full(f, params)
            j = int(np.argmax(fv))
            if fv[j] > best.value:
                best = _case(self, float(fv[j]), post[j], probs[j],
                             f"{self.k_full} posteriors")
        return best


def _case(space: SearchSpace, value: float, post: Array, probs: Array, family: str
          ) -> GroupWorstCase:
    keep = probs > 1e-12
    order = np.argsort(post[keep])
    p, t = post[keep][order], probs[keep][order]
    mu, q0, q1 = signal_reports(post, probs, space.lams)
    return GroupWorstCase(max(value, 0.0), tuple(float(v) for v in p),
                          tuple(float(v) for v in t), float(mu),
                          tuple(float(v) for v in q0), tuple(float(v) for v in q1), family)


_STENCIL3 = np.array(np.meshgrid(*[np.linspace(-1, 1, 5)] * 3, indexing="ij")).reshape(3, -1).T
_STENCIL_HALF = _STENCIL3[_STENCIL3[:, 0] == 0]  # moves that keep p where it is


@lru_cache(maxsize=8)
def _space(groups: tuple[Group, ...]) -> SearchSpace:
    return SearchSpace(groups)


def search_space(groups: Sequence[Any]) -> SearchSpace:
    """The (cached) search space of a configuration of groups."""
    return _space(validate_groups(groups))


def candidates(f: Array, lam: float, n: int, *, top: int = 6,
               grid: tuple[int, int] = (61, 31), zoom_steps: int = 14) -> tuple[Array, Array]:
    """The `top` locally-refined structures of largest regret: (params (k, 3), regrets (k,))."""
    return _space((Group(n, lam),)).candidates3(np.asarray(f, dtype=float), top=top, grid=grid,
                                                zoom_steps=zoom_steps)


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


def group_worst_case_regret(f: ArrayLike, groups: Sequence[Any]) -> GroupWorstCase:
    """max over c.i.i.d. structures of R(f, θ) for groups (n_g, λ_g) of experts.

    `f` has shape (n_1+1, ..., n_G+1) (f[x_1]...[x_G] = P(decide 1)). The search covers a
    sufficient family of structures (module doc); the value is in ±1 units.
    """
    gs = validate_groups(groups)
    check_size(gs, "regret")
    farr = validate_group_f(f, gs)
    return search_space(gs).worst(farr)
