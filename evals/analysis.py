"""Vectorised analysis of sampled answers: bootstrap vote accuracy and exact box-task utility.

Multiple choice (plurality, the paper's procedure). Each bootstrap repetition draws Q questions
with replacement and, for each, a uniformly random n-subset of its K answers without
replacement; the plurality of the subset decides, ties broken uniformly at random (seeded).
The point estimate is the mean over repetitions, the standard error their standard deviation
(so it includes the question-sampling variance, not only the subset noise), the interval the
2.5/97.5 percentiles. The same question and subset draws are used at every temperature, so
differences between temperatures are paired (`contrast`).

Invalid answers are abstentions: they take no part in the vote; a group whose answers are all
invalid counts as wrong. Random-follow (follow one member chosen at random) counts an invalid
answer as wrong.

Box-and-ball (majority, exact as in the paper's study). Each expert draws its own ball, so with
a_c and b_c the frequencies of "L" and "R" among the K answers to colour c (invalid answers make
up the rest), an expert answers L with probability qL_ω = Σ_c P(c | ω) a_c given the state ω,
R with qR_ω = Σ_c P(c | ω) b_c. The counts (x_L, x_R) of n experts are trinomial, and the
majority's expected utility in ±1 units is U = Σ_x [P(x, ω=1) − P(x, ω=0)] d(x) − P(no valid
answer), with d = +1 (L wins), −1 (R wins), 0 (a tie, broken by a fair coin). Without invalid
answers this is Σ_x w_x (2 f(x) − 1) with X ~ Binomial(n, q_ω), `ensemble.theory`'s formula. The
reported utility is the mean over scenarios; its error comes from resampling each question's K
answers (a parametric bootstrap: multinomial draws with the observed frequencies).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.aggregators import plurality_credit

__all__ = [
    "BOX_RULES",
    "VOTE_RULES",
    "Estimate",
    "bootstrap_indices",
    "bootstrap_vote_accuracy",
    "box_utility",
    "box_utility_bootstrap",
    "box_utility_draws",
    "estimate",
    "vote_accuracy_loop",
    "vote_draws",
]

VOTE_RULES = ("plurality", "random-follow")
BOX_RULES = ("majority", "random-follow")


@dataclass(frozen=True)
class Estimate:
    """A bootstrap estimate: point value, standard error and 95% percentile interval."""

    value: float
    sem: float
    ci: tuple[float, float]


def estimate(draws: NDArray[np.float64], point: float | None = None) -> Estimate:
    """Summarise bootstrap draws (1-D); `point` overrides the mean of the draws."""
    d = np.asarray(draws, dtype=float)
    sem = float(d.std(ddof=1)) if d.size > 1 else 0.0
    lo, hi = np.percentile(d, [2.5, 97.5])
    return Estimate(float(d.mean()) if point is None else float(point), sem, (float(lo), float(hi)))


def _gen(rng: Any) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def bootstrap_indices(n_questions: int, k: int, m: int, *, reps: int, rng: Any = 0
                      ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Questions drawn with replacement (reps, Q) and, for each, an ordered random m-subset of
    its k answers without replacement (reps, Q, m); the first n of it form a random n-subset.

    Sequential draws: the i-th index is uniform on the k − i answers not yet taken, mapped to
    its position by stepping over the (sorted) indices already taken. O(m²) passes over
    (reps, Q) arrays, far cheaper than sorting k random keys per draw.
    """
    if not 1 <= m <= k:
        raise ValueError(f"need 1 <= m <= k, got m={m}, k={k}")
    g = _gen(rng)
    qidx = g.integers(0, n_questions, size=(reps, n_questions))
    chosen = np.empty((reps, n_questions, m), dtype=np.intp)
    taken = np.empty((reps, n_questions, 0), dtype=np.intp)
    for i in range(m):
        x = g.integers(0, k - i, size=(reps, n_questions))
        for j in range(i):
            x += x >= taken[..., j]
        chosen[..., i] = x
        taken = np.sort(chosen[..., : i + 1], axis=-1)
    return qidx, chosen


def vote_draws(codes: NDArray[np.integer], correct: NDArray[np.integer], ns: list[int], *,
               n_options: int, reps: int = 1000, rng: Any = 0) -> NDArray[np.float64]:
    """Bootstrap draws of the mean credit of plurality and random-follow.

    codes: (T, Q, K) or (Q, K) answer indices in [0, n_options), −1 for invalid. correct: (Q,)
    index of the right option. Returns (T, len(ns), 2, reps) ([..., 0, :] plurality,
    [..., 1, :] random-follow); the T axis is dropped for 2-D input.
    """
    c = np.asarray(codes)
    flat = c.ndim == 2
    if flat:
        c = c[None]
    T, Q, K = c.shape
    corr = np.asarray(correct)
    g = _gen(rng)
    qidx, sub_idx = bootstrap_indices(Q, K, max(ns), reps=reps, rng=g)
    ccorr = corr[qidx]  # (reps, Q)
    out = np.empty((T, len(ns), 2, reps))
    small = np.int8 if n_options < 127 else np.int32
    for ti in range(T):
        picked = c[ti].astype(small)[qidx[..., None], sub_idx]  # (reps, Q, m)
        hit = picked == ccorr[..., None]
        for ni, n in enumerate(ns):
            sub = picked[..., :n]
            counts = np.stack([(sub == o).sum(axis=-1, dtype=np.int16)
                               for o in range(n_options)], axis=-1)
            plu = plurality_credit(counts, ccorr, tie="random", rng=g)
            out[ti, ni, 0] = plu.mean(axis=-1)
            # random-follow, Rao-Blackwellised: the mean over the n members it may follow
            out[ti, ni, 1] = hit[..., :n].mean(axis=(-1, -2))
    return out[0] if flat else out


def bootstrap_vote_accuracy(codes: NDArray[np.integer], correct: NDArray[np.integer],
                            ns: list[int], *, n_options: int, reps: int = 1000, rng: Any = 0,
                            ) -> dict[int, dict[str, Estimate]]:
    """Bootstrap accuracy of plurality and random-follow for each n, from (Q, K) codes.

    Returns {n: {"plurality": Estimate, "random-follow": Estimate}}.
    """
    d = vote_draws(codes, correct, ns, n_options=n_options, reps=reps, rng=rng)
    return {n: {rule: estimate(d[ni, ri]) for ri, rule in enumerate(VOTE_RULES)}
            for ni, n in enumerate(ns)}


def vote_accuracy_loop(codes: NDArray[np.integer], correct: NDArray[np.integer], n: int, *,
                       reps: int, rng: Any = 0) -> float:
    """The same estimate with a plain per-question Python loop (the benchmark's baseline)."""
    import random
    from collections import Counter

    r = random.Random(int(_gen(rng).integers(2**31)))
    Q = np.shape(codes)[0]
    rows = [list(map(int, row)) for row in codes]
    corr = list(map(int, correct))
    total = 0.0
    for _ in range(reps):
        acc = 0.0
        for _q in range(Q):
            q = r.randrange(Q)
            sub = [a for a in r.sample(rows[q], n) if a >= 0]
            if not sub:
                continue
            cnt = Counter(sub)
            best = max(cnt.values())
            acc += r.choice([a for a, c in cnt.items() if c == best]) == corr[q]
        total += acc / Q
    return total / reps


# -- box-and-ball: exact utility ---------------------------------------------------------------
def _state_rates(freq: NDArray[np.float64], joint: NDArray[np.float64]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per state ω: P(an expert answers with this code | ω) from per-colour frequencies."""
    mu = joint[:, :, 1].sum(axis=1)  # (S,)
    p_c_w1 = joint[:, :, 1] / np.where(mu > 0, mu, 1.0)[:, None]
    p_c_w0 = joint[:, :, 0] / np.where(mu < 1, 1 - mu, 1.0)[:, None]
    return mu, (freq * p_c_w0).sum(axis=-1), (freq * p_c_w1).sum(axis=-1)


def box_utility(r: NDArray[np.float64], joint: NDArray[np.float64], n: int, *,
                rule: str = "majority", r_right: NDArray[np.float64] | None = None
                ) -> NDArray[np.float64]:
    """Exact expected utility (±1 units) per scenario, vectorised over leading axes.

    r: (..., S, 2) frequency of "L" for the colours (red, blue) of each scenario; r_right the
    frequency of "R" (default 1 − r: no invalid answers). joint: (S, 2, 2) P(colour c, ω) as
    [s, c, ω]. Returns (..., S).
    """
    rl = np.asarray(r, dtype=float)
    rr = 1.0 - rl if r_right is None else np.asarray(r_right, dtype=float)
    mu, l0, l1 = _state_rates(rl, joint)
    _, r0, r1 = _state_rates(rr, joint)
    if rule == "random-follow":
        # follow one expert: right minus wrong, an invalid answer being wrong
        u1 = l1 - r1 - (1 - l1 - r1)
        u0 = r0 - l0 - (1 - l0 - r0)
        return mu * u1 + (1 - mu) * u0
    if rule != "majority":
        raise ValueError(f"rule must be one of {BOX_RULES}, got {rule!r}")
    return mu * _majority_value(l1, r1, n) - (1 - mu) * _majority_value(l0, r0, n) \
        - _no_vote(l0, r0, l1, r1, mu, n)


def _majority_value(ql: NDArray[np.float64], qr: NDArray[np.float64], n: int
                    ) -> NDArray[np.float64]:
    """E[d(x_L, x_R)] for trinomial counts: d = +1 if L wins, −1 if R wins, 0 on a tie."""
    qi = np.clip(1.0 - ql - qr, 0.0, 1.0)
    pl, pr, pi = (_powers(q, n) for q in (ql, qr, qi))
    total = np.zeros(np.shape(ql))
    for xl in range(n + 1):
        xr = np.arange(n - xl + 1)
        coef = np.array([comb(n, xl) * comb(n - xl, b) for b in xr], dtype=float)
        coef *= np.sign(xl - xr)
        if not coef.any():
            continue
        # pi[..., n - xl - xr] for xr = 0..n-xl is the reversed view pi[..., n - xl::-1]
        total += pl[..., xl] * ((pr[..., : n - xl + 1] * pi[..., n - xl::-1]) @ coef)
    return total


def _powers(q: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """q ** x for x = 0..n along a new last axis, by repeated products (exact 0 ** 0 = 1)."""
    out = np.empty((*np.shape(q), n + 1))
    out[..., 0] = 1.0
    for x in range(1, n + 1):
        out[..., x] = out[..., x - 1] * q
    return out


def _no_vote(l0: NDArray[np.float64], r0: NDArray[np.float64], l1: NDArray[np.float64],
             r1: NDArray[np.float64], mu: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """P(all n answers invalid): such a group counts as wrong (utility −1)."""
    i0 = np.clip(1 - l0 - r0, 0, 1) ** n
    i1 = np.clip(1 - l1 - r1, 0, 1) ** n
    return mu * i1 + (1 - mu) * i0


def box_utility_draws(ones: NDArray[np.integer], zeros: NDArray[np.integer],
                      total: NDArray[np.integer], joint: NDArray[np.float64], ns: list[int], *,
                      reps: int = 1000, rng: Any = 0
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Exact mean utility over scenarios, at the observed frequencies and under resampling.

    ones, zeros, total: (S, 2) counts of "L", "R" and all answers per scenario and colour (0 for
    a colour of zero probability). Returns (point (len(ns), 2), draws (len(ns), 2, reps)), rule
    axis (majority, random-follow).
    """
    g = _gen(rng)
    tot = np.asarray(total)
    den = np.maximum(tot, 1)
    a, b = np.asarray(ones) / den, np.asarray(zeros) / den
    # a colour nobody answered (it cannot be drawn) gets any valid rates; its weight is 0
    a, b = np.where(tot > 0, a, 0.5), np.where(tot > 0, b, 0.5)
    size = (reps, *tot.shape)
    xl = g.binomial(np.broadcast_to(tot, size), a)
    rest = np.broadcast_to(tot, size) - xl
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = np.where(a < 1, b / np.where(a < 1, 1 - a, 1.0), 0.0)
    xr = g.binomial(rest, np.clip(cond, 0.0, 1.0))
    da = np.where(tot > 0, xl / den, 0.5)
    db = np.where(tot > 0, xr / den, 0.5)
    point = np.empty((len(ns), 2))
    draws = np.empty((len(ns), 2, reps))
    follow_point = box_utility(a, joint, 1, rule="random-follow", r_right=b).mean()
    follow = box_utility(da, joint, 1, rule="random-follow", r_right=db).mean(axis=-1)
    for ni, n in enumerate(ns):
        point[ni, 0] = box_utility(a, joint, n, r_right=b).mean()
        draws[ni, 0] = box_utility(da, joint, n, r_right=db).mean(axis=-1)
        point[ni, 1], draws[ni, 1] = follow_point, follow  # the same for every n
    return point, draws


def box_utility_bootstrap(ones: NDArray[np.integer], valid: NDArray[np.integer],
                          joint: NDArray[np.float64], ns: list[int], *, reps: int = 1000,
                          rng: Any = 0, total: NDArray[np.integer] | None = None,
                          ) -> dict[int, dict[str, Estimate]]:
    """Utility of majority and random-follow per n (mean over scenarios, ±1 units).

    ones, valid: (S, 2) counts of "L" and of valid answers per scenario and colour; `total`
    (default `valid`) counts all answers, invalid ones included. The point estimate uses the
    observed frequencies; the error and interval come from resampling each question's answers.
    """
    tot = np.asarray(valid if total is None else total)
    zeros = np.asarray(valid) - np.asarray(ones)
    point, draws = box_utility_draws(ones, zeros, tot, joint, ns, reps=reps, rng=rng)
    return {n: {rule: estimate(draws[ni, ri], point[ni, ri]) for ri, rule in enumerate(BOX_RULES)}
            for ni, n in enumerate(ns)}
