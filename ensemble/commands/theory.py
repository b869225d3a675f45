"""`ensemble theory`: threshold g(n), worst-case regret, the robust aggregator, utility."""

from __future__ import annotations

import argparse
import math
from typing import Any

from ._args import lam_value, positive_int
from ._output import emit_json, fmt_lam

UNITS = "λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units; utility and regret in ±1 units"
AGGREGATORS = ("majority", "robust", "random-follow")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("theory", help="decision-aggregation theory (g(n), regret, robust rule)",
                              description=f"Decision-aggregation theory. {UNITS}.")
    p.set_defaults(_parser=p)
    sub = p.add_subparsers(dest="theory_command", metavar="WHAT", parser_class=type(p))

    t = sub.add_parser("threshold", help="g(n): majority is optimally robust for λ <= g(n)")
    t.add_argument("--n-max", type=positive_int, default=20, help="largest n (default 20)")
    _common(t, plot=True)
    t.set_defaults(func=run_threshold, _parser=t)

    r = sub.add_parser("regret", help="worst-case regret of an aggregator and its maximiser")
    r.add_argument("--n", type=positive_int, required=True, help="number of experts")
    r.add_argument("--lam", type=lam_value, required=True, help="rationality λ (inf allowed)")
    r.add_argument("--aggregator", choices=AGGREGATORS, default="majority")
    _common(r)
    r.set_defaults(func=run_regret, _parser=r)

    o = sub.add_parser("robust", help="the optimal robust (minimax-regret) aggregator")
    o.add_argument("--n", type=positive_int, required=True)
    o.add_argument("--lam", type=lam_value, required=True)
    _common(o)
    o.set_defaults(func=run_robust, _parser=o)

    u = sub.add_parser("utility", help="utility of majority / omniscient under a signal structure")
    u.add_argument("--joint", required=True,
                   help="JSON rows [P(s, ω=0), P(s, ω=1)], e.g. '[[0.375, 0], [0.375, 0.25]]'")
    u.add_argument("--lam", type=lam_value, required=True)
    u.add_argument("--n", type=positive_int, required=True)
    _common(u)
    u.set_defaults(func=run_utility, _parser=u)

    c = sub.add_parser("regret-curve", help="worst-case regret against λ, majority vs robust")
    c.add_argument("--n", type=positive_int, nargs="+", default=[1, 3, 5])
    c.add_argument("--lam-max", type=lam_value, default=5.0)
    c.add_argument("--points", type=positive_int, default=51)
    _common(c, plot=True)
    c.set_defaults(func=run_curve, _parser=c)


def _common(p: argparse.ArgumentParser, *, plot: bool = False) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    if plot:
        p.add_argument("--plot", metavar="FILE.png", help="also save a plot")


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, caption=UNITS)
    for col in columns:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def run_threshold(args: argparse.Namespace) -> int:
    from ..theory import threshold

    rows = [{"n": n, "g": threshold(n)} for n in range(1, args.n_max + 1)]
    if args.plot:
        _plot_threshold(rows, args.plot)
    if args.json:
        emit_json(rows)
    else:
        _table("Threshold g(n): majority is optimally robust for λ <= g(n)", ["n", "g(n)"],
               [[str(r["n"]), fmt_lam(r["g"])] for r in rows])
    return 0


def _aggregator_f(name: str, n: int, lam: float):  # type: ignore[no-untyped-def]
    from ..theory import majority_f, random_follow_f, robust_aggregator

    if name == "majority":
        return majority_f(n)
    if name == "random-follow":
        return random_follow_f(n)
    return robust_aggregator(n, lam).f


def run_regret(args: argparse.Namespace) -> int:
    from ..theory import worst_case_regret

    f = _aggregator_f(args.aggregator, args.n, args.lam)
    wc = worst_case_regret(f, args.lam, n=args.n)
    doc = {"n": args.n, "lam": args.lam, "aggregator": args.aggregator,
           "worst_regret": wc.value, "argmax": wc.argmax()}
    if args.json:
        emit_json(doc)
    else:
        _table(f"Worst-case regret of {args.aggregator}, n = {args.n}, λ = {fmt_lam(args.lam)}",
               ["worst regret", "p", "γ0", "γ1", "μ", "q0", "q1"],
               [[f"{wc.value:.6f}"] + [f"{v:.4f}" for v in wc.argmax().values()]])
    return 0


def run_robust(args: argparse.Namespace) -> int:
    from ..theory import robust_aggregator

    res = robust_aggregator(args.n, args.lam)
    doc = {"n": args.n, "lam": args.lam, "f": list(res.f), "worst_regret": res.worst_regret,
           "lower_bound": res.lower_bound, "majority_worst_regret": res.majority_worst_regret}
    if args.json:
        emit_json(doc)
    else:
        _table(f"Optimal robust aggregator, n = {args.n}, λ = {fmt_lam(args.lam)}",
               ["x reports of 1"] + [str(x) for x in range(args.n + 1)],
               [["f(x) = P(decide 1)"] + [f"{v:.4f}" for v in res.f]])
        _table("Certificate", ["worst regret (upper)", "LP lower bound", "gap", "majority"],
               [[f"{res.worst_regret:.6f}", f"{res.lower_bound:.6f}", f"{res.gap:.1e}",
                 f"{res.majority_worst_regret:.6f}"]])
    return 0


def run_utility(args: argparse.Namespace) -> int:
    from ..theory import utility_under
    from ..theory.structures import parse_joint

    cmp_ = utility_under(parse_joint(args.joint), args.lam, args.n)
    doc = {"n": cmp_.n, "lam": cmp_.lam, "majority": cmp_.majority, "omniscient": cmp_.omniscient,
           "rational_omniscient": cmp_.rational_omniscient}
    if args.json:
        emit_json(doc)
    else:
        _table(f"Expected utility, n = {args.n}, λ = {fmt_lam(args.lam)}",
               ["majority", "omniscient", "rational experts, omniscient"],
               [[f"{cmp_.majority:.6f}", f"{cmp_.omniscient:.6f}",
                 f"{cmp_.rational_omniscient:.6f}"]])
    return 0


def regret_curves(ns: list[int], lams: list[float]) -> list[dict[str, Any]]:
    """Worst-case regret of majority and of the robust rule for each n and λ."""
    from ..theory import robust_aggregator, threshold

    out = []
    for n in ns:
        for lam in lams:
            res = robust_aggregator(n, lam)
            out.append({"n": n, "lam": lam, "g": threshold(n), "majority": res.majority_worst_regret,
                        "robust": res.worst_regret, "lower_bound": res.lower_bound})
    return out


def run_curve(args: argparse.Namespace) -> int:
    import numpy as np

    lams = [float(v) for v in np.linspace(0.0, args.lam_max, args.points)]
    rows = regret_curves(args.n, lams)
    if args.plot:
        _plot_curves(rows, args.n, args.plot)
    if args.json:
        emit_json(rows)
    else:
        _table("Worst-case regret: majority vs optimal robust aggregator",
               ["n", "λ", "majority", "robust"],
               [[str(r["n"]), f"{r['lam']:.3f}", f"{r['majority']:.5f}", f"{r['robust']:.5f}"]
                for r in rows])
    return 0


def _plot_threshold(rows: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(r["n"], r["g"]) for r in rows if math.isfinite(r["g"])]
    fig, ax = plt.subplots(figsize=(6, 4))
    if pts:
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="mid", marker="o")
    ax.set_xlabel("group size n")
    ax.set_ylabel("g(n)  (λ in ψ_λ units)")
    ax.set_title("Majority is optimally robust for λ ≤ g(n)  (g = ∞ for n ≤ 2)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_curves(rows: list[dict[str, Any]], ns: list[int], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ns), figsize=(4.5 * len(ns), 4), squeeze=False)
    for ax, n in zip(axes[0], ns):
        sel = [r for r in rows if r["n"] == n]
        lam = [r["lam"] for r in sel]
        ax.plot(lam, [r["majority"] for r in sel], label="majority")
        ax.plot(lam, [r["robust"] for r in sel], "--", label="optimal robust")
        g = sel[0]["g"] if sel else math.inf
        if math.isfinite(g):
            ax.axvline(g, color="gray", linestyle=":", label=f"g({n}) = {g:.3f}")
        ax.set_title(f"n = {n}")
        ax.set_xlabel("λ (ψ_λ units)")
        ax.set_ylabel("worst-case regret (±1 units)")
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
