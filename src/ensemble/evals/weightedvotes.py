"""The exact estimate of a weighted vote over any number of options, by a recursion over them.

A weighted vote is a rule declaring `RuleInfo.weighs` (plurality, majority, lam-weighted): each
valid vote of member g adds w_g to its answer's score, the highest score wins, and a k-way tie
that holds the right answer earns 1/k. Its accuracy is estimated without bias from K_g stored
samples of each member by averaging its credit over every choice of n_g of them per member
(`evals.groups.vote_group_values`). Enumerating the members' count vectors to do so grows with
the number of distinct answers: on open answers (a cheap model's 20 samples of one arithmetic
question gave 12 different numbers) 10-subsets of one member with 4-subsets of another's 6 made
some 10^7 count vectors a question, and the run did not finish in ten minutes.

The credit only asks whether the right answer's score beats, or ties with, every other answer's.
So, for each score s the right answer can get (each count vector y_r of it, weighted by
Π_g C(c_gr, y_gr)), the choices of the other slots are summed option by option: a recursion over
the wrong answers (and the invalid replies, which fill slots and vote for nothing) whose state is
the slots used per member and the number of wrong answers tied with s, and which drops every
assignment where a wrong answer scores more than s. The sum over the states that fill exactly
n_g − y_gr slots, each weighted 1/(1 + ties), divided by Π_g C(K_g, n_g), is the estimate: the
same number the enumeration gives (tests/evals/test_mixed_open.py recounts it by brute force).
Every score the right answer can get is carried at once (a leading axis), so the work per
question is (wrong answers' count vectors) × (right answer's scores) × Π_g (n_g + 1) × ties.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from math import comb

import numpy as np
from numpy.typing import NDArray

__all__ = ["usable_weights", "weighted_vote_value"]

_REL = 1e-12  # ties within this relative difference, as `ensemble.credit.lam_weighted_credit`


def usable_weights(weights: Sequence[float]) -> NDArray[np.float64] | None:
    """The weights as an array when the recursion applies (every one finite and > 0), else None:
    a vote of weight 0 or ∞ (λ = 0, λ = ∞) is compared as `lam_weighted_credit` compares it,
    which the enumeration does."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or not np.isfinite(w).all() or (w <= 0).any():
        return None
    return w


def _vectors(upper: Sequence[int]) -> NDArray[np.int64]:
    """Every count vector y with 0 <= y_g <= upper[g], as rows."""
    return np.array(list(itertools.product(*(range(int(u) + 1) for u in upper))),
                    dtype=np.int64).reshape(-1, len(upper))


def _coef(counts: NDArray[np.int64], ys: NDArray[np.int64]) -> NDArray[np.float64]:
    """Π_g C(counts[g], y_g) per row of ys."""
    out = np.ones(len(ys))
    for g, c in enumerate(counts):
        out *= np.array([comb(int(c), int(y)) for y in ys[:, g]], dtype=float)
    return out


def weighted_vote_value(counts: NDArray[np.integer], ns: Sequence[int],
                        weights: NDArray[np.float64], right: int) -> float:
    """The mean credit of the weighted vote over every choice of ns[g] of each member's samples.

    counts: (G, O + 1) member g's samples per option, the last column its invalid ones; ns: the
    votes drawn from each member (ns[g] <= its samples); weights: w_g > 0 (`usable_weights`);
    right: the right option's column (−1 or out of range: none, credit 0)."""
    c = np.asarray(counts, dtype=np.int64)
    G, cols = c.shape
    options = cols - 1
    n = [int(x) for x in ns]
    if not 0 <= right < options:
        return 0.0
    total = c.sum(axis=1)
    if any(int(total[g]) < n[g] for g in range(G)):
        raise ValueError(f"members with {total.tolist()} samples cannot give {n} votes")
    yr = _vectors([min(int(c[g, right]), n[g]) for g in range(G)])
    s = yr @ weights
    keep = s > 0  # the right answer without a vote is never the decision
    yr, s = yr[keep], s[keep]
    if not len(yr):
        return 0.0
    coef_r = _coef(c[:, right], yr)
    key = np.round(s / np.max(s), 12)
    levels, which = np.unique(key, return_inverse=True)
    thresholds = np.array([s[which == i][0] for i in range(len(levels))])  # (L,)
    tol = _REL * np.maximum(1.0, np.abs(thresholds))
    wrong = [o for o in range(options) if o != right and c[:, o].any()]
    T = len(wrong)
    shape = (len(thresholds), *(x + 1 for x in n), T + 1)
    state = np.zeros(shape)
    state[(slice(None),) + (0,) * G + (0,)] = 1.0
    lead = (slice(None),)

    def shifted(y: Sequence[int]) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        src = tuple(slice(0, n[g] + 1 - int(y[g])) for g in range(G))
        dst = tuple(slice(int(y[g]), n[g] + 1) for g in range(G))
        return lead + src, lead + dst

    # the invalid replies fill slots and vote for nothing: member by member
    for g in range(G):
        bad = min(int(c[g, options]), n[g])
        if bad == 0:
            continue
        new = np.zeros_like(state)
        for y in range(bad + 1):
            step = [0] * G
            step[g] = y
            src, dst = shifted(step)
            new[dst] += comb(int(c[g, options]), y) * state[src]
        state = new
    below = (slice(None),) + (None,) * (G + 1)  # a (L,) mask over the state's axes
    for o in wrong:
        ys = _vectors([min(int(c[g, o]), n[g]) for g in range(G)])
        coefs = _coef(c[:, o], ys)
        sigma = ys @ weights
        new = np.zeros_like(state)
        for y, coef, sg in zip(ys, coefs, sigma, strict=True):
            less = sg < thresholds - tol
            tie = np.abs(sg - thresholds) <= tol
            src, dst = shifted(y)
            if less.any():
                new[dst] += (coef * less)[below] * state[src]
            if tie.any():
                new[dst + (slice(1, None),)] += ((coef * tie)[below]
                                                 * state[src + (slice(0, T),)])
        state = new
    share = 1.0 / (1.0 + np.arange(T + 1))
    rest = np.asarray(n)[None, :] - yr
    got = state[(which,) + tuple(rest[:, g] for g in range(G))]  # (R, T + 1)
    value = float(coef_r @ (got @ share))
    norm = 1.0
    for g in range(G):
        norm *= comb(int(total[g]), n[g])
    return value / norm
