"""Benchmark: g(n) for n = 3..20 and worst-case regret curves (n = 1, 3, 5; 101 λ in [0, 5]),
checked against a slow dense-grid-and-refine search in the same run; the robust rule for three
groups of three experts (target < 5 s); with --sizes, what the robust rule costs as n grows
(the data behind the size limits in `ensemble.theory.regret.MAX_SEARCH_COST`).

With --family, the scan behind docs/ensembles.md: for two groups, how often a structure outside
{0, p, 1} has more regret (the K-posterior search against the {0, p, 1} search).

    python tests/bench/bench_theory.py [--check-every 10] [--sizes] [--family]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ensemble.theory import group_robust_aggregator, majority_f, worst_case_regret
from ensemble.theory.regret import _space, search_cost

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "theory"))
from regret_oracle import dense_worst_case_regret  # noqa: E402

from ensemble.theory.robust import _group_robust, _robust
from ensemble.theory.threshold import _threshold, threshold


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", action="store_true", help="also time robust for n = 20..100")
    ap.add_argument("--family", action="store_true",
                    help="also scan two-group configurations for regret outside {0, p, 1}")
    args = ap.parse_args()
    if args.family:
        family_scan()
    groups_of_three(args.repeats)
    if args.sizes:
        sizes()
    g_times = []
    for _ in range(args.repeats):
        _threshold.cache_clear()
        t0 = time.perf_counter()
        gs = [threshold(n) for n in range(3, 21)]
        g_times.append(time.perf_counter() - t0)
    print(f"g(n), n = 3..20: median {statistics.median(g_times):.3f} s over {args.repeats} runs "
          f"(target < 1 s); g(3) = {gs[0]:.6f}, g(20) = {gs[-1]:.6f}")
    lams = np.linspace(0, 5, 101)
    curve_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        fast = {(n, lam): worst_case_regret(majority_f(n), lam).value
                for n in (1, 3, 5) for lam in lams}
        curve_times.append(time.perf_counter() - t0)
    print(f"regret curves, 3 x 101 values: median {statistics.median(curve_times):.2f} s "
          f"(target < 10 s)")
    diffs, slow_t, fast_t = [], [], []
    for n in (1, 3, 5):
        for lam in lams[::args.check_every]:
            t0 = time.perf_counter()
            slow = dense_worst_case_regret(majority_f(n), lam)
            slow_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            worst_case_regret(majority_f(n), lam)
            fast_t.append(time.perf_counter() - t0)
            diffs.append(fast[(n, lam)] - slow)
    d = np.array(diffs)
    print(f"vs dense grid (401 x 201 x 201 / 2 structures + Nelder-Mead) on {d.size} points: "
          f"max |diff| {np.abs(d).max():.2e}, min (fast - dense) {d.min():+.2e} (target 1e-4); "
          f"median time per value {statistics.median(fast_t) * 1e3:.0f} ms vs "
          f"{statistics.median(slow_t) * 1e3:.0f} ms (ratio "
          f"{statistics.median(slow_t) / statistics.median(fast_t):.0f}x)")


def _clear() -> None:
    _space.cache_clear()
    _robust.cache_clear()
    _group_robust.cache_clear()


def groups_of_three(repeats: int) -> None:
    for groups in ([(3, 1.0), (3, 2.0), (3, 4.0)], [(3, 0.7), (3, 1.9), (3, 5.3)],
                   [(3, 2.0), (3, 2.0), (3, 2.0)]):
        times = []
        for _ in range(repeats):
            _clear()
            t0 = time.perf_counter()
            res = group_robust_aggregator(groups)
            times.append(time.perf_counter() - t0)
        print(f"robust rule, groups {groups}: median {statistics.median(times):.2f} s over "
              f"{repeats} runs (target < 5 s); worst regret {res.worst_regret:.6f}, gap "
              f"{res.gap:.1e}, majority {res.majority_worst_regret:.6f}, lam-weighted "
              f"{res.lam_weighted_worst_regret:.6f}")


def sizes() -> None:
    from ensemble.theory import Group

    for n in (20, 50, 100):
        _clear()
        t0 = time.perf_counter()
        res = group_robust_aggregator([(n, 3.0)])
        print(f"robust rule, one group n = {n}, λ = 3: {time.perf_counter() - t0:.1f} s, search "
              f"cost {search_cost([Group(n, 3.0)]):.2g} weights per pass, gap {res.gap:.1e}")


def family_scan() -> None:
    import itertools
    import math

    from ensemble.theory import group_majority_f, lam_weighted_f
    from ensemble.theory.regret import search_space

    lams = [0.5, 1.0, 2.0, 4.0, 8.0, math.inf]
    rows = []
    t0 = time.perf_counter()
    for n1, n2 in [(1, 1), (2, 1), (1, 2), (2, 2), (3, 1), (3, 2)]:
        for l1, l2 in itertools.combinations(lams, 2):
            groups = [(n1, l1), (n2, l2)]
            space = search_space(groups)
            for name, f in (("majority", group_majority_f(groups)),
                            ("lam-weighted", lam_weighted_f(groups))):
                params, v3 = space.candidates3(f.ravel())
                post, probs, vk = space.candidates_full(f.ravel(), params)
                j = int(np.argmax(vk))
                keep = probs[j] > 1e-9
                rows.append((groups, name, float(v3.max()), float(vk[j]), post[j][keep],
                             probs[j][keep]))
    more = sorted((r for r in rows if r[3] > r[2] + 1e-6), key=lambda r: r[2] - r[3])
    print(f"family scan: {len(rows)} cases in {time.perf_counter() - t0:.0f} s; {len(more)} have "
          "more regret outside {0, p, 1}:")
    for groups, name, v3, vk, post, probs in more:
        print(f"  {groups} {name}: {{0, p, 1}} {v3:.6f}, K posteriors {vk:.6f} "
              f"(+{vk - v3:.1e}) at posteriors {np.round(post, 4).tolist()} with "
              f"probabilities {np.round(probs, 4).tolist()}")


if __name__ == "__main__":
    main()
