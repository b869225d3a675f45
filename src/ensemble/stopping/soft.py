"""The Bayes rule on soft evidence (issue 37): `bayes-soft` stops on the soft vote's tallies.

`bayes` reads the counts of a question's two leading answers, a of m votes, and stops when the
posterior of q (the leader's share against the runner-up, Beta prior fitted from the pilots)
makes one more sample worth less than its cost. A sample drawn with logprobs says more than its
vote: its own P(option) at the answer position (`Observation.shares`). Under quantal response
with per-sample beliefs b_i around the question's distribution π (the simulator's chain
beliefs, b ~ Dirichlet(κπ)), the sum of the leader's shares estimates the same q as the count
with variance π(1 − π)/r per sample instead of π(1 − π), r = κ + 1: one soft sample is worth r
hard votes. The rule matches moments: the soft tallies T_L ≥ T_S of the two leaders are taken
as r·T_L of r·(T_L + T_S) votes (a Binomial(r m, q) has the variance of r·Σ b_i), and it decides
by the Bayes table of r-times-as-many votes at cost c / r per vote (the same prior, the same
cost per sample), the state rounded to the nearest vote. It stops on the hard table when the
logprobs have not shown a signal.

r is fitted without labels on the pilots (every question's first `pilot` samples): for each
pilot, the leader's shares b_i (leader: the highest summed share) give the within-question
variance s² (an unbiased estimate of Var(b | π)) and q̂(1 − q̂) + s²/m (of π(1 − π)); r is
the ratio of their sums over the pilots, clipped to [1, `R_MAX`] (and r·max_n to 200). The
signal check is the soft vote's (`ensemble.soft.SignalCheck`: a sample's own P(answer) must go
with the other samples' agreement, z > 3.09 over at least 30 samples); until it is on, and
with fewer than `MIN_PILOTS` pilots with shares, r = 1 and the rule is `bayes` on the hard
counts. When every sample of a question reports the same distribution (a model that answers
first: r at its clip), the rule reads them as many votes of the same share, and near 1/2 it
draws on: on the SmolLM2 yes/no recording it drew more samples than `bayes` (docs/adaptive.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..rules import Requests
from .bayes import DEFAULT_PILOT, BayesRule
from .drawn import Drawn, Prefixes
from .priors import Prior
from .registry import register_stop_rule
from .table import MAX_N_LIMIT

__all__ = ["MIN_PILOTS", "R_MAX", "SoftBayesRule", "SoftFit", "fit_gain", "pilot_stats",
           "reachable_stop_table"]

MIN_PILOTS = 30  # pilots with shares before r is fitted
R_MAX = 10.0  # one soft sample is worth at most this many votes (and r·max_n at most 200:
# the table grows as (r·max_n)³, `MAX_N_LIMIT`)
_GRID = 4  # r is rounded to quarters (tables are cached per r)
_EPS = 1e-12  # stop when stopping is worth at least as much as going on (`bayes`'s)


@dataclass(frozen=True)
class SoftFit:
    """What the pilots say of the soft evidence: the gain r (votes per soft sample), the
    signal check's z and samples, and the pilots it read; `on` whether the rule reads the
    tallies (else it is `bayes` on the hard counts); `note` says which, and why."""

    r: float
    on: bool
    pilots: int
    z: float
    pairs: int

    @property
    def note(self) -> str:
        if self.on:
            return (f"bayes-soft: one soft sample counts as {self.r:g} votes (fitted on "
                    f"{self.pilots} pilots; signal z = {self.z:.1f} over {self.pairs} samples)")
        if self.pilots < MIN_PILOTS:
            return (f"bayes-soft: stops on the hard counts: {self.pilots} of the {MIN_PILOTS} "
                    "pilots with logprobs it fits on")
        return (f"bayes-soft: stops on the hard counts: the logprobs showed no signal "
                f"(z = {self.z:.1f} over {self.pairs} samples)")


def pilot_stats(shares: Sequence[dict[str, float] | None], keys: Sequence[str | None]
                ) -> tuple[float, float, list[tuple[float, float]]] | None:
    """One pilot's (s², q̂(1 − q̂) + s²/m, agreement pairs): the within-question variance of
    the leader's shares and the Bernoulli variance it estimates, from the samples with shares
    (None: fewer than 2)."""
    from ..soft import agreement_pairs

    got = [(s, k) for s, k in zip(shares, keys, strict=True) if s is not None]
    if len(got) < 2:
        return None
    total: dict[str, float] = {}
    for s, _ in got:
        for a, v in s.items():
            total[a] = total.get(a, 0.0) + float(v)
    lead = max(total, key=lambda a: total[a])
    p = np.array([float(s.get(lead, 0.0)) for s, _ in got])
    m = len(p)
    s2 = float(p.var(ddof=1))
    q = float(p.mean())
    own = [None if k is None else float(s.get(k, 0.0)) for s, k in got]
    return s2, q * (1 - q) + s2 / m, agreement_pairs([k for _, k in got], own)


def fit_gain(stats: Sequence[tuple[float, float, list[tuple[float, float]]] | None]
             ) -> SoftFit:
    """r and the signal check from the pilots' `pilot_stats` (module docstring)."""
    from ..soft import SignalCheck

    got = [s for s in stats if s is not None]
    check = SignalCheck()
    for _, _, pairs in got:
        check.add(pairs)
    within = sum(s[0] for s in got)
    spread = sum(s[1] for s in got)
    r = 1.0
    if len(got) >= MIN_PILOTS and within > 0:
        r = min(R_MAX, max(1.0, round(spread / within * _GRID) / _GRID))
    on = len(got) >= MIN_PILOTS and check.on and r > 1.0
    return SoftFit(r if on else 1.0, on, len(got), check.z, check.pairs)


@lru_cache(maxsize=32)
def _soft_table(prior: Prior, votes: int, cost: float) -> NDArray[np.bool_]:
    """stop[r, m, a] of the binary Bayes problem over `votes` votes at `cost` per vote, for
    the states `stops_at` reads (m + r ≤ votes, a ≤ m; the others are left True)."""
    table = reachable_stop_table(prior, votes, cost)
    table.setflags(write=False)
    return table


def reachable_stop_table(prior: Prior, votes: int, cost: float) -> NDArray[np.bool_]:
    """`bayes.stop_table` on the states that can occur, r votes left at a of m with
    m + r ≤ votes and a ≤ m (the others left True): the same backward induction, element
    for element the same arithmetic, over a triangle of each step's (m, a) instead of the
    square, ~3x faster at 200 votes (one such table per order of an eval's replay)."""
    V = votes
    pred, win = prior.state_tables(V)
    val = np.maximum(win, 1.0 - win)
    stop = np.ones((V + 1, V + 1, V + 1), dtype=bool)
    W = val.copy()  # value with r votes left, over (m, a); rows m ≤ V − r + 1 are current
    for r in range(1, V + 1):
        h = V - r + 1  # states m = 0..V − r, a = 0..m (columns past m are never read)
        up = W[1:h + 1, 1:h + 1]
        down = W[1:h + 1, :h]
        p = pred[:h, :h]
        cont = -cost + p * up + (1.0 - p) * down
        st = val[:h, :h] >= cont - _EPS
        W[:h, :h] = np.where(st, val[:h, :h], cont)
        stop[r, :h, :h] = st
    return stop


@register_stop_rule
class SoftBayesRule(BayesRule):
    """`bayes` on soft evidence (module docstring): the same prior, cost and pilot; reads each
    sample's own P(option) (drawn with logprobs) once `fit` says they carry a signal."""

    name = "bayes-soft"
    about = ("bayes on soft votes: each sample's answer-token probabilities as its evidence, "
             "worth r votes (r and a signal check fitted on the pilots; else bayes)")
    requests: ClassVar[Requests] = Requests(answer_logprobs=True, top_logprobs=5)
    fits_evidence: ClassVar[bool] = True

    def __init__(self, *, max_n: int, prior: Prior, cost: float | None = None,
                 target_loss: float | None = None, pilot: int = DEFAULT_PILOT,
                 gain: SoftFit | None = None) -> None:
        super().__init__(max_n=max_n, prior=prior, cost=cost, target_loss=target_loss,
                         pilot=pilot)
        self.gain = gain if gain is not None else SoftFit(1.0, False, 0, 0.0, 0)

    @classmethod
    def pilot_evidence(cls, pilot: Drawn) -> tuple[float, float, list[tuple[float, float]]] | None:
        """What the fit keeps of one question's pilot (`pilot_stats` of its pooled samples)."""
        obs = [o for m in pilot.members for o in m]
        return pilot_stats([None if o.shares is None else dict(o.shares) for o in obs],
                           [o.key for o in obs])

    def fit_evidence(self, stats: Sequence[Any]) -> None:
        """Fit r and the signal check on the pilots' `pilot_stats` (`StopSpec.fit` calls it)."""
        self.gain = fit_gain(stats)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the rule says of its fit: its gain, or why it stops on the hard counts."""
        return (self.gain.note,)

    def stops_at(self, drawn: ArrayLike, lead: ArrayLike, second: ArrayLike) -> NDArray[np.bool_]:
        """Whether the rule stops with `drawn` samples whose soft tallies of the two leading
        answers are `lead` ≥ `second` (arrays: the evals and the bench replay it vectorised)."""
        n = np.asarray(drawn, dtype=np.int64)
        t1 = np.asarray(lead, dtype=float)
        t2 = np.asarray(second, dtype=float)
        M = self.max_n
        r = min(self.gain.r, max(1.0, math.floor(MAX_N_LIMIT / M * _GRID) / _GRID))
        votes = int(math.ceil(r * M - 1e-9))
        stop = _soft_table(self.prior, votes, self.cost / r)
        left = np.clip(np.rint(r * (M - n)), 0, votes).astype(np.int64)
        m = np.clip(np.rint(r * (t1 + t2)), 0, votes - left).astype(np.int64)
        a = np.clip(np.rint(r * np.maximum(t1, t2)), 0, m).astype(np.int64)
        out = stop[left, m, a] | (n >= M)
        return np.where(n < self.pilot, False, out)

    def stops_along(self, prefixes: Prefixes) -> NDArray[np.bool_]:
        """Where `next` stops along many orders at once (`plan.PrefixPolicy`: a replay in
        `ensemble eval` reads it): [..., m] True where it asks for nothing more after the
        first m samples. The soft state while the logprobs are trusted, else the hard table
        (whose batches only skip states where it cannot stop)."""
        n = prefixes.drawn
        M = self.max_n
        if not self.gain.on:
            top, second = prefixes.top_two(count_invalid=self.count_invalid)
            m = np.minimum(n, M)
            stop = self.table[m, np.minimum(top, M), np.minimum(second, M)] == 0
            return stop | (n >= M)
        lead, second_t = prefixes.leading_tallies()
        return self.stops_at(np.broadcast_to(n, lead.shape), lead, second_t) | (n >= M)

    def next(self, drawn: Drawn) -> tuple[int, ...]:
        """One more sample while the soft state does not stop (over several members: one
        round), within the budget; the hard table while the logprobs are not trusted."""
        if not self.gain.on:
            return super().next(drawn)
        left = drawn.left()
        tallies = sorted(drawn.tallies().values(), reverse=True) + [0.0, 0.0]
        n = drawn.drawn
        go = n < self.max_n and not bool(self.stops_at(n, tallies[0], tallies[1]))
        if len(left) == 1:
            return (1 if go and left[0] > 0 else 0,)
        return tuple(1 if go and m > 0 else 0 for m in left)

    @classmethod
    def table_only(cls) -> bool:
        return False

    def __repr__(self) -> str:
        return (f"SoftBayesRule(max_n={self.max_n}, prior={self.prior!r}, "
                f"cost={self.cost:.3g}, pilot={self.pilot}, r={self.gain.r:g}, "
                f"on={self.gain.on})")
