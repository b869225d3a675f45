"""Rules as vectors and their exact or vectorised credit: what the evals and the theory need.

A binary rule is a vector f(0..n) (the probability of deciding the first choice given x votes
for it), matching `ensemble.theory`; for mixed ensembles an array f[x_1, ..., x_G] of the
per-group counts. The credit functions score many items and bootstrap draws at once.
Import them from here (`ensemble.aggregators` holds the per-vote rules).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import InputError

__all__ = [
    "TIE_RULES",
    "aggregator_f",
    "as_rng",
    "binary_credit",
    "group_aggregator_f",
    "group_credit",
    "group_utility",
    "group_utility_with_invalid",
    "lam_weighted_credit",
    "majority_credit",
    "plurality_credit",
    "plurality_winner",
]

TIE_RULES = ("random", "fractional")


def as_rng(rng: Any) -> np.random.Generator:
    """A numpy Generator from a Generator, a seed or None."""
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def aggregator_f(name: str, n: int, *, lam: float | None = None) -> NDArray[np.float64]:
    """A registered rule as the vector f(0..n) for one group of n experts (λ for the rules that
    need it), e.g. majority, random-follow, robust (needs λ), lam-weighted (for one group:
    majority)."""
    from .rules import aggregator_info

    return aggregator_info(name).f_of(n, lam)


def group_aggregator_f(name: str, ns: Sequence[int], lams: Sequence[float]
                       ) -> NDArray[np.float64]:
    """A registered rule's group form as an array f of shape (n_1+1, ..., n_G+1):
    f[x_1, ..., x_G] = P(decide choices[0]) given x_g votes for it among the n_g of group g.

    name: e.g. majority (over all votes), random-follow, lam-weighted (votes weighted by 2λ_g)
    or robust (the minimax-regret rule; cached per (n_g, λ_g), the first call costs ~0.1-5 s).
    `lams` gives λ_g per group (ψ_λ units). One group gives the same values as
    `aggregator_f`. The array is read-only.
    """
    from .rules import aggregator_info, aggregator_names
    from .theory import validate_groups

    info = aggregator_info(name)
    if info.group_f is None:
        raise InputError(f"{name!r} has no group form; rules with one: "
                         f"{', '.join(n for n in aggregator_names() if _has_groups(n))}")
    if len(ns) != len(lams):
        raise InputError(f"ns and lams must have one entry per group ({len(ns)} vs {len(lams)})")
    groups = validate_groups(list(zip(ns, lams, strict=True)))
    f = np.array(info.group_f(groups), dtype=float)
    f.flags.writeable = False
    return f


def _has_groups(name: str) -> bool:
    from .rules import aggregator_info

    return aggregator_info(name).group_f is not None


def group_utility(f: ArrayLike, mu: ArrayLike, q0: ArrayLike, q1: ArrayLike,
                  ns: Sequence[int]) -> NDArray[np.float64]:
    """Exact expected utility (±1 units) of a group rule f, vectorised over scenarios.

    U = Σ_x w_x (2 f(x) − 1), w_x = μ Π_g Bin(x_g; n_g, q1[g]) − (1 − μ) Π_g Bin(x_g; n_g,
    q0[g]): the experts of group g report 1 with probability q0[..., g] given ω = 0 and
    q1[..., g] given ω = 1 (e.g. Σ_c P(colour c | ω) × the member's frequency of answering 1
    to colour c, in box-ball), independently given ω.

    f: shape (n_1+1, ..., n_G+1) (`group_aggregator_f`) or flat in C order.
    mu: shape S (any batch shape), the prior P(ω = 1) of each scenario.
    q0, q1: shape S + (G,).
    Returns shape S. For one group, f(0..n), q0 and q1 of shape S + (1,).
    """
    from .theory import group_utility as _group_utility

    return _group_utility(f, mu, q0, q1, ns)


def group_utility_with_invalid(rule: str, ns: Sequence[int], lams: Sequence[float],
                               mu: ArrayLike, yes0: ArrayLike, no0: ArrayLike, yes1: ArrayLike,
                               no1: ArrayLike) -> NDArray[np.float64]:
    """Exact expected utility (±1 units) of a group rule when answers can be invalid.

    Each expert of group g votes 1 with probability yes{ω}[..., g], 0 with no{ω}[..., g], and
    is invalid otherwise (e.g. box-ball: yes = Σ_c P(c | ω) × frequency of "L" for colour c,
    no likewise for "R"). Invalid votes are ignored, as by the rules' default policy: the rule
    decides on the valid counts, with f computed for the valid group sizes (a group without a
    valid vote drops out); no valid vote at all counts as wrong (−1), as in the evals.

    rule: a registered rule with a group form, e.g. majority (over all valid votes),
    lam-weighted or robust (one f per vector of valid sizes: ∏(n_g + 1) rules, each cached).
    mu: shape S; yes0, no0, yes1, no1: shape S + (G,). Returns shape S. Without invalid
    answers it equals `group_utility`.
    """
    from .theory import group_weights
    from .theory.utility import binom_pmf

    if len(ns) != len(lams):
        raise InputError(f"ns and lams must have one entry per group ({len(ns)} vs {len(lams)})")
    m = np.asarray(mu, dtype=float)
    y0, n0, y1, n1 = (np.asarray(v, dtype=float) for v in (yes0, no0, yes1, no1))
    v0, v1 = np.clip(y0 + n0, 0.0, 1.0), np.clip(y1 + n1, 0.0, 1.0)  # P(valid | ω)
    with np.errstate(invalid="ignore", divide="ignore"):
        c0 = np.where(v0 > 0, y0 / np.where(v0 > 0, v0, 1.0), 0.5)  # P(1 | valid, ω)
        c1 = np.where(v1 > 0, y1 / np.where(v1 > 0, v1, 1.0), 0.5)
    size0 = [binom_pmf(n, v0[..., g]) for g, n in enumerate(ns)]  # P(m_g valid | ω = 0)
    size1 = [binom_pmf(n, v1[..., g]) for g, n in enumerate(ns)]
    total = np.zeros(np.broadcast_shapes(m.shape, v0.shape[:-1]))
    for sizes in np.ndindex(*(n + 1 for n in ns)):
        pm0 = np.prod([size0[g][..., k] for g, k in enumerate(sizes)], axis=0)
        pm1 = np.prod([size1[g][..., k] for g, k in enumerate(sizes)], axis=0)
        present = [g for g, k in enumerate(sizes) if k > 0]
        if not present:
            total -= m * pm1 + (1 - m) * pm0  # no valid vote: wrong
            continue
        sub_ns = [sizes[g] for g in present]
        f = group_aggregator_f(rule, sub_ns, [lams[g] for g in present]).reshape(-1)
        w1 = group_weights(1.0, c0[..., present], c1[..., present], sub_ns)  # P(x | m, ω=1)
        w0 = -group_weights(0.0, c0[..., present], c1[..., present], sub_ns)  # P(x | m, ω=0)
        total += m * pm1 * (w1 @ (2 * f - 1)) - (1 - m) * pm0 * (w0 @ (2 * f - 1))
    return total


def binary_credit(group_f: Callable[[Sequence[Any]], ArrayLike]
                  ) -> Callable[[ArrayLike, ArrayLike, Sequence[float | None]],
                                NDArray[np.float64]]:
    """A binary rule's credit over two options from its group form (`RuleInfo.credit` for a
    rule that has `group_f`): per row, the rule for the valid votes of each member (a member
    without one drops out), P(first option) at the members' counts of it; credit that
    probability when the first option is right, else its complement; no valid vote: 0.

    counts: shape S + (G, 2); correct: shape S (0 or 1); lams: λ per member. The group rules
    are computed once per vector of valid sizes."""

    def credit(counts: ArrayLike, correct: ArrayLike, lams: Sequence[float | None]
               ) -> NDArray[np.float64]:
        from .theory import validate_groups

        c = np.asarray(counts)
        if c.shape[-1] != 2:
            raise InputError(f"a binary rule's credit needs two options, got {c.shape[-1]}")
        corr = np.asarray(correct)
        rows, right = c.reshape(-1, c.shape[-2], 2), corr.reshape(-1)
        out = np.zeros(len(rows))
        cache: dict[tuple[tuple[int, ...], tuple[int, ...]], NDArray[Any]] = {}
        for i, row in enumerate(rows):
            sizes = row.sum(axis=-1)
            present = tuple(int(g) for g in np.flatnonzero(sizes))
            if not present:
                continue
            key = (present, tuple(int(sizes[g]) for g in present))
            if key not in cache:
                cache[key] = np.asarray(group_f(validate_groups(
                    [(int(sizes[g]), 1.0 if lams[g] is None else float(lams[g]))  # type: ignore[arg-type]
                     for g in present])))
            p1 = float(cache[key][tuple(int(row[g, 0]) for g in present)])
            out[i] = p1 if right[i] == 0 else 1.0 - p1
        return out.reshape(corr.shape)

    return credit


def group_credit(f: ArrayLike, ones: ArrayLike, truth: ArrayLike) -> NDArray[np.float64]:
    """Expected credit of a group rule on observed votes: f[x] if truth is 1 else 1 − f[x].

    f: shape (n_1+1, ..., n_G+1); ones: per-group counts of votes for 1, shape S + (G,)
    (integers, x_g <= n_g); truth: 0/1 of shape S. A randomised f gives its probability.
    """
    farr = np.asarray(f, dtype=float)
    x = np.asarray(ones)
    if x.shape[-1] != farr.ndim:
        raise InputError(f"ones needs a last axis with one count per group ({farr.ndim})")
    if (x < 0).any() or any((x[..., g] >= farr.shape[g]).any() for g in range(farr.ndim)):
        raise InputError(f"counts out of range for f of shape {farr.shape}")
    p1 = farr[tuple(x[..., g] for g in range(farr.ndim))]
    t = np.asarray(truth)
    return np.where(t == 1, p1, 1.0 - p1)


def lam_weighted_credit(counts: ArrayLike, correct: ArrayLike, lams: Sequence[float], *,
                        tie: str = "fractional", rng: Any = None) -> NDArray[np.float64]:
    """Credit of the λ-weighted vote, vectorised (any number of options).

    counts: shape S + (G, k): votes per group and option; correct: index of the right option,
    shape S; lams: λ per group. Scores are compared lexicographically: votes of λ = ∞ first,
    then Σ_g 2λ_g counts. Ties as in `plurality_credit`; rows without votes get 0.
    """
    c = np.asarray(counts, dtype=float)
    if c.ndim < 2 or c.shape[-2] != len(lams):
        raise InputError(f"counts needs shape (..., G, k) with G = {len(lams)} groups")
    from .theory import lam_weights

    w = lam_weights(lams)
    inf = np.isinf(w)
    hi = (c * inf[:, None]).sum(axis=-2)
    lo = (c * np.where(inf, 0.0, w)[:, None]).sum(axis=-2)
    top = hi == hi.max(axis=-1, keepdims=True)
    lo_top = np.where(top, lo, -np.inf)
    best = lo_top.max(axis=-1, keepdims=True)
    top &= np.abs(lo_top - best) <= 1e-12 * np.maximum(1.0, np.abs(best))
    any_vote = c.sum(axis=(-2, -1)) > 0
    corr = np.asarray(correct).astype(int)
    if tie == "random":
        noise = as_rng(rng).random(top.shape)
        win = np.argmax(np.where(top, noise, -1.0), axis=-1)
        return ((win == corr) & any_vote).astype(float)
    if tie != "fractional":
        raise InputError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    k = top.sum(axis=-1)
    is_top = np.take_along_axis(top, corr[..., None], axis=-1)[..., 0]
    return np.where(is_top & any_vote, 1.0 / k, 0.0)


# -- vectorised forms for evaluation -----------------------------------------------------------
def plurality_winner(counts: ArrayLike, *, rng: Any = None) -> NDArray[np.int64]:
    """Index of the plurality winner along the last axis, ties broken uniformly at random."""
    c = np.asarray(counts)
    g = as_rng(rng)
    top = c == c.max(axis=-1, keepdims=True)
    noise = g.random(c.shape)
    return np.argmax(np.where(top, noise, -1.0), axis=-1)


def plurality_credit(counts: ArrayLike, correct: ArrayLike, *, tie: str = "fractional",
                     rng: Any = None) -> NDArray[np.float64]:
    """Credit of the plurality vote: 1 for a unique correct winner; with a k-way tie that
    includes the correct option, 1/k ("fractional") or a seeded random tie-break ("random").
    Rows with no votes at all get 0."""
    c = np.asarray(counts)
    corr = np.asarray(correct)
    if tie == "random":
        win = plurality_winner(c, rng=rng)
        return ((win == corr) & (c.max(axis=-1) > 0)).astype(float)
    if tie != "fractional":
        raise InputError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    mx = c.max(axis=-1)
    top = c == mx[..., None]
    k = top.sum(axis=-1)
    is_top = np.take_along_axis(top, corr[..., None].astype(int), axis=-1)[..., 0]
    return np.where(is_top & (mx > 0), 1.0 / k, 0.0)


def majority_credit(ones: ArrayLike, n: ArrayLike, truth: ArrayLike, *, tie: str = "fractional",
                    rng: Any = None) -> NDArray[np.float64]:
    """Credit of a binary majority with `ones` votes for 1 out of `n` valid votes; truth 0/1.
    Ties give ½ ("fractional") or a seeded coin ("random"); n = 0 counts as a tie."""
    o = np.asarray(ones, dtype=float)
    nn = np.asarray(n, dtype=float)
    t = np.asarray(truth)
    p1 = np.where(2 * o > nn, 1.0, np.where(2 * o < nn, 0.0, 0.5))
    if tie == "random":
        coin = as_rng(rng).random(np.broadcast(o, nn, t).shape) < 0.5
        p1 = np.where(p1 == 0.5, coin.astype(float), p1)
    elif tie != "fractional":
        raise InputError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    return np.where(t == 1, p1, 1.0 - p1)
