"""Coverage of `ensemble calibrate`'s 95% interval for λ, by simulation against the simulator's
planted expert: logprob mode (one belief P(L) per question, `fit_probabilities`) old and new,
and sample mode (k hard answers per question, `fit_lambda`'s profile-likelihood interval).

For each cell (κ the chains' concentration, λ₁, t, questions): `--reps` runs, each a random
subset of the 400 box-ball questions (all 400 at 400), beliefs drawn as the simulator draws
them, λ fitted, and the share of intervals covering the planted λ = λ₁/t printed with its 95%
Wilson interval. "old" is the interval before the fix (Wald, Pearson's scale, z = 1.96),
computed from the same fit; "new" is `fit_probabilities`' interval as it is now.

The beliefs: the simulator (`SimulatedExpert._binary` with `ChainBeliefs`) draws the answer
from π = ψ_λ(p), then the belief from Dirichlet(κ·π + e_answer): marginally Beta(κπ, κ(1 − π)).
This bench draws the same two steps with numpy, vectorised over questions (the simulator's
per-sample code costs ~40 µs a belief, its whole reply ~1.3 ms); `--check` compares the two
draws' distributions (Kolmogorov-Smirnov) before measuring. `--wire N` also runs N whole
`ensemble calibrate --mode logprob` runs against `SimulatedServer` (real HTTP on loopback,
the CLI in this process) and counts their intervals' coverage.

    python tests/bench/bench_logprob_coverage.py                       # the docs' table
    python tests/bench/bench_logprob_coverage.py --reps 100 --questions 50 400 --kappa 1
    python tests/bench/bench_logprob_coverage.py --sample              # sample mode too (k = 20)
    python tests/bench/bench_logprob_coverage.py --wire 30 --reps 0    # through the wire
    python tests/bench/bench_logprob_coverage.py --json /tmp/rows.json

Run it niced on a shared machine (`nice -n 10`): the full grid takes a few minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.special import expit
from scipy.stats import ks_2samp
from statsmodels.stats.proportion import proportion_confint

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from ensemble.calibration import fit_lambda, fit_probabilities  # noqa: E402
from ensemble.tasks import get_task  # noqa: E402
from ensemble.testing.expert import ChainBeliefs  # noqa: E402

P = np.array([q.posterior for q in get_task("boxball").questions()])


def beliefs(pi: np.ndarray, kappa: float, rng: np.random.Generator) -> np.ndarray:
    """P(L) of one sample per question: the answer from π, the belief from
    Dirichlet(κ·π + e_answer) (κ = ∞: π itself), as `ChainBeliefs.draw` draws it."""
    if math.isinf(kappa):
        return pi.copy()
    left = rng.random(pi.size) < pi
    g_l = rng.standard_gamma(kappa * pi + left)
    g_r = rng.standard_gamma(kappa * (1 - pi) + ~left)
    total = g_l + g_r
    # every gamma underflowed: the answer's share is all of it (as ChainBeliefs.draw)
    return np.where(total > 0, g_l / np.where(total > 0, total, 1.0), left * 1.0)


def check(rng: np.random.Generator, n: int = 4000) -> None:
    """The vectorised draw against the simulator's own `ChainBeliefs.draw` (KS test)."""
    for kappa in (1.0, 10.0):
        for pi_l in (0.03, 0.3, 0.5):
            chain = ChainBeliefs(kappa=kappa)
            own = []
            for _ in range(n):
                answer = 0 if rng.random() < pi_l else 1
                own.append(chain.draw([pi_l, 1 - pi_l], answer, rng)[0])
            ours = beliefs(np.full(n, pi_l), kappa, rng)
            res = ks_2samp(own, ours)
            print(f"check κ = {kappa:g}, π = {pi_l}: KS p = {res.pvalue:.3f}"
                  f"{'  <- differs' if res.pvalue < 0.001 else ''}")


def old_interval(p: np.ndarray, q: np.ndarray, lam: float, bias: float | None
                 ) -> tuple[float, float]:
    """The interval before the fix, from the same fit: Wald, z = 1.96, Pearson's scale."""
    q = np.clip(q, 1e-9, 1 - 1e-9)
    x = 2 * (2 * p - 1)
    exog = np.column_stack([x, np.ones_like(x)])
    mu = expit(lam * x + (bias or 0.0))
    v = mu * (1 - mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        pearson = float(np.sum(np.where(v > 0, (q - mu) ** 2 / v, 0.0)) / (p.size - 2))
    bread = np.linalg.pinv(exog.T @ (exog * v[:, None]))
    se = math.sqrt(max(pearson * bread[0, 0], 0.0))
    return lam - 1.959964 * se, lam + 1.959964 * se


def covers(ci: tuple[float, float] | list[float], lam: float) -> bool:
    return bool(ci[0] <= lam <= ci[1])


def wilson(hits: int, reps: int) -> str:
    lo, hi = proportion_confint(hits, reps, alpha=0.05, method="wilson")
    return f"{hits / reps:.3f} [{lo:.2f}, {hi:.2f}]"


def cell(kappa: float, lam1: float, t: float, nq: int, reps: int, rng: np.random.Generator,
         sample_k: int) -> dict[str, object]:
    lam = lam1 / t
    old = new = samp = 0
    widths = []
    start = time.process_time()
    for _ in range(reps):
        p = P if nq >= P.size else P[rng.choice(P.size, nq, replace=False)]
        pi = expit(2 * lam * (2 * p - 1))
        q = beliefs(pi, kappa, rng)
        fit = fit_probabilities(p, q, t=t)
        new += covers(fit.ci, lam)
        old += covers(old_interval(p, q, fit.lam, fit.bias), lam)
        widths.append(fit.ci[1] - fit.ci[0])
        if sample_k:
            ones = rng.binomial(sample_k, pi)
            try:
                samp += covers(fit_lambda(p, ones, np.full(p.size, sample_k), gof_reps=0,
                                          t=t).ci, lam)
            except Exception:  # every answer the same: no interval (counts as a miss)
                pass
    ms = (time.process_time() - start) / max(reps, 1) * 1000
    return {"kappa": kappa, "lam1": lam1, "t": t, "lam": lam, "questions": nq, "reps": reps,
            "old": old, "new": new, "sample": samp if sample_k else None,
            "median_width": float(np.median(widths)), "ms_per_rep": ms}


def beliefs_of_run(out: Path) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """t -> (posteriors, P(L)) of a logprob calibration's folder, from questions.jsonl and
    samples.jsonl (each sample's compact top logprobs, renormalised over L and R, as the fit
    reads them; the file rounds logprobs to 4 decimals)."""
    post = {}
    for line in (out / "questions.jsonl").read_text().splitlines():
        rec = json.loads(line)
        post[rec["id"]] = float(rec["posterior"])
    got: dict[float, list[tuple[float, float]]] = {}
    for line in (out / "samples.jsonl").read_text().splitlines():
        rec = json.loads(line)
        top = {str(tok).strip().upper(): math.exp(lp) for tok, lp in rec["lp"]["top"]}
        q = top.get("L", 0.0) / (top.get("L", 0.0) + top.get("R", 0.0))
        got.setdefault(float(rec["t"]), []).append((post[rec["id"]], q))
    return {t: (np.array([a for a, _ in v]), np.array([b for _, b in v]))
            for t, v in got.items()}


def wire(runs: int, lam1: float, limit: int) -> None:
    """`ensemble calibrate --mode logprob` against SimulatedServer(lam1, seed=i), t 0.5 and 1:
    the share of its intervals covering λ₁/t (new: calibration.json's; old: recomputed from the
    run's own beliefs and fit)."""
    from ensemble.cli import main
    from ensemble.testing import SimulatedServer

    hits = {0.5: [0, 0], 1.0: [0, 0]}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            out = Path(tmp) / f"c{i}"
            with SimulatedServer(lam1=lam1, seed=100 + i) as srv, \
                    contextlib.redirect_stdout(io.StringIO()):
                rc = main(["calibrate", "--model", "openai/sim-expert", "--api-base",
                           srv.base_url, "--t", "0.5", "1", "--mode", "logprob", "--limit",
                           str(limit), "--seed", str(i), "--out", str(out), "--json"])
            assert rc == 0, f"calibrate exited {rc}"
            doc = json.loads((out / "calibration.json").read_text())
            drawn = beliefs_of_run(out)
            for f in doc["fits"]:
                lam = lam1 / f["t"]
                hits[f["t"]][1] += covers(f["ci"], lam)
                p, q = drawn[f["t"]]
                hits[f["t"]][0] += covers(old_interval(p, q, f["lam"], f["bias"]), lam)
    took = time.perf_counter() - start
    for t, (old, new) in hits.items():
        print(f"wire: SimulatedServer(lam1={lam1:g}) κ = 1, t = {t:g} (λ = {lam1 / t:g}), "
              f"{limit} questions, {runs} calibrations: old {wilson(old, runs)}, "
              f"new {wilson(new, runs)}")
    print(f"wire: {took / max(runs, 1):.1f} s per calibration")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--kappa", type=float, nargs="+", default=[1.0, 10.0, math.inf])
    ap.add_argument("--lam1", type=float, nargs="+", default=[0.5, 2.0, 4.0])
    ap.add_argument("--t", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--questions", type=int, nargs="+", default=[50, 100, 200, 400])
    ap.add_argument("--sample", type=int, nargs="?", const=20, default=0,
                    help="also sample mode with K hard answers per question (default 20)")
    ap.add_argument("--check", action="store_true", help="KS-check the vectorised draw first")
    ap.add_argument("--wire", type=int, default=0, help="N calibrations through the wire")
    ap.add_argument("--wire-limit", type=int, default=400)
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--json", help="write the rows as JSON to this file")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.check:
        check(rng)
    rows = []
    if args.reps > 0:
        head = "| κ | λ₁ | t | λ | questions | old (Wald, Pearson) | new | median width |"
        head += " sample mode |" if args.sample else ""
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for kappa in args.kappa:
            for lam1 in args.lam1:
                for t in args.t:
                    for nq in args.questions:
                        # hard answers do not depend on κ: sample mode on the first κ's rows
                        r = cell(kappa, lam1, t, nq, args.reps, rng,
                                 args.sample if kappa == args.kappa[0] else 0)
                        rows.append(r)
                        line = (f"| {kappa:g} | {lam1:g} | {t:g} | {r['lam']:g} | {nq} | "
                                f"{wilson(r['old'], args.reps)} | "  # type: ignore[arg-type]
                                f"{wilson(r['new'], args.reps)} | "  # type: ignore[arg-type]
                                f"{r['median_width']:.3g} |")
                        if args.sample:
                            line += (f" {wilson(r['sample'], args.reps)} |"  # type: ignore
                                     if r["sample"] is not None else " |")
                        print(line, flush=True)
        ms = [float(r["ms_per_rep"]) for r in rows]  # type: ignore[arg-type]
        print(f"CPU per refit (draw + both intervals{' + sample fit' if args.sample else ''}):"
              f" median {np.median(ms):.1f} ms")
    if args.json and rows:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.wire:
        wire(args.wire, 2.0, args.wire_limit)


if __name__ == "__main__":
    main()
