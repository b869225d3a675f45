"""Priors over q, the leading answer's share against the runner-up, and their fits across
questions (empirical Bayes from a pilot, or the quantal-response prior from calibration)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InputError

__all__ = ["ALPHA_MAX", "ALPHA_MIN", "PRIOR_FAMILIES", "PRIOR_SOURCES", "BetaPrior", "GridPrior",
           "Prior", "PriorUsed", "counts_arrays", "fit_prior", "prior_from_calibration"]

#: The families `fit_prior` fits (the first is the default).
PRIOR_FAMILIES = ("beta", "grid")
#: The range the Beta(α, α) fit searches. The upper end is reached when the counts are at least
#: as split as a prior concentrated at q = 1/2 would make them (a pilot of 2: half or more of
#: the pilots split), which no spread over q explains better.
ALPHA_MIN, ALPHA_MAX = 1e-3, 1e3


@dataclass(frozen=True)
class BetaPrior:
    """Symmetric Beta(α, α) over q, the leading answer's share against the runner-up.

    α < 1 is U-shaped (most questions settled, a few split), α = 1 uniform, α > 1 bell-shaped.
    """

    alpha: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise InputError(f"the Beta prior needs alpha > 0, got {self.alpha!r}")

    def state_tables(self, M: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """pred[m, a] = P(next is answer 1 | a of m), win[m, a] = P(q > 1/2 | a of m)."""
        from scipy.special import betainc

        m = np.arange(M + 1)[:, None].astype(float)
        a = np.arange(M + 1)[None, :].astype(float)
        b = np.maximum(m - a, 0.0)
        al = self.alpha
        pred = (al + a) / (2 * al + m)
        # q | counts ~ Beta(α + a, α + b); P(q > 1/2) = I_{1/2}(α + b, α + a)
        win = betainc(al + b, al + a, 0.5)
        return pred, win

    def mean_split(self) -> float:
        """P(two samples disagree) = E[2 q (1 − q)] = α / (2α + 1)."""
        return self.alpha / (2 * self.alpha + 1)

    def describe(self) -> str:
        """One phrase for a person: "the uniform Beta(1, 1)", "Beta(α, α), α = 0.31"."""
        if self.alpha == 1.0:
            return "the uniform Beta(1, 1)"
        return f"Beta(α, α), α = {self.alpha:.3g}"


@dataclass(frozen=True)
class GridPrior:
    """A discrete prior over q: nodes `q` with weights `w`, symmetric under q ↔ 1 − q.

    Build it with `GridPrior.of(q, w)`, which symmetrises, clips the nodes to [1e-9, 1 − 1e-9]
    (so no sequence of answers has probability zero) and normalises.
    """

    q: tuple[float, ...]
    w: tuple[float, ...]

    @classmethod
    def of(cls, q: ArrayLike, w: ArrayLike | None = None) -> GridPrior:
        qa = np.asarray(q, dtype=float).ravel()
        wa = np.ones_like(qa) if w is None else np.asarray(w, dtype=float).ravel()
        if qa.size == 0 or qa.shape != wa.shape:
            raise InputError("a grid prior needs as many weights as nodes, and at least one node")
        if np.isnan(qa).any() or (qa < 0).any() or (qa > 1).any():
            raise InputError("grid prior nodes q must lie in [0, 1]")
        if np.isnan(wa).any() or (wa < 0).any() or wa.sum() <= 0:
            raise InputError("grid prior weights must be >= 0 with a positive sum")
        qa = np.clip(qa, 1e-9, 1 - 1e-9)
        qs = np.concatenate([qa, 1 - qa])
        ws = np.concatenate([wa, wa])
        order = np.argsort(qs, kind="stable")
        qs, ws = qs[order], ws[order]
        # merge equal nodes so equal priors hash equal
        uq, inv = np.unique(np.round(qs, 12), return_inverse=True)
        wm = np.bincount(inv, weights=ws)
        keep = wm > 0
        return cls(tuple(map(float, uq[keep])), tuple(map(float, wm[keep] / wm[keep].sum())))

    def state_tables(self, M: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """pred[m, a] = P(next is answer 1 | a of m), win[m, a] = P(q > 1/2 | a of m)."""
        q = np.asarray(self.q)
        lw0 = np.log(np.asarray(self.w))
        lq, l1q = np.log(q), np.log1p(-q)
        step = np.where(q > 0.5, 1.0, np.where(q < 0.5, 0.0, 0.5))
        pred = np.full((M + 1, M + 1), 0.5)
        win = np.full((M + 1, M + 1), 0.5)
        for m in range(M + 1):
            a = np.arange(m + 1)[:, None]
            lw = lw0 + a * lq + (m - a) * l1q
            post = np.exp(lw - lw.max(axis=1, keepdims=True))
            post /= post.sum(axis=1, keepdims=True)
            pred[m, : m + 1] = post @ q
            win[m, : m + 1] = post @ step
        return pred, win

    def mean_split(self) -> float:
        """P(two samples disagree) = E[2 q (1 − q)]."""
        q, w = np.asarray(self.q), np.asarray(self.w)
        return float(w @ (2 * q * (1 - q)))

    def describe(self) -> str:
        """One phrase for a person."""
        return f"a grid prior on {len(self.q)} nodes (split share {self.mean_split():.3g})"


Prior = BetaPrior | GridPrior

#: Where a pilot-fitted rule's prior came from (`PriorUsed.source`).
PRIOR_SOURCES = ("fitted", "default", "uninformative", "given")


@dataclass(frozen=True)
class PriorUsed:
    """Which prior a rule that fits one from pilots decided with, and why (`Decision.stop_prior`,
    `StopSpec.prior_for`).

    source:    "fitted": empirical Bayes on the pilots of `questions` questions;
               "default": fewer than `needed` questions had a pilot to fit on (a fresh
               Ensemble's first decisions, a run of a handful of questions), so the rule used
               its spec's documented default prior (the uniform one unless the spec names
               another, e.g. one fitted on a calibration profile or an earlier run), rather
               than believe the first few pilots;
               "uninformative": enough pilots, but they split as often as coin flips, which
               says nothing about the spread (the default prior again);
               "given": the spec's own prior (no fit).
    prior:     the prior (`BetaPrior`, `GridPrior`, or the cost rule's `JointPrior`).
    questions: the questions whose pilots were seen (the fit's data when fitted).
    needed:    the questions a fit needs (`StopSpec.fit_after`, `CostSpec.pilot_questions`).
    """

    source: str
    prior: Any
    questions: int
    needed: int

    def __post_init__(self) -> None:
        if self.source not in PRIOR_SOURCES:
            raise InputError(f"a prior's source is one of {', '.join(PRIOR_SOURCES)}, got "
                             f"{self.source!r}")

    def __str__(self) -> str:
        what = self.prior.describe() if hasattr(self.prior, "describe") else repr(self.prior)
        if self.source == "fitted":
            return f"{what}, fitted on the pilots of {self.questions} questions"
        if self.source == "given":
            return f"{what}, given"
        if self.source == "uninformative":
            return (f"{what}, the default: the pilots of {self.questions} questions split as "
                    "often as coin flips, which says nothing about how hard they are")
        return (f"{what}, the default until {self.needed} questions' pilots are seen "
                f"({self.questions} so far)")

    def to_dict(self) -> dict[str, Any]:
        """As plain JSON values (the prior as its one-phrase description)."""
        what = self.prior.describe() if hasattr(self.prior, "describe") else repr(self.prior)
        return {"source": self.source, "prior": what, "questions": self.questions,
                "needed": self.needed, "about": str(self)}


def counts_arrays(top: ArrayLike, second: ArrayLike) -> tuple[NDArray[np.int64],
                                                                 NDArray[np.int64]]:
    t = np.asarray(top).astype(np.int64).ravel()
    s = np.asarray(second).astype(np.int64).ravel()
    if t.shape != s.shape:
        raise InputError("top and second must have one count per question each")
    if (s < 0).any() or (t < s).any():
        raise InputError("counts must satisfy 0 <= second <= top")
    return t, s


def _grid_nodes(G: int) -> NDArray[np.float64]:
    # arcsine spacing: dense near 0 and 1, where U-shaped spreads put their mass
    u = (np.arange(G) + 0.5) / G
    return np.sin(np.pi * u / 2) ** 2


def fit_prior(top: ArrayLike, second: ArrayLike, *, family: str = PRIOR_FAMILIES[0],
              grid: int = 200, iterations: int = 2000) -> Prior:
    """Fit the prior over q across questions (empirical Bayes) from per-question counts.

    top, second: the counts of the two leading answers of each question (pilot counts, or all
    counts so far: the likelihood q^top (1 − q)^second does not depend on how the sampler chose
    to stop, so refitting on adaptively drawn counts is valid).

    family "beta" (default): symmetric Beta(α, α) by maximum marginal likelihood of the
    beta-binomial. A pilot of 2 (or 3) samples per question identifies exactly one number, the
    share of split pilots, which fixes α (E[2q(1−q)] = α/(2α+1)); the family is U-shaped for
    α < 1 and bell-shaped for α > 1, so it follows both kinds of spread with the one number
    the pilot gives. α is searched in [1e-3, 1e3].

    family "grid": a discrete prior on `grid` nodes by NPMLE (EM on the mixture weights). It
    can follow any shape (several clusters, a U with a bump), but needs more samples per
    question than a pilot of 2 to pin it down; use it to refit on larger counts.
    """
    t, s = counts_arrays(top, second)
    informative = (t + s) >= 2
    if not informative.any():
        raise InputError("fitting the prior needs at least one question with 2 or more valid "
                         "answers among its two leading answers; draw a larger pilot")
    t, s = t[informative], s[informative]
    if family not in PRIOR_FAMILIES:
        raise InputError(f"unknown prior family {family!r}; choose from "
                         f"{', '.join(PRIOR_FAMILIES)}")
    if family == PRIOR_FAMILIES[0]:
        return _fit_beta(t, s)
    return _fit_grid(t, s, grid=grid, iterations=iterations)


def _fit_beta(t: NDArray[np.int64], s: NDArray[np.int64]) -> BetaPrior:
    from scipy.optimize import minimize_scalar
    from scipy.special import betaln

    pairs, mult = np.unique(np.stack([t, s], axis=1), axis=0, return_counts=True)
    a, b = pairs[:, 0].astype(float), pairs[:, 1].astype(float)

    def nll(log_alpha: float) -> float:
        al = math.exp(log_alpha)
        return -float(mult @ (betaln(al + a, al + b) - betaln(al, al)))

    lo, hi = math.log(ALPHA_MIN), math.log(ALPHA_MAX)
    res = minimize_scalar(nll, bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-8})
    best = float(res.x)
    # the bounded search can miss a boundary optimum by its tolerance: check the ends
    for edge in (lo, hi):
        if nll(edge) < nll(best):
            best = edge
    return BetaPrior(alpha=float(math.exp(best)))


def _fit_grid(t: NDArray[np.int64], s: NDArray[np.int64], *, grid: int, iterations: int
              ) -> GridPrior:
    q = _grid_nodes(grid)
    pairs, mult = np.unique(np.stack([t, s], axis=1), axis=0, return_counts=True)
    a, b = pairs[:, :1].astype(float), pairs[:, 1:].astype(float)
    # unlabelled counts: the likelihood of a node is the mean over both labellings, which makes
    # the fitted weights symmetric by construction
    loglik = np.logaddexp(a * np.log(q) + b * np.log1p(-q), b * np.log(q) + a * np.log1p(-q))
    lik = np.exp(loglik - loglik.max(axis=1, keepdims=True))
    w = np.full(grid, 1.0 / grid)
    for _ in range(iterations):
        mix = lik @ w
        new = w * ((mult / mix) @ lik) / mult.sum()
        if np.abs(new - w).max() < 1e-10:
            w = new
            break
        w = new
    return GridPrior.of(q, w)


def prior_from_calibration(lam: float, posteriors: ArrayLike, *,
                           weights: ArrayLike | None = None) -> GridPrior:
    """The quantal-response prior: q = ψ_λ(p) over a task's posteriors p (λ in ψ_λ units).

    `weights` (default equal) weight the questions, e.g. how often each is asked. The result
    is symmetrised, as the top-two reduction needs.
    """
    from ..qr import psi, validate_lam, validate_probability

    lam_v = validate_lam(lam)
    p = validate_probability(posteriors, name="posteriors").ravel()
    if p.size == 0:
        raise InputError("prior_from_calibration needs at least one posterior")
    return GridPrior.of(psi(p, lam_v), weights)

