"""Signal structures, the report structures they induce, and the paper's three-signal family.

A signal structure is a finite joint table P(S = s, ω) (rows: signals; columns: ω = 0, ω = 1).
Experts are conditionally i.i.d. given ω, so under a response rule r(s) = P(X_i = 1 | S = s)
the reports are fully described by the report structure (μ, q0, q1), q_w = P(X_i = 1 | ω = w).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InputError
from ..qr import psi, validate_lam

__all__ = [
    "ReportStructure",
    "parse_joint",
    "posteriors",
    "report_structure",
    "report_structure_from_probs",
    "signal_reports",
    "three_signal_group_reports",
    "three_signal_reports",
    "validate_joint",
]

_SUM_TOL = 1e-9


@dataclass(frozen=True)
class ReportStructure:
    """(μ, q0, q1): prior of ω = 1 and the per-expert probability of reporting 1 given ω."""

    mu: float
    q0: float
    q1: float


def parse_joint(text: str) -> NDArray[np.float64]:
    """Read a joint table from JSON text such as '[[0.375, 0], [0.375, 0.25]]'."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"--joint is not valid JSON ({exc.msg}); expected e.g. "
                         "'[[0.375, 0], [0.375, 0.25]]'") from None
    return validate_joint(value)


def validate_joint(joint: ArrayLike) -> NDArray[np.float64]:
    """A joint table P(S=s, ω) as an (m, 2) float array; raise InputError if it is not one."""
    try:
        arr = np.asarray(joint, dtype=float)
    except (TypeError, ValueError):
        raise InputError("joint table must be a list of [P(s, ω=0), P(s, ω=1)] rows of numbers") \
            from None
    if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] < 1:
        raise InputError("joint table must be a list of [P(s, ω=0), P(s, ω=1)] rows "
                         f"(got shape {arr.shape})")
    if not np.isfinite(arr).all():
        raise InputError("joint table entries must be finite numbers")
    if (arr < 0).any():
        raise InputError("joint table has a negative entry; probabilities must be >= 0")
    total = float(arr.sum())
    if abs(total - 1.0) > _SUM_TOL:
        raise InputError(f"joint table sums to {total:.6g}, not 1; rescale the entries")
    return arr


def posteriors(joint: ArrayLike) -> NDArray[np.float64]:
    """P(ω = 1 | S = s) for every signal (1/2 for a signal of zero probability)."""
    arr = validate_joint(joint)
    tot = arr.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        post = np.where(tot > 0, arr[:, 1] / np.where(tot > 0, tot, 1.0), 0.5)
    return post


def report_structure_from_probs(joint: ArrayLike, r: ArrayLike) -> ReportStructure:
    """The report structure when an expert with signal s reports 1 with probability r[s].

    Used with empirical answer frequencies (evals) as well as with ψ_λ (theory).
    """
    arr = validate_joint(joint)
    rr = np.asarray(r, dtype=float)
    if rr.shape != (arr.shape[0],) or (rr < 0).any() or (rr > 1).any():
        raise InputError("r must give one probability in [0, 1] per signal")
    mu = float(arr[:, 1].sum())
    q1 = float(arr[:, 1] @ rr / mu) if mu > 0 else 0.5
    q0 = float(arr[:, 0] @ rr / (1 - mu)) if mu < 1 else 0.5
    return ReportStructure(mu, min(max(q0, 0.0), 1.0), min(max(q1, 0.0), 1.0))


def report_structure(joint: ArrayLike, lam: float) -> ReportStructure:
    """The report structure of experts with rationality λ (ψ_λ units) under `joint`."""
    lam = validate_lam(lam)
    return report_structure_from_probs(joint, psi(posteriors(joint), lam))


def three_signal_reports(p: ArrayLike, gamma0: ArrayLike, gamma1: ArrayLike, lam: float
                         ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(μ, q0, q1) of the paper's three-posterior structures {0, p, 1}, vectorised.

    γ0 = P(S = 0), γ1 = P(S = p), γ2 = 1 − γ0 − γ1 = P(S = 1). Then μ = γ1 p + γ2,
    P(X=1, ω=1) = γ1 p ψ(p) + γ2 ψ(1) and P(X=1, ω=0) = γ0 ψ(0) + γ1 (1−p) ψ(p).
    Where μ is 0 (or 1) the undefined q1 (or q0) is set to 1/2; it carries zero weight.
    The one-group case of `three_signal_group_reports`.
    """
    mu, q0, q1 = three_signal_group_reports(p, gamma0, gamma1, (lam,))
    return mu, q0[..., 0], q1[..., 0]


def _conditional(mu: NDArray[np.float64], a0: NDArray[np.float64], a1: NDArray[np.float64]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """q0 = P(X=1, ω=0) / (1 − μ), q1 = P(X=1, ω=1) / μ; 1/2 where the condition is null."""
    m = mu[..., None]
    with np.errstate(invalid="ignore", divide="ignore"):
        q1 = np.where(m > 1e-15, a1 / np.where(m > 1e-15, m, 1.0), 0.5)
        q0 = np.where(m < 1 - 1e-15, a0 / np.where(m < 1 - 1e-15, 1 - m, 1.0), 0.5)
    return np.clip(q0, 0.0, 1.0), np.clip(q1, 0.0, 1.0)


def three_signal_group_reports(p: ArrayLike, gamma0: ArrayLike, gamma1: ArrayLike,
                               lams: Sequence[float]
                               ) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                          NDArray[np.float64]]:
    """(μ, q0, q1) of the structures {0, p, 1} seen by groups of rationalities `lams`.

    Vectorised over (p, γ0, γ1); q0 and q1 carry a last axis with one entry per group.
    """
    p = np.asarray(p, dtype=float)
    g0 = np.asarray(gamma0, dtype=float)
    g1 = np.asarray(gamma1, dtype=float)
    g2 = np.clip(1.0 - g0 - g1, 0.0, 1.0)
    mu = g1 * p + g2
    a1, a0 = [], []
    for lam in lams:
        psi_p = psi(p, lam)
        a1.append(g1 * p * psi_p + g2 * psi(1.0, lam))
        a0.append(g0 * psi(0.0, lam) + g1 * (1 - p) * psi_p)
    q0, q1 = _conditional(mu, np.stack(a0, axis=-1), np.stack(a1, axis=-1))
    return mu, q0, q1


def signal_reports(posteriors: ArrayLike, probs: ArrayLike, lams: Sequence[float]
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(μ, q0, q1) of signal structures given as posteriors with their probabilities.

    `posteriors` and `probs` have shape (..., K): a distribution τ of posteriors (Bayes
    plausibility makes μ = E_τ[p]). For each group, P(X=1, ω=1) = E_τ[p ψ_g(p)] and
    P(X=1, ω=0) = E_τ[(1 − p) ψ_g(p)]; q0 and q1 get a last axis with one entry per group.
    """
    P = np.asarray(posteriors, dtype=float)
    T = np.asarray(probs, dtype=float)
    mu = (T * P).sum(axis=-1)
    a1, a0 = [], []
    for lam in lams:
        r = T * psi(P, lam)
        a1.append((r * P).sum(axis=-1))
        a0.append((r * (1 - P)).sum(axis=-1))
    q0, q1 = _conditional(mu, np.stack(a0, axis=-1), np.stack(a1, axis=-1))
    return mu, q0, q1
