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

Goodness of fit. With ~10 samples per question the deviance is far from its χ² limit (its
χ² p-value is near 1 on every honest run: a test that cannot reject). Two tests replace it,
both calibrated by a parametric bootstrap (answers redrawn from the fitted model, the model
refitted to each draw; `gof_reps` draws, 999 by default, seeded by default from the counts
themselves, so one calibration always gives the same p-values while different calibrations use
different draws; the seed is recorded in `boot_seed`):

- the **link test** (`gof_pvalue`): quantal response says the logit of P(L) is linear in the
  evidence x. Add γ·(η̂/s)³ to the fitted linear predictor η̂ (s = max |η̂|) and compare the
  likelihoods (a 1-df likelihood ratio, Pregibon's and Stukel's link tests in a symmetric
  form): it detects tails that fall off faster or slower than the logistic, e.g. an expert
  whose answers follow a probit curve. Its size and power are measured in
  tests/bench/coverage.py (docs/statistics.md).
- the **deviance test** (`deviance_pvalue`, upper tail): more spread between questions than
  binomial sampling allows (e.g. the model misreads some prompts).

Across temperatures (`fit_joint`): λ(t) = λ₁/t against a free λ per t. Sampling at temperature
t divides the whole logit by t, a preference for one answer included, so a bias is b₁/t when
it is part of the model's scores and a constant b when it is added after the temperature; by
default each temperature gets its own bias in both models, so the test is about λ alone.

Logprob mode fits the same model to per-question probabilities P(L) read from one request's top
logprobs (quasi-binomial: each question's P(L), its belief q, is a proportion with mean μ and
variance φ·μ(1 − μ); a belief in [0, 1] has φ ≤ 1, φ = 1 being a hard vote). The questions are
the independent units (one belief per question and temperature), and the interval is built for
beliefs piled near 0 and 1, where few questions carry the information about λ:

    λ̂ ± t_{ν, 0.975} · SE,   SE² = max(cluster-robust variance, φ̂ · [(XᵀWX)⁻¹]_λλ)

- the **cluster-robust** (sandwich) variance, clustered by question (with statsmodels'
  small-sample factor for clusters), assumes nothing about how the beliefs spread;
- the **model-based** variance uses the scale φ̂ = Σ(q − μ̂)² / Σ μ̂(1 − μ̂) · N/(N − d): the
  ratio of sums, not Pearson's mean of ratios Σ(q − μ̂)²/(μ̂(1 − μ̂))/(N − d), whose terms at
  μ̂ near 0 or 1 are mostly ~0 and rarely huge, so that in most runs it is far below φ (the
  Wald interval with Pearson's scale covered 51-89% of runs at λ = 4-8, κ = 1 and 10, in
  tests/bench/bench_logprob_coverage.py);
- ν = (Σ v)² / Σ v² − d, v = μ̂(1 − μ̂) (Satterthwaite's degrees of freedom of a residual sum
  of squares with variances ∝ v): the number of questions whose beliefs can vary, small when
  λ is large and most questions are answered with near certainty.

Coverage across κ (the chains' concentration), λ, temperature and 50-400 questions:
docs/calibration.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import InputError

__all__ = ["BIAS_FORMS", "LOGPROB_INTERVAL", "ONE_SIDED_INTERVAL", "PROFILE_INTERVAL", "JointFit",
           "LambdaFit", "fit_joint", "fit_lambda", "fit_probabilities"]

_CHI2_95 = 3.841458820694124  # χ²₁ 0.95 quantile: two-sided 95% profile interval
_CHI2_90 = 2.705543454095404  # χ²₁ 0.90 quantile: one-sided 95% bound
_LAM_MAX = 1e4

# what a fit's interval is (LambdaFit.interval; calibration.json's `fits[].interval`)
PROFILE_INTERVAL = "95% profile-likelihood interval (bias profiled out), answers as binomial counts"
ONE_SIDED_INTERVAL = "one-sided 95% profile-likelihood bound (separated: no upper end)"
LOGPROB_INTERVAL = ("95% interval, clustered by question: λ ± t(ν)·SE, SE the larger of the "
                    "cluster-robust and the quasi-binomial standard errors")


@dataclass(frozen=True, kw_only=True)
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
    gof_stat: float | None = None  # the link test's likelihood ratio
    deviance_pvalue: float | None = None  # parametric bootstrap, upper tail
    gof_reps: int = 0  # bootstrap draws behind the p-values (0: χ²₁ reference, no deviance p)
    boot_seed: int | None = None  # the bootstrap's seed (fit_lambda(..., rng=boot_seed) repeats it)
    interval: str = PROFILE_INTERVAL  # what `ci` is (the module's constants)
    df_interval: float | None = None  # logprob mode: the t quantile's degrees of freedom ν

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
    gof_pvalue: float | None = None  # link test pooled over temperatures (free λ per t)
    gof_stat: float | None = None
    deviance_pvalue: float | None = None
    bias_form: str = "per-t"  # how the bias was fitted across t (see fit_joint); "none"
    biases: tuple[float, ...] | None = None  # per-t: the bias at each t; else (b,) or (b₁,)
    boot_seed: int | None = None  # the bootstrap's seed (fit_joint(..., rng=boot_seed) repeats it)
    gof_reps: int = 0  # bootstrap draws behind lrt_pvalue and the pooled tests (0: χ² reference)


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


def _logit_newton(k: NDArray[np.float64], n: NDArray[np.float64], X: NDArray[np.float64],
                  beta0: NDArray[np.float64] | None = None, *, iters: int = 60
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Binomial logit fits to B datasets at once (Newton-Raphson): k (B, N) successes of n (N,)
    trials, design X (N, d) shared by all or (B, N, d) one per dataset. Returns β (B, d),
    log-likelihood (B,) (without the binomial coefficients) and η (B, N).

    Our own, because the bootstrap refits hundreds of datasets: with a shared design one Newton
    step for all of them is three matrix products (the Hessians as w @ (x xᵀ) per row), and a
    dataset leaves the loop when it has converged. Steps are capped so that near-separated
    draws (whose likelihood keeps rising as β grows) end at a large finite β with the
    likelihood converged.
    """
    from scipy.special import expit

    b = k.shape[0]
    shared = X.ndim == 2
    d = X.shape[-1]
    beta = np.zeros((b, d)) if beta0 is None else np.array(beta0, dtype=float)
    outer = (X[:, :, None] * X[:, None, :]).reshape(X.shape[0], d * d) if shared else None
    ridge = 1e-9 * np.eye(d)
    active = np.arange(b)
    for _ in range(iters):
        if active.size == 0:
            break
        ba = beta[active]
        if outer is not None:
            mu = expit(ba @ X.T)
            w = n * mu * (1 - mu)
            grad = (k[active] - n * mu) @ X
            hess = (w @ outer).reshape(-1, d, d)
        else:
            xa = X[active]
            mu = expit(np.matmul(xa, ba[..., None])[..., 0])
            w = n * mu * (1 - mu)
            xt = xa.transpose(0, 2, 1)
            grad = np.matmul(xt, (k[active] - n * mu)[..., None])[..., 0]
            hess = np.matmul(xt, xa * w[..., None])
        step = np.linalg.solve(hess + ridge, grad[..., None])[..., 0]
        size = np.abs(step).max(axis=1)
        beta[active] = ba + step * np.minimum(1.0, 5.0 / np.maximum(size, 1e-300))[:, None]
        active = active[size >= 1e-9]
    eta = beta @ X.T if shared else np.matmul(X, beta[..., None])[..., 0]
    ll = -(k * np.logaddexp(0, -eta) + (n - k) * np.logaddexp(0, eta)).sum(axis=1)
    return beta, ll, eta


def _collapse(k: NDArray[np.float64], n: NDArray[np.float64], X: NDArray[np.float64]
              ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                         NDArray[np.intp]]:
    """Pool the questions whose design rows are equal (the 400 box-ball questions have 63
    distinct posteriors): counts k (B, N) -> (B, G), trials n (N,) -> (G,), rows X -> (G, d),
    and the group of each question. A binomial logit likelihood (without its coefficients) is
    the same function of β on pooled and unpooled counts, and a sum of binomials with one μ is
    binomial: fits, likelihood ratios and draws are unchanged, at a fraction of the cost."""
    rows, inv = np.unique(X, axis=0, return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    onehot = np.zeros((X.shape[0], rows.shape[0]))
    onehot[np.arange(X.shape[0]), inv] = 1.0
    return k @ onehot, n @ onehot, rows, inv


def _link_stats(k: NDArray[np.float64], n: NDArray[np.float64], X: NDArray[np.float64]
                ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """For B datasets: the link test's likelihood ratio (γ(η̂/s)³ added), the deviance, and
    the fitted η̂ of the model X (per question)."""
    from scipy.special import xlogy

    kc, nc, xc, inv = _collapse(k, n, X)
    beta, ll0, eta = _logit_newton(kc, nc, xc)
    scale = np.abs(eta).max(axis=1, keepdims=True)
    extra = (eta / np.where(scale > 0, scale, 1.0)) ** 3
    x1 = np.concatenate([np.broadcast_to(xc, (k.shape[0], *xc.shape)), extra[..., None]], axis=-1)
    _, ll1, _ = _logit_newton(kc, nc, x1, np.concatenate([beta, np.zeros((k.shape[0], 1))], 1))
    # the saturated model is per question: its likelihood needs the unpooled counts
    sat = (xlogy(k, k / n) + xlogy(n - k, (n - k) / n)).sum(axis=1)
    return np.maximum(2 * (ll1 - ll0), 0.0), 2 * (sat - ll0), eta[:, inv]


def _generator(rng: Any, *data: NDArray[np.float64]) -> tuple[np.random.Generator, int | None]:
    """The bootstrap's generator and the seed it came from (None for a Generator passed in).

    `rng=None` seeds from the data themselves (a hash of the counts): the same answers always
    give the same p-value, and different calibrations use different draws, so no fixed set of
    draws sets the cutoff of every test. The seed is recorded beside the p-values."""
    if isinstance(rng, np.random.Generator):
        return rng, None
    if rng is None:
        import hashlib

        h = hashlib.sha256()
        for a in data:
            h.update(np.ascontiguousarray(a, dtype=float).tobytes())
        rng = int.from_bytes(h.digest()[:4], "big")
    return np.random.default_rng(int(rng)), int(rng)


def _gof(X: NDArray[np.float64], k: NDArray[np.float64], n: NDArray[np.float64], *,
         reps: int, rng: np.random.Generator) -> tuple[float, float, float | None]:
    """(link test p-value, its statistic, deviance p-value) for the logit model with design X;
    both p-values from `reps` parametric-bootstrap draws (reps = 0: χ²₁ for the link test)."""
    from scipy.stats import chi2

    lr, dev, eta = _link_stats(k[None], n, X)
    if reps <= 0:
        return float(chi2.sf(lr[0], 1)), float(lr[0]), None
    mu = 1.0 / (1.0 + np.exp(-eta[0]))
    draws = rng.binomial(n.astype(np.int64), mu, size=(reps, n.size)).astype(float)
    lr_b, dev_b, _ = _link_stats(draws, n, X)
    p_link = (1 + np.sum(lr_b >= lr[0] - 1e-9)) / (reps + 1)
    p_dev = (1 + np.sum(dev_b >= dev[0] - 1e-9)) / (reps + 1)
    return float(p_link), float(lr[0]), float(p_dev)


def _separated_fit(sign: float, x: NDArray[np.float64], k: NDArray[np.float64],
                   n: NDArray[np.float64], *, bias: bool, mode: str, t: float | None,
                   mirror: bool, notes: list[str]) -> LambdaFit:
    """λ = ±∞ with its one-sided 95% bound (separated along sign · λ)."""
    from scipy.optimize import brentq

    nq, nv = int(x.size), int(n.sum())
    target = _profile(sign * _LAM_MAX, x, k, n, bias) - _CHI2_90 / 2

    def slack(lam: float) -> float:
        return _profile(sign * lam, x, k, n, bias) - target

    bound = brentq(slack, 1e-9, _LAM_MAX, xtol=1e-10) if slack(1e-9) < 0 else 0.0
    if bias:
        notes.append("bias not estimated under separation")
    if sign > 0:
        lam, ci = math.inf, (float(bound), math.inf)
    else:
        notes.append("answers are separated AGAINST the evidence (λ = −∞): the model picks the "
                     "less likely box; check the prompt and the answer mapping")
        lam, ci = -math.inf, (-math.inf, -float(bound))
    return LambdaFit(lam=lam, se=None, ci=ci, bias=None, bias_se=None, separated=True,
                     n_questions=nq, n_valid=nv, deviance=None, df=nq - (2 if bias else 1),
                     gof_pvalue=None, dispersion=None, mode=mode, t=t, mirrored=mirror,
                     notes=tuple(notes), interval=ONE_SIDED_INTERVAL)


def fit_lambda(posteriors: ArrayLike, ones: ArrayLike, totals: ArrayLike, *, bias: bool = True,
               mirror: bool = False, t: float | None = None, mode: str = "sample",
               gof_reps: int = 999, rng: Any = None) -> LambdaFit:
    """Fit logit P(X=1) = 2λ(2p−1) (+ b) to counts: `ones` of `totals` valid answers per question.

    mirror=True adds the paper's symmetric copy (1 − p, totals − ones) of every question (and
    then fits no bias: the mirrored data are symmetric by construction); for comparison only.
    `gof_reps` parametric-bootstrap draws calibrate the goodness-of-fit tests (0: the link test
    against χ²₁ and no deviance test); `rng` seeds them (an int or a Generator; None: a seed
    derived from the counts, recorded in `boot_seed`).
    """
    import statsmodels.api as sm
    from scipy.optimize import brentq

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
        if _separated(x, k, n, bias, sign=sign):
            return _separated_fit(sign, x, k, n, bias=bias, mode=mode, t=t, mirror=mirror,
                                  notes=notes)
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

    def f(v: float) -> float:
        return _profile(v, x, k, n, bias) - target

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
    disp = float(res.pearson_chi2 / df) if df > 0 else None
    gof = gof_stat = dev_p = None
    seed = None
    if mirror:
        notes.append("no goodness-of-fit test on mirrored data (the copies are not independent)")
    elif df > 1:
        g, seed = _generator(rng, x, k, n)
        gof, gof_stat, dev_p = _gof(exog, k, n, reps=gof_reps, rng=g)
        if gof < 0.05:
            notes.append(f"link test p = {gof:.2g}: logit P(L) is not linear in the evidence "
                         "(the answers' curve has other tails than the logistic); λ summarises "
                         "the slope near p = 1/2 only")
        if dev_p is not None and dev_p < 0.05:
            notes.append(f"deviance test p = {dev_p:.2g}: more spread between questions than "
                         "binomial sampling allows (some prompts may be read differently)")
    return LambdaFit(lam=lam, se=se, ci=(float(lo), float(hi)), bias=b, bias_se=b_se,
                     separated=False, n_questions=nq, n_valid=nv, deviance=dev, df=df,
                     gof_pvalue=gof, dispersion=disp, mode=mode, t=t, mirrored=mirror,
                     notes=tuple(notes), gof_stat=gof_stat, deviance_pvalue=dev_p,
                     gof_reps=gof_reps if gof is not None else 0,
                     boot_seed=seed if gof is not None and gof_reps > 0 else None)


def fit_probabilities(posteriors: ArrayLike, probs: ArrayLike, *, bias: bool = True,
                      t: float | None = None) -> LambdaFit:
    """Logprob mode: fit the model to per-question probabilities P(X = 1), one per question
    (quasi-binomial), with the interval of the module docstring (`LOGPROB_INTERVAL`): λ̂ ±
    t_ν · SE, SE the larger of the cluster-robust (by question) and the quasi-binomial one."""
    import statsmodels.api as sm
    from scipy.stats import t as student

    p = np.asarray(posteriors, dtype=float)
    q = np.clip(np.asarray(probs, dtype=float), 1e-9, 1 - 1e-9)
    if p.shape != q.shape or p.ndim != 1 or p.size < 3:
        raise InputError("need a probability for each of at least three questions")
    x = 2 * (2 * p - 1)
    exog = np.column_stack([x, np.ones_like(x)]) if bias else x[:, None]
    nq, d = int(p.size), exog.shape[1]  # nq >= 3 > d
    import warnings

    with warnings.catch_warnings():
        # probabilities near 0 or 1 trip statsmodels' separation heuristic; the fit is fine
        warnings.simplefilter("ignore")
        res = sm.GLM(q, exog, family=sm.families.Binomial()).fit()
    lam = float(res.params[0])
    mu = np.asarray(res.fittedvalues, dtype=float)
    v = mu * (1 - mu)
    bread = np.linalg.pinv(exog.T @ (exog * v[:, None]))  # (XᵀWX)⁻¹
    # The sandwich by hand, one cluster per question, with statsmodels' small-sample factor
    # G/(G−1)·(N−1)/(N−d) = N/(N−d) (G = N): its own cov_type="cluster" goes through the
    # link's derivative, 1/(μ(1 − μ)), and is NaN as soon as a fitted μ rounds to 0 or 1.
    score = exog * (q - mu)[:, None]
    robust = bread @ (score.T @ score) @ bread * (nq / (nq - d))
    phi = float(((q - mu) ** 2).sum() / v.sum() * nq / (nq - d))  # ratio of sums (docstring)
    var = np.maximum(phi * np.diag(bread), np.diag(robust))
    se, b_se = float(math.sqrt(var[0])), (float(math.sqrt(var[1])) if bias else None)
    nu = max(1.0, float(v.sum() ** 2 / (v ** 2).sum()) - d)
    # beliefs that are exactly ψ (κ = ∞) give SE ≈ 0: the fit's own precision is the floor
    half = max(float(student.ppf(0.975, nu)) * se, 1e-6 * max(1.0, abs(lam)))
    return LambdaFit(lam=lam, se=se, ci=(lam - half, lam + half),
                     bias=float(res.params[1]) if bias else None, bias_se=b_se,
                     separated=False, n_questions=nq, n_valid=nq,
                     deviance=float(res.deviance), df=int(res.df_resid), gof_pvalue=None,
                     dispersion=phi, mode="logprob", t=t, mirrored=False,
                     notes=(f"quasi-binomial fit to one logprob belief per question (scale "
                            f"{phi:.3g}); the interval's t quantile has ν = {nu:.1f} degrees "
                            "of freedom",),
                     interval=LOGPROB_INTERVAL, df_interval=nu)


BIAS_FORMS = ("per-t", "fixed", "scaled")


def _joint_designs(x: NDArray[np.float64], ts: NDArray[np.float64], temps: list[float],
                   bias: bool, bias_form: str
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The designs of the λ₁/t model and of the free-λ-per-t model, each with the bias terms
    of `bias_form`: one b at every t ("fixed"), b₁/t as temperature acts on the whole logit
    ("scaled"), or one free b per t in both models ("per-t", right under either)."""
    free_cols = [x * (ts == t) for t in temps]
    if not bias:
        const: list[NDArray[np.float64]] = []
    elif bias_form == "fixed":
        const = [np.ones_like(x)]
    elif bias_form == "scaled":
        const = [1.0 / ts]
    else:
        const = [(ts == t).astype(float) for t in temps]
    return np.column_stack([x / ts, *const]), np.column_stack([*free_cols, *const])


def fit_joint(groups: Sequence[tuple[float, ArrayLike, ArrayLike, ArrayLike]], *,
              bias: bool = True, bias_form: str = "per-t", gof_reps: int = 999,
              rng: Any = None, pooled_gof: bool = True) -> JointFit | None:
    """Fit λ(t) = λ₁/t over the temperatures t > 0 of `groups` = [(t, posteriors, ones, totals)]
    and test it (likelihood ratio, T − 1 df) against a free λ per temperature: its p-value
    from `gof_reps` parametric-bootstrap draws under the λ₁/t fit (0: the χ² reference). None
    if < 2 temperatures with t > 0 or if a group is separated (λ = ∞ fits no finite λ₁).

    The bias (`bias=True`) is fitted as `bias_form` says. Sampling at temperature t divides the
    whole logit by t, a preference for one answer included (P(L) = σ((2λ₁(2p−1) + b₁)/t)),
    while a bias added after the temperature stays b at every t: "per-t" (the default) gives
    each temperature its own bias in both models, so the test is about λ alone and keeps its
    size under either; "scaled" fits b₁/t, "fixed" one b at every t (each wrong under the
    other form: tests/bench/size_study.py). `rng` seeds the bootstrap (None: from the
    counts; the seed is in `boot_seed`).

    The goodness-of-fit tests of `fit_lambda`, pooled over the temperatures (one γ for all,
    on the free-λ model), are in `gof_pvalue` and `deviance_pvalue` (`pooled_gof=False` skips
    them: half the cost, for studies of the λ₁/t test alone)."""
    import statsmodels.api as sm
    from scipy.stats import chi2

    if bias_form not in BIAS_FORMS:
        raise InputError(f"bias_form must be one of {', '.join(BIAS_FORMS)}, got {bias_form!r}")
    rows = []
    for t, post, ones, tot in groups:
        if t <= 0:
            continue
        p, k, n = _arrays(post, ones, tot)
        rows.append((float(t), p, k, n))
    if len(rows) < 2:
        return None
    for _t, p, k, n in rows:
        if _separated(2 * (2 * p - 1), k, n, bias):
            return None
    ts = np.concatenate([np.full(p.size, t) for t, p, _, _ in rows])
    x = np.concatenate([2 * (2 * p - 1) for _, p, _, _ in rows])
    k = np.concatenate([k for _, _, k, _ in rows])
    n = np.concatenate([n for _, _, _, n in rows])
    temps = sorted({t for t, *_ in rows})
    x_joint, x_free = _joint_designs(x, ts, temps, bias, bias_form)
    y = np.column_stack([k, n - k])
    joint = sm.GLM(y, x_joint, family=sm.families.Binomial()).fit()
    free = sm.GLM(y, x_free, family=sm.families.Binomial()).fit()
    stat = max(0.0, float(joint.deviance - free.deviance))
    df = len(temps) - 1
    g, seed = _generator(rng, ts, x, k, n)
    if gof_reps > 0:
        # the χ² reference runs a little liberal with ~10 samples per question (6-7% at the 5%
        # level in tests/bench/size_study.py): calibrate by redrawing from the λ₁/t fit
        mu = 1.0 / (1.0 + np.exp(-(x_joint @ np.asarray(joint.params))))
        draws = g.binomial(n.astype(np.int64), mu, size=(gof_reps, n.size)).astype(float)
        kc, nc, both, _ = _collapse(np.vstack([k[None], draws]), n,
                                    np.column_stack([x_joint, x_free]))
        _, ll_j, _ = _logit_newton(kc, nc, both[:, :x_joint.shape[1]])
        _, ll_f, _ = _logit_newton(kc, nc, both[:, x_joint.shape[1]:])
        lr = 2 * (ll_f - ll_j)
        pval = float((1 + np.sum(lr[1:] >= lr[0] - 1e-9)) / (gof_reps + 1))
    else:
        pval = float(chi2.sf(stat, df))
    lam1, se = float(joint.params[0]), float(joint.bse[0])
    gof = gof_stat = dev_p = None
    if pooled_gof:
        gof, gof_stat, dev_p = _gof(x_free, k, n, reps=gof_reps, rng=g)
    biases = tuple(float(v) for v in joint.params[1:]) if bias else None
    return JointFit(lam1, se, (lam1 - 1.959964 * se, lam1 + 1.959964 * se),
                    biases[0] if biases and bias_form != "per-t" else None, stat, df, pval,
                    tuple(temps), pval >= 0.05, gof, gof_stat, dev_p,
                    bias_form=bias_form if bias else "none", biases=biases,
                    boot_seed=seed if gof_reps > 0 else None, gof_reps=max(gof_reps, 0))
