"""Vectorised analysis of sampled answers: bootstrap accuracy and exact box-task utility.

Accuracy of an n-expert vote (plurality, random tie-break as in the paper) is estimated by
bootstrap: each repetition draws the questions with replacement and, for each, a random
n-subset of its K answers without replacement (the paper's procedure). The point estimate is the
mean over repetitions, the standard error their standard deviation (so it includes the
question-sampling variance), the interval the 2.5/97.5 percentiles. Invalid answers take no part
in the vote; a group whose answers are all invalid counts as wrong.

For the box-and-ball task the utility of majority voting is exact, as in the paper's study: each
expert draws its own ball, so with r_c the frequency of "L" answers to colour c, the report
structure of a scenario is q_w = Σ_c P(c | ω = w) r_c and X ~ Binomial(n, q_w); the utility
(±1 units) follows from `ensemble.theory.count_weights`. Its error comes from resampling each
question's K answers (bootstrap over samples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ensemble.aggregators import plurality_credit
from ensemble.theory import count_weights, majority_f, random_follow_f

__all__ = ["Estimate", "bootstrap_vote_accuracy", "box_utility", "box_utility_bootstrap",
           "vote_accuracy_loop"]


@dataclass(frozen=True)
class Estimate:
    value: float
    sem: float
    ci: tuple[float, float]


def _estimate(draws: NDArray[np.float64]) -> Estimate:
    return Estimate(float(draws.mean()), float(draws.std(ddof=1)) if draws.size > 1 else 0.0,
                    (float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))))


def bootstrap_vote_accuracy(codes: NDArray[np.int64], correct: NDArray[np.int64], ns: list[int],
                            *, n_options: int, reps: int = 1000, rng: object = 0,
                            ) -> dict[int, dict[str, Estimate]]:
    """Bootstrap accuracy of plurality and random-follow for each n.

    codes: (Q, K) answer indices, −1 for invalid. correct: (Q,) index of the right option.
    Returns {n: {"plurality": Estimate, "random-follow": Estimate}}.
    """
    g = np.random.default_rng(rng)
    Q, K = codes.shape
    out: dict[int, dict[str, Estimate]] = {}
    qidx = g.integers(0, Q, size=(reps, Q))
    # a uniformly random ordered m-subset of the K answers per (rep, question), m = max n:
    # the m smallest of K i.i.d. random keys, in key order; its first n form the n-subset
    m = max(ns)
    keys = g.random((reps, Q, K), dtype=np.float32)
    part = np.argpartition(keys, m - 1, axis=-1)[..., :m] if m < K else \
        np.broadcast_to(np.arange(K), keys.shape)
    order = np.argsort(np.take_along_axis(keys, part, axis=-1), axis=-1)
    perm = np.take_along_axis(part, order, axis=-1)
    small = codes.astype(np.int8 if n_options < 127 else np.int32)
    picked = small[qidx[..., None], perm]  # (reps, Q, m)
    corr = correct[qidx]
    for n in ns:
        sub = picked[..., :n]
        counts = np.zeros((*sub.shape[:-1], n_options), dtype=np.int8)
        for j in range(n):  # n is small: n passes beat a (reps, Q, n, C) one-hot
            c = sub[..., j]
            np.put_along_axis(counts, np.maximum(c, 0)[..., None].astype(np.intp),
                              np.take_along_axis(counts, np.maximum(c, 0)[..., None]
                                                 .astype(np.intp), axis=-1) + (c >= 0)[..., None],
                              axis=-1)
        plu = plurality_credit(counts, corr, tie="random", rng=g)
        follow = (sub == corr[..., None]).mean(axis=-1)
        out[n] = {"plurality": _estimate(plu.mean(axis=-1)),
                  "random-follow": _estimate(follow.mean(axis=-1))}
    return out


def vote_accuracy_loop(codes: NDArray[np.int64], correct: NDArray[np.int64], n: int, *,
                       reps: int, rng: object = 0) -> float:
    """The same estimate with a plain per-question Python loop (benchmark baseline)."""
    import random
    from collections import Counter

    r = random.Random(int(np.random.default_rng(rng).integers(2**31)))
    Q, K = codes.shape
    total = 0.0
    for _ in range(reps):
        acc = 0.0
        for _q in range(Q):
            q = r.randrange(Q)
            sub = [c for c in r.sample(list(codes[q]), n) if c >= 0]
            if not sub:
                continue
            cnt = Counter(sub)
            best = max(cnt.values())
            top = [a for a, c in cnt.items() if c == best]
            acc += r.choice(top) == correct[q]
        total += acc / Q
    return total / reps


def box_utility(r: NDArray[np.float64], joint: NDArray[np.float64], n: int, *,
                rule: str = "majority") -> NDArray[np.float64]:
    """Exact expected utility (±1 units) per scenario, vectorised over leading axes.

    r: (..., S, 2) frequency of "L" for colours (red, blue) of each scenario;
    joint: (S, 2, 2) P(colour c, ω) with [s, c, ω]. Returns (..., S).
    """
    mu = joint[:, :, 1].sum(axis=1)  # (S,)
    p_c_w1 = joint[:, :, 1] / np.where(mu > 0, mu, 1.0)[:, None]
    p_c_w0 = joint[:, :, 0] / np.where(mu < 1, 1 - mu, 1.0)[:, None]
    q1 = (r * p_c_w1).sum(axis=-1)
    q0 = (r * p_c_w0).sum(axis=-1)
    w = count_weights(np.broadcast_to(mu, q1.shape), q0, q1, n)
    f = majority_f(n) if rule == "majority" else random_follow_f(n)
    return w @ (2 * f - 1)


def box_utility_bootstrap(ones: NDArray[np.int64], valid: NDArray[np.int64],
                          joint: NDArray[np.float64], ns: list[int], *, reps: int = 1000,
                          rng: object = 0) -> dict[int, dict[str, Estimate]]:
    """Utility of majority and random-follow per n, mean over scenarios, bootstrap over samples.

    ones, valid: (S, 2) counts of "L" and of valid answers per scenario and colour (0 valid for
    a colour of zero probability). The point estimate uses the observed frequencies.
    """
    g = np.random.default_rng(rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        r_hat = np.where(valid > 0, ones / np.maximum(valid, 1), 0.5)
    draws = g.binomial(np.broadcast_to(valid, (reps, *valid.shape)), r_hat) / np.maximum(valid, 1)
    draws = np.where(valid > 0, draws, 0.5)
    out: dict[int, dict[str, Estimate]] = {}
    for n in ns:
        res = {}
        for rule in ("majority", "random-follow"):
            point = float(box_utility(r_hat, joint, n, rule=rule).mean())
            boot = box_utility(draws, joint, n, rule=rule).mean(axis=-1)
            res[rule] = Estimate(point, float(boot.std(ddof=1)),
                                 (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))))
        out[n] = res
    return out
