"""Benchmark: the analysis of the paper's full grid, vectorised vs a per-question Python loop.

Grid: 500 questions × 20 samples × 3 temperatures × n ∈ {1, 3, 5} × 1000 bootstrap repetitions
(plurality and random-follow), and the exact box-task utility of the 400-question box-and-ball
grid (216 scenarios) with 1000 resamples per temperature. Target (DESIGN.md section 7): < 2 s.
The loop baseline runs the same estimator for 20 repetitions and is scaled to 1000.

Run: python tests/bench/bench_evals.py   (or python -m pytest tests/bench/bench_evals.py -s)
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from evals.analysis import box_utility_draws, vote_accuracy_loop, vote_draws
from tasks import get_task

REPS, Q, K, T, NS = 1000, 500, 20, 3, [1, 3, 5]


def _synthetic(seed: int = 0):
    g = np.random.default_rng(seed)
    correct = g.integers(0, 5, size=Q)
    # per question, answer probabilities with a right answer of varying strength, 2% invalid
    codes = np.empty((T, Q, K), dtype=np.int64)
    for ti in range(T):
        p = g.dirichlet(np.ones(5) * (0.5 + ti), size=Q)
        u = g.random((Q, K, 1))
        codes[ti] = (u > p.cumsum(axis=1)[:, None, :]).sum(-1)
        codes[ti][g.random((Q, K)) < 0.02] = -1
    return codes, correct


def _box(seed: int = 0):
    qs = get_task("boxball").questions()
    scen = sorted({q.meta["scenario"] for q in qs})
    si = {s: i for i, s in enumerate(scen)}
    joint = np.zeros((len(scen), 2, 2))
    tot = np.zeros((len(scen), 2), dtype=np.int64)
    for q in qs:
        c = 0 if q.meta["colour"] == "red" else 1
        joint[si[q.meta["scenario"]], c] = q.meta["joint"]
        tot[si[q.meta["scenario"]], c] = K
    g = np.random.default_rng(seed)
    ones = g.binomial(tot, 0.5)
    return ones, tot - ones, tot, joint


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(repeat: int = 3) -> dict[str, float]:
    codes, correct = _synthetic()
    ones, zeros, tot, joint = _box()
    mc = _median_time(lambda: vote_draws(codes, correct, NS, n_options=5, reps=REPS, rng=0),
                      repeat)
    box = _median_time(lambda: [box_utility_draws(ones, zeros, tot, joint, NS, reps=REPS, rng=t)
                                for t in range(T)], repeat)
    loop_reps = 20
    loop = _median_time(lambda: [vote_accuracy_loop(codes[t], correct, n, reps=loop_reps, rng=0)
                                 for t in range(T) for n in NS], 1) * (REPS / loop_reps)
    # the two estimators agree (same estimand, independent Monte-Carlo noise)
    d = vote_draws(codes[:1], correct, [3], n_options=5, reps=REPS, rng=1)[0, 0, 0].mean()
    ref = vote_accuracy_loop(codes[0], correct, 3, reps=100, rng=1)
    out = {"vectorised_mc_s": mc, "box_exact_s": box, "loop_mc_s": loop,
           "speedup": loop / mc, "agree_abs_diff": abs(d - ref)}
    print(f"MathQA grid ({Q} q × {K} samples × {T} t × n {NS} × {REPS} reps): "
          f"vectorised median {mc:.3f} s, per-question loop {loop:.1f} s (scaled from "
          f"{loop_reps} reps), speed-up ×{loop / mc:.0f}")
    print(f"Box-ball exact utility ({len(joint)} scenarios × {T} t × n {NS} × {REPS} resamples):"
          f" median {box:.3f} s")
    print(f"vectorised vs loop estimate at n = 3: |diff| = {abs(d - ref):.4f}")
    return out


def test_bench_evals() -> None:
    r = run()
    assert r["vectorised_mc_s"] < 2.0 and r["box_exact_s"] < 2.0
    assert r["agree_abs_diff"] < 0.01


if __name__ == "__main__":
    run()
