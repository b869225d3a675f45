"""Benchmark: the analysis of the paper's full grid, and the paper's procedure as a Python loop.

Grid: 500 questions × 20 samples × 3 temperatures × n ∈ {1, 3, 5}: exact per-question
plurality estimates (the average over all n-subsets), their jackknife terms, and intervals with
1000 bootstrap resamples of the questions, for every cell and contrast (`evals.grid.analyse`,
the function the CLI runs). Box-ball: the 216 scenarios (400 questions) × 20 samples × 3
temperatures, exact unbiased utility, same intervals. Target: < 2 s each.
The baseline is the paper's procedure (1000 bootstrap repetitions, each a random n-subset per
question) with a per-question Python loop, run for 20 repetitions and scaled to 1000; its
Monte-Carlo estimate agrees with the exact one.

Run: python tests/bench/bench_evals.py   (or python -m pytest tests/bench/bench_evals.py -s)
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plans import jsonl_plan  # noqa: E402

from ensemble.evals.analysis import vote_values  # noqa: E402
from ensemble.evals.grid import analyse  # noqa: E402
from ensemble.evals.plan import RunPlan, resolve  # noqa: E402
from ensemble.evals.spec import one_model  # noqa: E402
from ensemble.tasks import Question  # noqa: E402

REPS, Q, K, T, NS = 1000, 500, 20, 3, [1, 3, 5]
LETTERS = ("A", "B", "C", "D", "E")


def _synthetic(seed: int = 0) -> tuple[RunPlan, list[Question], np.ndarray, np.ndarray,
                                       np.ndarray]:
    """Q multiple-choice questions (a JSONL file the jsonl task reads, so the plan is the one a
    run of them resolves) and T x K planted answers to each."""
    g = np.random.default_rng(seed)
    correct = g.integers(0, 5, size=Q)
    # per question, answer probabilities with a right answer of varying strength, 2% invalid
    codes = np.empty((T, Q, K), dtype=np.int64)
    for ti in range(T):
        p = g.dirichlet(np.ones(5) * (0.5 + ti), size=Q)
        u = g.random((Q, K, 1))
        codes[ti] = (u > p.cumsum(axis=1)[:, None, :]).sum(-1)
        codes[ti][g.random((Q, K)) < 0.02] = -1
    questions = [Question(id=f"q{i}", prompt=f"q{i}", choices=LETTERS, correct=LETTERS[c])
                 for i, c in enumerate(correct)]
    plan = jsonl_plan(questions, (0.0, 0.5, 1.0), NS, samples=K, bootstrap=REPS)
    answers = np.array([[[LETTERS[a] if a >= 0 else None for a in row] for row in codes[ti]]
                        for ti in range(T)], dtype=object)
    return plan, plan.questions, answers, codes, correct


def _box(seed: int = 0) -> tuple[RunPlan, list[Question], np.ndarray]:
    plan = resolve(one_model("boxball", "bench", (0.0, 0.5, 1.0), NS, samples=K,
                             bootstrap=REPS))
    qs = plan.questions
    g = np.random.default_rng(seed)
    answers = np.where(g.random((T, len(qs), K)) < 0.5, "L", "R").astype(object)
    return plan, qs, answers


def vote_accuracy_loop(codes: NDArray[np.integer], correct: NDArray[np.integer], n: int, *,
                       reps: int, rng: Any = 0) -> float:
    """The paper's procedure with a plain Python loop: for each repetition, every question
    with replacement and one random n-subset of its answers, plurality with a random
    tie-break. Its expectation is the mean of `vote_values` (the benchmark's reference)."""
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    r = random.Random(int(g.integers(2**31)))
    q = np.shape(codes)[0]
    rows = [list(map(int, row)) for row in codes]
    corr = list(map(int, correct))
    total = 0.0
    for _ in range(reps):
        acc = 0.0
        for _q in range(q):
            i = r.randrange(q)
            sub = [a for a in r.sample(rows[i], n) if a >= 0]
            if not sub:
                continue
            cnt = Counter(sub)
            best = max(cnt.values())
            acc += r.choice([a for a, c in cnt.items() if c == best]) == corr[i]
        total += acc / q
    return total / reps


def _median_time(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run(repeat: int = 3) -> dict[str, float]:
    mc_plan, questions, answers, codes, correct = _synthetic()
    mc = _median_time(lambda: analyse(mc_plan, questions, answers), repeat)
    box_plan, box_q, box_a = _box()
    box = _median_time(lambda: analyse(box_plan, box_q, box_a), repeat)
    loop_reps = 20
    loop = _median_time(lambda: [vote_accuracy_loop(codes[t], correct, n, reps=loop_reps, rng=0)
                                 for t in range(T) for n in NS], 1) * (REPS / loop_reps)
    # the paper's Monte-Carlo procedure estimates the exact subset average
    exact = vote_values(codes[0], correct, [3], n_options=5)["plurality", 3].values.mean()
    ref = vote_accuracy_loop(codes[0], correct, 3, reps=200, rng=1)
    out = {"analyse_mc_s": mc, "analyse_box_s": box, "loop_mc_s": loop,
           "speedup": loop / mc, "agree_abs_diff": abs(exact - ref)}
    print(f"MathQA grid ({Q} q × {K} samples × {T} t × n {NS}, {REPS} bootstrap resamples, "
          f"every cell and contrast): analyse median {mc:.3f} s; the paper's procedure as a "
          f"per-question loop {loop:.1f} s (scaled from {loop_reps} reps), ×{loop / mc:.0f}")
    print(f"Box-ball grid (216 scenarios × {K} samples × {T} t × n {NS}): analyse median "
          f"{box:.3f} s")
    print(f"exact subset average vs the loop's Monte-Carlo estimate (200 reps) at n = 3: "
          f"|diff| = {abs(exact - ref):.4f}")
    return out


def test_bench_evals() -> None:
    r = run()
    assert r["analyse_mc_s"] < 2.0 and r["analyse_box_s"] < 2.0
    assert r["agree_abs_diff"] < 0.01


if __name__ == "__main__":
    run()
