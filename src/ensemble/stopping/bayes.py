"""The Bayes-optimal stopping rule: exact backward induction over (samples left, counts) under
a prior over q, and the exact expected performance of any rule under a prior."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from ..errors import InputError
from .priors import BetaPrior, GridPrior, Prior
from .registry import register_stop_rule
from .table import StoppingRule, lookahead, validate_max_n

__all__ = ["DEFAULT_COST", "DEFAULT_PILOT", "BayesRule", "PolicySummary", "bayes_table",
           "expected_performance", "stop_table"]

#: Cost of one sample in accuracy units (0-1 scale). Chosen on the box-and-ball benchmark
#: (docs/adaptive.md): at λ₁ = 3, t = 1, max 20 it loses < 0.005 accuracy against a fixed 20
#: at about a fifth of the samples; lower costs trade samples for accuracy along the curve.
DEFAULT_COST = 0.004
DEFAULT_PILOT = 2
_EPS = 1e-12  # stop when stopping is worth at least as much as going on, up to rounding


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


def stop_table(prior: Prior, votes: int, cost: float) -> NDArray[np.bool_]:
    """stop[r, m, a]: whether the Bayes-optimal rule stops with r votes left at a of m (the
    binary problem over `votes` votes at `cost` per vote; `ensemble.stopping.soft` reads it
    with fractional votes)."""
    return _stop_by_remaining(prior, votes, cost)[0]


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
    table = lookahead(S)
    table.setflags(write=False)
    return _BayesTables(table, _summarise(S, pred, val, M, cost))


def bayes_table(prior: Prior, max_n: int, cost: float, pilot: int) -> NDArray[np.int16]:
    """The bayes rule's table k[drawn, top, second] for a prior, budget, cost per sample and
    pilot (computed once per argument tuple and cached: a rule that prices each question's
    samples differently, `stopping.tokens`, looks its questions up at their own cost)."""
    return _bayes_tables(prior, max_n, float(cost), pilot).table


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


@register_stop_rule
class BayesRule(StoppingRule):
    """The Bayes-optimal rule for a prior over q, a cost per sample and a budget max_n.

    Give `cost` (accuracy units per sample, default DEFAULT_COST) or `target_loss` (the largest
    expected accuracy loss against a fixed max_n under the prior; the cost is then solved for).
    The rule never stops before `pilot` samples.
    """

    name = "bayes"
    about = ("Bayes-optimal: stop when more samples are worth less than their cost (prior "
               "fitted from a pilot)")
    params: ClassVar[tuple[str, ...]] = ("cost", "target_loss", "pilot")
    needs_prior = True

    def __init__(self, *, max_n: int, prior: Prior, cost: float | None = None,
                 target_loss: float | None = None, pilot: int = DEFAULT_PILOT) -> None:
        M = validate_max_n(max_n)
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

