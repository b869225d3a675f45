"""Quantal response: ψ_λ, its inverse, and the λ <-> temperature link.

Units, fixed for the whole project: an expert with posterior p = P(ω=1 | S) reports 1 with
probability

    ψ_λ(p) = 1 / (1 + exp(2λ(1 − 2p))),   i.e.   logit ψ_λ(p) = 2λ(2p − 1).

λ = 0 is pure noise (ψ ≡ 1/2); λ = ∞ is the rational step response with ψ(1/2) = 1/2.
The paper's appendix table and its code use β = 2λ; we never do.

With softmax temperature t, λ(t) = λ₁ / t, where λ₁ is λ at t = 1; t = 0 (greedy) is λ = ∞.
"""

from __future__ import annotations

import math
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import InputError

__all__ = [
    "lam_at_temperature",
    "psi",
    "psi_inverse",
    "temperature_for_lam",
    "validate_temperature",
    "validate_lam",
    "validate_probability",
]

INF = math.inf


def validate_lam(lam: float, *, name: str = "lam") -> float:
    """Return λ as a float, or raise InputError if it is negative, NaN or not a number."""
    try:
        value = float(lam)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number >= 0 (inf allowed), got {lam!r}") from None
    if math.isnan(value) or value < 0:
        raise InputError(f"{name} must be a number >= 0 (inf allowed), got {lam!r}")
    return value


def validate_probability(p: ArrayLike, *, name: str = "p") -> NDArray[np.float64]:
    """Return p as a float array, or raise InputError if any entry is outside [0, 1] or NaN."""
    arr = np.asarray(p, dtype=float)
    if np.isnan(arr).any() or (arr < 0).any() or (arr > 1).any():
        raise InputError(f"{name} must lie in [0, 1]")
    return arr


@overload
def psi(p: float, lam: float) -> float: ...
@overload
def psi(p: NDArray[np.float64], lam: float) -> NDArray[np.float64]: ...


def psi(p: Any, lam: float) -> Any:
    """ψ_λ(p): the probability that an expert with posterior p reports 1.

    Vectorised over p. λ = inf gives the step (1/2 at p = 1/2); λ = 0 gives 1/2 everywhere.
    Computed as a numerically stable logistic function (no overflow for large λ).
    """
    lam = validate_lam(lam)
    arr = np.asarray(p, dtype=float)
    if math.isinf(lam):
        out = np.where(arr > 0.5, 1.0, np.where(arr < 0.5, 0.0, 0.5))
    else:
        z = 2.0 * lam * (2.0 * arr - 1.0)
        # scipy.special.expit is stable; import locally to keep `import ensemble.qr` cheap.
        from scipy.special import expit

        out = expit(z)
    if np.ndim(p) == 0:
        return float(out)
    return out


@overload
def psi_inverse(q: float, lam: float) -> float: ...
@overload
def psi_inverse(q: NDArray[np.float64], lam: float) -> NDArray[np.float64]: ...


def psi_inverse(q: Any, lam: float) -> Any:
    """The posterior p with ψ_λ(p) = q, clipped to [0, 1].

    For 0 < λ < inf, p = 1/2 + logit(q) / (4λ), clipped to [0, 1] (values of q below ψ_λ(0)
    or above ψ_λ(1) are not reached by any posterior). λ = 0 and λ = inf are not invertible
    and raise InputError.
    """
    lam = validate_lam(lam)
    if lam == 0 or math.isinf(lam):
        raise InputError(f"psi_inverse needs 0 < lam < inf, got {lam}")
    arr = validate_probability(q, name="q")
    from scipy.special import logit

    with np.errstate(divide="ignore"):
        out = np.clip(0.5 + logit(arr) / (4.0 * lam), 0.0, 1.0)
    if np.ndim(q) == 0:
        return float(out)
    return out


def lam_at_temperature(lam1: float, t: float) -> float:
    """λ(t) = λ₁ / t, with t = 0 (greedy decoding) giving λ = inf."""
    lam1 = validate_lam(lam1, name="lam1")
    t = validate_temperature(t)
    if t == 0:
        return INF
    return lam1 / t


def temperature_for_lam(lam1: float, lam: float) -> float:
    """The temperature t at which an expert with λ₁ (λ at t = 1) has rationality λ."""
    lam1 = validate_lam(lam1, name="lam1")
    lam = validate_lam(lam)
    if lam == 0:
        return INF
    if math.isinf(lam):
        return 0.0
    return lam1 / lam


def validate_temperature(t: float) -> float:
    """A sampling temperature as a float, checked: finite and >= 0 (InputError otherwise)."""
    try:
        value = float(t)
    except (TypeError, ValueError):
        raise InputError(f"temperature must be a number >= 0, got {t!r}") from None
    if math.isnan(value) or value < 0 or math.isinf(value):
        raise InputError(f"temperature must be a finite number >= 0, got {t!r}")
    return value
