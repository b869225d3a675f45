"""Where the seconds after the progress bar of `ensemble calibrate` go, on the README's demo.

After sampling, `ensemble calibrate` fits λ at each temperature (`fit_lambda`, with its link
and deviance tests), fits and tests λ₁/t (`fit_joint`), chooses a rule per temperature
(`recommend`: the minimax-regret rule of each λ, a linear program) and writes the report
(matplotlib figures). This times each step on the demo's answers (λ₁ = 4, bias −0.5,
t = 0, 0.5, 1, 10 samples, 400 questions, drawn with numpy), with the bootstrap at 0
(the baseline: χ² references only), 199 and 999 draws, and prints medians and ratios against
the baseline measured in the same run.

    python tests/bench/bench_calibration_fit.py            # 5 repeats
    python tests/bench/bench_calibration_fit.py --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from ensemble.calibration import fit_joint, fit_lambda  # noqa: E402
from ensemble.evals.calibrate import recommend  # noqa: E402
from ensemble.evals.report import write_report  # noqa: E402
from ensemble.evals.schemas import (  # noqa: E402
    CalibrationMeta,
    CalibrationSummary,
    FailedSummary,
    Recommendation,
)
from ensemble.tasks import get_task  # noqa: E402


def _document(out: str, rec: Recommendation | None) -> CalibrationSummary:
    """The calibration document a report is rendered from (the run's context left blank)."""
    meta = CalibrationMeta(
        model="openai/sim-expert", api_base=None, endpoint=None, served_by=None, task="boxball",
        data=None, mode="sample", questions=400, samples_per_question=10,
        temperatures=[0.5, 1.0, 2.0], bias=True, mirror=False, seed=0, limit=None, created="",
        version="", requests=0, cost_usd=None, invalid=0, run_dir=out, bootstrap=None)
    return CalibrationSummary(
        model=meta.model, endpoint=None, meta=meta, units="", mode="sample", fits=[],
        joint=None, recommendation=rec,
        invalid=0, requests=0, cost_usd=None, rate_limited=0, report={}, profile="",
        failed=FailedSummary(count=0, of=0, ids=[], reasons={}, file=None))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    post = np.array([q.posterior for q in get_task("boxball").questions()], dtype=float)
    rng = np.random.default_rng(0)
    tot = np.full(post.size, 10)
    groups = []
    for t in (0.0, 0.5, 1.0):
        z = np.where(post > 0.5, 50.0, np.where(post < 0.5, -50.0, 0.0)) if t == 0 else \
            2 * (4.0 / t) * (2 * post - 1) - 0.5
        groups.append((t, post, rng.binomial(10, expit(z)), tot))
    fits0 = [fit_lambda(post, k, n, t=t, gof_reps=0) for t, _, k, n in groups]  # warm imports
    fit_joint(groups, gof_reps=0)
    times: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for reps in (0, 199, 999):
            t0 = time.perf_counter()
            fits = [fit_lambda(post, k, n, t=t, gof_reps=reps) for t, _, k, n in groups]
            t1 = time.perf_counter()
            joint = fit_joint(groups, gof_reps=reps)
            t2 = time.perf_counter()
            times.setdefault(f"fit_lambda x3, {reps} draws", []).append(t1 - t0)
            times.setdefault(f"fit_joint, {reps} draws", []).append(t2 - t1)
        t0 = time.perf_counter()
        rec = recommend(fits, 5, model="openai/sim-expert", choices=("L", "R"))
        t1 = time.perf_counter()
        panels = [{"t": f.t, "fit": f, "posteriors": post, "proportions": k / n}
                  for f, (_, _, k, n) in zip(fits, groups, strict=True)]
        with tempfile.TemporaryDirectory() as d:
            write_report(Path(d), _document(d, rec), fits=fits, joint=joint, panels=panels)
        t2 = time.perf_counter()
        # recommend caches its linear programs by (n, λ): the first repeat is what a run pays
        times.setdefault("recommend (rule per t)", []).append(t1 - t0)
        times.setdefault("write_report", []).append(t2 - t1)
    base = statistics.median(times["fit_lambda x3, 0 draws"]) + statistics.median(
        times["fit_joint, 0 draws"])
    print(f"{'step':34} {'median s':>9} {'x baseline':>11}   (baseline: both fits, 0 draws, "
          f"{base:.3f} s; {args.repeats} repeats)")
    for k, v in times.items():
        shown = v[:1] if k.startswith("recommend") else v
        print(f"{k:34} {statistics.median(shown):9.3f} {statistics.median(shown) / base:11.1f}")
    del fits0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
