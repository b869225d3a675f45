"""A real local model on real MathQA questions: start-up, short-request latency, valid-answer
rate and accuracy with Wilson 95% intervals (docs/ensembles.md, "Two real local models").

    python tests/bench/bench_local_models.py local:smollm2 20
    python tests/bench/bench_local_models.py local:gemma3-270m 20  # ensemble models pull NAME first
"""

import math
import statistics
import sys
import time
from pathlib import Path

from ensemble import Ensemble
from ensemble.tasks import get_task

MATHQA = Path(__file__).resolve().parents[3] / "shared" / "data" / "mathqa" / "test.json"
model = sys.argv[1]
nq = int(sys.argv[2])
qs = list(get_task("mathqa", data=MATHQA).questions())[:nq]
t0 = time.perf_counter()
with Ensemble(model, n=1, temperature=0.7, choices=list("ABCDE"), max_tokens=160) as ens:
    ens.decide("Say OK.")
    start = time.perf_counter() - t0
    lat = []
    for _ in range(5):
        t = time.perf_counter()
        ens.decide("Answer with <answer>A</answer>.")
        lat.append(time.perf_counter() - t)
    t1 = time.perf_counter()
    ds = ens.decide_many([q.prompt for q in qs])
    el = time.perf_counter() - t1
valid = sum(d.n_invalid == 0 for d in ds)
right = sum(d.decision == q.correct for d, q in zip(ds, qs, strict=True))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(max(0.0, c - h), 3), round(min(1.0, c + h), 3))


print(model, f"start + first reply {start:.1f} s; short request median {statistics.median(lat):.2f}"
      f" s; {nq} questions {el:.0f} s; valid {valid}/{nq} {wilson(valid, nq)}; right "
      f"{right}/{nq} {wilson(right, nq)}")
print([d.samples[0].text[:120] for d in ds[:2]])
