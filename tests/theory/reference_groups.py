"""Independent reference values for groups of experts with different λ (slow; minutes).

    python tests/theory/reference_groups.py [--out tests/theory/reference_groups.json]

Deliberately simple and separate from `ensemble.theory` (it imports nothing from it): its own
ψ_λ, its own count-vector probabilities (plain products of binomial terms, no log space), its
own rules, a dense grid instead of a search, and an LP over that grid.

For each configuration of groups (n_g, λ_g):
1. Two sets of signal structures: a dense set of {0, p, 1} structures (a 3-D grid over
   (p, γ0, γ1), 101 x 1326 points; the two faces of two-posterior structures {0, p} and
   {p, 1}, 1001 x 501 points each; p = 1/2 ± 1e-9 with a 20,301-point (γ0, γ1) grid, for the
   jump of λ = ∞ at posterior 1/2), and 400,000 random structures with K = 2G' + 2 free
   posteriors (G' distinct λ > 0: by Carathéodory K posteriors reach every report structure;
   {0, p, 1} does not, see docs/ensembles.md).
2. The minimax LP in the variables d_x = 2 f(x) − 1 and t: minimise t with
   Σ_x |w_x| − Σ_x w_x d_x <= t for every structure of a working set. Four rounds: the LP's
   solution picks the {0, p, 1} structures within 0.05 of its largest regret, and the best 10
   random K-posterior structures polished by Nelder-Mead (and their mirror images); they join
   the set. Every row is a feasible structure, so the final LP value `robust_lower` is a lower
   bound on the minimax regret of any aggregator of the counts.
3. `robust_upper`: the worst-case regret of the LP's f: the max over the dense {0, p, 1} set
   polished by Nelder-Mead from the best 30 points, and over the random K-posterior structures
   polished from the best 10 (both kept under `three_posteriors` and `free_posteriors`).
   Likewise `majority` (over all votes) and `lam_weighted` (votes weighted by 2λ).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from math import comb

import numpy as np
from scipy.optimize import linprog, minimize

CONFIGS = [
    [(1, 2.0), (1, 8.0)],
    [(3, 2.0), (2, 8.0)],
    [(2, 1.0), (1, 8.0)],
    [(3, 0.5), (1, 8.0)],
    [(2, 3.0), (1, 3.0)],
    [(2, 1.0), (2, math.inf)],
    [(2, 0.5), (1, 4.0)],
    [(1, 1.0), (1, 3.0), (1, 9.0)],
    [(3, 1.0), (3, 2.0), (3, 4.0)],
]


def psi(p, lam):  # type: ignore[no-untyped-def]
    p = np.asarray(p, dtype=float)
    if math.isinf(lam):
        return np.where(p > 0.5, 1.0, np.where(p < 0.5, 0.0, 0.5))
    return 1.0 / (1.0 + np.exp(2.0 * lam * (1.0 - 2.0 * p)))


def count_vectors(ns):  # type: ignore[no-untyped-def]
    return np.array(np.meshgrid(*[np.arange(n + 1) for n in ns], indexing="ij")
                    ).reshape(len(ns), -1).T


def weights(post, probs, ns, lams):  # type: ignore[no-untyped-def]
    """w_x = P(x, ω=1) − P(x, ω=0) for structures given as posteriors (S, K) and probs (S, K)."""
    mu = (probs * post).sum(axis=1)
    xs = count_vectors(ns)
    p1 = np.ones((post.shape[0], xs.shape[0]))
    p0 = np.ones((post.shape[0], xs.shape[0]))
    for g, (n, lam) in enumerate(zip(ns, lams, strict=True)):
        r = probs * psi(post, lam)
        a1 = (r * post).sum(axis=1)  # P(X=1, ω=1)
        a0 = (r * (1 - post)).sum(axis=1)  # P(X=1, ω=0)
        q1 = np.divide(a1, mu, out=np.full_like(mu, 0.5), where=mu > 0)
        q0 = np.divide(a0, 1 - mu, out=np.full_like(mu, 0.5), where=mu < 1)
        x = xs[:, g]
        c = np.array([comb(n, int(v)) for v in x], dtype=float)
        p1 *= c * q1[:, None] ** x * (1 - q1[:, None]) ** (n - x)
        p0 *= c * q0[:, None] ** x * (1 - q0[:, None]) ** (n - x)
    return mu[:, None] * p1 - (1 - mu[:, None]) * p0


def three(p, g0, g1):  # type: ignore[no-untyped-def]
    post = np.stack([np.zeros_like(p), p, np.ones_like(p)], axis=1)
    probs = np.stack([g0, g1, np.clip(1 - g0 - g1, 0, 1)], axis=1)
    return post, probs


def dense_set():  # type: ignore[no-untyped-def]
    p = np.linspace(0, 1, 101)
    s = np.arange(51) / 50
    a, b = [v.ravel() for v in np.meshgrid(s, s, indexing="ij")]
    keep = a + b <= 1 + 1e-12
    a, b = a[keep], b[keep]
    grid = np.stack([np.repeat(p, a.size), np.tile(a, p.size), np.tile(b, p.size)], axis=1)
    pf, gf = [v.ravel() for v in np.meshgrid(np.linspace(0, 1, 1001), np.linspace(0, 1, 501),
                                             indexing="ij")]
    face0 = np.stack([pf, gf, 1 - gf], axis=1)  # {0, p}
    face1 = np.stack([pf, np.zeros_like(pf), gf], axis=1)  # {p, 1}
    # λ = ∞ jumps at posterior 1/2 (0 below, 1/2 at, 1 above), so the worst case can be the
    # limit p -> 1/2 from one side: p = 1/2 ± 1e-9 with a dense (γ0, γ1) grid
    s = np.arange(201) / 200
    a, b = [v.ravel() for v in np.meshgrid(s, s, indexing="ij")]
    keep = a + b <= 1 + 1e-12
    half = [np.stack([np.full(keep.sum(), 0.5 + e), a[keep], b[keep]], axis=1)
            for e in (-1e-9, 1e-9)]
    return np.concatenate([grid, face0, face1, *half])


def coarse_set():  # type: ignore[no-untyped-def]
    p = np.linspace(0, 1, 21)
    s = np.arange(11) / 10
    a, b = [v.ravel() for v in np.meshgrid(s, s, indexing="ij")]
    keep = a + b <= 1 + 1e-12
    return np.stack([np.repeat(p, keep.sum()), np.tile(a[keep], p.size),
                     np.tile(b[keep], p.size)], axis=1)


def regrets(d, pts, ns, lams, chunk=50_000):  # type: ignore[no-untyped-def]
    """Regret of d = 2f − 1 at {0, p, 1} structures given as rows (p, γ0, γ1)."""
    out = np.empty(pts.shape[0])
    for s in range(0, pts.shape[0], chunk):
        w = weights(*three(*pts[s:s + chunk].T), ns, lams)
        out[s:s + chunk] = np.abs(w).sum(axis=1) - w @ d
    return out


def regrets_free(d, post, probs, ns, lams, chunk=20_000):  # type: ignore[no-untyped-def]
    """Regret of d at structures given as posteriors (S, K) with probabilities (S, K)."""
    out = np.empty(post.shape[0])
    for s in range(0, post.shape[0], chunk):
        w = weights(post[s:s + chunk], probs[s:s + chunk], ns, lams)
        out[s:s + chunk] = np.abs(w).sum(axis=1) - w @ d
    return out


def lp(pts, free, ns, lams):  # type: ignore[no-untyped-def]
    w = weights(*three(*pts.T), ns, lams)
    if free[0].shape[0]:
        w = np.vstack([w, weights(*free, ns, lams)])
    m, k = w.shape
    res = linprog(np.r_[np.zeros(k), 1.0], A_ub=np.hstack([-w, -np.ones((m, 1))]),
                  b_ub=-np.abs(w).sum(axis=1), bounds=[(-1, 1)] * k + [(None, None)],
                  method="highs-ipm")
    assert res.status == 0, res.message
    return np.clip(res.x[:-1], -1, 1), float(res.x[-1])


def polish3(d, pts, vals, ns, lams, starts=30):  # type: ignore[no-untyped-def]
    def neg(u):  # type: ignore[no-untyped-def]
        u = np.clip(u, 0, 1)
        g0, g1 = u[1], (1 - u[1]) * u[2]
        return -regrets(d, np.array([[u[0], g0, g1]]), ns, lams)[0]

    best = float(vals.max())
    for i in np.argsort(vals)[::-1][:starts]:
        p, g0, g1 = pts[i]
        u0 = np.array([p, g0, g1 / (1 - g0) if g0 < 1 else 0.0])
        res = minimize(neg, u0, method="Nelder-Mead",
                       options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 3000})
        best = max(best, -float(res.fun))
    return best


def worst3(d, dense, ns, lams):  # type: ignore[no-untyped-def]
    vals = regrets(d, dense, ns, lams)
    return polish3(d, dense, vals, ns, lams)


def random_free(k, rng, m=400_000):  # type: ignore[no-untyped-def]
    """m random structures with K free posteriors (support sizes 1..K)."""
    post = rng.random((m, k))
    probs = rng.dirichlet(np.ones(k), size=m)
    support = rng.integers(1, k + 1, size=m)
    probs *= np.argsort(rng.random((m, k)), axis=1) < support[:, None]
    probs /= probs.sum(axis=1, keepdims=True)
    return post, probs


def polish_free(d, sample, ns, lams, starts=10):  # type: ignore[no-untyped-def]
    """The best `starts` structures of the sample, polished by Nelder-Mead in (posteriors,
    log-probabilities): (largest regret, polished posteriors (starts, K), probs (starts, K))."""
    post, probs = sample
    k = post.shape[1]
    vals = regrets_free(d, post, probs, ns, lams)

    def unpack(z):  # type: ignore[no-untyped-def]
        tt = np.exp(z[k:] - z[k:].max())
        return np.clip(z[:k], 0, 1), tt / tt.sum()

    def neg(z):  # type: ignore[no-untyped-def]
        pp, tt = unpack(z)
        return -float(regrets_free(d, pp[None], tt[None], ns, lams)[0])

    best = float(vals.max())
    out_p, out_t = [], []
    for i in np.argsort(vals)[::-1][:starts]:
        z0 = np.r_[post[i], np.log(np.maximum(probs[i], 1e-12))]
        res = minimize(neg, z0, method="Nelder-Mead",
                       options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20000})
        best = max(best, -float(res.fun))
        pp, tt = unpack(res.x)
        out_p.append(pp)
        out_t.append(tt)
    return best, np.array(out_p), np.array(out_t)


def majority_d(ns):  # type: ignore[no-untyped-def]
    x = count_vectors(ns).sum(axis=1)
    return np.sign(2 * x - sum(ns)).astype(float)


def lam_weighted_d(ns, lams):  # type: ignore[no-untyped-def]
    xs = count_vectors(ns)
    net = 2 * xs - np.array(ns)
    inf = np.array([math.isinf(v) for v in lams])
    hi = (net * inf).sum(axis=1)
    lo = (net * np.array([0.0 if math.isinf(v) else 2 * v for v in lams])).sum(axis=1)
    lo = np.where(np.abs(lo) < 1e-9, 0.0, lo)
    return np.where(hi != 0, np.sign(hi), np.sign(lo)).astype(float)


def reference(groups, dense, rng):  # type: ignore[no-untyped-def]
    ns = [n for n, _ in groups]
    lams = [lam for _, lam in groups]
    t0 = time.time()
    k = 2 * len({v for v in lams if v > 0}) + 2
    sample = random_free(k, rng)
    pts = coarse_set()
    free = (np.zeros((0, k)), np.zeros((0, k)))
    for _ in range(4):
        d, lower = lp(pts, free, ns, lams)
        vals = regrets(d, dense, ns, lams)
        near = np.flatnonzero(vals >= vals.max() - 0.05)
        near = near[np.argsort(vals[near])[::-1][:30_000]]
        pts = np.unique(np.concatenate([pts, dense[near]]), axis=0)
        _, pp, tt = polish_free(d, sample, ns, lams)
        # each polished structure and its mirror image (posterior s -> 1 − s)
        free = (np.concatenate([free[0], pp, 1 - pp]), np.concatenate([free[1], tt, tt]))
    d, lower = lp(pts, free, ns, lams)
    robust3 = worst3(d, dense, ns, lams)
    maj3 = worst3(majority_d(ns), dense, ns, lams)
    lw3 = worst3(lam_weighted_d(ns, lams), dense, ns, lams)
    robust_k = polish_free(d, sample, ns, lams)[0]
    maj_k = polish_free(majority_d(ns), sample, ns, lams)[0]
    lw_k = polish_free(lam_weighted_d(ns, lams), sample, ns, lams)[0]
    return {"groups": [{"n": n, "lam": None if math.isinf(lam) else lam,
                        **({"lam_inf": "+"} if math.isinf(lam) else {})} for n, lam in groups],
            "robust_lower": lower, "robust_upper": max(robust3, robust_k),
            "f": ((d + 1) / 2).reshape([n + 1 for n in ns]).round(6).tolist(),
            "majority": max(maj3, maj_k), "lam_weighted": max(lw3, lw_k),
            "three_posteriors": {"robust": robust3, "majority": maj3, "lam_weighted": lw3},
            "free_posteriors": {"K": k, "robust": robust_k, "majority": maj_k,
                                "lam_weighted": lw_k},
            "lp_rows": int(pts.shape[0] + free[0].shape[0]),
            "seconds": round(time.time() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the JSON here (default: print only)")
    ap.add_argument("--only", type=int, help="run only configuration number i (0-based)")
    args = ap.parse_args()
    rng = np.random.default_rng(2026)
    dense = dense_set()
    rows = []
    for i, groups in enumerate(CONFIGS):
        if args.only is not None and i != args.only:
            continue
        row = reference(groups, dense, rng)
        rows.append(row)
        print(json.dumps(row), flush=True)
    doc = {"command": "python tests/theory/reference_groups.py --out "
                      "tests/theory/reference_groups.json",
           "date": datetime.date.today().isoformat(),
           "units": "λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units; regret in ±1 units",
           "configs": rows}
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
    print(f"{len(rows)} configurations", file=sys.stderr)


if __name__ == "__main__":
    main()
