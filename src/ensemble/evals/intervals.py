"""Intervals that say what they cover: for these questions, and for the task.

An eval estimates a mean over items (questions; scenarios for box-ball) of per-item unbiased
estimates Û_q (`evals.analysis`). Two quantities can be meant:

- **for these questions**: the mean of the items' true values θ_q over the Q items drawn.
  Only the answers are random: Var = Σ_q Var(Û_q | q) / Q², each term the item's jackknife
  variance. The interval is the normal one, value ± z·SE. It needs K ≥ n + 1 answers per
  item (one to delete); with K = n it is not identified and the interval for the task
  (below, without the finite-population correction) is shown instead: it is wider (it also
  holds the variation between items), so it still covers. The same holds for sampled answers
  (t > 0) that happen to be identical within every item (at K = 1 they always are): that they
  agree does not show there is no noise, so it is not taken as 0.
- **for the task**: the mean of θ_q over all N items of the task, when the Q items are a
  random subset (`--limit`). Then Var = (1 − f) σ²_θ / Q + Σ_q Var(Û_q | q) / Q², f = Q/N
  (simple random sampling without replacement, plus the answers' noise). Since the sample
  variance s² of the Û_q estimates σ²_θ + mean Var(Û_q | q), this is
  (1 − f) s²/Q + f · SE²_questions: the full run (f = 1) keeps the narrow interval of its
  questions, a small subset (f → 0) gets the usual s²/Q. When s²/Q falls below SE²_questions
  (the items' true values look less spread than zero, by chance) the variance between items
  is taken as 0 and the task's interval is the one for the questions.

The task interval is a percentile bootstrap: B resamples of the items with replacement give
draws of the mean, whose deviations from their mean are scaled by √((1 − f) Q/(Q − 1))
(the finite-population correction, and the Q − 1 of an unbiased variance), plus an
independent normal term with variance f · SE²_questions. The same recipe serves differences:
contrasts between temperatures and runs (independent answers, the jackknife variances add)
and between group sizes at one temperature (the same answers: the jackknife deviations of the
difference are paired), always over the same items (paired).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.errors import InputError

from .analysis import ItemValues

__all__ = ["MIN_BOOTSTRAP", "Estimate", "Summary", "bootstrap_counts", "check_bootstrap",
           "estimate", "sampled_row", "summarise"]

MIN_BOOTSTRAP = 100  # fewer resamples cannot place a 95% interval's 2.5% and 97.5% points


def check_bootstrap(reps: int, *, name: str = "--bootstrap") -> None:
    """InputError unless `reps` bootstrap resamples can place a 95% interval (`name`: the
    option or field as the user gave it)."""
    if isinstance(reps, bool) or not isinstance(reps, int) or reps < MIN_BOOTSTRAP:
        raise InputError(f"{name} must be an integer >= {MIN_BOOTSTRAP}, got {reps} (fewer "
                         "resamples cannot place a 95% interval; default 1000)")

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    """A bootstrap estimate: point value, standard error and 95% percentile interval."""

    value: float
    sem: float
    ci: tuple[float, float]


def estimate(draws: NDArray[np.float64], point: float | None = None) -> Estimate:
    """Summarise 1-D bootstrap draws; `point` overrides the mean of the draws."""
    d = np.asarray(draws, dtype=float)
    sem = float(d.std(ddof=1)) if d.size > 1 else 0.0
    lo, hi = np.percentile(d, [2.5, 97.5])
    return Estimate(float(d.mean()) if point is None else float(point), sem,
                    (float(lo), float(hi)))


@dataclass(frozen=True)
class Summary:
    """A mean over items with its two intervals.

    value: the estimate (mean of the per-item unbiased estimates).
    sem, ci: standard error and 95% interval for the task (all `population` items).
    sem_questions, ci_questions: for these `items` items only (answer noise); when the
    jackknife is not available (K = n, or sampled answers identical within every item) they
    repeat the task's, without the finite-population correction, and `questions_exact` is
    False.
    identical: the answers were not sampled (t = 0) and every item's were all the same: there
    is no answer noise, the value is exact for these items.
    """

    value: float
    sem: float
    ci: tuple[float, float]
    sem_questions: float
    ci_questions: tuple[float, float]
    items: int
    population: int
    questions_exact: bool
    identical: bool

    @property
    def fraction(self) -> float:
        return self.items / self.population


def _gen(rng: Any) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def bootstrap_counts(items: int, reps: int, rng: Any = 0) -> NDArray[np.float64]:
    """(reps, items) how often each item is drawn in each bootstrap resample (with
    replacement). Share one matrix between cells for paired resamples."""
    g = _gen(rng)
    idx = g.integers(0, items, size=(reps, items))
    out = np.zeros((reps, items))
    np.add.at(out, (np.arange(reps)[:, None], idx), 1.0)
    return out


def sampled_row(head: dict[str, Any]) -> bool:
    """Whether a table row's answers were sampled: some temperature of the row (`t`, `vs_t`)
    above 0 or unknown (None: a mixed ensemble). Only greedy answers (t = 0) that agree are
    taken to carry no noise (`summarise`)."""
    ts = [head[k] for k in ("t", "vs_t") if k in head]
    return not ts or any(t is None or t > 0 for t in ts)


def summarise(iv: ItemValues, *, population: int, reps: int = 1000, rng: Any = 0,
              counts: NDArray[np.float64] | None = None,
              normals: NDArray[np.float64] | None = None,
              bounds: tuple[float, float] = (-math.inf, math.inf),
              sampled: bool = True, level: bool = True) -> Summary:
    """The mean of `iv` with its interval for the task (`population` items, of which these are
    a simple random sample) and for these items. `counts` (from `bootstrap_counts`) fixes the
    resamples and `normals` (one standard normal per resample) the draws of the answers' noise,
    both shared across cells: paired differences, and the same interval for the same values;
    `bounds` clip the intervals to the metric's range.
    `sampled`: the answers were drawn at t > 0 (False: greedy, t = 0, where identical answers
    mean there is no noise). `level`: a mean, not a difference (only a level gets the Wilson
    interval below: a difference that is the same on every item, such as two rules that agree
    on every answer seen, keeps the bootstrap's)."""
    g = _gen(rng)
    same = bool(iv.identical.all())
    if same and not sampled:
        # greedy answers that agree: no noise to estimate, with or without a spare answer
        iv = ItemValues(iv.values, np.zeros_like(iv.jack), iv.weight, True, iv.identical)
    elif same:
        # sampled answers that agree (always so at K = 1) do not show the noise is 0: it
        # cannot be separated from the items' variation, as at K = n
        iv = ItemValues(iv.values, iv.jack, iv.weight, False, iv.identical)
    s = _summarise(iv, population, reps, g, counts, bounds, normals)
    s = replace(s, identical=same and not sampled)
    if (sampled and level and not s.questions_exact
            and math.isfinite(bounds[0]) and math.isfinite(bounds[1])
            and s.ci[1] - s.ci[0] <= 1e-9 * (bounds[1] - bounds[0])):
        # no noise measured and no spread between items either: nothing to resample (the
        # bootstrap's interval is then a point up to rounding: means of equal values differ
        # in the last bits)
        wilson = _wilson(s.value, s.items, bounds)
        half = (wilson[1] - wilson[0]) / (2 * Z95)
        s = replace(s, ci=wilson, sem=half, ci_questions=wilson, sem_questions=half)
    return _snapped(s, 1e-12 * (bounds[1] - bounds[0] if math.isfinite(bounds[1] - bounds[0])
                                else 1.0))


def _snapped(s: Summary, tol: float) -> Summary:
    """Rounding noise read as zero: two rules that agree on every answer differ by ~1e-17
    (the same votes summed in another order), which printed as -0.0000 and [-0.000, 0.000]."""

    def z(x: float) -> float:
        return 0.0 if abs(x) <= tol else x

    return replace(s, value=z(s.value), sem=z(s.sem), ci=(z(s.ci[0]), z(s.ci[1])),
                   sem_questions=z(s.sem_questions),
                   ci_questions=(z(s.ci_questions[0]), z(s.ci_questions[1])))


def _wilson(value: float, items: int, bounds: tuple[float, float]) -> tuple[float, float]:
    """The Wilson score interval of a mean of `items` values in `bounds` (rescaled to [0, 1],
    where a mean μ has variance at most μ(1 − μ))."""
    lo, hi = bounds
    p = min(max((value - lo) / (hi - lo), 0.0), 1.0)
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * items)) / (1 + z2 / items)
    half = Z95 * math.sqrt(p * (1 - p) / items + z2 / (4 * items * items)) / (1 + z2 / items)
    return (lo + (hi - lo) * max(centre - half, 0.0), lo + (hi - lo) * min(centre + half, 1.0))


def _summarise(iv: ItemValues, population: int, reps: int, g: np.random.Generator,
               counts: NDArray[np.float64] | None, bounds: tuple[float, float],
               normals: NDArray[np.float64] | None = None) -> Summary:
    q = iv.items
    if q < 1:
        raise ValueError("no items to summarise")
    n_pop = max(int(population), q)
    f = q / n_pop
    vals = iv.values
    value = float(vals.mean())
    s2 = float(vals.var(ddof=1)) if q > 1 else math.nan
    se_q2 = float(iv.cond_var().sum()) / q**2 if iv.jackknife else math.nan
    lo, hi = bounds

    def clip(a: float, b: float) -> tuple[float, float]:
        return (float(min(max(a, lo), hi)), float(min(max(b, lo), hi)))

    if q == 1 and (f < 1 or not iv.jackknife):
        # one item says nothing about the others (nor, without replicate votes, about its
        # own noise): the interval is the metric's range
        se_q = math.sqrt(se_q2) if iv.jackknife else math.inf
        ci_q = clip(value - Z95 * se_q, value + Z95 * se_q) if iv.jackknife else (lo, hi)
        return Summary(value, math.inf, (lo, hi), se_q, ci_q, q, n_pop, iv.jackknife,
                       bool(iv.identical.all()))
    if iv.jackknife and (q == 1 or s2 / q >= se_q2):
        var_task = (1 - f) * (s2 if q > 1 else 0.0) / q + f * se_q2
        between = math.sqrt((1 - f) * q / (q - 1)) if q > 1 else 0.0
        cond = math.sqrt(f * se_q2)
    elif iv.jackknife:
        # the items vary less than their answers' noise (the estimated variance between items
        # is negative, as can happen by chance): take it as 0, keep the noise
        var_task, between, cond = se_q2, 0.0, math.sqrt(se_q2)
    else:
        var_task = s2 / q
        between = math.sqrt(q / (q - 1))
        cond = 0.0
    w = counts if counts is not None else bootstrap_counts(q, reps, g)
    if w.shape[1] != q:
        raise ValueError(f"bootstrap counts are for {w.shape[1]} items, not {q}")
    boot = w @ vals / q
    draws = value + between * (boot - boot.mean())
    if cond > 0:
        if normals is not None and normals.shape[0] != draws.shape[0]:
            raise ValueError(f"{normals.shape[0]} noise draws for {draws.shape[0]} resamples")
        draws = draws + cond * (g.standard_normal(draws.shape[0]) if normals is None
                                else normals)
    a, b = np.percentile(draws, [2.5, 97.5])
    ci = clip(float(a), float(b))
    sem = math.sqrt(max(var_task, 0.0))
    if iv.jackknife:
        se_q = math.sqrt(se_q2)
        ci_q = clip(value - Z95 * se_q, value + Z95 * se_q)
        if f >= 1:
            ci = ci_q  # every item of the task was run: the two intervals are one
    else:
        # no replicate votes: the interval for the task without the finite-population
        # correction, which is wider than the one for these questions
        se_q, ci_q = sem, ci
    return Summary(value, sem, ci, se_q, ci_q, q, n_pop, iv.jackknife, bool(iv.identical.all()))
