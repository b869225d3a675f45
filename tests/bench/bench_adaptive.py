"""Benchmark: adaptive stopping rules on the same stored samples of planted-λ experts.

Rules: `bayes` (prior fitted per run from a pilot of 2, over a grid of costs), our `beta` (over
thresholds), the `adaptiveconsistency` package's own `BetaStoppingCriteria` (same thresholds,
called on every prefix of the same answer sequences), fixed n = 1..20, and, for reference, `bayes`
with the true prior (the oracle a calibration would give: q = ψ_λ(p) over the questions).

Cases (K = 20 stored samples per question, max_n = 20, t = 1, drawn with numpy):
- box-and-ball, the 40 scenarios `ensemble eval boxball --limit 40` picks with seed 0; the
  expert answers L with probability ψ_{λ₁/t}(p), λ₁ ∈ {1, 3}; accuracy = P(ω = decision | colour)
  weighted by P(scenario, colour) (evals/adaptive.py);
- multiple choice, 500 questions with 5 options, the simulated server's accuracy model (reading
  accuracy ρ ~ Beta(3, 2), one distractor, quantal response among the options with λ = λ₁/t,
  λ₁ = 3); accuracy = plurality right.

Accuracy and samples are averaged over R random orders of each question's samples (the same
orders for every rule). Prints the curves, the samples each rule needs at equal accuracy, the
done-when check of issue 16, and writes docs/adaptive.png.

Run:  python tests/bench/bench_adaptive.py            (needs `pip install adaptiveconsistency`)
      python tests/bench/bench_adaptive.py --record-fixture   (rewrites the package-decision
      fixture tests/fixtures/adaptiveconsistency_beta.json used by tests/test_stopping.py)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from ensemble.evals.adaptive import (
    _credit,
    adaptive_eval,
    boxball_inputs,
    replay,
    values_from_correct,
)
from ensemble.evals.plan import resolve
from ensemble.evals.spec import one_model
from ensemble.qr import psi
from ensemble.stopping import (
    DEFAULT_COST,
    BayesRule,
    BetaPrior,
    BetaRule,
    StopSpec,
    expected_performance,
    prior_from_calibration,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "adaptiveconsistency_beta.json"
PLOT = ROOT / "docs" / "adaptive.png"
K = MAX_N = 20
COSTS = [0.00003, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.03, 0.06]
THRESHOLDS = [0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 0.995]
PACKAGE_THRESHOLDS = [0.8, 0.9, 0.95, 0.99]


# -- the cases --------------------------------------------------------------------------------
def boxball_case(lam1: float, *, seed: int = 0):
    qs = resolve(one_model("boxball", "sim", (1.0,), (MAX_N,), limit=40, seed=0)).questions
    values, weights, groups = boxball_inputs(qs)
    p = np.array([q.posterior for q in qs])
    g = np.random.default_rng(seed)
    codes = (g.random((len(qs), K)) >= psi(p, lam1)[:, None]).astype(np.int64)  # 0 = L, 1 = R
    return {"name": f"box-ball λ₁={lam1:g}", "codes": codes, "values": values,
            "weights": weights, "groups": groups, "labels": ["L", "R"],
            "oracle": prior_from_calibration(lam1, p)}


def mc_case(lam1: float, *, questions: int = 500, options: int = 5, seed: int = 0):
    g = np.random.default_rng(seed)
    rho = g.beta(3.0, 2.0, size=questions)
    correct = g.integers(0, options, size=questions)
    distractor = (correct + 1 + g.integers(0, options - 1, size=questions)) % options
    read_right = g.random((questions, K)) < rho[:, None]
    read = np.where(read_right, correct[:, None], distractor[:, None])
    logits = np.full((questions, K, options), -2.0 * lam1)
    np.put_along_axis(logits, read[..., None], 2.0 * lam1, axis=-1)
    prob = np.exp(logits - logits.max(axis=-1, keepdims=True))
    prob /= prob.sum(axis=-1, keepdims=True)
    codes = (g.random((questions, K, 1)) > prob.cumsum(axis=-1)).sum(axis=-1)
    codes = np.minimum(codes, options - 1).astype(np.int64)
    return {"name": f"multiple choice λ₁={lam1:g}", "codes": codes,
            "values": values_from_correct(correct, options), "weights": None, "groups": None,
            "labels": list("ABCDE"[:options]), "oracle": None}


# -- running the rules ------------------------------------------------------------------------
def run_rule(case, rule, orders):
    r = adaptive_eval(case["codes"], rule, values=case["values"], weights=case["weights"],
                      groups=case["groups"], orders=orders, fixed_ns=list(range(1, MAX_N + 1)),
                      reps=1000, rng=1)[0]
    return r


def run_package(case, threshold, orders):
    """The package's BetaStoppingCriteria on every prefix of the same sequences."""
    from adaptive_consistency import BetaStoppingCriteria

    crit = BetaStoppingCriteria(conf_thresh=threshold)
    codes, labels = case["codes"], case["labels"]
    Q, R, _ = orders.shape
    used = np.empty((Q, R), dtype=np.int64)
    counts = np.zeros((Q, R, len(labels)), dtype=np.int64)
    for q in range(Q):
        for r in range(R):
            seq = [labels[c] for c in codes[q, orders[q, r]]]
            n = MAX_N
            for i in range(1, MAX_N + 1):
                if crit.should_stop(seq[:i])["stop"]:
                    n = i
                    break
            used[q, r] = n
            counts[q, r] = np.bincount(codes[q, orders[q, r, :n]], minlength=len(labels))
    acc_q = _credit(counts, case["values"]).mean(axis=1)
    w = np.ones(Q) if case["weights"] is None else case["weights"]
    return used, float((w * acc_q).sum() / w.sum()), float(used.mean())


def interp_samples(curve, accuracy):
    """Samples a rule needs to reach `accuracy`, interpolated along its (samples, accuracy)
    curve (points sorted by samples; the running maximum of accuracy makes it monotone)."""
    pts = sorted(curve)
    s = np.array([p[0] for p in pts])
    a = np.maximum.accumulate(np.array([p[1] for p in pts]))
    if accuracy > a[-1]:
        return float("nan")
    i = int(np.searchsorted(a, accuracy))
    if i == 0:
        return float(s[0])
    t = (accuracy - a[i - 1]) / (a[i] - a[i - 1]) if a[i] > a[i - 1] else 1.0
    return float(s[i - 1] + t * (s[i] - s[i - 1]))


def bench_case(make_case, seeds, *, orders_n: int, package: bool):
    """Curves averaged over independent stored-sample sets (one per seed), each replayed along
    the same `orders_n` random orders for every rule."""
    runs = [_bench_one(make_case(seed), orders_n=orders_n, package=package) for seed in seeds]
    out = {"name": runs[0]["name"], "seeds": list(seeds), "orders": orders_n}
    for key in ("bayes", "oracle", "beta", "package"):
        rows = [r[key] for r in runs]
        out[key] = [(float(np.mean([r[i][0] for r in rows])),
                     float(np.mean([r[i][1] for r in rows])), rows[0][i][2])
                    for i in range(len(rows[0]))]
    out["fixed"] = [(n, float(np.mean([r["fixed"][i][1] for r in runs])))
                    for i, (n, _) in enumerate(runs[0]["fixed"])]
    if package:
        out["package_same"] = tuple(int(sum(r["package_same"][j] for r in runs))
                                    for j in (0, 1))
        out["package_time_s"] = sum(r["package_time_s"] for r in runs)
    out["rules_time_s"] = sum(r["rules_time_s"] for r in runs)
    return out


def _bench_one(case, *, orders_n: int, package: bool):
    g = np.random.default_rng(7)
    Q = case["codes"].shape[0]
    orders = np.argsort(g.random((Q, orders_n, K)), axis=-1)
    out = {"name": case["name"], "bayes": [], "beta": [], "package": [], "oracle": []}
    t0 = time.perf_counter()
    base = None
    for c in COSTS:
        r = run_rule(case, StopSpec("bayes", max_n=MAX_N, cost=c), orders)
        out["bayes"].append((r.mean_samples.value, r.accuracy.value, c))
        base = r
        if case["oracle"] is not None:
            ro = run_rule(case, StopSpec("bayes", max_n=MAX_N, cost=c, prior=case["oracle"]),
                          orders)
            out["oracle"].append((ro.mean_samples.value, ro.accuracy.value, c))
    assert base is not None
    out["fixed"] = [(n, base.fixed[n].value) for n in range(1, MAX_N + 1)]
    beta_used = {}
    for th in THRESHOLDS:
        r = run_rule(case, StopSpec("beta", max_n=MAX_N, threshold=th), orders)
        out["beta"].append((r.mean_samples.value, r.accuracy.value, th))
        if th in PACKAGE_THRESHOLDS:
            beta_used[th] = replay(case["codes"], BetaRule(max_n=MAX_N, threshold=th),
                                   n_options=case["values"].shape[1], orders=orders).used
    out["rules_time_s"] = time.perf_counter() - t0
    if package:
        t0 = time.perf_counter()
        same = total = 0
        for th in PACKAGE_THRESHOLDS:
            used, acc, mean = run_package(case, th, orders)
            out["package"].append((mean, acc, th))
            same += int((used == beta_used[th]).sum())
            total += used.size
        out["package_same"] = (same, total)
        out["package_time_s"] = time.perf_counter() - t0
    return out


def model_comparison(name, prior):
    """Exact expectations under a prior (binary questions): the samples bayes needs to match
    each beta threshold's accuracy (agreement with the vote of unlimited samples),
    interpolated along bayes's frontier (mixing two neighbouring costs at random)."""
    lines = [f"[exact under the model: {name}]"]
    for pilot in (0, 2):
        parts = [f"beta({th:g}) {beta_n:.2f} vs bayes {need:.2f} (ratio {need / beta_n:.3f})"
                 for th, beta_n, need in exact_equal_accuracy(prior, MAX_N, pilot=pilot)]
        lines.append(f"  pilot {pilot}: " + "; ".join(parts))
    return "\n".join(lines)


def exact_equal_accuracy(prior, max_n, *, pilot=2, n_costs=160, thresholds=(0.9, 0.95, 0.99)):
    """[(beta threshold, beta's mean samples, the samples bayes needs for beta's accuracy)],
    exactly under `prior` (`expected_performance`), bayes interpolated along its frontier over
    costs 1e-6..0.3."""
    costs = np.geomspace(1e-6, 0.3, n_costs)
    curve = [(f.mean_samples, f.accuracy) for f in (
        expected_performance(BayesRule(max_n=max_n, prior=prior, cost=c, pilot=pilot), prior)
        for c in costs)]
    out = []
    for th in thresholds:
        b = expected_performance(BetaRule(max_n=max_n, threshold=th), prior)
        out.append((th, b.mean_samples, interp_samples(curve, b.accuracy)))
    return out


def headline(case, orders_n: int, package: bool):
    """Issue 16's done-when: bayes at the default cost vs fixed 20 and beta(0.95)."""
    g = np.random.default_rng(7)
    Q = case["codes"].shape[0]
    orders = np.argsort(g.random((Q, orders_n, K)), axis=-1)
    bayes = run_rule(case, StopSpec("bayes", max_n=MAX_N), orders)
    beta = run_rule(case, StopSpec("beta", max_n=MAX_N, threshold=0.95), orders)
    lines = [
        f"[{case['name']}, {Q} questions, max 20, {orders_n} orders, default cost "
        f"{DEFAULT_COST}]",
        f"  bayes:   accuracy {bayes.accuracy.value:.4f}  fixed 20 {bayes.fixed[MAX_N].value:.4f}"
        f"  difference {bayes.difference.value:+.4f} (95% CI {bayes.difference.ci[0]:+.4f}"
        f" to {bayes.difference.ci[1]:+.4f})  mean samples {bayes.mean_samples.value:.2f}"
        f" (95% CI {bayes.mean_samples.ci[0]:.2f}-{bayes.mean_samples.ci[1]:.2f})",
        f"  beta .95: accuracy {beta.accuracy.value:.4f}  difference {beta.difference.value:+.4f}"
        f"  mean samples {beta.mean_samples.value:.2f}",
    ]
    ok = (bayes.difference.value >= -0.005 and bayes.mean_samples.value <= MAX_N / 3
          and bayes.mean_samples.value < beta.mean_samples.value)
    if package:
        used, acc, mean = run_package(case, 0.95, orders)
        lines.append(f"  package BetaStoppingCriteria(0.95): accuracy {acc:.4f}  mean samples"
                     f" {mean:.2f}")
        ok = ok and bayes.mean_samples.value < mean
    lines.append(f"  done-when (diff >= -0.005, samples <= 6.67 and below beta): "
                 f"{'MET' if ok else 'NOT MET'}")
    return "\n".join(lines), ok


def report(res):
    print(f"\n== {res['name']} (mean over stored-sample seeds {res['seeds']}, "
          f"{res['orders']} orders each) ==")
    print("  bayes (pilot-fitted prior): cost -> mean samples, accuracy")
    for s, a, c in res["bayes"]:
        print(f"    {c:<8g} {s:6.2f}  {a:.4f}")
    if res["oracle"]:
        print("  bayes (oracle prior q = ψ_λ(p)):")
        for s, a, c in res["oracle"]:
            print(f"    {c:<8g} {s:6.2f}  {a:.4f}")
    print("  beta (ours): threshold -> mean samples, accuracy")
    for s, a, th in res["beta"]:
        print(f"    {th:<8g} {s:6.2f}  {a:.4f}")
    if res["package"]:
        print("  BetaStoppingCriteria (package):")
        for s, a, th in res["package"]:
            print(f"    {th:<8g} {s:6.2f}  {a:.4f}")
        same, total = res["package_same"]
        print(f"  our beta and the package stop at the same sample on {same} of {total} "
              "sequences")
    print("  fixed n: " + "  ".join(f"{n}:{a:.4f}" for n, a in res["fixed"] if n in
                                    (1, 3, 5, 10, 15, 20)))
    print("  samples at equal accuracy (bayes / beta):")
    for s_beta, a_beta, th in res["beta"]:
        s_bayes = interp_samples([(s, a) for s, a, _ in res["bayes"]], a_beta)
        print(f"    at beta({th:g})'s accuracy {a_beta:.4f}: bayes {s_bayes:6.2f} vs beta "
              f"{s_beta:6.2f}  ratio {s_bayes / s_beta:.3f}")
    print(f"  time: rules {res['rules_time_s']:.1f} s"
          + (f", package {res['package_time_s']:.1f} s" if "package_time_s" in res else ""))


def plot(results, path: Path) -> None:
    """Top row: accuracy against mean samples. Bottom row: the same, as the difference from
    the fixed 20 vote, zoomed on the region where the rules compete."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(5.2 * len(results), 8.0))
    for col, res in enumerate(results):
        fx = res["fixed"]
        ref = fx[-1][1]
        for row, shift in ((0, 0.0), (1, ref)):
            ax = axes[row, col]

            def xy(rows, shift=shift):
                return [r[0] for r in rows], [r[1] - shift for r in rows]

            ax.plot([n for n, _ in fx], [a - shift for _, a in fx], "o-", color="0.6", ms=3,
                    label="fixed n = 1..20")
            ax.plot(*xy(res["beta"]), "^-", color="C3", label="beta (ours), thresholds")
            if res["package"]:
                ax.plot(*xy(res["package"]), "x", color="k", ms=8,
                        label="BetaStoppingCriteria (package)")
            if res["oracle"]:
                ax.plot(*xy(res["oracle"]), "--", color="C0", alpha=0.6,
                        label="bayes, true prior")
            ax.plot(*xy(res["bayes"]), "s-", color="C0", ms=4,
                    label="bayes, prior fitted on a pilot of 2, costs")
            for s_, a, c in res["bayes"]:
                if c == DEFAULT_COST:
                    ax.plot([s_], [a - shift], "o", mfc="none", mec="C0", ms=13)
                    ax.annotate(f"default cost {c:g}", (s_, a - shift),
                                textcoords="offset points", xytext=(6, -16), fontsize=8,
                                color="C0")
            for s_, a, th in res["beta"]:
                if th == 0.95:
                    ax.annotate("0.95", (s_, a - shift), textcoords="offset points",
                                xytext=(4, 5), fontsize=8, color="C3")
            ax.set_xlim(0, MAX_N + 0.5)
            ax.grid(alpha=0.3)
            if row == 0:
                lo = min(a for _, a, _ in res["bayes"] + res["beta"])
                ax.set_ylim(lo - 0.2 * (ref - lo), ref + 0.15 * (ref - lo))
                ax.set_ylabel("accuracy")
                ax.set_title(f"{res['name']} ({len(res['seeds'])} sample sets)", fontsize=10)
                ax.legend(fontsize=7, loc="lower right")
            else:
                ax.axhline(0.0, color="0.3", lw=0.8)
                ax.axhline(-0.005, color="0.3", lw=0.8, ls=":")
                ax.set_ylim(-0.012, 0.002)
                ax.set_ylabel("accuracy − fixed 20 (zoom; dotted: −0.005)")
                ax.set_xlabel("mean samples per question (pilot included)")
    fig.suptitle("Adaptive stopping on the same stored samples (max 20, t = 1)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- the package-decision fixture ---------------------------------------------------------------
def record_fixture(path: Path) -> None:
    import importlib.metadata

    from adaptive_consistency import BetaStoppingCriteria

    g = np.random.default_rng(2024)
    seqs: list[list[str | None]] = [
        ["A"], ["A", "A"], ["A", "A", "A"], ["A", "A", "A", "A"], ["A", "B"],
        ["A", "B", "A", "A", "A", "A"], ["A", "B", "C", "A", "A", "A", "A"],
        ["A", "B", "C", "D", "A", "A", "A", "A", "A"], ["A", None, "A", "A", "A"],
        [None, None, None, None], [None, None, "A", None, None],
        ["A", "A", "A", "A", "A", "B", "B", "B", "B", "B"],
    ]
    for _ in range(300):
        n_opt = int(g.integers(2, 6))
        length = int(g.integers(1, 26))
        skew = g.dirichlet(np.full(n_opt, 0.6))
        alphabet: list[str | None] = [*"ABCDE"[: n_opt - 1], None] if g.random() < 0.3 \
            else list("ABCDE"[:n_opt])
        seqs.append([alphabet[i] for i in g.choice(len(alphabet), size=length, p=skew)])
    cases = []
    for th in (0.8, 0.95, 0.99):
        crit = BetaStoppingCriteria(conf_thresh=th)
        for s in seqs:
            d = crit.should_stop(list(s))
            cases.append({"threshold": th, "answers": s, "stop": bool(d["stop"]),
                          "prob": float(d["prob"])})
    doc = {
        "provenance": ("decisions of adaptiveconsistency "
                       f"{importlib.metadata.version('adaptiveconsistency')} "
                       "BetaStoppingCriteria(conf_thresh).should_stop(answers), recorded by "
                       "`python tests/bench/bench_adaptive.py --record-fixture` "
                       "(sequences: fixed cases + 300 random ones, numpy seed 2024). The "
                       "package counts None as an answer like any other."),
        "cases": cases,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(cases)} package decisions to {path}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--record-fixture", action="store_true")
    ap.add_argument("--orders", type=int, default=400, help="random orders per question "
                    "(box-ball; multiple choice uses a quarter)")
    ap.add_argument("--seeds", type=int, default=3, help="independent stored-sample sets the "
                    "curves average over")
    ap.add_argument("--no-package", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    if args.record_fixture:
        record_fixture(FIXTURE)
        return 0
    package = not args.no_package
    if package:
        try:
            import adaptive_consistency  # noqa: F401
        except ImportError:
            print("adaptiveconsistency is not installed (pip install adaptiveconsistency); "
                  "running without the package's rule", file=sys.stderr)
            package = False
    text, ok = headline(boxball_case(3.0), args.orders, package)
    print(text)
    for seed in range(1, args.seeds):
        text_s, ok_s = headline(boxball_case(3.0, seed=seed), args.orders, False)
        print(f"  (stored samples seed {seed}) " + " | ".join(
            line.strip() for line in text_s.splitlines()[1:]))
    print(model_comparison("box-ball λ₁=3, true prior", boxball_case(3.0)["oracle"]))
    print(model_comparison("box-ball λ₁=1, true prior", boxball_case(1.0)["oracle"]))
    print(model_comparison("multiple choice, Beta(2, 2) prior", BetaPrior(2.0)))
    results = []
    seeds = range(args.seeds)
    for make, orders_n in ((lambda s: boxball_case(1.0, seed=s), args.orders),
                           (lambda s: boxball_case(3.0, seed=s), args.orders),
                           (lambda s: mc_case(3.0, seed=s), max(10, args.orders // 4))):
        res = bench_case(make, seeds, orders_n=orders_n, package=package)
        report(res)
        results.append(res)
    if not args.no_plot:
        plot(results, PLOT)
        print(f"\nwrote {PLOT}")
    return 0 if ok else 1


def test_bench_adaptive() -> None:
    assert main(["--orders", "100", "--seeds", "1", "--no-plot"]) == 0


if __name__ == "__main__":
    raise SystemExit(main())
