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

numpy only: `ensemble theory threshold` must start in under 0.5 s, and importing scipy.optimize
and scipy.special costs ~0.3 s, more than the whole computation of g(3..20). The refinement is
therefore a golden-section search written here (`_golden_min`, a dozen lines), not scipy's
bounded Brent; both converge to the same minimum on these unimodal brackets (g(n) for n = 3..59,
101, ..., 10001 agree to 1e-9 relative; tests/theory/test_threshold.py pins the values).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._checks import validate_n

__all__ = ["threshold", "threshold_margin"]


def _log_h(q: NDArray[np.float64], k: int, psi1: float) -> NDArray[np.float64]:
    """log h(q) for ψ_λ(0) <= q < 1/2 (h underflows for large k: (1/4)^k < 1e-300 at k ~ 500)."""
    with np.errstate(divide="ignore"):
        return k * np.log(q * (1 - q)) + np.log1p(-2 * q) - np.log(psi1 - q)


def _log_h1(q: float, k: int, psi1: float) -> float:
    """`_log_h` at one point, in plain floats (the refinement calls it thousands of times)."""
    if q <= 0.0 or q >= 0.5:
        return -math.inf  # h(1/2) = 0; q <= 0 lies outside the region
    return k * math.log(q * (1 - q)) + math.log1p(-2 * q) - math.log(psi1 - q)


def threshold_margin(lam: float, n: int, *, points: int = 4001) -> float:
    """min over the (q0, q1) triangle of log[h(q0) ρ(q0) / max_{q1 ∈ [q0, 1/2]} h(q1)].

    >= 0 means the inequality holds at this λ (majority is then optimally robust). Computed in
    log space, so large n (h ~ 4^-k) does not underflow.
    """
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
        return -_log_h1(x, k, psi1)

    qstar, neg_max = _golden_min(neg_lh, float(q[0]), 0.5, xatol=1e-13)
    lhstar = max(-neg_max, float(lH.max()))
    lo, hi = float(L[min(i + 1, L.size - 1)]), float(L[max(i - 1, 0)])

    def slack_at(Lx: float) -> float:
        q0 = 1.0 / (1.0 + math.exp(Lx))  # expit(−Lx), Lx >= 0
        lhq = _log_h1(q0, k, psi1)
        lHq = lhstar if q0 <= qstar else lhq
        lr = math.log(2 * lam + Lx) - math.log(2 * lam - Lx) if Lx < 2 * lam else math.inf
        return lhq + lr - lHq

    if hi > lo:
        best = min(best, _golden_min(slack_at, lo, hi, xatol=1e-14)[1])
    return best


def expit(x: Any) -> Any:
    """1 / (1 + e^−x), without overflow warnings for large |x|."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=float)))


_INVPHI = (math.sqrt(5.0) - 1.0) / 2.0  # 1/φ


def _golden_min(f: Callable[[float], float], a: float, b: float, *,
                xatol: float) -> tuple[float, float]:
    """(x, f(x)) at the minimum of a unimodal f on [a, b], by golden-section search to
    |bracket| <= xatol; the endpoints are compared too, so a minimum at a bound is found."""
    c, d = b - _INVPHI * (b - a), a + _INVPHI * (b - a)
    fc, fd = f(c), f(d)
    while b - a > xatol:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _INVPHI * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _INVPHI * (b - a)
            fd = f(d)
    return min(((c, fc), (d, fd), (a, f(a)), (b, f(b))), key=lambda p: p[1])


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
