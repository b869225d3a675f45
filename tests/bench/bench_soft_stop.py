"""Benchmark: `bayes` stopping on soft evidence against `bayes` on hard votes (issue 37).

The case is bench_soft.py's simulator (fixed before measuring: 5 options, ρ ~ Beta(3, 2),
λ₁ = 3, t = 1, chain beliefs κ = 1; `--mode noise` its noise setting), each question's K = 20
samples drawn through the user's path with logprobs. Along R random orders of each question's
samples, each rule draws one sample at a time from its pilot (2) until it stops (at most 20):

- `bayes`: the registered rule on the hard counts (`StopSpec("bayes", cost=c)`, its prior
  fitted from the order's pilots as `ensemble eval --adaptive` does), decided by the plurality
  of the samples used;
- `bayes-soft`: `ensemble.stopping.soft.SoftBayesRule`, the same prior and cost, its gain r
  and signal check fitted on the same pilots (`StopSpec.fit`), decided by the soft vote of the
  samples used (the tallies it stopped on);
- `bayes + soft vote`: bayes's stopping, decided by the soft vote (what the vote alone buys).

Each rule is run at costs c on a grid (the curve samples ↔ accuracy). Equal accuracy: the mean
samples at which a curve reaches `bayes`'s accuracy at the reference cost (default 0.004, the
rule's default), interpolated along the curve made monotone (pool adjacent violators: bayes's
curve is nearly flat over 6-13 samples, and a noisy flat curve crosses its own level early),
as a ratio to `bayes`'s samples there; and the accuracy at equal samples (each rule at the
reference cost minus bayes's monotone curve at the same mean samples); 95% paired bootstrap
over questions (every curve resampled together).

    python tests/bench/bench_soft_stop.py [--questions 1000] [--orders 20] [--boot 1000]
        [--mode informative|noise] [--ref-cost 0.004]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
for p in (str(SRC), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench_soft import simulated_case  # noqa: E402

from ensemble.stopping import StopSpec  # noqa: E402
from ensemble.stopping.drawn import Drawn, Observation  # noqa: E402
from ensemble.stopping.plan import FitContext, StopMemory  # noqa: E402

COSTS = (0.0002, 0.0005, 0.001, 0.002, 0.003, 0.004, 0.006, 0.008, 0.012, 0.02, 0.04)
PILOT = 2


def arrays(case: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """codes[q, i] (−1 invalid), shares[q, i, j] (each sample's P(option j); a sample without
    them: its hard vote), right[q]."""
    opts = list(case.choices)
    Q, K = len(case.answers), case.k
    codes = np.full((Q, K), -1)
    shares = np.zeros((Q, K, len(opts)))
    for q in range(Q):
        for i in range(K):
            a, e = case.answers[q][i], case.evidence[q][i]
            if a is not None:
                codes[q, i] = opts.index(a)
            if e is not None and e.options is not None:
                for o, v in e.options.items():
                    shares[q, i, opts.index(o)] = math.exp(v)
            elif a is not None:
                shares[q, i, opts.index(a)] = 1.0
    right = np.array([opts.index(c) for c in case.correct])
    return codes, shares, right, opts


def _credit(totals: np.ndarray, right: np.ndarray) -> np.ndarray:
    best = totals.max(axis=-1, keepdims=True)
    win = (totals >= best - 1e-12 * np.maximum(1.0, best)) & (best > 0)
    hit = np.take_along_axis(win, right[:, None, None], axis=-1)[..., 0]
    return np.where(win.any(axis=-1), hit / np.maximum(win.sum(axis=-1), 1), 0.0)


def run(codes: np.ndarray, shares: np.ndarray, right: np.ndarray, opts: list[str], *,
        orders: int, seed: int) -> dict[str, np.ndarray]:
    """{rule: (C, 2, Q)}: per cost, each question's mean samples and accuracy over orders."""
    Q, K = codes.shape
    M = K
    rng = np.random.default_rng(seed)
    idx = np.argsort(rng.random((Q, orders, K)), axis=-1)
    c = codes[np.arange(Q)[:, None, None], idx]  # (Q, R, K)
    s = shares[np.arange(Q)[:, None, None], idx]  # (Q, R, K, J)
    onehot = (c[..., None] == np.arange(len(opts))) & (c[..., None] >= 0)
    hard_cum = onehot.cumsum(axis=2)  # (Q, R, K, J)
    soft_cum = s.cumsum(axis=2)
    top2h = np.sort(hard_cum, axis=-1)[..., ::-1][..., :2]
    top2s = np.sort(soft_cum, axis=-1)[..., ::-1][..., :2]
    out = {r: np.zeros((len(COSTS), 2, Q)) for r in ("bayes", "bayes-soft", "bayes + soft vote")}
    notes = []
    pilots_of = [[Drawn((tuple(Observation(None if c[q, r, i] < 0 else opts[c[q, r, i]],
                                           shares={o: float(s[q, r, i, j])
                                                   for j, o in enumerate(opts)})
                               for i in range(PILOT)),), (M,)) for q in range(Q)]
                 for r in range(orders)]
    ctx = FitContext(budgets=(M,), lams=(None,))
    for ci, cost in enumerate(COSTS):
        spec = StopSpec("bayes", max_n=M, cost=cost, pilot=PILOT)
        soft_spec = StopSpec("bayes-soft", max_n=M, cost=cost, pilot=PILOT)
        for r in range(orders):
            pilots = pilots_of[r]
            hard = spec.fit(pilots, StopMemory(), ctx)
            soft: Any = soft_spec.fit(pilots, StopMemory(), ctx)
            if ci == 0 and r == 0:
                notes.append(soft.gain.note)
            table = hard.table  # type: ignore[attr-defined]
            used_h = np.full(Q, M)
            used_s = np.full(Q, M)
            open_h = np.ones(Q, dtype=bool)
            open_s = np.ones(Q, dtype=bool)
            for n in range(PILOT, M):
                th = top2h[:, r, n - 1]
                stop_h = open_h & (table[n, th[:, 0], th[:, 1]] == 0)
                used_h[stop_h] = n
                open_h &= ~stop_h
                if soft.gain.on:
                    ts = top2s[:, r, n - 1]
                    stop_s = open_s & soft.stops_at(np.full(Q, n), ts[:, 0], ts[:, 1])
                else:  # no signal: bayes on the hard counts
                    stop_s = open_s & (table[n, th[:, 0], th[:, 1]] == 0)
                used_s[stop_s] = n
                open_s &= ~stop_s
            at = np.arange(Q)
            for name, used, cum in (("bayes", used_h, hard_cum),
                                    ("bayes-soft", used_s, soft_cum if soft.gain.on else hard_cum),
                                    ("bayes + soft vote", used_h, soft_cum)):
                tot = cum[at, r, used - 1]  # (Q, J)
                acc = _credit(tot[:, None, :], right)[:, 0]
                out[name][ci, 0] += used / orders
                out[name][ci, 1] += acc / orders
    print("\n".join(dict.fromkeys(notes)))
    return out


def monotone(ys: np.ndarray) -> np.ndarray:
    """The non-decreasing least-squares fit of `ys` (pool adjacent violators): accuracy as a
    function of samples, without the noise that makes a flat curve cross its own level early."""
    blocks: list[list[float]] = []  # [sum, count]
    for y in ys:
        blocks.append([float(y), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
    return np.concatenate([np.full(int(n), s / n) for s, n in blocks])


def samples_at(curve_s: np.ndarray, curve_a: np.ndarray, target: float) -> float:
    """Mean samples at which the (samples, accuracy) curve over costs, made monotone
    (`monotone`), first reaches `target`: linear interpolation between neighbouring costs;
    inf if never."""
    order = np.argsort(curve_s)
    xs, ys = curve_s[order], monotone(curve_a[order])
    for i in range(len(xs)):
        if ys[i] >= target - 1e-12:
            if i == 0:
                return float(xs[0])
            lo = ys[i - 1]
            return float(xs[i - 1] + (xs[i] - xs[i - 1]) * (target - lo) / (ys[i] - lo))
    return math.inf


def accuracy_at(curve_s: np.ndarray, curve_a: np.ndarray, samples: float) -> float:
    """The monotone curve's accuracy at `samples` (linear between costs; clipped at its ends)."""
    order = np.argsort(curve_s)
    return float(np.interp(samples, curve_s[order], monotone(curve_a[order])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--orders", type=int, default=20)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--mode", choices=("informative", "noise"), default="informative")
    ap.add_argument("--ref-cost", type=float, default=0.004)
    a = ap.parse_args(argv)
    t0 = time.time()
    case = simulated_case(a.mode, questions=a.questions)
    codes, shares, right, opts = arrays(case)
    got = run(codes, shares, right, opts, orders=a.orders, seed=0)
    Q = codes.shape[0]
    ref = COSTS.index(a.ref_cost)
    print(f"\n== {case.name}; {a.orders} orders; bayes's reference cost {a.ref_cost:g}")
    print(f"{'rule':<18}" + "".join(f"{'c=' + format(c, 'g'):>16}" for c in COSTS))
    for name, v in got.items():
        print(f"{name:<18}" + "".join(f"{v[i, 0].mean():>7.2f} {v[i, 1].mean():.4f}"
                                      for i in range(len(COSTS))))
    rng = np.random.default_rng(1)
    W = rng.multinomial(Q, np.full(Q, 1.0 / Q), size=a.boot) / Q  # (B, Q)
    base = got["bayes"]
    target = base[ref, 1].mean()
    base_n = base[ref, 0].mean()
    print(f"\nbayes at cost {a.ref_cost:g}: {base_n:.2f} samples, accuracy {target:.4f}")
    for name, v in got.items():
        point = samples_at(v[:, 0].mean(axis=1), v[:, 1].mean(axis=1), target) / base_n
        boots = []
        for w in W:
            ms, ma = v[:, 0] @ w, v[:, 1] @ w
            t = base[ref, 1] @ w
            boots.append(samples_at(ms, ma, t) / (base[ref, 0] @ w))
        b = np.array(boots)
        lo, hi = np.quantile(np.where(np.isfinite(b), b, 1e9), [0.025, 0.975])
        same = v[ref, 1] - base[ref, 1]
        d_lo, d_hi = np.quantile(W @ same, [0.025, 0.975])
        # accuracy at equal samples: this rule at the reference cost against bayes's curve
        # at the same mean samples (stable where bayes's curve is flat)
        eq = [v[ref, 1] @ w - accuracy_at(base[:, 0] @ w, base[:, 1] @ w, v[ref, 0] @ w)
              for w in W]
        eq_point = v[ref, 1].mean() - accuracy_at(base[:, 0].mean(axis=1),
                                                  base[:, 1].mean(axis=1), v[ref, 0].mean())
        e_lo, e_hi = np.quantile(eq, [0.025, 0.975])
        print(f"{name:<18} samples at bayes's accuracy: {point:.3f}x "
              f"[{lo:.3f}, {'inf' if hi > 1e8 else format(hi, '.3f')}]; at the same cost: "
              f"{v[ref, 0].mean():.2f} samples, accuracy {v[ref, 1].mean() - target:+.4f} "
              f"[{d_lo:+.4f}, {d_hi:+.4f}]; minus bayes's curve at its samples "
              f"{eq_point:+.4f} [{e_lo:+.4f}, {e_hi:+.4f}]")
    print(f"\n({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
