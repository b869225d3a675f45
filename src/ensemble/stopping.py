"""Stopping rules for adaptive sampling: after each batch of answers to one question, stop or
draw k more.

State: the answers drawn so far for one question (normalised answers, None = invalid) and the
most samples a question may get, `max_n`. A rule answers `more(answers)`: the number of samples
to draw next, 0 meaning stop. Every rule is a precomputed table over the states (samples drawn,
count of the leading answer, count of the runner-up), so a decision is one lookup
(`more_counts`); `more` counts the answers first.

The k returned is *lossless*: no outcome of the next k − 1 draws could let the rule stop
earlier, so a sampler may request k samples at once (through the provider's `n`) and spend
exactly what one-at-a-time drawing would. k is the smallest j ≥ 1 for which some state the
question can reach after j more draws is a stopping state.

Three rules:

- `fixed`: draw up to `max_n` (today's behaviour; k = max_n − drawn in one go).
- `beta`: Adaptive-Consistency's rule (Aggarwal et al., EMNLP 2023), reproducing the
  `adaptiveconsistency` package's `BetaStoppingCriteria(conf_thresh)`: with a and b the counts
  of the two most frequent answers (any further answers are ignored), stop when
  P(x > 1/2) ≥ threshold for x ~ Beta(a + 1, b + 1). That probability is P(Bin(a+b+1, 1/2) ≤ a),
  computed here exactly (the package integrates numerically). There is no explicit minimum: at
  0.95 the first possible stop is 4 agreeing answers (1 − 2⁻⁵ ≥ 0.95 > 1 − 2⁻⁴). The package
  counts None as an answer like any other; here invalid answers are ignored (the project's
  abstention policy) unless `count_invalid=True`, which reproduces the package on them too.
- `bayes`: the Bayes-optimal rule. Each question has an unknown report probability q of the
  leading answer against the runner-up, with a prior over q across the task's questions. The
  terminal reward is the probability that the decision (the current leader) is the answer the
  vote would reach with unlimited samples, P(q > 1/2 | counts) (accuracy, when the modal answer
  is right); each sample costs `cost` accuracy units. Exact backward induction over (samples
  left, counts) gives the optimal policy: stop when the expected gain in accuracy from going on
  is worth less than the samples it needs. Several answers are reduced to the top two: the
  state is the counts of the two leading answers, other and invalid answers only use up the
  budget (samples left = max_n − drawn), so the prior over q is symmetric (which of the two leads
  is data, not a label).

The prior: `BetaPrior(alpha)` (symmetric Beta(α, α) over q), fitted across questions from a
small pilot by `fit_prior` (empirical Bayes, maximum marginal likelihood of the beta-binomial);
`GridPrior` for any discrete prior (an NPMLE fit with `family="grid"`, or the quantal-response
prior `prior_from_calibration(lam, posteriors)`: q = ψ_λ(p) over the task's posteriors).
`StopSpec` is what a run asks for; it builds the rule once the pilot is in.

Tables are cached per (prior, max_n, cost, pilot): building one takes milliseconds for
max_n = 20 (~0.2 s at max_n = 200, the largest supported).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import InputError

__all__ = [
    "DEFAULT_COST",
    "DEFAULT_PILOT",
    "DEFAULT_THRESHOLD",
    "MAX_N_LIMIT",
    "RULES",
    "BayesRule",
    "BetaPrior",
    "BetaRule",
    "FixedRule",
    "GridPrior",
    "PolicySummary",
    "StopSpec",
    "StoppingRule",
    "answer_counts",
    "expected_performance",
    "fit_prior",
    "get_stopping_rule",
    "prior_from_calibration",
]

RULES = ("fixed", "beta", "bayes")
#: Cost of one sample in accuracy units (0-1 scale). Chosen on the box-and-ball benchmark
#: (docs/adaptive.md): at λ₁ = 3, t = 1, max 20 it loses < 0.005 accuracy against a fixed 20
#: at about a fifth of the samples; lower costs trade samples for accuracy along the curve.
DEFAULT_COST = 0.004
DEFAULT_PILOT = 2
DEFAULT_THRESHOLD = 0.95
MAX_N_LIMIT = 200
_EPS = 1e-12  # stop when stopping is worth at least as much as going on, up to rounding


# -- state ------------------------------------------------------------------------------------
def answer_counts(answers: Sequence[str | None], *, count_invalid: bool = False
                  ) -> tuple[int, int, int]:
    """(drawn, top, second): samples drawn, and the counts of the two most frequent answers.

    Invalid answers (None) count as drawn but support no answer, unless `count_invalid`, which
    treats None as one more answer (as the `adaptiveconsistency` package does).
    """
    counts = Counter(a for a in answers if count_invalid or a is not None)
    top = counts.most_common(2)
    return (len(answers), top[0][1] if top else 0, top[1][1] if len(top) > 1 else 0)


class StoppingRule:
    """A stopping rule as a table k[drawn, top, second] of samples to draw next (0 = stop).

    Subclasses fill the table; `more` and `more_counts` are the same lookup for every rule.
    """

    name = "rule"

    def __init__(self, max_n: int, table: NDArray[np.int16], *, count_invalid: bool = False
                 ) -> None:
        self.max_n = max_n
        self.count_invalid = count_invalid
        self._table = table

    @property
    def table(self) -> NDArray[np.int16]:
        """k[drawn, top, second] for 0 ≤ second ≤ top, top + second ≤ drawn ≤ max_n (read-only;
        other entries are unused)."""
        return self._table

    def more(self, answers: Sequence[str | None]) -> int:
        """Samples to draw next for a question with these answers so far; 0 = stop."""
        n, top, second = answer_counts(answers, count_invalid=self.count_invalid)
        return self.more_counts(drawn=n, top=top, second=second)

    def more_counts(self, *, drawn: int, top: int, second: int) -> int:
        """The same decision from the counts: O(1)."""
        if drawn >= self.max_n:
            return 0
        if not 0 <= second <= top or top + second > drawn:
            raise InputError(f"impossible counts: drawn={drawn}, top={top}, second={second} "
                             "(need 0 <= second <= top and top + second <= drawn)")
        return int(self._table[drawn, top, second])

    def stops(self, *, drawn: int, top: int, second: int) -> bool:
        """Whether the rule stops in this state."""
        return self.more_counts(drawn=drawn, top=top, second=second) == 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_n={self.max_n})"


def _validate_max_n(max_n: Any) -> int:
    if isinstance(max_n, bool) or not isinstance(max_n, (int, np.integer)) or max_n < 1:
        raise InputError(f"max_n must be an integer >= 1, got {max_n!r}")
    if max_n > MAX_N_LIMIT:
        raise InputError(f"max_n must be at most {MAX_N_LIMIT} (the rules' tables grow as "
                         f"max_n³), got {max_n}")
    return int(max_n)


def _lookahead(stop: NDArray[np.bool_]) -> NDArray[np.int16]:
    """k[n, a, b] from a stop table S[n, A, B] (True at n = max_n): 0 where S stops, else the
    smallest j ≥ 1 such that some state reachable in j draws stops.

    One draw raises the leader's count a, the runner-up's count b, or neither (another answer,
    an invalid one); a third answer overtaking the runner-up raises b by at most one per draw.
    Allowing both to rise in one step gives a superset of the reachable states, which can only
    make k smaller, so k stays lossless: k(n, a, b) = 1 + min over (a or a + 1, b or b + 1) of
    k(n + 1, ·, ·), computed backwards from n = max_n.
    """
    M = stop.shape[0] - 1
    k = np.zeros((M + 1, M + 1, M + 1), dtype=np.int16)
    up = np.minimum(np.arange(M + 1) + 1, M)
    for n in range(M - 1, -1, -1):
        nxt = k[n + 1]
        best = np.minimum(np.minimum(nxt, nxt[up]), np.minimum(nxt[:, up], nxt[up][:, up]))
        k[n] = np.where(stop[n], 0, best + 1)
    return k


# -- priors -----------------------------------------------------------------------------------
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


Prior = BetaPrior | GridPrior


def _counts_arrays(top: ArrayLike, second: ArrayLike) -> tuple[NDArray[np.int64],
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


def fit_prior(top: ArrayLike, second: ArrayLike, *, family: str = "beta", grid: int = 200,
              iterations: int = 2000) -> Prior:
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
    t, s = _counts_arrays(top, second)
    informative = (t + s) >= 2
    if not informative.any():
        raise InputError("fitting the prior needs at least one question with 2 or more valid "
                         "answers among its two leading answers; draw a larger pilot")
    t, s = t[informative], s[informative]
    if family == "beta":
        return _fit_beta(t, s)
    if family == "grid":
        return _fit_grid(t, s, grid=grid, iterations=iterations)
    raise InputError(f"unknown prior family {family!r}; choose 'beta' or 'grid'")


def _fit_beta(t: NDArray[np.int64], s: NDArray[np.int64]) -> BetaPrior:
    from scipy.optimize import minimize_scalar
    from scipy.special import betaln

    pairs, mult = np.unique(np.stack([t, s], axis=1), axis=0, return_counts=True)
    a, b = pairs[:, 0].astype(float), pairs[:, 1].astype(float)

    def nll(log_alpha: float) -> float:
        al = math.exp(log_alpha)
        return -float(mult @ (betaln(al + a, al + b) - betaln(al, al)))

    lo, hi = math.log(1e-3), math.log(1e3)
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
    from .qr import psi, validate_lam, validate_probability

    lam_v = validate_lam(lam)
    p = validate_probability(posteriors, name="posteriors").ravel()
    if p.size == 0:
        raise InputError("prior_from_calibration needs at least one posterior")
    return GridPrior.of(psi(p, lam_v), weights)


# -- the Bayes rule: exact backward induction ---------------------------------------------------
@dataclass(frozen=True)
class PolicySummary:
    """What the Bayes rule expects of itself under its prior, for a binary question with no
    invalid answers: mean samples per question (pilot included), accuracy (agreement with the
    vote of unlimited samples) of the rule and of the fixed max_n vote, and their difference."""

    mean_samples: float
    accuracy: float
    fixed_accuracy: float
    loss: float
    cost: float


@dataclass(frozen=True)
class _BayesTables:
    table: NDArray[np.int16]
    summary: PolicySummary


def _stop_by_remaining(prior: Prior, M: int, cost: float
                       ) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64]]:
    """stop[r, m, a]: the optimal action with r samples left at a of m (binary, exact)."""
    pred, win = prior.state_tables(M)
    val = np.maximum(win, 1.0 - win)
    stop = np.ones((M + 1, M + 1, M + 1), dtype=bool)
    W = val.copy()  # value with r samples left, over (m, a)
    for r in range(1, M + 1):
        nxt = np.empty_like(W)
        # going on from (m, a): next state (m + 1, a + 1) w.p. pred, (m + 1, a) otherwise;
        # rows m = M have no successor and are never used with r ≥ 1 (m + r ≤ M)
        up = np.zeros_like(W)
        down = np.zeros_like(W)
        up[:M, :M] = W[1:, 1:]
        down[:M, :] = W[1:, :]
        cont = -cost + pred * up + (1.0 - pred) * down
        st = val >= cont - _EPS
        nxt = np.where(st, val, cont)
        stop[r] = st
        W = nxt
    return stop, pred, val


@lru_cache(maxsize=64)
def _bayes_tables(prior: Prior, max_n: int, cost: float, pilot: int) -> _BayesTables:
    M = max_n
    stop_r, pred, val = _stop_by_remaining(prior, M, cost)
    # S[n, A, B]: top-two counts A ≥ B after n draws; the binary sub-problem has m = A + B
    # votes and r = M − n draws left
    n = np.arange(M + 1)[:, None, None]
    A = np.arange(M + 1)[None, :, None]
    B = np.arange(M + 1)[None, None, :]
    m = np.minimum(A + B, M)
    r = np.broadcast_to(M - n, (M + 1, M + 1, M + 1))
    S = stop_r[r, np.broadcast_to(m, r.shape), np.broadcast_to(A, r.shape)].copy()
    S[:pilot] = False
    S[M] = True
    table = _lookahead(S)
    table.setflags(write=False)
    return _BayesTables(table, _summarise(S, pred, val, M, cost))


def _summarise(S: NDArray[np.bool_], pred: NDArray[np.float64], val: NDArray[np.float64],
               M: int, cost: float) -> PolicySummary:
    """Forward pass under the prior predictive (binary, no invalid answers)."""
    mass = np.zeros(M + 1)
    mass[0] = 1.0  # P(reach (m, a) without having stopped), over a
    samples = acc = 0.0
    for m in range(M + 1):
        a = np.arange(m + 1)
        stops = S[m, np.maximum(a, m - a), np.minimum(a, m - a)] | (m == M)
        here = mass[: m + 1]
        samples += m * here[stops].sum()
        acc += (here * val[m, : m + 1])[stops].sum()
        go = np.where(stops, 0.0, here)
        if m < M:
            p = pred[m, : m + 1]
            nxt = np.zeros(M + 1)
            nxt[1 : m + 2] += go * p
            nxt[: m + 1] += go * (1 - p)
            mass = nxt
    fixed = _fixed_accuracy(pred, val, M)
    return PolicySummary(mean_samples=float(samples), accuracy=float(acc),
                         fixed_accuracy=fixed, loss=fixed - float(acc), cost=cost)


def expected_performance(rule: StoppingRule, prior: Prior) -> PolicySummary:
    """Mean samples and accuracy of any rule, exactly, when questions' q follow `prior`.

    For a binary question with no invalid answers: a forward pass over (drawn, votes) under the
    prior predictive. Accuracy is agreement with the vote of unlimited samples; `cost` is the
    rule's own (0 for rules without one). A model-based comparison free of sampling noise:
    under its prior, no rule beats `bayes` on accuracy − cost × samples.
    """
    M = rule.max_n
    pred, win = prior.state_tables(M)
    return _summarise(rule.table == 0, pred, np.maximum(win, 1.0 - win), M,
                      float(getattr(rule, "cost", 0.0)))


def _fixed_accuracy(pred: NDArray[np.float64], val: NDArray[np.float64], M: int) -> float:
    mass = np.zeros(M + 1)
    mass[0] = 1.0
    for m in range(M):
        p = pred[m, : m + 1]
        nxt = np.zeros(M + 1)
        nxt[1 : m + 2] += mass[: m + 1] * p
        nxt[: m + 1] += mass[: m + 1] * (1 - p)
        mass = nxt
    return float(mass @ val[M])


def _cost_for_loss(prior: Prior, max_n: int, target_loss: float, pilot: int) -> float:
    """The largest cost whose policy loses at most `target_loss` accuracy against a fixed max_n
    under the prior (the loss grows with the cost: bisection on log cost)."""
    lo, hi = math.log(1e-8), math.log(0.5)
    if _bayes_tables(prior, max_n, math.exp(lo), pilot).summary.loss > target_loss:
        return math.exp(lo)
    for _ in range(40):
        mid = (lo + hi) / 2
        if _bayes_tables(prior, max_n, math.exp(mid), pilot).summary.loss <= target_loss:
            lo = mid
        else:
            hi = mid
    return math.exp(lo)


# -- the rules --------------------------------------------------------------------------------
class FixedRule(StoppingRule):
    """Draw up to max_n samples, all at once."""

    name = "fixed"

    def __init__(self, *, max_n: int) -> None:
        M = _validate_max_n(max_n)
        k = np.broadcast_to((M - np.arange(M + 1)).astype(np.int16)[:, None, None],
                            (M + 1, M + 1, M + 1))
        super().__init__(M, k)


@lru_cache(maxsize=64)
def _beta_table(max_n: int, threshold: float) -> NDArray[np.int16]:
    from scipy.special import betainc

    M = max_n
    A = np.arange(M + 1)[:, None].astype(float)
    B = np.arange(M + 1)[None, :].astype(float)
    # P(x > 1/2), x ~ Beta(A + 1, B + 1), = I_{1/2}(B + 1, A + 1)
    prob = betainc(B + 1, A + 1, 0.5)
    S = np.broadcast_to(prob >= threshold, (M + 1, M + 1, M + 1)).copy()
    S[M] = True
    table = _lookahead(S)
    table.setflags(write=False)
    return table


class BetaRule(StoppingRule):
    """Adaptive-Consistency's Beta stopping rule (`BetaStoppingCriteria(threshold)`), capped at
    max_n. `count_invalid=True` counts None as an answer, as the package does."""

    name = "beta"

    def __init__(self, *, max_n: int, threshold: float = DEFAULT_THRESHOLD,
                 count_invalid: bool = False) -> None:
        M = _validate_max_n(max_n)
        th = float(threshold)
        if not 0.5 < th <= 1.0:
            raise InputError(f"the beta rule's threshold must lie in (0.5, 1], got {threshold!r}")
        self.threshold = th
        super().__init__(M, _beta_table(M, th), count_invalid=count_invalid)

    def probability(self, *, top: int, second: int) -> float:
        """P(x > 1/2) for x ~ Beta(top + 1, second + 1): the package's `prob`."""
        from scipy.special import betainc

        return float(betainc(second + 1, top + 1, 0.5))

    def __repr__(self) -> str:
        return f"BetaRule(max_n={self.max_n}, threshold={self.threshold})"


class BayesRule(StoppingRule):
    """The Bayes-optimal rule for a prior over q, a cost per sample and a budget max_n.

    Give `cost` (accuracy units per sample, default DEFAULT_COST) or `target_loss` (the largest
    expected accuracy loss against a fixed max_n under the prior; the cost is then solved for).
    The rule never stops before `pilot` samples.
    """

    name = "bayes"

    def __init__(self, *, max_n: int, prior: Prior, cost: float | None = None,
                 target_loss: float | None = None, pilot: int = DEFAULT_PILOT) -> None:
        M = _validate_max_n(max_n)
        if not isinstance(prior, (BetaPrior, GridPrior)):
            raise InputError("the bayes rule needs a prior: BetaPrior, GridPrior, or "
                             "fit_prior(...) on pilot counts")
        if isinstance(pilot, bool) or not isinstance(pilot, (int, np.integer)) or pilot < 0:
            raise InputError(f"pilot must be an integer >= 0, got {pilot!r}")
        pilot = min(int(pilot), M)
        if cost is not None and target_loss is not None:
            raise InputError("give the bayes rule either cost or target_loss, not both")
        if target_loss is not None:
            tl = float(target_loss)
            if not 0 < tl < 1:
                raise InputError(f"target_loss must lie in (0, 1), got {target_loss!r}")
            c = _cost_for_loss(prior, M, tl, pilot)
        else:
            c = DEFAULT_COST if cost is None else float(cost)
            if not (math.isfinite(c) and c >= 0):
                raise InputError(f"cost must be a finite number >= 0, got {cost!r}")
        self.prior = prior
        self.cost = c
        self.pilot = pilot
        tables = _bayes_tables(prior, M, c, pilot)
        self.summary: PolicySummary = tables.summary
        super().__init__(M, tables.table)

    def __repr__(self) -> str:
        return (f"BayesRule(max_n={self.max_n}, prior={self.prior!r}, cost={self.cost:.3g}, "
                f"pilot={self.pilot})")


def get_stopping_rule(name: str, *, max_n: int, **options: Any) -> StoppingRule:
    """Build a rule by name: fixed, beta (threshold=), bayes (prior=, cost= or target_loss=,
    pilot=)."""
    if name == "fixed":
        return FixedRule(max_n=max_n, **options)
    if name == "beta":
        return BetaRule(max_n=max_n, **options)
    if name == "bayes":
        return BayesRule(max_n=max_n, **options)
    raise InputError(f"unknown stopping rule {name!r}; choose from {', '.join(RULES)}")


@dataclass(frozen=True)
class StopSpec:
    """What a run asks for: the rule, its budget and options. For `bayes` without a prior, every
    question first gets `pilot` samples and the prior is fitted across questions from them
    (`rule(pilot_answers)` or `rule_from_counts`); the other rules need no pilot.

    The sampler's loop: draw `spec.first_draw()` samples for every question; build
    `rule = spec.rule(answers_so_far)`; then for each question draw `rule.more(answers)` more
    whenever its answers arrive, until it returns 0.
    """

    stop: str
    max_n: int
    cost: float | None = None
    target_loss: float | None = None
    threshold: float = DEFAULT_THRESHOLD
    pilot: int = DEFAULT_PILOT
    prior: Prior | None = None
    family: str = "beta"
    count_invalid: bool = False

    def __post_init__(self) -> None:
        if self.stop not in RULES:
            raise InputError(f"unknown stopping rule {self.stop!r}; choose from "
                             f"{', '.join(RULES)}")
        _validate_max_n(self.max_n)
        if self.family not in ("beta", "grid"):
            raise InputError(f"unknown prior family {self.family!r}; choose 'beta' or 'grid'")

    @property
    def needs_pilot(self) -> bool:
        """True when the rule can only be built after a pilot (bayes without a prior)."""
        return self.stop == "bayes" and self.prior is None

    def first_draw(self) -> int:
        """Samples every question gets before the rule is consulted."""
        if self.stop == "fixed":
            return self.max_n
        if self.needs_pilot:
            return min(self.pilot, self.max_n)
        return max(1, self.build().more([]))

    def build(self, prior: Prior | None = None) -> StoppingRule:
        """The rule, with `prior` (or the spec's own) for bayes."""
        if self.stop == "fixed":
            return FixedRule(max_n=self.max_n)
        if self.stop == "beta":
            return BetaRule(max_n=self.max_n, threshold=self.threshold,
                            count_invalid=self.count_invalid)
        pr = prior if prior is not None else self.prior
        if pr is None:
            raise InputError("the bayes rule needs a prior: give prior=, or fit it from the "
                             "pilot with spec.rule(pilot_answers)")
        return BayesRule(max_n=self.max_n, prior=pr, cost=self.cost,
                         target_loss=self.target_loss, pilot=self.pilot)

    def rule(self, answers: Sequence[Sequence[str | None]] | None = None) -> StoppingRule:
        """The rule; for bayes without a prior, fitted from each question's answers so far
        (the pilot)."""
        if not self.needs_pilot:
            return self.build()
        if answers is None:
            raise InputError("this bayes rule fits its prior from the pilot: pass every "
                             "question's pilot answers")
        counts = [answer_counts(list(a)) for a in answers]
        return self.rule_from_counts([c[1] for c in counts], [c[2] for c in counts])

    def rule_from_counts(self, top: ArrayLike, second: ArrayLike) -> StoppingRule:
        """The rule, the prior (if needed) fitted from per-question top-two counts.

        When no question's pilot has 2 valid votes among its two leading answers (all invalid,
        or a single question whose pilot failed to parse), there is nothing to fit a prior on:
        the rule is then the fixed one, drawing the whole budget, the cautious choice when
        nothing is known about how hard the questions are.
        """
        if not self.needs_pilot:
            return self.build()
        t, s = _counts_arrays(top, second)
        if not ((t + s) >= 2).any():
            return FixedRule(max_n=self.max_n)
        return self.build(fit_prior(top, second, family=self.family))
