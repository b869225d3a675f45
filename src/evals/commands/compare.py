"""`ensemble compare RUN_A RUN_B`: two eval runs on their shared questions, paired intervals."""

from __future__ import annotations

import argparse
from typing import Any

from ensemble.cliargs import emit_json, positive_int


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare", help="compare two eval runs (is B better than A?)",
        description="For each (t, n, aggregator) cell two `ensemble eval` runs share: each "
                    "run's accuracy (box-ball: utility, ±1 units) on their shared questions and "
                    "the difference B − A, with paired 95% intervals for the task and for the "
                    "shared questions. Runs are read from their folders (summary.json, "
                    "questions.jsonl, samples.jsonl); nothing is sampled.")
    p.add_argument("run_a", metavar="RUN_A", help="run folder of `ensemble eval` (baseline)")
    p.add_argument("run_b", metavar="RUN_B", help="run folder to compare against it")
    p.add_argument("--bootstrap", type=positive_int, default=1000,
                   help="bootstrap resamples of the shared questions (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from evals.compare import compare_runs, load_run

    doc = compare_runs(load_run(args.run_a), load_run(args.run_b), reps=args.bootstrap,
                       seed=args.seed)
    if args.json:
        emit_json(doc)
        return 0
    from rich.console import Console

    con = Console()
    for item in table_lines(doc):
        con.print(item)
    return 0


def table_lines(doc: dict[str, Any]) -> list[Any]:
    """The comparison as a rich table and its notes."""
    from rich.table import Table

    box = doc["task"] == "boxball"
    sh = doc["shared"]
    items, unit, total = sh["items"], sh["unit"], sh["total"]
    subset = total is None or items < total
    pre = "utility_" if box else ""
    metric = "utility" if box else "accuracy"
    table = Table(title=f"{doc['task']}: B − A on {items} shared {unit} "
                        f"(A {sh['of_a']}, B {sh['of_b']}"
                        + (f", task {total})" if total else ")"),
                  caption=f"A = {doc['a']['model']} ({doc['a']['run']}) · "
                          f"B = {doc['b']['model']} ({doc['b']['run']}) · "
                          + ("expected utility, ±1 units" if box else "accuracy"))
    for col in ("t", "n", "aggregator", f"A {metric}", f"B {metric}", "B − A", "SEM",
                "95% for the task" if subset else f"95% interval ({items} {unit})"):
        table.add_column(col, justify="right")
    if subset:
        table.add_column(f"95% for these {items}", justify="right")
    last = None
    for r in doc["results"]:
        a, b, d = (r[pre + "a"], r[pre + "b"], r[pre + "diff"])
        sem, ci, ciq = r[pre + "sem"], r[pre + "ci"], r[pre + "ci_questions"]
        row = [f"{r['t']:g}" if r["t"] != last else "", str(r["n"]), r["aggregator"],
               f"{a:.4f}", f"{b:.4f}", f"{d:+.4f}", f"{sem:.4f}",
               f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"]
        if subset:
            row.append(f"[{ciq[0]:+.3f}, {ciq[1]:+.3f}]"
                       + ("" if r.get("questions_exact", True) else " ‡"))
        table.add_row(*row, end_section=r["aggregator"] == "random-follow")
        last = r["t"]
    out: list[Any] = [table]
    if subset:
        out.append(f"[dim]“for the task” treats the {items} shared {unit} as a random subset of "
                   f"the task and includes the variation between them; “for these {items}” "
                   "only the two runs' answer noise.[/]")
    if any(not r.get("questions_exact", True) for r in doc["results"]):
        out.append("[dim]‡ as many samples as the group size: the answers' noise cannot be "
                   "separated from the questions'; the wider interval for the task is shown.[/]")
    out.append("[dim]A difference whose interval excludes 0 is significant at the 5% level; "
               "many cells make some of them so by chance.[/]")
    return out
