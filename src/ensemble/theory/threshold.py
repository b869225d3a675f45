"""The threshold g(n) of the paper's main theorem (item 1): majority is optimally robust for
λ <= g(n).

With k = floor((n−1)/2), h(q) = (q(1−q))^k (1 − 2q) / (ψ_λ(1) − q) and
ρ(q0) = (2λ + L(q0)) / (2λ − L(q0)), L(q0) = ln((1−q0)/q0), the defining inequality is

    h(q1) <= h(q0) ρ(q0)   for all ψ_λ(0) <= q0 <= q1 <= 1/2,

and g(n) is the supremum of the λ for which it holds. For fixed λ this is equivalent to
min over q0 of [h(q0) ρ(q0) − max_{q1 ∈ [q0, 1/2]} h(q1)] >= 0, computed on a dense grid in the
log-odds of q0 (so the region near ψ_λ(0), where ρ blows up, is resolved) and refined with a
bounded scalar minimiser, all in log space (h ~ 4^-k underflows doubles beyond n ~ 1000;
before that fix g(10001) came out as ∞). The paper's lemma makes the condition monotone in λ,
so g(n) follows by bisection. g(n) = ∞ for n <= 2 and g(2k) = g(2k − 1) (same k).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from numpy.typing import NDArray

from .utility import validate_n

__all__ = ["threshold", "threshold_margin"]


def _log_h(q: NDArray[np.float64], k: int, psi1: float) -> NDArray[np.float64]:
    """log h(q) for ψ_λ(0) <= q < 1/2 (h underflows for large k: (1/4)^k < 1e-300 at k ~ 500)."""
    with np.errstate(divide="ignore"):
        return k * np.log(q * (1 - q)) + np.log1p(-2 * q) - np.log(psi1 - q)


def threshold_margin(lam: float, n: int, *, points: int = 4001) -> float:
    """min over the (q0, q1) triangle of log[h(q0) ρ(q0) / max_{q1 ∈ [q0, 1/2]} h(q1)].

    >= 0 means the inequality holds at this λ (majority is then optimally robust). Computed in
    log space, so large n (h ~ 4^-k) does not underflow.
    """
    from scipy.optimize import minimize_scalar
    from scipy.special import expit

    k = (n - 1) // 2
    psi1 = float(expit(2 * lam))
    # q0 from ψ_λ(0) (log-odds −2λ) towards 1/2 (log-odds 0): L = ln((1−q0)/q0) from 2λ down
    # to 0, dense near ψ_λ(0). q0 = 1/2 itself is left out: there h(q0) = max h = 0 and the
    # inequality holds with equality.
    L = 2 * lam * (1 - np.linspace(0.0, 1.0, points) ** 2)[1:-1]
    q = expit(-L)
    lh = _log_h(q, k, psi1)
    lrho = np.log(2 * lam + L) - np.log(2 * lam - L)
    # suffix maximum of log h over q1 >= q0 (q increases along the grid)
    lH = np.maximum.accumulate(lh[::-1])[::-1]
    slack = lh + lrho - lH
    i = int(np.argmin(slack))
    best = float(slack[i])
    # refine around the grid minimum; the max of h on [q0, 1/2] is refined too

    def neg_lh(x: float) -> float:
        return -float(_log_h(np.array([x]), k, psi1)[0])

    qmax_res = minimize_scalar(neg_lh, bounds=(float(q[0]), 0.5), method="bounded",
                               options={"xatol": 1e-13})
    qstar = float(qmax_res.x)
    lhstar = max(float(-qmax_res.fun), float(lH.max()))
    lo, hi = float(L[min(i + 1, L.size - 1)]), float(L[max(i - 1, 0)])

    def slack_at(Lx: float) -> float:
        q0 = float(expit(-Lx))
        lhq = float(_log_h(np.array([q0]), k, psi1)[0])
        lHq = lhstar if q0 <= qstar else lhq
        lr = math.log(2 * lam + Lx) - math.log(2 * lam - Lx) if Lx < 2 * lam else math.inf
        return lhq + lr - lHq

    if hi > lo:
        res = minimize_scalar(slack_at, bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-14})
        best = min(best, float(res.fun))
    return best


def threshold(n: int, *, rtol: float = 1e-9) -> float:
    """g(n) in ψ_λ units; inf for n <= 2. Cached."""
    n = validate_n(n)
    if n <= 2:
        return math.inf
    return _threshold((n - 1) // 2, rtol)


@cache
def _threshold(k: int, rtol: float) -> float:
    n = 2 * k + 1
    lo, hi = 0.0, 1.0
    while threshold_margin(hi, n) >= 0:
        lo, hi = hi, hi * 2
        if hi > 1e6:  # pragma: no cover - never reached for n >= 3
            return math.inf
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if threshold_margin(mid, n) >= 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
