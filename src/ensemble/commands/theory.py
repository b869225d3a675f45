"""`ensemble theory`: threshold g(n), worst-case regret, the robust aggregator, utility."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..cliargs import emit_json, fmt_lam, lam_value, positive_int, rule_choices
from ..clitables import Column
from ..rules import LAM_WEIGHTED, MAJORITY, ROBUST

UNITS = "λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units; utility and regret in ±1 units"
GROUP_HELP = ("a group of N experts of rationality λ, as N:λ (λ may be inf); repeat for each "
              "group, e.g. --group 3:2 --group 2:8; replaces --n/--lam")


def group_value(text: str) -> tuple[int, float]:
    """An N:λ group (N >= 1, λ >= 0 or inf), for --group; kept free of numpy (fast --help)."""
    parts = text.split(":")
    bad = argparse.ArgumentTypeError(
        f"expected N:λ with N an integer >= 1 and λ a number >= 0 or inf (e.g. 3:2), got {text!r}")
    if len(parts) != 2:
        raise bad
    try:
        n, lam = int(parts[0]), float(parts[1])
    except ValueError:
        raise bad from None
    if n < 1 or math.isnan(lam) or lam < 0:
        raise bad
    return n, lam


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("theory",
                              help="decision-aggregation theory (g(n), regret, robust rule)",
                              description=f"Decision-aggregation theory. {UNITS}.")
    p.set_defaults(_parser=p)
    sub = p.add_subparsers(dest="theory_command", metavar="WHAT", parser_class=type(p))

    t = sub.add_parser("threshold", help="g(n): majority is optimally robust for λ <= g(n)")
    t.add_argument("--n-max", type=positive_int, default=20, help="largest n (default 20)")
    _common(t, plot=True)
    t.set_defaults(func=run_threshold, _parser=t)

    r = sub.add_parser("regret", help="worst-case regret of an aggregator and its maximiser")
    r.add_argument("--n", type=positive_int, help="number of experts")
    r.add_argument("--lam", type=lam_value, help="rationality λ (inf allowed)")
    r.add_argument("--group", type=group_value, action="append", metavar="N:λ", help=GROUP_HELP)
    r.add_argument("--aggregator", choices=rule_choices(vector=True), default=MAJORITY,
                   metavar="RULE", help="a rule with a vector form f(n, λ): %(choices)s "
                   "(default %(default)s; lam-weighted is plain majority for one group)")
    _common(r)
    r.set_defaults(func=run_regret, _parser=r)

    o = sub.add_parser(ROBUST, help="the optimal robust (minimax-regret) aggregator")
    o.add_argument("--n", type=positive_int, help="number of experts")
    o.add_argument("--lam", type=lam_value, help="their rationality λ (inf allowed)")
    o.add_argument("--group", type=group_value, action="append", metavar="N:λ", help=GROUP_HELP)
    _common(o)
    o.set_defaults(func=run_robust, _parser=o)

    u = sub.add_parser("utility", help="utility of majority / omniscient under a signal structure")
    u.add_argument("--joint", required=True,
                   help="JSON rows [P(s, ω=0), P(s, ω=1)], e.g. '[[0.375, 0], [0.375, 0.25]]'")
    u.add_argument("--lam", type=lam_value, required=True,
                   help="the experts' rationality λ (inf allowed)")
    u.add_argument("--n", type=positive_int, required=True, help="number of experts")
    _common(u)
    u.set_defaults(func=run_utility, _parser=u)

    c = sub.add_parser("regret-curve", help="worst-case regret against λ, majority vs robust")
    c.add_argument("--n", type=positive_int, nargs="+", default=[1, 3, 5],
                   help="numbers of experts, one curve each (default 1 3 5)")
    c.add_argument("--lam-max", type=lam_value, default=5.0,
                   help="the curve runs from λ = 0 to this (default 5)")
    c.add_argument("--points", type=positive_int, default=51,
                   help="values of λ on the curve (default 51; each solves an LP per n)")
    _common(c, plot=True)
    c.set_defaults(func=run_curve, _parser=c)


def _common(p: argparse.ArgumentParser, *, plot: bool = False) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    if plot:
        p.add_argument("--plot", metavar="FILE.png", help="also save a plot")


def _table(title: str, columns: list[Any], rows: list[list[str]]) -> None:
    from ..clitables import print_table

    print_table(columns, rows, title=title, caption=UNITS)


MAX_N_THRESHOLD = 10_001  # g(n) costs ~13 ms per odd n here: ~1 min at the limit


def run_threshold(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..theory import threshold

    if args.n_max > MAX_N_THRESHOLD:
        raise InputError(f"--n-max {args.n_max} needs g(n) for {(args.n_max - 1) // 2} group "
                         f"sizes (~13 ms each, ~{args.n_max * 0.0065 / 60:.0f} min); the limit "
                         f"is {MAX_N_THRESHOLD} (~1 min)")

    rows = []
    with _points_bar(args.n_max, "g(n) for each n") as step:
        for n in range(1, args.n_max + 1):
            rows.append({"n": n, "g": threshold(n)})
            step()
    if args.plot:
        _plot_threshold(rows, args.plot)
    if args.json:
        emit_json(rows)
    else:
        _table("Threshold g(n): majority is optimally robust for λ <= g(n)", ["n", "g(n)"],
               [[str(r["n"]), fmt_lam(r["g"])] for r in rows])
    return 0


def _groups_or_one(args: argparse.Namespace) -> list[tuple[int, float]] | None:
    """The --group list, or None for the one-group form --n/--lam; InputError when mixed."""
    from ..errors import InputError

    if args.group:
        if args.n is not None or args.lam is not None:
            raise InputError("use either --group N:λ (repeatable) or --n N --lam λ, not both")
        return list(args.group)
    missing = [flag for flag, v in (("--n", args.n), ("--lam", args.lam)) if v is None]
    if missing:
        raise InputError(f"missing {' and '.join(missing)}: give --n N --lam λ for one group, "
                         "or --group N:λ for each group")
    return None


def _aggregator_f(name: str, n: int, lam: float) -> Any:
    from ..rules import aggregator_info

    return aggregator_info(name).f_of(n, lam)


def _group_f(name: str, groups: list[tuple[int, float]]) -> Any:
    from ..aggregators import group_aggregator_f

    return group_aggregator_f(name, [n for n, _ in groups], [lam for _, lam in groups])


def _groups_json(groups: list[tuple[int, float]]) -> list[dict[str, Any]]:
    return [{"n": n, "lam": lam} for n, lam in groups]


def _groups_title(groups: list[tuple[int, float]]) -> str:
    return ", ".join(f"{n} at λ = {fmt_lam(lam)}" for n, lam in groups)


def run_regret(args: argparse.Namespace) -> int:
    groups = _groups_or_one(args)
    if groups is not None:
        return _run_group_regret(args, groups)
    from ..theory import Group, worst_case_regret
    from ..theory.regret import check_size

    check_size((Group(args.n, args.lam),), "regret")  # a rule's own search checks itself
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


def _run_group_regret(args: argparse.Namespace, groups: list[tuple[int, float]]) -> int:
    from ..theory import group_worst_case_regret
    from ..theory.groups import validate_groups
    from ..theory.regret import check_size

    gs = validate_groups(groups)
    check_size(gs, "regret")  # a rule's own search (robust's LP) checks itself
    wc = group_worst_case_regret(_group_f(args.aggregator, groups), gs)
    doc = {"groups": _groups_json(groups), "aggregator": args.aggregator,
           "worst_regret": wc.value, "argmax": wc.argmax()}
    if args.json:
        emit_json(doc)
        return 0
    _table(f"Worst-case regret of {args.aggregator}, groups: {_groups_title(groups)}",
           ["worst regret", Column("posteriors", wrap=True), Column("P(posterior)", wrap=True),
            "μ"],
           [[f"{wc.value:.6f}", ", ".join(f"{p:.4f}" for p in wc.posteriors),
             ", ".join(f"{t:.4f}" for t in wc.probs), f"{wc.mu:.4f}"]])
    _table("Report structure at the maximiser: P(report 1 | ω) per group",
           ["group", "n", "λ", "q0", "q1"],
           [[str(i + 1), str(n), fmt_lam(lam), f"{a:.4f}", f"{b:.4f}"]
            for i, ((n, lam), a, b) in enumerate(zip(groups, wc.q0, wc.q1, strict=True))])
    return 0


def run_robust(args: argparse.Namespace) -> int:
    groups = _groups_or_one(args)
    if groups is not None:
        return _run_group_robust(args, groups)
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
        _table("Certificate", ["worst regret (upper)", "LP lower bound", "gap", MAJORITY],
               [[f"{res.worst_regret:.6f}", f"{res.lower_bound:.6f}", f"{res.gap:.1e}",
                 f"{res.majority_worst_regret:.6f}"]])
    return 0


def _run_group_robust(args: argparse.Namespace, groups: list[tuple[int, float]]) -> int:
    from ..theory import group_robust_aggregator

    res = group_robust_aggregator(groups)
    doc = {"groups": _groups_json(groups), "f": res.f.tolist(),
           "worst_regret": res.worst_regret, "lower_bound": res.lower_bound,
           "majority_worst_regret": res.majority_worst_regret,
           "lam_weighted_worst_regret": res.lam_weighted_worst_regret,
           "family_posteriors": res.family_posteriors}
    if args.json:
        emit_json(doc)
        return 0
    title = f"Optimal robust aggregator, groups: {_groups_title(groups)}"
    f = res.f
    if f.ndim == 1:
        _table(title, ["x reports of 1"] + [str(x) for x in range(f.shape[0])],
               [["f(x) = P(decide 1)"] + [f"{v:.4f}" for v in f]])
    elif f.ndim == 2:
        _table(title + " — f(x1, x2) = P(decide 1); rows x1, columns x2",
               ["x1 \\ x2"] + [str(x) for x in range(f.shape[1])],
               [[str(i)] + [f"{v:.4f}" for v in row] for i, row in enumerate(f)])
    else:
        import numpy as np

        _table(title + " — f = P(decide 1) per count vector",
               [f"x{g + 1}" for g in range(f.ndim)] + ["f(x)"],
               [[str(v) for v in idx] + [f"{f[idx]:.4f}"] for idx in np.ndindex(*f.shape)])
    _table("Certificate and comparison (worst-case regret)",
           [f"{ROBUST} (upper)", "LP lower bound", "gap", MAJORITY, LAM_WEIGHTED],
           [[f"{res.worst_regret:.6f}", f"{res.lower_bound:.6f}", f"{res.gap:.1e}",
             f"{res.majority_worst_regret:.6f}", f"{res.lam_weighted_worst_regret:.6f}"]])
    return 0


def run_utility(args: argparse.Namespace) -> int:
    from ..theory import utility_under
    from ..theory.structures import parse_joint

    cmp_ = utility_under(parse_joint(args.joint), args.lam, args.n)
    doc = {"n": cmp_.n, "lam": cmp_.lam, MAJORITY: cmp_.majority, "omniscient": cmp_.omniscient,
           "rational_omniscient": cmp_.rational_omniscient}
    if args.json:
        emit_json(doc)
    else:
        _table(f"Expected utility, n = {args.n}, λ = {fmt_lam(args.lam)}",
               [MAJORITY, "omniscient", "rational experts, omniscient"],
               [[f"{cmp_.majority:.6f}", f"{cmp_.omniscient:.6f}",
                 f"{cmp_.rational_omniscient:.6f}"]])
    return 0


def regret_curves(ns: list[int], lams: list[float], *,
                  step: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:
    """Worst-case regret of majority and of the robust rule for each n and λ (`step` is
    called after each point)."""
    from ..theory import robust_aggregator, threshold

    out = []
    for n in ns:
        for lam in lams:
            res = robust_aggregator(n, lam)
            out.append({"n": n, "lam": lam, "g": threshold(n),
                        MAJORITY: res.majority_worst_regret, ROBUST: res.worst_regret,
                        "lower_bound": res.lower_bound})
            step()
    return out


@contextmanager
def _points_bar(total: int, what: str) -> Iterator[Callable[[], None]]:
    """A bar on stderr while `total` points are computed (each solves a linear programme:
    `regret-curve --n 1 3 5` was silent for 26 s), when stderr is a terminal; it goes away
    when done. Yields the step to call after each point."""
    if not sys.stderr.isatty():
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn(what), BarColumn(bar_width=None), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                  expand=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda: bar.advance(task)


def run_curve(args: argparse.Namespace) -> int:
    import numpy as np

    lams = [float(v) for v in np.linspace(0.0, args.lam_max, args.points)]
    with _points_bar(len(args.n) * len(lams), "robust rule at each (n, λ)") as step:
        rows = regret_curves(args.n, lams, step=step)
    if args.plot:
        _plot_curves(rows, args.n, args.plot)
    if args.json:
        emit_json(rows)
    else:
        _table("Worst-case regret: majority vs optimal robust aggregator",
               ["n", "λ", MAJORITY, ROBUST],
               [[str(r["n"]), f"{r['lam']:.3f}", f"{r[MAJORITY]:.5f}", f"{r[ROBUST]:.5f}"]
                for r in rows])
    return 0


def _save(fig: Any, path: str) -> None:
    """Save a figure; a path that cannot be written is one line naming it."""
    import matplotlib.pyplot as plt

    from ..errors import InputError

    try:
        fig.savefig(path, dpi=120)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot write the plot to --plot {path}: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
    finally:
        plt.close(fig)


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
    _save(fig, path)
    plt.close(fig)


def _plot_curves(rows: list[dict[str, Any]], ns: list[int], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ns), figsize=(4.5 * len(ns), 4), squeeze=False)
    for ax, n in zip(axes[0], ns, strict=True):
        sel = [r for r in rows if r["n"] == n]
        lam = [r["lam"] for r in sel]
        ax.plot(lam, [r[MAJORITY] for r in sel], label=MAJORITY)
        ax.plot(lam, [r[ROBUST] for r in sel], "--", label=f"optimal {ROBUST}")
        g = sel[0]["g"] if sel else math.inf
        if math.isfinite(g):
            ax.axvline(g, color="gray", linestyle=":", label=f"g({n}) = {g:.3f}")
        ax.set_title(f"n = {n}")
        ax.set_xlabel("λ (ψ_λ units)")
        ax.set_ylabel("worst-case regret (±1 units)")
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
