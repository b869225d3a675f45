"""Groups of experts with different rationality, the count vectors they report, and their rules.

Group g has n_g experts of rationality λ_g (ψ_λ units); all experts share one conditionally
i.i.d. signal structure. Given ω the per-group counts X_g of reports of 1 are independent
Binomial(n_g, q_{g,ω}). An aggregator for groups is an array f of shape (n_1+1, ..., n_G+1):
f[x_1, ..., x_G] = P(decide 1). One group is the case G = 1 (f has n + 1 entries).

Flattened arrays over count vectors use C order (the last group varies fastest), as
`numpy.ravel` does on f.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InputError
from ..qr import validate_lam

__all__ = [
    "Group",
    "count_shape",
    "count_vectors",
    "group_majority_f",
    "group_random_follow_f",
    "lam_weighted_f",
    "lam_weighted_score",
    "lam_weights",
    "parse_group",
    "validate_group_f",
    "validate_groups",
]

@dataclass(frozen=True)
class Group:
    """n experts of rationality λ (ψ_λ units; inf is the rational expert)."""

    n: int
    lam: float


def _one_group(g: Any) -> Group:
    if isinstance(g, Group):
        n, lam = g.n, g.lam
    elif isinstance(g, dict):
        if set(g) - {"n", "lam"} or "n" not in g or "lam" not in g:
            raise InputError(f"a group is {{'n': N, 'lam': λ}}, got {g!r}")
        n, lam = g["n"], g["lam"]
    else:
        try:
            n, lam = g
        except (TypeError, ValueError):
            raise InputError(f"a group is (n, λ), e.g. (3, 2.0), got {g!r}") from None
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"a group's size n must be an integer >= 1, got {n!r}")
    return Group(int(n), validate_lam(lam, name="a group's λ"))


def validate_groups(groups: Iterable[Any]) -> tuple[Group, ...]:
    """Groups as a tuple of `Group`; accepts Group, (n, λ) pairs or {"n", "lam"} dicts."""
    if isinstance(groups, (str, bytes)):
        raise InputError("groups must be a list of (n, λ) pairs, e.g. [(3, 2.0), (2, 8.0)]")
    try:
        out = tuple(_one_group(g) for g in groups)
    except TypeError:
        raise InputError("groups must be a list of (n, λ) pairs, e.g. [(3, 2.0), (2, 8.0)]") \
            from None
    if not out:
        raise InputError("at least one group is needed")
    return out


def parse_group(text: str) -> Group:
    """'N:λ' (λ may be 'inf') as a Group; InputError naming the fix otherwise."""
    parts = text.split(":")
    if len(parts) != 2:
        raise InputError(f"a group is N:λ, e.g. 3:2 or 2:inf, got {text!r}")
    try:
        n = int(parts[0])
    except ValueError:
        raise InputError(f"a group is N:λ with N an integer >= 1, got {text!r}") from None
    try:
        lam = float(parts[1])
    except ValueError:
        raise InputError(f"a group is N:λ with λ a number >= 0 or inf, got {text!r}") from None
    if n < 1:
        raise InputError(f"a group is N:λ with N an integer >= 1, got {text!r}")
    if math.isnan(lam) or lam < 0:
        raise InputError(f"a group is N:λ with λ a number >= 0 or inf, got {text!r}")
    return Group(n, lam)


def count_shape(groups: Sequence[Group]) -> tuple[int, ...]:
    """(n_1 + 1, ..., n_G + 1): the shape of an aggregator f for these groups."""
    return tuple(g.n + 1 for g in groups)


def count_vectors(groups: Sequence[Group]) -> NDArray[np.int64]:
    """All count vectors (x_1, ..., x_G), shape (∏(n_g+1), G), in C order."""
    shape = count_shape(groups)
    grids = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=-1)


def validate_group_f(f: ArrayLike, groups: Sequence[Group]) -> NDArray[np.float64]:
    """f as a float array of shape (n_1+1, ..., n_G+1) with entries in [0, 1].

    A flat vector of the right length (C order) is accepted and reshaped.
    """
    shape = count_shape(groups)
    try:
        arr = np.asarray(f, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"an aggregator for groups {_desc(groups)} must be a nested list of "
                         f"numbers of shape {shape}") from None
    if arr.ndim == 1 and arr.size == math.prod(shape):
        arr = arr.reshape(shape)
    if arr.shape != shape:
        raise InputError(f"an aggregator for groups {_desc(groups)} needs shape {shape} "
                         f"(f[x_1]...[x_G]), got {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        raise InputError("aggregator values f(x) must lie in [0, 1]")
    return arr


def _desc(groups: Sequence[Group]) -> str:
    return " ".join(f"{g.n}:{g.lam:g}" for g in groups)


def _sign_rule(score: NDArray[np.float64], tol: float) -> NDArray[np.float64]:
    return np.where(score > tol, 1.0, np.where(score < -tol, 0.0, 0.5))


def group_majority_f(groups: Sequence[Any]) -> NDArray[np.float64]:
    """Majority over all votes: 1 above half of Σ n_g, 0 below, 1/2 on a tie."""
    groups = validate_groups(groups)
    x = count_vectors(groups).sum(axis=-1)
    total = sum(g.n for g in groups)
    return _sign_rule((2 * x - total).astype(float), 0.0).reshape(count_shape(groups))


def group_random_follow_f(groups: Sequence[Any]) -> NDArray[np.float64]:
    """Follow one expert chosen uniformly at random: f(x) = Σ x_g / Σ n_g."""
    groups = validate_groups(groups)
    x = count_vectors(groups).sum(axis=-1)
    return (x / sum(g.n for g in groups)).reshape(count_shape(groups))


def lam_weights(lams: Sequence[float]) -> NDArray[np.float64]:
    """The vote weight of each rationality: 2λ, the log-odds that an expert whose signal reveals
    ω reports it (ψ_λ(1) / (1 − ψ_λ(1)) = e^{2λ}). See docs/ensembles.md for the derivation.

    inf stays inf (handled lexicographically by the rules: rational votes first).
    """
    return np.array([2.0 * validate_lam(lam) for lam in lams], dtype=float)


def lam_weighted_score(plus: NDArray[np.float64], lams: Sequence[float]
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(score of the rational votes, score of the others) for net votes `plus` (..., G).

    `plus[..., g]` is (votes for 1) − (votes for 0) in group g. The weighted vote decides by
    the first score when it is non-zero (rational experts, λ = ∞, outweigh any finite λ) and
    by the second otherwise.
    """
    w = lam_weights(lams)
    inf = np.isinf(w)
    hi = (plus * inf).sum(axis=-1)
    lo = (plus * np.where(inf, 0.0, w)).sum(axis=-1)
    return hi, lo


def lam_weighted_f(groups: Sequence[Any]) -> NDArray[np.float64]:
    """The λ-weighted vote: decide 1 when Σ_g 2λ_g (x_g − (n_g − x_g)) > 0, 1/2 on a tie.

    Votes of rationality λ = ∞ come first (lexicographically); λ = 0 votes carry no weight.
    Equal λ everywhere gives plain majority.
    """
    groups = validate_groups(groups)
    xs = count_vectors(groups).astype(float)
    ns = np.array([g.n for g in groups], dtype=float)
    hi, lo = lam_weighted_score(2 * xs - ns, [g.lam for g in groups])
    scale = max(1.0, float(np.abs(lo).max()))
    f = np.where(hi > 0, 1.0, np.where(hi < 0, 0.0, _sign_rule(lo, 1e-12 * scale)))
    return f.reshape(count_shape(groups))
