"""Unbiased per-item estimates of vote accuracy and box-ball utility, with jackknife terms.

An eval draws K answers per question and temperature; the table reports, for each group size n,
the expected credit of a vote of n *fresh* answers. Each item's estimate here is exactly
unbiased for n ≤ K, and comes with its delete-one jackknife deviations, from which
`evals.intervals` builds the intervals (for these questions, and for the task).

Multiple choice (plurality). With counts c_o of each option among a question's K answers (and
c_∅ invalid), the estimate is the average credit of the plurality over all n-subsets of the K
answers (the paper's bootstrap over n-subsets, taken to its limit): the U-statistic, unbiased
for the accuracy of n fresh answers. It is computed exactly from the counts, through the
multivariate hypergeometric law of an n-subset's counts, without enumerating subsets (a
generating-function recursion over the options, `_plurality_sum`). Credit: 1 when the right
option has strictly the most votes, 1/(j+1) when it ties with j others (a fair random
tie-break), 0 otherwise; invalid answers abstain; a subset with no valid answer counts 0.
Random-follow (follow one member) is c_right / K: invalid counts as wrong.

Box-and-ball (majority, exact as in the paper's study). Each of n experts draws its own ball:
given the state ω it sees colour c with P(c | ω) and answers like the model does for that
colour (L, R or invalid with probabilities a_c, b_c, i_c). The majority's expected utility in
±1 units, U = μ (E₁[sign(x_L − x_R)] − P₁(no valid)) − (1 − μ)(E₀[sign(x_L − x_R)] + P₀(no
valid)), is a polynomial in (a_c, b_c, i_c) of degree n. Each monomial a^j b^k i^l of a colour
has the unbiased estimator (L)_j (R)_k (I)_l / (K)_{j+k+l} (falling factorials of that colour's
counts; the colours are sampled independently, so products across colours factor): the
expectation when the experts who drew colour c take answers from c's K samples *without
replacement*. This is computed exactly per scenario (hypergeometric tables of x_L − x_R per
colour, convolved across the colours). It needs n ≤ K for every colour the scenario can show;
above that `box_values` refuses (no unbiased estimator exists). The plug-in formula on the
observed shares (`box_utility`, exact for true probabilities) is biased low for n > 1
(Jensen), by about one standard error at K = 10.

Jackknife. For each item, deleting one answer changes one count (of one colour, for box-ball),
so the K delete-one estimates take at most (options + 1) distinct values (6 for box-ball):
their deviations from the full estimate, with multiplicities, give the delete-one jackknife
variance Σ_pools (K−1)/K Σ_i (Û₍₋ᵢ₎ − Û)², an upward-biased (conservative) estimate of the
variance of a U-statistic (Efron & Stein 1981). It needs K − 1 ≥ n; with K = n there are no
replicate votes and `ItemValues.jackknife` is False.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb, factorial

import numpy as np
from numpy.typing import NDArray

from ensemble.errors import InputError
from ensemble.rules import baseline, declared, main_vote

__all__ = [
    "Cell",
    "ItemValues",
    "box_utility",
    "box_values",
    "check_box",
    "choose_table",
    "plurality_counts_estimate",
    "plurality_exact",
    "power_table",
    "state_weights",
    "vote_values",
]

Cell = tuple[str, int]  # (aggregator, n)


@dataclass(frozen=True)
class ItemValues:
    """Per-item unbiased estimates of one statistic and their jackknife deviations.

    values: (Q,) the estimate per item (question; scenario for box-ball).
    jack: (Q, V) Û₍₋ᵥ₎ − Û for each distinct delete-one variant v of the item's answers.
    weight: (Q, V) multiplicity of the variant × (K − 1)/K of its pool (0: no such variant).
    jackknife: False when some item has too few answers to delete one (K ≤ n); `jack` is
    then meaningless and the conditional variance unknown.
    identical: (Q,) True where all of the item's answers are the same (no sampling noise seen).
    """

    values: NDArray[np.float64]
    jack: NDArray[np.float64]
    weight: NDArray[np.float64]
    jackknife: bool
    identical: NDArray[np.bool_]

    @property
    def items(self) -> int:
        return int(self.values.shape[0])

    def cond_var(self) -> NDArray[np.float64]:
        """Jackknife variance of each item's estimate, given the item (answer noise only)."""
        return (self.weight * self.jack**2).sum(axis=1)

    def minus(self, other: ItemValues, *, same_answers: bool) -> ItemValues:
        """self − other per item. `same_answers`: both were computed from the same answers
        (e.g. n = 5 vs n = 1 at one temperature), so their jackknife deviations are paired;
        otherwise the answers are independent (other temperature, other run) and the
        variances add."""
        if self.values.shape != other.values.shape:
            raise ValueError("items differ: align them first (ItemValues.take)")
        vals = self.values - other.values
        ok = self.jackknife and other.jackknife
        same = self.identical & other.identical
        if same_answers:
            if self.jack.shape != other.jack.shape:
                raise ValueError("paired differences need the same jackknife layout")
            return ItemValues(vals, self.jack - other.jack, self.weight, ok, same)
        return ItemValues(vals, np.concatenate([self.jack, -other.jack], axis=1),
                          np.concatenate([self.weight, other.weight], axis=1), ok, same)

    def take(self, idx: NDArray[np.intp] | list[int]) -> ItemValues:
        """The items at `idx`, in that order."""
        i = np.asarray(idx, dtype=np.intp)
        return ItemValues(self.values[i], self.jack[i], self.weight[i], self.jackknife,
                          self.identical[i])


# -- coefficient tables ------------------------------------------------------------------------
def choose_table(counts: NDArray[np.integer], n: int) -> NDArray[np.float64]:
    """C(c, y) for y = 0..n along a new last axis (0 for y > c), exact in float for c < 2**53."""
    c = np.asarray(counts, dtype=float)
    out = np.empty((*c.shape, n + 1))
    out[..., 0] = 1.0
    for y in range(1, n + 1):
        out[..., y] = out[..., y - 1] * np.maximum(c - (y - 1), 0.0) / y
    return out


def power_table(probs: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """π^y / y! for y = 0..n along a new last axis (the multinomial's coefficients)."""
    p = np.asarray(probs, dtype=float)
    out = np.empty((*p.shape, n + 1))
    out[..., 0] = 1.0
    for y in range(1, n + 1):
        out[..., y] = out[..., y - 1] * p / y
    return out


# -- multiple choice: plurality --------------------------------------------------------------
def _plurality_sum(a0: NDArray[np.float64], aw: NDArray[np.float64], ai: NDArray[np.float64],
                   n: int) -> NDArray[np.float64]:
    """Σ over vote counts (y_right, y_wrong_1.., y_invalid) summing to n of
    a0[y_right] Π_j aw[j][y_j] ai[y_invalid] × credit, vectorised over rows.

    a0, ai: (R, n+1); aw: (R, J, n+1). With a = C(count, y) this is C(K, n) × the average
    credit over n-subsets; with a = π^y / y!, 1/n! × the expected credit of n i.i.d. answers.
    For each x = y_right ≥ 1, the wrong options are multiplied in one by one as polynomials in
    z (votes used) and u (options tied with the right one at x votes); options beating x are
    left out, so the coefficient of z^(n−x) u^j sums the configurations where the right
    option ties with exactly j others and no option beats it. Its credit is 1/(j+1).
    """
    rows = a0.shape[0]
    total = np.zeros(rows)
    for x in range(1, n + 1):
        rest = n - x
        umax = rest // x
        poly = np.zeros((rows, rest + 1, umax + 1))
        poly[:, :, 0] = ai[:, : rest + 1]
        for j in range(aw.shape[1]):
            a = aw[:, j]
            new = np.zeros_like(poly)
            for y in range(min(x, rest + 1)):  # this option gets y < x votes
                new[:, y:, :] += a[:, y, None, None] * poly[:, : rest + 1 - y, :]
            if x <= rest:  # it ties with the right option at x votes
                new[:, x:, 1:] += a[:, x, None, None] * poly[:, : rest + 1 - x, :-1]
            poly = new
        share = 1.0 / (1.0 + np.arange(umax + 1))
        total += a0[:, x] * (poly[:, rest, :] @ share)
    return total


def _split_counts(counts: NDArray[np.integer], right: NDArray[np.integer]
                  ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """(right count (R,), wrong counts sorted descending and trimmed (R, J), invalid (R,))
    from option counts (R, O + 1) whose last column counts invalid answers."""
    c = np.asarray(counts, dtype=np.int64)
    rows = np.arange(c.shape[0])
    c0 = c[rows, right]
    opts = c[:, :-1].copy()
    opts[rows, right] = -1
    wrong = -np.sort(-opts, axis=1)[:, :-1]  # drop the right option (now the smallest, −1)
    keep = (wrong > 0).any(axis=0)
    return c0, wrong[:, keep] if keep.any() else wrong[:, :0], c[:, -1]


def plurality_counts_estimate(counts: NDArray[np.integer], right: NDArray[np.integer], n: int
                              ) -> NDArray[np.float64]:
    """The average plurality credit over all n-subsets of each row's answers (unbiased).

    counts: (R, O + 1) answers per option, the last column invalid ones; right: (R,) the
    index of the right option. Every row needs at least n answers.
    """
    c = np.asarray(counts, dtype=np.int64)
    k = c.sum(axis=1)
    if (k < n).any():
        raise InputError(f"n = {n} needs at least {n} answers per question; some have "
                         f"{int(k.min())} (draw more with --samples)")
    c0, cw, ci = _split_counts(c, np.asarray(right))
    s = _plurality_sum(choose_table(c0, n), choose_table(cw, n), choose_table(ci, n), n)
    return s / choose_table(k, n)[:, n]


def plurality_exact(probs: NDArray[np.float64], right: NDArray[np.integer], n: int
                    ) -> NDArray[np.float64]:
    """The exact plurality accuracy of n i.i.d. answers (random tie-break, invalid abstain, no
    valid answer = wrong). probs: (R, O + 1) answer probabilities, the last column invalid."""
    p = np.asarray(probs, dtype=float)
    rows = np.arange(p.shape[0])
    r = np.asarray(right)
    wrong = p[:, :-1].copy()
    wrong[rows, r] = 0.0
    s = _plurality_sum(power_table(p[rows, r], n), power_table(wrong, n),
                       power_table(p[:, -1], n), n)
    return s * factorial(n)


def _variants(counts: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Delete-one variants of count vectors (..., C): (C, ..., C) counts with one answer of
    category v removed (clipped at 0), and their multiplicities (..., C) (= the counts)."""
    c = np.asarray(counts, dtype=np.int64)
    eye = np.eye(c.shape[-1], dtype=np.int64)
    var = np.maximum(c[None] - eye.reshape(c.shape[-1], *([1] * (c.ndim - 1)), c.shape[-1]), 0)
    return var, c.astype(float)


def vote_values(codes: NDArray[np.integer], correct: NDArray[np.integer], ns: list[int], *,
                n_options: int) -> dict[Cell, ItemValues]:
    """Per-question unbiased estimates of plurality (each n) and random-follow accuracy.

    codes: (Q, K) answer indices in [0, n_options), −1 for invalid; correct: (Q,) index of
    the right option. Returns {(plurality, n): ..., (random-follow, 1): ...} (the main vote and
    the baseline, `ensemble.rules`).
    """
    c = np.asarray(codes)
    q, k = c.shape
    right = np.asarray(correct, dtype=np.intp)
    counts = np.zeros((q, n_options + 1), dtype=np.int64)
    for o in range(n_options):
        counts[:, o] = (c == o).sum(axis=1)
    counts[:, -1] = (c < 0).sum(axis=1)
    identical = (c == c[:, :1]).all(axis=1)
    var, mult = _variants(counts)  # (C, Q, C), (Q, C)
    cats = counts.shape[1]
    jk = k >= 2
    weight = mult * ((k - 1) / k if k else 0.0)
    out: dict[Cell, ItemValues] = {}
    stacked = np.concatenate([counts[None], var]).reshape(-1, cats)
    rights = np.tile(right, cats + 1)
    for n in sorted(set(ns)):
        ok = jk and k - 1 >= n
        est = plurality_counts_estimate(stacked if ok else counts, rights if ok else right, n)
        base = est[:q]
        jack = (est[q:].reshape(cats, q) - base).T if ok else np.zeros((q, cats))
        out[main_vote(False), n] = ItemValues(base, jack, weight, ok, identical)
    hits = counts[np.arange(q), right].astype(float)
    follow = hits / k
    if jk:
        # deleting a right answer: (hits − 1)/(K − 1); any other: hits/(K − 1)
        del_vals = np.where(np.arange(cats)[None, :] == right[:, None],
                            (hits - 1)[:, None], hits[:, None]) / (k - 1)
        jack = del_vals - follow[:, None]
    else:
        jack = np.zeros((q, cats))
    out[baseline(), 1] = ItemValues(follow, jack, weight, jk, identical)
    return out


# -- box-and-ball: utility ---------------------------------------------------------------------
def state_weights(joint: NDArray[np.float64]
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """μ (S,) and P(c | ω = 0), P(c | ω = 1) (S, 2) from joint[s, c, ω] = P(c, ω)."""
    mu = joint[:, :, 1].sum(axis=1)
    w1 = joint[:, :, 1] / np.where(mu > 0, mu, 1.0)[:, None]
    w0 = joint[:, :, 0] / np.where(mu < 1, 1 - mu, 1.0)[:, None]
    return mu, w0, w1


def _diff_tables(a_l: NDArray[np.float64], a_r: NDArray[np.float64], a_i: NDArray[np.float64],
                 n: int) -> NDArray[np.float64]:
    """H[..., m, d + n] = Σ_{x_L − x_R = d, x_L + x_R ≤ m} a_l[x_L] a_r[x_R] a_i[m − x_L − x_R]
    for m = 0..n: the (unnormalised) law of x_L − x_R among m answers of one colour."""
    out = np.zeros((*a_l.shape[:-1], n + 1, 2 * n + 1))
    for m in range(n + 1):
        for xl in range(m + 1):
            for xr in range(m - xl + 1):
                out[..., m, xl - xr + n] += a_l[..., xl] * a_r[..., xr] * a_i[..., m - xl - xr]
    return out


def _box_majority(h: NDArray[np.float64], z: NDArray[np.float64], joint: NDArray[np.float64],
                  n: int) -> NDArray[np.float64]:
    """Majority utility per scenario from normalised per-colour tables.

    h: (..., S, 2, N+1, 2N+1) law of x_L − x_R among m answers of colour c (N ≥ n); z:
    (..., S, 2, N+1) P(all m answers invalid). The m experts who see red and the n − m who see
    blue answer independently, so their differences convolve.
    """
    big = h.shape[-2] - 1
    h = h[..., : n + 1, big - n: big + n + 1]  # m ≤ n, |d| ≤ n
    red, blue = h[..., 0, :, :], h[..., 1, :, :]
    cdf = np.cumsum(blue, axis=-1)
    below = np.concatenate([np.zeros((*cdf.shape[:-1], 1)), cdf[..., :-1]], axis=-1)
    # sgn[m', k] = P(D_blue > k) − P(D_blue < k) among the m' blue answers
    total = blue.sum(axis=-1, keepdims=True)
    sgn = (total - cdf) - below
    m = np.arange(n + 1)
    # G[m] = Σ_d red[m, d] sgn[n − m, −d]: the expected sign of the total difference
    g = np.einsum("...md,...md->...m", red, sgn[..., n - m, ::-1])
    none = z[..., 0, : n + 1] * z[..., 1, n - m]  # no valid answer at all
    mu, w0, w1 = state_weights(joint)
    coef = np.array([comb(n, i) for i in m], dtype=float)

    def mix(w: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.float64]:
        pr = w[:, 0, None] ** m * w[:, 1, None] ** (n - m) * coef  # (S, n+1): m see red
        return (pr * v).sum(axis=-1)

    return mu * (mix(w1, g) - mix(w1, none)) - (1 - mu) * (mix(w0, g) + mix(w0, none))


def _box_follow(frac: NDArray[np.float64], joint: NDArray[np.float64]) -> NDArray[np.float64]:
    """Random-follow utility from per-colour shares frac[..., S, 2, (L, R, invalid)]."""
    mu, w0, w1 = state_weights(joint)
    right1 = frac[..., 0] - frac[..., 1] - frac[..., 2]  # ω = 1: L right, R and invalid wrong
    right0 = frac[..., 1] - frac[..., 0] - frac[..., 2]
    return mu * (w1 * right1).sum(axis=-1) + (1 - mu) * (w0 * right0).sum(axis=-1)


def check_box(counts: NDArray[np.int64], joint: NDArray[np.float64], n: int) -> None:
    k = counts.sum(axis=-1)
    shown = joint.sum(axis=-1) > 0  # colours the scenario can show
    short = shown & (k < n)
    if short.any():
        raise InputError(f"n = {n} needs at least {n} answers to every question of a scenario; "
                         f"some have {int(k[short].min())} (draw more with --samples): no "
                         "unbiased estimate of the majority exists with fewer")


def box_values(counts: NDArray[np.integer], joint: NDArray[np.float64], ns: list[int]
               ) -> dict[Cell, ItemValues]:
    """Per-scenario unbiased utility of the majority (each n) and random-follow (±1 units).

    counts: (S, 2, 3) answers "L", "R", invalid per scenario and colour (0 for a colour the
    scenario cannot show); joint: (S, 2, 2). Returns {(majority, n): ...,
    (random-follow, 1): ...} (the binary main vote and the baseline).
    """
    c = np.asarray(counts, dtype=np.int64)
    j = np.asarray(joint, dtype=float)
    s = c.shape[0]
    k = c.sum(axis=-1)  # (S, 2)
    shown = j.sum(axis=-1) > 0
    kmin = int(np.where(shown, k, np.iinfo(np.int64).max).min()) if shown.any() else 0
    identical = ((c == k[..., None]).any(axis=-1) | (k == 0)).all(axis=-1)
    # delete-one variants: one answer of category i removed from colour c (6 per scenario)
    var = np.repeat(c[None], 6, axis=0)
    mult = np.zeros((s, 6))
    for v in range(6):
        col, cat = divmod(v, 3)
        var[v, :, col, cat] = np.maximum(var[v, :, col, cat] - 1, 0)
        kc = k[:, col]
        mult[:, v] = c[:, col, cat] * np.where(kc > 1, (kc - 1) / np.maximum(kc, 1), 0.0)
    stacked = np.concatenate([c[None], var])  # (7, S, 2, 3)
    out: dict[Cell, ItemValues] = {}
    big = max(ns)
    check_box(c, j, big)
    kk = stacked.sum(axis=-1)
    norm = choose_table(kk, big)
    safe = np.where(norm > 0, norm, 1.0)
    tab = [choose_table(stacked[..., i], big) for i in range(3)]
    h = _diff_tables(tab[0], tab[1], tab[2], big) / safe[..., None]
    z = tab[2] / safe
    for n in sorted(set(ns)):
        ok = kmin - 1 >= n
        # variants with K − 1 < n have empty tables (estimates of no use, weight ignored)
        est = _box_majority(h, z, j, n)
        jack = (est[1:] - est[0]).T if ok else np.zeros((s, 6))
        out[main_vote(True), n] = ItemValues(est[0], jack, mult, ok, identical)
    frac = stacked / np.maximum(kk, 1)[..., None]
    follow = _box_follow(frac, j)
    ok = kmin >= 2
    jack = (follow[1:] - follow[0]).T if ok else np.zeros((s, 6))
    out[baseline(), 1] = ItemValues(follow[0], jack, mult, ok, identical)
    return out


def box_utility(r: NDArray[np.float64], joint: NDArray[np.float64], n: int, *,
                rule: str | None = None, r_right: NDArray[np.float64] | None = None
                ) -> NDArray[np.float64]:
    """Exact expected utility (±1 units) per scenario from true answer probabilities.

    r: (..., S, 2) P("L") for the colours (red, blue) of each scenario; r_right P("R")
    (default 1 − r: no invalid answers). joint: (S, 2, 2) P(colour c, ω) as [s, c, ω].
    Returns (..., S). Plugged into observed shares it is biased for n > 1: use `box_values`.
    `rule`: the binary main vote (majority, the default) or the baseline (random-follow), as
    `ensemble.rules` declares them.
    """
    rl = np.asarray(r, dtype=float)
    rr = 1.0 - rl if r_right is None else np.asarray(r_right, dtype=float)
    ri = np.clip(1.0 - rl - rr, 0.0, 1.0)
    j = np.asarray(joint, dtype=float)
    info = declared(rule or main_vote(True))
    if info is not None and info.baseline:
        return _box_follow(np.stack([rl, rr, ri], axis=-1), j)
    if info is None or not (info.vote and info.binary):
        raise ValueError(f"rule must be {main_vote(True)} or {baseline()}, got {rule!r}")
    tab = [power_table(x, n) for x in (rl, rr, ri)]
    fact = np.array([factorial(m) for m in range(n + 1)], dtype=float)
    h = _diff_tables(tab[0], tab[1], tab[2], n) * fact[:, None]
    z = tab[2] * fact
    return _box_majority(h, z, j, n)
