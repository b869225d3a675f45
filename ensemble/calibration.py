"""The quantal-response fit: a model's rationality λ from calibration answers, with honest errors.

Data: for each question with known posterior p, the number of "1" answers (e.g. "L") out of the
valid answers. Model (λ in ψ_λ units, b an optional bias on the logit scale):

    logit P(X = 1) = 2λ(2p − 1) + b      (regressor x = 2(2p − 1): its coefficient IS λ)

fitted as a binomial GLM on the counts (statsmodels), not on proportions as single observations
(the paper's fit treats each proportion as one observation, so its standard errors are off).
The 95% interval is the profile-likelihood interval (the bias profiled out), which stays valid
where the likelihood is skewed; the standard error is the GLM's model-based one.

Separation: when every answer agrees with a threshold rule in p (as at t = 0), the likelihood
keeps increasing as λ → ∞. This is detected before fitting; λ is reported as ∞ with a finite
one-sided 95% lower bound: the λ at which the profile log-likelihood is χ²₁(0.90)/2 below its
supremum (a one-sided 95% likelihood bound).

Logprob mode fits the same model to per-question probabilities P(L) read from one request's top
logprobs (quasi-binomial: the probabilities are treated as proportions, the scale estimated
from Pearson's χ²).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import InputError

__all__ = ["JointFit", "LambdaFit", "fit_joint", "fit_lambda", "fit_probabilities"]

_CHI2_95 = 3.841458820694124  # χ²₁ 0.95 quantile: two-sided 95% profile interval
_CHI2_90 = 2.705543454095404  # χ²₁ 0.90 quantile: one-sided 95% bound
_LAM_MAX = 1e4


@dataclass(frozen=True)
class LambdaFit:
    """λ (ψ_λ units) with its uncertainty; lam = inf when the data are separated."""

    lam: float
    se: float | None
    ci: tuple[float, float]
    bias: float | None
    bias_se: float | None
    separated: bool
    n_questions: int
    n_valid: int
    deviance: float | None
    df: int
    gof_pvalue: float | None
    dispersion: float | None
    mode: str = "sample"
    t: float | None = None
    mirrored: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def lower_bound(self) -> float:
        return self.ci[0]


@dataclass(frozen=True)
class JointFit:
    """λ(t) = λ₁ / t fitted jointly over temperatures t > 0, tested against a free λ per t."""

    lam1: float
    se: float | None
    ci: tuple[float, float]
    bias: float | None
    lrt_stat: float
    lrt_df: int
    lrt_pvalue: float
    temperatures: tuple[float, ...]
    holds: bool


def _arrays(posteriors: ArrayLike, ones: ArrayLike, totals: ArrayLike
            ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    p = np.asarray(posteriors, dtype=float)
    k = np.asarray(ones, dtype=float)
    n = np.asarray(totals, dtype=float)
    if not (p.shape == k.shape == n.shape) or p.ndim != 1:
        raise InputError("posteriors, ones and totals must be 1-D arrays of equal length")
    if ((p < 0) | (p > 1) | np.isnan(p)).any():
        raise InputError("posteriors must lie in [0, 1]")
    if ((k < 0) | (k > n)).any():
        raise InputError("ones must lie between 0 and totals")
    keep = n > 0
    return p[keep], k[keep], n[keep]


def _loglik(lam: float, b: float, x: NDArray[np.float64], k: NDArray[np.float64],
            n: NDArray[np.float64]) -> float:
    z = lam * x + b
    # log σ(z) = −log(1 + e^{−z}); stable with logaddexp
    return float(np.sum(-k * np.logaddexp(0, -z) - (n - k) * np.logaddexp(0, z)))


def _profile(lam: float, x: NDArray[np.float64], k: NDArray[np.float64], n: NDArray[np.float64],
             bias: bool) -> float:
    """Profile log-likelihood at λ (the bias maximised out when it is in the model)."""
    if not bias:
        return _loglik(lam, 0.0, x, k, n)
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda b: -_loglik(lam, b, x, k, n), bounds=(-40, 40),
                          method="bounded", options={"xatol": 1e-9})
    return -float(res.fun)


def _separated(x: NDArray[np.float64], k: NDArray[np.float64], n: NDArray[np.float64],
               bias: bool, *, sign: float = 1.0) -> bool:
    """True when the answers are separated along +λ (sign = 1: MLE at λ = ∞) or along −λ
    (sign = −1: answers anti-correlated with the evidence, MLE at λ = −∞)."""
    x = sign * x
    has_l = x[k > 0]
    has_r = x[k < n]
    if has_l.size == 0 or has_r.size == 0:
        return False  # all answers equal: λ is not identified (handled by the caller)
    if bias:
        return bool(has_r.max() <= has_l.min())
    # without bias the threshold is fixed at x = 0 (p = 1/2); rows at x = 0 carry no λ-information
    nz = x != 0
    return bool(np.all(k[nz & (x > 0)] == n[nz & (x > 0)]) and np.all(k[nz & (x < 0)] == 0)
                and nz.any())


def fit_lambda(posteriors: ArrayLike, ones: ArrayLike, totals: ArrayLike, *, bias: bool = True,
               mirror: bool = False, t: float | None = None, mode: str = "sample") -> LambdaFit:
    """Fit logit P(X=1) = 2λ(2p−1) (+ b) to counts: `ones` of `totals` valid answers per question.

    mirror=True adds the paper's symmetric copy (1 − p, totals − ones) of every question (and
    then fits no bias: the mirrored data are symmetric by construction); for comparison only.
    """
    import statsmodels.api as sm
    from scipy.optimize import brentq
    from scipy.stats import chi2

    p, k, n = _arrays(posteriors, ones, totals)
    notes: list[str] = []
    if mirror:
        p, k, n = np.concatenate([p, 1 - p]), np.concatenate([k, n - k]), np.concatenate([n, n])
        bias = False
        notes.append("mirrored (paper's symmetric processing): counts doubled, bias fixed at 0")
    if p.size < 2:
        raise InputError("need answers to at least two questions to fit λ")
    x = 2 * (2 * p - 1)
    if np.all(k == 0) or np.all(k == n):
        raise InputError("every valid answer is the same: λ is not identified (the model may "
                         "ignore the evidence); check the parser or the prompt")
    nq, nv = int(p.size), int(n.sum())
    for sign in (1.0, -1.0):
        if not _separated(x, k, n, bias, sign=sign):
            continue
        sup = _profile(sign * _LAM_MAX, x, k, n, bias)
        target = sup - _CHI2_90 / 2

        def slack(lam: float, sign: float = sign, target: float = target) -> float:
            return _profile(sign * lam, x, k, n, bias) - target

        bound = brentq(slack, 1e-9, _LAM_MAX, xtol=1e-10) if slack(1e-9) < 0 else 0.0
        if bias:
            notes.append("bias not estimated under separation")
        if sign > 0:
            return LambdaFit(math.inf, None, (float(bound), math.inf), None, None, True, nq, nv,
                             None, nq - (2 if bias else 1), None, None, mode, t, mirror,
                             tuple(notes))
        notes.append("answers are separated AGAINST the evidence (λ = −∞): the model picks the "
                     "less likely box; check the prompt and the answer mapping")
        return LambdaFit(-math.inf, None, (-math.inf, -float(bound)), None, None, True, nq, nv,
                         None, nq - (2 if bias else 1), None, None, mode, t, mirror, tuple(notes))
    exog = np.column_stack([x, np.ones_like(x)]) if bias else x[:, None]
    import warnings

    model = sm.GLM(np.column_stack([k, n - k]), exog, family=sm.families.Binomial())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # separation was handled above; tiny data may still warn
        res = model.fit()
    lam = float(res.params[0])
    se = float(res.bse[0])
    b = float(res.params[1]) if bias else None
    b_se = float(res.bse[1]) if bias else None
    best = _profile(lam, x, k, n, bias)
    target = best - _CHI2_95 / 2
    f = lambda v: _profile(v, x, k, n, bias) - target
    step = max(se, 1e-3)
    lo_end = lam - step
    while f(lo_end) > 0 and lo_end > -_LAM_MAX:
        lo_end -= 2 * step
        step *= 2
    lo = brentq(f, lo_end, lam, xtol=1e-9) if f(lo_end) < 0 else -math.inf
    step = max(se, 1e-3)
    hi_end = lam + step
    while f(hi_end) > 0 and hi_end < _LAM_MAX:
        hi_end += 2 * step
        step *= 2
    hi = brentq(f, lam, hi_end, xtol=1e-9) if f(hi_end) < 0 else math.inf
    dev = float(res.deviance)
    df = int(res.df_resid)
    gof = float(chi2.sf(dev, df)) if df > 0 else None
    disp = float(res.pearson_chi2 / df) if df > 0 else None
    if gof is not None and gof < 0.01:
        notes.append(f"poor fit: deviance {dev:.1f} on {df} df (p = {gof:.2g}); the "
                     "quantal-response model misses structure in these answers")
    return LambdaFit(lam, se, (float(lo), float(hi)), b, b_se, False, nq, nv, dev, df, gof, disp,
                     mode, t, mirror, tuple(notes))


def fit_probabilities(posteriors: ArrayLike, probs: ArrayLike, *, bias: bool = True,
                      t: float | None = None) -> LambdaFit:
    """Logprob mode: fit the model to per-question probabilities P(X = 1) (quasi-binomial)."""
    import statsmodels.api as sm

    p = np.asarray(posteriors, dtype=float)
    q = np.clip(np.asarray(probs, dtype=float), 1e-9, 1 - 1e-9)
    if p.shape != q.shape or p.size < 3:
        raise InputError("need a probability for each of at least three questions")
    x = 2 * (2 * p - 1)
    exog = np.column_stack([x, np.ones_like(x)]) if bias else x[:, None]
    import warnings

    with warnings.catch_warnings():
        # probabilities near 0 or 1 trip statsmodels' separation heuristic; the fit is fine
        warnings.simplefilter("ignore")
        res = sm.GLM(q, exog, family=sm.families.Binomial()).fit(scale="X2")
    lam, se = float(res.params[0]), float(res.bse[0])
    return LambdaFit(lam, se, (lam - 1.959964 * se, lam + 1.959964 * se),
                     float(res.params[1]) if bias else None,
                     float(res.bse[1]) if bias else None, False, int(p.size), int(p.size),
                     float(res.deviance), int(res.df_resid), None, float(res.scale), "logprob", t,
                     False, ("quasi-binomial fit to logprob probabilities; Wald interval",))


def fit_joint(groups: Sequence[tuple[float, ArrayLike, ArrayLike, ArrayLike]], *,
              bias: bool = True) -> JointFit | None:
    """Fit λ(t) = λ₁/t over the temperatures t > 0 of `groups` = [(t, posteriors, ones, totals)]
    and test it (likelihood ratio) against a free λ per temperature. None if < 2 temperatures
    with t > 0 or if a group is separated (λ = ∞ fits no finite λ₁)."""
    import statsmodels.api as sm
    from scipy.stats import chi2

    rows = []
    for t, post, ones, tot in groups:
        if t <= 0:
            continue
        p, k, n = _arrays(post, ones, tot)
        rows.append((float(t), p, k, n))
    if len(rows) < 2:
        return None
    for t, p, k, n in rows:
        if _separated(2 * (2 * p - 1), k, n, bias):
            return None
    ts = np.concatenate([np.full(p.size, t) for t, p, _, _ in rows])
    x = np.concatenate([2 * (2 * p - 1) for _, p, _, _ in rows])
    k = np.concatenate([k for _, _, k, _ in rows])
    n = np.concatenate([n for _, _, _, n in rows])
    y = np.column_stack([k, n - k])
    const = [np.ones_like(x)] if bias else []
    joint = sm.GLM(y, np.column_stack([x / ts, *const]), family=sm.families.Binomial()).fit()
    temps = sorted({t for t, *_ in rows})
    free_cols = [x * (ts == t) for t in temps]
    free = sm.GLM(y, np.column_stack([*free_cols, *const]), family=sm.families.Binomial()).fit()
    stat = max(0.0, float(joint.deviance - free.deviance))
    df = len(temps) - 1
    pval = float(chi2.sf(stat, df))
    lam1, se = float(joint.params[0]), float(joint.bse[0])
    return JointFit(lam1, se, (lam1 - 1.959964 * se, lam1 + 1.959964 * se),
                    float(joint.params[1]) if bias else None, stat, df, pval, tuple(temps),
                    pval >= 0.05)
