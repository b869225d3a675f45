"""The size of the λ₁/t test, and λ̂'s bias and coverage, on the README's calibration demo.

The README's demo calibrates `ensemble testing serve --lam 4 --bias -0.5` at t = 0, 0.5 and 1
with 10 samples per question on the 400 box-ball questions. This script redraws that setup many
times and runs the project's own fitting functions (`fit_lambda`, `fit_joint`) on each draw:

- the size of the λ₁/t likelihood-ratio test (how often it rejects at the 5% level a simulator
  that satisfies λ(t) = λ₁/t exactly), with its bootstrap p-value and with the χ² reference;
- the same for the model the test had before (one bias b shared by every temperature, 199
  bootstrap draws with seed 0 in every run), to show what it did;
- the bias and the coverage of λ̂ at each temperature and of the joint λ₁.

Each is run under both forms of planted bias: "fixed" (the same b at every t, as the simulator
plants by default) and "scaled" (b/t: sampling at temperature t divides the whole logit, bias
included, by t, as it does for a real model's preference for one answer).

The counts are drawn directly from the planted probabilities (no HTTP: this studies the
statistics, not the sampler): at temperature t each question with posterior p gets
Binomial(10, σ(2(λ₁/t)(2p − 1) + b)) answers "L" (fixed) or Binomial(10, σ((2λ₁(2p − 1) + b)/t))
(scaled). t = 0 is left out: its answers are separated and `fit_joint` leaves it out too.

    python tests/bench/size_study.py                       # 500 replications per bias form
    python tests/bench/size_study.py --reps 50             # a quick look
    python tests/bench/size_study.py --markdown out.md     # also write the table

Rates are printed with their 95% Wilson intervals; means with their standard errors.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from ensemble.calibration import fit_joint, fit_lambda  # noqa: E402
from ensemble.tasks import get_task  # noqa: E402

LAM1, BIAS, SAMPLES, TEMPS = 4.0, -0.5, 10, (0.5, 1.0)


def wilson(hits: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    z = 1.959964
    ph = hits / n
    mid = (ph + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (mid - half, mid + half)


def draw(post: np.ndarray, t: float, form: str, rng: np.random.Generator) -> np.ndarray:
    x = 2 * LAM1 * (2 * post - 1)
    z = x / t + BIAS if form == "fixed" else (x + BIAS) / t
    return rng.binomial(SAMPLES, expit(z))


def study(form: str, reps: int, post: np.ndarray) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}

    def add(key: str, v: float) -> None:
        out.setdefault(key, []).append(v)

    tot = np.full(post.size, SAMPLES)
    for r in range(reps):
        rng = np.random.default_rng([0 if form == "fixed" else 1, r])
        groups = [(t, post, draw(post, t, form, rng), tot) for t in TEMPS]
        for t, _, ones, _ in groups:
            f = fit_lambda(post, ones, tot, gof_reps=0, t=t)
            add(f"lam_err_{t:g}", f.lam - LAM1 / t)
            add(f"lam_cov_{t:g}", float(f.ci[0] <= LAM1 / t <= f.ci[1]))
        # the default: a bias per t, 999 draws seeded from the counts
        j = fit_joint(groups, pooled_gof=False)
        assert j is not None
        add("new_boot", float(j.lrt_pvalue < 0.05))
        add("lam1_err", j.lam1 - LAM1)
        add("lam1_cov", float(j.ci[0] <= LAM1 <= j.ci[1]))
        jc = fit_joint(groups, gof_reps=0, pooled_gof=False)
        assert jc is not None
        add("new_chi2", float(jc.lrt_pvalue < 0.05))
        # the test as it was: one bias for all t, the same 199 draws in every run
        jo = fit_joint(groups, bias_form="fixed", gof_reps=199, rng=0, pooled_gof=False)
        assert jo is not None
        add("old_boot", float(jo.lrt_pvalue < 0.05))
        joc = fit_joint(groups, bias_form="fixed", gof_reps=0, pooled_gof=False)
        assert joc is not None
        add("old_chi2", float(joc.lrt_pvalue < 0.05))
        if (r + 1) % 50 == 0:
            print(f"  {form}: {r + 1}/{reps}", file=sys.stderr, flush=True)
    return out


ROWS = [
    ("new_boot",
     "λ₁/t test, a bias per t (default), bootstrap p (999 draws, seeded by the counts)"),
    ("new_chi2", "λ₁/t test, a bias per t, χ²₁ p"),
    ("old_boot", "λ₁/t test, one bias for all t (before), bootstrap p (199 draws, seed 0)"),
    ("old_chi2", "λ₁/t test, one bias for all t (before), χ²₁ p"),
]


def table(results: dict[str, dict[str, list[float]]], reps: int) -> list[str]:
    lines = ["| statistic | planted bias | runs | rejects at 5% / covers (95% Wilson) | "
             "mean error ± SE |", "| --- | --- | --- | --- | --- |"]
    for form, res in results.items():
        planted = ("fixed: b = −0.5 at every t" if form == "fixed"
                   else "scaled: b/t, b = −0.5 at t = 1")
        for key, label in ROWS:
            v = res[key]
            lo, hi = wilson(int(sum(v)), len(v))
            lines.append(f"| {label} | {planted} | {len(v)} | rejects {np.mean(v):.1%} "
                         f"[{lo:.1%}, {hi:.1%}] |  |")
        for what, cov, err in [(f"λ̂ at t = {t:g} (planted {LAM1 / t:g}), profile 95% interval",
                                f"lam_cov_{t:g}", f"lam_err_{t:g}") for t in TEMPS] + [
                ("joint λ₁ (planted 4), Wald 95% interval", "lam1_cov", "lam1_err")]:
            c, e = res[cov], np.asarray(res[err])
            lo, hi = wilson(int(sum(c)), len(c))
            lines.append(f"| {what} | {planted} | {len(c)} | covers {np.mean(c):.1%} "
                         f"[{lo:.1%}, {hi:.1%}] | {e.mean():+.4f} ± "
                         f"{e.std(ddof=1) / math.sqrt(e.size):.4f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=500, help="replications per bias form")
    ap.add_argument("--forms", nargs="+", default=["fixed", "scaled"],
                    choices=["fixed", "scaled"])
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args()
    post = np.array([q.posterior for q in get_task("boxball").questions()], dtype=float)
    t0 = time.perf_counter()
    results = {form: study(form, args.reps, post) for form in args.forms}
    took = time.perf_counter() - t0
    lines = table(results, args.reps)
    lines.append("")
    lines.append(f"({args.reps} replications per form, λ₁ = {LAM1:g}, b = {BIAS:g}, "
                 f"{SAMPLES} samples, t ∈ {{{', '.join(f'{t:g}' for t in TEMPS)}}}, 400 "
                 f"questions; {took:.0f} s)")
    print("\n".join(lines))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
