"""`ensemble eval TASK`: sample a grid of temperatures, vote over n, report accuracy."""

from __future__ import annotations

import argparse
from typing import Any

from ._args import (
    add_provider_args,
    add_run_policy_args,
    positive_int,
    provider_options,
    status_printer,
    temperature,
)
from ._output import emit_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate voting over a task (mathqa, boxball, jsonl)",
        description="Draw K samples per question and temperature (stored and resumable), then "
                    "estimate the vote's accuracy for each (t, n) by bootstrap. Box-ball "
                    "utility is exact, in ±1 units.")
    p.add_argument("task", help="mathqa | boxball | jsonl")
    add_provider_args(p)
    p.add_argument("--t", type=temperature, nargs="+", required=True, help="temperatures")
    p.add_argument("--n", type=positive_int, nargs="+", required=True, help="group sizes")
    p.add_argument("--samples", type=positive_int, help="samples per question (default: max n)")
    p.add_argument("--limit", type=positive_int, help="random subset of questions (scenarios "
                                                      "for boxball)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the question subset, the bootstrap and the tie-breaks")
    p.add_argument("--data", help="data file (mathqa: test.json; jsonl: .jsonl/.csv)")
    p.add_argument("--out", help="run directory (default runs/TASK-MODEL)")
    p.add_argument("--bootstrap", type=positive_int, default=1000,
                   help="bootstrap repetitions (default 1000, as in the paper)")
    p.add_argument("--max-tokens", type=positive_int,
                   help="completion token limit per sample (default: the task's: 512 for "
                        "boxball, 1024 for mathqa and jsonl)")
    p.add_argument("--skip-invalid", action="store_true",
                   help="skip malformed data rows (counted in summary.json) instead of failing")
    add_run_policy_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from evals.runner import EvalConfig, run_eval

    from .._sync import run_sync

    cfg = EvalConfig(task=args.task, model=args.model, temperatures=tuple(args.t),
                     ns=tuple(args.n), samples=args.samples, limit=args.limit, seed=args.seed,
                     data=args.data, out=args.out, provider=provider_options(args),
                     bootstrap=args.bootstrap, max_tokens=args.max_tokens,
                     skip_invalid=args.skip_invalid, fail_on_error=args.fail_on_error,
                     max_cost=args.max_cost, progress=not args.json, on_status=status_printer)
    summary = run_sync(run_eval(cfg))
    if args.json:
        emit_json(summary)
        return 0
    _table(summary)
    return 0


def _table(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    box = summary["task"] == "boxball"
    table = Table(title=f"{summary['task']} · {summary['model']}", caption=summary["metric"])
    for col in ("t", "n", "aggregator", "utility" if box else "accuracy", "SEM", "95% interval"):
        table.add_column(col, justify="right")
    for r in summary["results"]:
        v, s, ci = ((r["utility"], r["utility_sem"], [2 * c - 1 for c in r["ci"]]) if box
                    else (r["accuracy"], r["sem"], r["ci"]))
        table.add_row(f"{r['t']:g}", str(r["n"]), r["aggregator"], f"{v:.4f}", f"{s:.4f}",
                      f"[{ci[0]:.3f}, {ci[1]:.3f}]")
    con = Console()
    con.print(table)
    cost = "unknown" if summary["cost_usd"] is None else f"${summary['cost_usd']:.4f}"
    for c in summary.get("contrasts", []):
        if c["aggregator"] == "plurality":
            con.print(f"n = {c['n']}: t = {c['t']:g} vs {c['vs_t']:g}: "
                      f"{c['difference']:+.4f} ± {c['sem']:.4f} (paired SEM)")
    skipped = summary.get("data", {}).get("skipped")
    if skipped:
        con.print(f"[yellow]skipped {len(skipped)} malformed data rows (see summary.json)[/]")
    con.print(f"invalid answers {summary['invalid_rate']:.1%} · requests {summary['requests']} · "
              f"from store {summary['samples']['from_store']} of {summary['samples']['total']} · "
              f"tokens {summary['tokens']['prompt'] + summary['tokens']['completion']} · "
              f"cost {cost} · {summary['wall_time_s']:.1f} s · outputs in {summary['run_dir']}")
