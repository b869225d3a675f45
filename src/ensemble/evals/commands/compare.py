"""`ensemble compare RUN_A RUN_B`: two eval runs on their shared questions, paired intervals."""

from __future__ import annotations

import argparse
from typing import Any

from ensemble.cliargs import emit_json
from ensemble.rules import is_baseline


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare", help="compare two eval runs (is B better than A?)",
        description="For each cell two `ensemble eval` runs share (one model: each (t, n, "
                    "rule); two mixed ensembles: the ensemble under each rule and each member "
                    "alone): each run's accuracy (box-ball: utility, ±1 units) on their shared "
                    "questions and the difference B − A, with paired 95% intervals for the "
                    "task and for the shared questions. Runs are read from their folders "
                    "(summary.json, questions.jsonl, samples.jsonl); nothing is sampled.")
    p.add_argument("run_a", metavar="RUN_A", help="run folder of `ensemble eval` (baseline)")
    p.add_argument("run_b", metavar="RUN_B", help="run folder to compare against it")
    p.add_argument("--bootstrap", type=int, default=1000,
                   help="bootstrap resamples of the shared questions (default 1000, at least 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--json", action="store_true",
                   help="print the comparison as one JSON document on stdout")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from ensemble.evals.compare import compare_runs
    from ensemble.evals.intervals import check_bootstrap
    from ensemble.evals.rundir import read_run

    check_bootstrap(args.bootstrap)  # before the runs are read
    doc = compare_runs(read_run(args.run_a, kinds=("eval",), votes=False),
                       read_run(args.run_b, kinds=("eval",), votes=False),
                       reps=args.bootstrap, seed=args.seed)
    if args.json:
        emit_json(doc)
        return 0
    from ensemble.clitables import console

    con = console()
    for item in table_lines(doc, width=con.width):
        con.print(item)
    return 0


def _cells(doc: dict[str, Any], r: dict[str, Any], *, last: Any) -> list[str]:
    """The row's head: a mixed ensemble's member (or "ensemble"), else t; n; the rule."""
    if doc.get("mixed"):
        who = r["member"]
        n = str(r["n"]) + (f"/{r['n_b']}" if r.get("n_b") is not None else "")
        return [who, "" if r["t"] is None else f"{r['t']:g}", n, r["aggregator"]]
    return [f"{r['t']:g}" if r["t"] != last else "", str(r["n"]), r["aggregator"]]


def table_lines(doc: dict[str, Any], *, width: int = 80) -> list[Any]:
    """The comparison as a table no wider than `width` (no number cut) and its notes."""
    from ensemble.clitables import Column, dropped_note, fit_table

    box = "utility_diff" in doc["results"][0]
    sh = doc["shared"]
    items, unit, total = sh["items"], sh["unit"], sh["total"]
    subset = total is None or items < total
    pre = "utility_" if box else ""
    metric = "utility" if box else "accuracy"
    head = ([Column("who", justify="left")] if doc.get("mixed") else []) + [
        Column("t"), Column("n"), Column("rule")]
    cols = [*head, Column(f"A {metric}", drop=3), Column(f"B {metric}", drop=4),
            Column("B − A"), Column("SEM", drop=2),
            Column("95% for the task" if subset else f"95% ({items} {unit})")]
    if subset:
        cols.append(Column(f"95% for these {items}", drop=1))
    rows, sections = [], []
    last = None
    for r in doc["results"]:
        a, b, d = (r[pre + "a"], r[pre + "b"], r[pre + "diff"])
        sem, ci, ciq = r[pre + "sem"], r[pre + "ci"], r[pre + "ci_questions"]
        row = [*_cells(doc, r, last=last), f"{a:.4f}", f"{b:.4f}", f"{d:+.4f}",
               "∞" if sem == float("inf") else f"{sem:.4f}", f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"]
        if subset:
            row.append(f"[{ciq[0]:+.3f}, {ciq[1]:+.3f}]"
                       + ("" if r.get("questions_exact", True) else " ‡"))
        rows.append(row)
        sections.append(is_baseline(r["aggregator"]) or bool(
            doc.get("mixed") and r.get("member") == "ensemble"
            and r is [x for x in doc["results"] if x.get("member") == "ensemble"][-1]))
        last = r["t"]
    title = (f"{doc['task']}: B − A on {items} shared {unit} (A {sh['of_a']}, B {sh['of_b']}"
             + (f", task {total})" if total else ")"))
    caption = (f"A = {doc['a']['model']} ({doc['a']['run']}) · B = {doc['b']['model']} "
               f"({doc['b']['run']}) · " + ("expected utility, ±1 units" if box else "accuracy"))
    table, dropped = fit_table(cols, rows, width=width, title=title, caption=caption,
                               sections=sections)
    out: list[Any] = [table]
    note = dropped_note(dropped, width)
    if note:
        out.append(note)
    if subset:
        out.append(f"[dim]“for the task” treats the {items} shared {unit} as a random subset of "
                   f"the task and includes the variation between them; “for these {items}” "
                   "only the two runs' answer noise.[/]")
    if any(not r.get("questions_exact", True) for r in doc["results"]):
        out.append("[dim]‡ as many samples as the group size, or sampled answers (t > 0) "
                   "identical within every question: the answers' noise cannot be separated "
                   "from the questions'; the wider interval for the task is shown.[/]")
    if doc.get("mixed"):
        out.append("[dim]who: the ensemble under each rule, and each member alone at its n "
                   "(members matched by label; n/m: the two ensembles' total votes).[/]")
    out.append("[dim]A difference whose interval excludes 0 is significant at the 5% level; "
               "many cells make some of them so by chance.[/]")
    return out
