"""Benchmark: the adaptive rows of an open-answer eval cost the same per question at any size.

Issue 32 item 12: `eval jsonl --answer text` over 500 questions x 40 samples with `--adaptive
bayes beta` spent 390-430 s in analysis, because every sample was one-hot encoded over the
task's 951 distinct answers (no question had more than 11): the cost per question grew with the
number of questions. Answers are now coded per question (`evals.adaptive.question_codes`).

Measured here (in process, the function the eval's analysis calls, `evals.grid.adaptive_rows`,
t = 0.7, 40 samples per question, max_n = 40, `--adaptive bayes beta`, 1000 bootstrap
resamples): open-answer questions with 11 distinct answers each, all different from the other
questions' (so the task's distinct answers grow with its size), at Q and 10 Q questions.
Printed: the median time of each (over --repeats), their ratio (linear: about 10; the task-wide
coding grew about 100x), and, as the baseline in the same run, the task-wide coding at Q
(timed once).

    python tests/bench/bench_adaptive_open.py [--questions 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _plans import jsonl_plan  # noqa: E402

from ensemble.evals.adaptive import adaptive_eval  # noqa: E402
from ensemble.evals.grid import adaptive_rows  # noqa: E402
from ensemble.stopping import StopSpec  # noqa: E402
from ensemble.tasks import Question  # noqa: E402

K, PER_QUESTION = 40, 11
ADAPTIVE, REPS = ("bayes", "beta"), 1000


def open_run(n: int, seed: int = 0) -> tuple[list[Question], np.ndarray]:
    g = np.random.default_rng(seed)
    qs, ans = [], np.empty((1, n, K), dtype=object)
    for i in range(n):
        opts = [f"answer {i}.{j}" for j in range(PER_QUESTION)]
        qs.append(Question(id=f"q{i}", prompt=f"q{i}", choices=tuple(opts), correct=opts[0]))
        p = g.dirichlet(np.full(PER_QUESTION, 0.3))
        ans[0, i] = [None if g.random() < 0.03 else opts[g.choice(PER_QUESTION, p=p)]
                     for _ in range(K)]
    return qs, ans


def task_wide(qs: list[Question], ans: np.ndarray) -> float:
    """The coding before the fix: every distinct answer of the task its own code."""
    every: dict[str, int] = {}
    for q in qs:
        for c in q.choices:
            every.setdefault(c, len(every))
    codes = np.vectorize(lambda a: -1 if a is None else every[a], otypes=[np.int64])(ans)
    t0 = time.perf_counter()
    for stop in ADAPTIVE:
        adaptive_eval(codes, StopSpec(stop=stop, max_n=K), correct=[every[q.correct] for q in qs],
                      n_options=len(every), fixed_ns=[1, 5, 10, 40], reps=REPS, rng=0)
    return time.perf_counter() - t0


def timed(qs: list[Question], ans: np.ndarray) -> float:
    plan = jsonl_plan(qs, (0.7,), (1, 5, 10, 40), samples=K, adaptive=list(ADAPTIVE),
                      bootstrap=REPS)
    t0 = time.perf_counter()
    adaptive_rows(plan, qs, ans)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    small, big = open_run(a.questions), open_run(10 * a.questions, seed=1)
    t1 = statistics.median(timed(*small) for _ in range(a.repeats))
    t10 = statistics.median(timed(*big) for _ in range(a.repeats))
    old = task_wide(*small)  # once: it is the slow one
    print(f"per-question coding: {a.questions} questions {t1:.2f} s, {10 * a.questions} "
          f"questions {t10:.2f} s: ratio {t10 / t1:.1f} (linear: 10)")
    print(f"task-wide coding (before), {a.questions} questions ({a.questions * PER_QUESTION} "
          f"distinct answers): {old:.2f} s, {old / t1:.1f}x the per-question coding")
    return 0


if __name__ == "__main__":
    sys.exit(main())
