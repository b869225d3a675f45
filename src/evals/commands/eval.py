"""`ensemble eval TASK`: sample a grid of temperatures, vote over n, report accuracy."""

from __future__ import annotations

import argparse
from typing import Any

from ensemble.cliargs import (
    add_mode_args,
    add_provider_args,
    add_run_policy_args,
    emit_json,
    fmt_lam,
    lam_value,
    mode_options,
    positive_float,
    positive_int,
    print_dry_run,
    provider_options,
    status_printer,
    temperature,
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate voting over a task (mathqa, boxball, jsonl)",
        description="Draw K samples per question and temperature (stored and resumable), then "
                    "estimate the vote's accuracy for each (t, n): exact, unbiased estimates "
                    "from the samples (box-ball: expected utility in ±1 units), with 95% "
                    "intervals for the task and for the questions run.")
    p.add_argument("task", help="mathqa | boxball | jsonl")
    add_provider_args(p, model_required=False)
    p.add_argument("--t", type=temperature, nargs="+", help="temperatures")
    p.add_argument("--n", type=positive_int, nargs="+", help="group sizes")
    m = p.add_argument_group("rules and mixed ensembles (docs/ensembles.md; λ in ψ_λ units)")
    m.add_argument("--ensemble", metavar="SPEC.json",
                   help="evaluate a mixed ensemble instead of --model/--t/--n: members (model, "
                        "api_base, n, temperature, lam or calibration), calibration, "
                        "aggregators (`ensemble eval --ensemble-schema` prints its schema)")
    m.add_argument("--ensemble-schema", action="store_true",
                   help="print the JSON schema of an --ensemble spec and exit")
    m.add_argument("--aggregator", nargs="+", default=(), metavar="NAME",
                   help="rules to score beside majority / plurality: lam-weighted, robust "
                        "(binary tasks only); they need λ: --lam or --calibration")
    m.add_argument("--lam", type=lam_value, metavar="L1",
                   help="the model's λ₁ (ψ_λ units at t = 1; λ = λ₁ / t) for --aggregator")
    m.add_argument("--calibration", metavar="PROFILE",
                   help="calibration profile (or folder) giving λ₁ for --aggregator")
    p.add_argument("--samples", type=positive_int,
                   help="samples per question and temperature (default: the largest n; draw at "
                        "least n + 1 to separate the answers' noise from the questions')")
    p.add_argument("--limit", type=positive_int, metavar="L",
                   help="run a random subset (seeded by --seed) of L questions of the task; for "
                        "boxball L scenarios of its 216 (each asks 2 questions, one per ball "
                        "colour); the intervals 'for the task' then include the variation "
                        "between questions")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the question subset (--limit) and of the bootstrap")
    p.add_argument("--data", help="data file (mathqa: test.json; jsonl: .jsonl/.csv)")
    p.add_argument("--out", help="run directory (default runs/TASK-MODEL)")
    p.add_argument("--bootstrap", type=positive_int, default=1000,
                   help="bootstrap resamples of the questions for the task's interval "
                        "(default 1000)")
    p.add_argument("--max-tokens", type=positive_int,
                   help="completion token limit per sample (default: the task's: 512 for "
                        "boxball, 1024 for mathqa and jsonl)")
    p.add_argument("--skip-invalid", action="store_true",
                   help="skip malformed data rows (counted in summary.json) instead of failing")
    p.add_argument("--open", action="store_true",
                   help="mathqa: the question without its options, the answer a number scored "
                        "by numeric equivalence (non-numeric right options skipped, counted)")
    p.add_argument("--answer", choices=("number", "math", "text"),
                   help="jsonl: the answer kind of rows without choices (default text)")
    a = p.add_argument_group("adaptive sampling (scored on the drawn samples, beside fixed n)")
    a.add_argument("--adaptive", nargs="+", choices=("bayes", "beta"), default=(),
                   help="stopping rules to score: bayes (the Bayes-optimal rule) and/or beta "
                        "(Adaptive-Consistency's)")
    a.add_argument("--max-n", type=positive_int,
                   help="the most samples the rule may use per question (default: --samples)")
    a.add_argument("--stop-cost", type=positive_float,
                   help="the bayes rule's cost of one sample in accuracy units (default 0.004)")
    add_run_policy_args(p)
    add_mode_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from ensemble._sync import run_sync
    from ensemble.errors import InputError
    from evals.runner import EvalConfig, run_eval

    if args.ensemble_schema:
        from evals.mixed import spec_schema

        emit_json(spec_schema())
        return 0
    batch, router = mode_options(args)
    if args.ensemble:
        given = [f for f, v in (("--model", args.model), ("--t", args.t), ("--n", args.n),
                                ("--aggregator", args.aggregator), ("--lam", args.lam),
                                ("--calibration", args.calibration)) if v]
        if given:
            raise InputError(f"--ensemble names the members, their n and t, and the rules: "
                             f"drop {', '.join(given)}")
    else:
        missing = [f for f, v in (("--model", args.model), ("--t", args.t), ("--n", args.n))
                   if not v]
        if missing:
            raise InputError(f"give {', '.join(missing)} (or --ensemble SPEC.json)")
        if args.lam is not None and args.calibration:
            raise InputError("give --lam or --calibration, not both")
    lam1 = args.lam
    if args.calibration:
        from ensemble.profile import CalibrationProfile

        prof = CalibrationProfile.load(args.calibration)
        if prof.lam1 is None:
            raise InputError(f"{args.calibration}: the profile has no fitted λ₁")
        lam1 = prof.lam1
    cfg = EvalConfig(task=args.task, model=args.model or "ensemble",
                     temperatures=tuple(args.t or (1.0,)),
                     ns=tuple(args.n or (1,)), samples=args.samples, limit=args.limit,
                     seed=args.seed,
                     data=args.data, out=args.out, provider=provider_options(args),
                     bootstrap=args.bootstrap, max_tokens=args.max_tokens,
                     skip_invalid=args.skip_invalid, fail_on_error=args.fail_on_error,
                     max_cost=args.max_cost, adaptive=tuple(args.adaptive),
                     max_n=args.max_n, stop_cost=args.stop_cost, dry_run=args.dry_run,
                     progress=not args.json, on_status=status_printer,
                     batch=batch, router=router, aggregators=tuple(args.aggregator),
                     lam1=lam1, open=args.open, answer=args.answer)
    if args.ensemble:
        from evals.mixed import load_spec, run_mixed

        summary = run_sync(run_mixed(load_spec(args.ensemble), cfg))
    else:
        summary = run_sync(run_eval(cfg))
    if args.json:
        emit_json(summary)
        return 0
    if cfg.dry_run:
        for doc in summary.get("members", [summary]):
            print_dry_run(doc)
        return 0
    _table(summary)
    return 0


def _table(summary: dict[str, Any]) -> None:
    from rich.console import Console

    con = Console()
    lines = mixed_table_lines(summary) if summary.get("ensemble") else table_lines(summary)
    for line in lines:
        con.print(line)
    cost = _cost_text(summary.get("cost", {}), summary["requests"],
                      summary["samples"]["from_store"])
    con.print(f"requests {summary['requests']} · "
              f"from store {summary['samples']['from_store']} of {summary['samples']['total']} · "
              f"tokens {summary['tokens']['prompt'] + summary['tokens']['completion']} · "
              f"cost {cost} · {summary['wall_time_s']:.1f} s · outputs in {summary['run_dir']}")


def _cost_text(cost: dict[str, Any], requests: int, stored: int) -> str:
    """What was spent now, and what the samples read from the store had cost."""
    def usd(x: float | None) -> str:
        return "unknown" if x is None else f"${x:.4f}"

    now = cost.get("now_usd")
    text = f"now {usd(now)}" if requests else "now $0 (no request)"
    if stored:
        text += f"; the {stored} stored samples had cost {usd(cost.get('stored_samples_usd'))}"
    return text


def _iv(ci: list[float], digits: int = 3) -> str:
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _sem(x: float) -> str:
    return "∞" if x == float("inf") else f"{x:.4f}"


def table_lines(summary: dict[str, Any]) -> list[Any]:
    """The eval's tables and notes as rich renderables: the results, the paired differences,
    and what the numbers rest on (questions, intervals, invalid replies)."""
    from rich.table import Table

    box = summary["task"] == "boxball"
    pop = summary.get("population", {})
    items, total = pop.get("items"), pop.get("total")
    unit = pop.get("unit", "questions")
    subset = items is not None and total is not None and items < total
    key = "utility" if box else "accuracy"
    prefix = "utility_" if box else ""
    by_t = {r["t"]: r["invalid_rate"] for r in summary.get("invalid_rate_by_t", [])}
    out: list[Any] = []
    table = Table(title=f"{summary['task']} · {summary['model']} · {_count_line(summary)}",
                  caption=summary["metric"])
    for col in ("t", "n", "aggregator", key, "SEM",
                "95% for the task" if subset else f"95% interval ({total} {unit})"):
        table.add_column(col, justify="right")
    if subset:
        table.add_column(f"95% for these {items}", justify="right")
    table.add_column("invalid", justify="right")
    marks: set[str] = set()
    last_t = None
    for r in summary["results"]:
        same = r.get("identical", False)
        exact_q = r.get("questions_exact", True)
        v = r[key]
        sem = r[prefix + "sem"] if box else r["sem"]
        ci = r[prefix + "ci"] if box else r["ci"]
        ciq = r[prefix + "ci_questions"] if box else r["ci_questions"]
        none_valid = by_t.get(r["t"]) == 1.0
        same = same and not none_valid  # identical because all invalid: said below instead
        if same:
            marks.add("same")
        cells = [f"{r['t']:g}" if r["t"] != last_t else "", str(r["n"]), r["aggregator"],
                 f"{v:.4f}" if not none_valid else f"{v:.4f} (no valid reply)",
                 "0 (†)" if same and sem == 0 else _sem(sem), _iv(ci)]
        if subset:
            if same:
                cells.append("exact (†)")
            elif not exact_q:
                marks.add("k=n")
                cells.append(_iv(ciq) + " ‡")
            else:
                cells.append(_iv(ciq))
        elif not exact_q:
            marks.add("k=n")
            cells[-1] += " ‡"
        inv = by_t.get(r["t"])
        cells.append("" if r["t"] == last_t or inv is None else f"{inv:.1%}")
        table.add_row(*cells, end_section=r["aggregator"] == "random-follow")
        last_t = r["t"]
    out.append(table)
    diffs = summary.get("contrasts", [])
    if diffs:
        d = Table(title="Paired differences (the same " + unit + "; "
                  + ("utility, ±1 units" if box else "accuracy") + ")")
        for col in ("difference", "aggregator", "estimate", "SEM",
                    "95% for the task" if subset else "95% interval"):
            d.add_column(col, justify="right")
        if subset:
            d.add_column(f"95% for these {items}", justify="right")
        for c in diffs:
            if c.get("kind") == "ensemble":
                what = f"n = {c['n']} − n = 1 at t = {c['t']:g}"
            else:
                what = f"t = {c['t']:g} − t = {c['vs_t']:g} at n = {c['n']}"
            val = c["utility_difference"] if box else c["difference"]
            sem = c[prefix + "sem"] if box else c["sem"]
            ci = c[prefix + "ci"] if box else c["ci"]
            row = [what, c["aggregator"], f"{val:+.4f}", _sem(sem), _iv(ci)]
            if subset:
                ciq = c[prefix + "ci_questions"] if box else c["ci_questions"]
                row.append(_iv(ciq) + ("" if c.get("questions_exact", True) else " ‡"))
            d.add_row(*row)
        out.append(d)
    adaptive = summary.get("adaptive", [])
    if adaptive:
        a = Table(title="Adaptive sampling, replayed on the drawn samples (the same random "
                        "orders of each question's samples for every row)",
                  caption=adaptive[0]["scored"])
        for col in ("t", "rule", "samples / question", "accuracy", "95% interval",
                    f"fixed n = {adaptive[0]['n']}", "difference (95%)", "saving"):
            a.add_column(col, justify="right")
        for r in adaptive:
            vs = r["vs_fixed"]
            a.add_row(f"{r['t']:g}", f"{r['stop']} (max {r['n']})",
                      f"{r['mean_samples']:.2f} {_iv(r['mean_samples_ci'], 2)}",
                      f"{r['accuracy']:.4f}", _iv(r["ci"]), f"{vs['accuracy']:.4f}",
                      f"{vs['difference']:+.4f} {_iv(vs['difference_ci'])}",
                      f"{r['saving']:.0%}")
        out.append(a)
    notes = []
    if subset:
        notes.append(f"{items} of the task's {total} {unit}, drawn at random (--limit "
                     f"{pop.get('limit')}, --seed {summary.get('seed')}): “for the task” "
                     f"includes the variation between {unit}; “for these {items}” only the "
                     "sampling noise of the answers.")
    if "same" in marks:
        ts = sorted({r["t"] for r in summary["results"]
                     if r.get("identical") and by_t.get(r["t"]) != 1.0})
        notes.append("† " + ", ".join(f"t = {t:g}" for t in ts) + ": all samples of each "
                     "question identical (no sampling noise to measure); "
                     + ("the interval for the task comes from the choice of " + unit + " alone."
                        if subset else "the value is exact for these " + unit + "."))
    if "k=n" in marks:
        notes.append(f"‡ as many samples per question ({summary.get('samples_per_question')}) "
                     "as the group size: the answers' noise cannot be separated from the "
                     "variation between questions, so the wider interval for the task (without "
                     "the finite-population correction) is shown; draw more with --samples.")
    if summary.get("invalid_rate", 0) > 0:
        notes.append(f"invalid replies {summary['invalid_rate']:.1%}: "
                     + summary.get("invalid_policy", ""))
    notes.append("random-follow (follow one expert) does not depend on n: one row per t.")
    notes.extend(summary.get("notes", []))  # what the sampler noticed (e.g. n not supported)
    out.extend(f"[dim]{n}[/]" for n in notes)
    out.extend(f"[bold yellow]warning:[/] {w}" for w in summary.get("warnings", []))
    return out


def mixed_table_lines(summary: dict[str, Any]) -> list[Any]:
    """A mixed ensemble's tables: the ensemble under each rule, each member alone, each rule
    minus majority / plurality on the same samples, and the ensemble under each rule minus
    its best member alone."""
    from rich.table import Table

    box = summary["task"] == "boxball"
    key = "utility" if box else "accuracy"
    pre = "utility_" if box else ""
    ens = summary["ensemble"]
    members = Table(title=f"members ({ens['units']})")
    for col in ("member", "model", "api_base", "t", "n", "λ", "λ from", "samples"):
        members.add_column(col)
    for m in ens["members"]:
        lam = "unknown" if m["lam"] is None else fmt_lam(m["lam"])
        members.add_row(m["label"], m["model"], m["api_base"] or "", f"{m['temperature']:g}",
                        str(m["n"]), lam, m["lam_source"] or "", str(m["samples"]))
    res = Table(title=f"{summary['task']} · {summary['model']} · {_count_line(summary)}",
                caption=summary["metric"])
    for col in ("who", "t", "n", "aggregator", key, "SEM", "95% for the task",
                "95% for these"):
        res.add_column(col, justify="right")
    for r in summary["results"]:
        res.add_row(r.get("member") or "", "" if r["t"] is None else f"{r['t']:g}", str(r["n"]),
                    r["aggregator"], f"{r[key]:.4f}", _sem(r[pre + "sem"]), _iv(r[pre + "ci"]),
                    _iv(r[pre + "ci_questions"]),
                    end_section=r.get("member") == "ensemble"
                    and r is [x for x in summary["results"] if x.get("member") == "ensemble"][-1])
    out: list[Any] = [members, res]
    if summary.get("contrasts"):
        d = Table(title="Paired differences (the ensemble's same samples; "
                  + ("utility, ±1 units" if box else "accuracy") + ")")
        for col in ("difference", "estimate", "SEM", "95% for the task", "95% for these"):
            d.add_column(col, justify="right")
        for c in summary["contrasts"]:
            what = (f"ensemble {c['aggregator']} − {c['vs_member']} alone"
                    if c.get("kind") == "vs-best-member"
                    else f"{c['aggregator']} − {c['vs_aggregator']}")
            d.add_row(what,
                      f"{c[pre + 'difference' if box else 'difference']:+.4f}",
                      _sem(c[pre + "sem"]), _iv(c[pre + "ci"]), _iv(c[pre + "ci_questions"]))
        out.append(d)
    out.append(f"[dim]{ens['assumption']}[/]")
    out.extend(f"[bold yellow]warning:[/] {w}" for w in summary.get("warnings", []))
    return out


def _count_line(summary: dict[str, Any]) -> str:
    """How many questions, of how many, and why."""
    pop = summary.get("population", {})
    items, total, unit = pop.get("items"), pop.get("total"), pop.get("unit", "questions")
    k = summary.get("samples_per_question")
    text = (f"{items} of {total} {unit} (--limit {pop.get('limit')})" if items < total
            else f"all {items} {unit}")
    skipped = summary.get("data", {}).get("skipped")
    if skipped:
        text += f", {len(skipped)} malformed data rows skipped (--skip-invalid)"
    return text + f" · {k} samples each"
