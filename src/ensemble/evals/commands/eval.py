"""`ensemble eval TASK`: sample a grid of temperatures, vote over n, report accuracy."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

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
    rule_choices,
    status_printer,
    stop_choices,
    temperature,
)
from ensemble.rules import baseline, is_baseline
from ensemble.wording import counted

if TYPE_CHECKING:
    from ensemble.evals.schemas import (
        ContrastRow,
        CostSummary,
        EvalSummary,
        ResultRow,
        Tokens,
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate voting over a task (mathqa, boxball, jsonl, a task file)",
        description="Draw K samples per question and temperature (stored and resumable), then "
                    "estimate the vote's accuracy for each (t, n): exact, unbiased estimates "
                    "from the samples (box-ball: expected utility in ±1 units), with 95% "
                    "intervals for the task and for the questions run.")
    p.add_argument("task", nargs="?",
                   help="mathqa | boxball | jsonl | path/to/task.yaml (a declarative task "
                        "file, docs/tasks.md; may come from --spec instead)")
    add_provider_args(p, model_required=False)
    p.add_argument("--t", type=temperature, nargs="+", help="temperatures")
    p.add_argument("--n", type=positive_int, nargs="+", help="group sizes")
    p.add_argument("--spec", metavar="FILE",
                   help="the run from a spec file instead of --model/--t: task, members (one "
                        "model at several temperatures with n at the top, or members with "
                        "their own n voting together), samples, rules, failure policy; flags "
                        "given replace the file's values; a run folder (RUN or RUN/spec.json, "
                        "which every run writes) repeats that run there (`ensemble schema "
                        "run-spec`; docs/evals.md)")
    m = p.add_argument_group("rules and mixed ensembles (docs/ensembles.md; λ in ψ_λ units)")
    m.add_argument("--ensemble", metavar="SPEC.json",
                   help="the same as --spec (a mixed ensemble's spec: members with model, "
                        "api_base, n, temperature, lam or calibration; calibration; "
                        "aggregators)")
    m.add_argument("--ensemble-schema", action="store_true",
                   help="print the JSON schema of a spec and exit")
    m.add_argument("--aggregator", nargs="+", default=(), metavar="NAME",
                   choices=rule_choices(scorable=True),
                   help="rules to score beside the main vote, of %(choices)s (binary ones on "
                        "binary tasks only); those that weigh votes by λ need --lam or "
                        "--calibration")
    m.add_argument("--lam", type=lam_value, metavar="L1",
                   help="the model's λ₁ (ψ_λ units at t = 1; λ = λ₁ / t) for --aggregator")
    m.add_argument("--calibration", metavar="PROFILE",
                   help="calibration profile (or folder) giving λ₁ for --aggregator")
    p.add_argument("--samples", type=positive_int,
                   help="samples per question and temperature (default: the largest n; draw at "
                        "least n + 1 to separate the answers' noise from the questions')")
    p.add_argument("--limit", type=positive_int, metavar="L",
                   help="run a random subset (seeded by --seed) of L questions of the task; for "
                        "boxball L scenarios of its 216 (each asks a question per ball colour it "
                        "can show, 1 or 2: 400 in all); the intervals 'for the task' then "
                        "include the variation between questions")
    p.add_argument("--seed", type=int,
                   help="seed of the question subset (--limit) and of the bootstrap "
                        "(default 0)")
    p.add_argument("--data", help="data file (mathqa: test.json; jsonl: .jsonl/.csv)")
    p.add_argument("--out", help="run folder (default runs/TASK-MODEL, with -DATA for a --data "
                                 "file and @ENDPOINT for an --api-base, e.g. runs/boxball-"
                                 "openai-sim-expert@127.0.0.1-8000-v1: the same command "
                                 "finds it again and resumes there)")
    p.add_argument("--bootstrap", type=int,
                   help="bootstrap resamples of the questions for the task's interval "
                        "(default 1000, at least 100)")
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
    a.add_argument("--adaptive", nargs="+", choices=stop_choices(), default=(), metavar="RULE",
                   help="stopping rules to score, of %(choices)s")
    a.add_argument("--max-n", type=positive_int,
                   help="the most samples the rule may use per question (default: --samples)")
    a.add_argument("--stop-cost", type=positive_float,
                   help="the cost of one sample in accuracy units, for the rules that take one "
                        "(bayes: default 0.004)")
    add_run_policy_args(p)
    add_mode_args(p)
    p.add_argument("--json", action="store_true",
                   help="print the summary (summary.json's document; `ensemble schema "
                        "eval-summary`) on stdout instead of the tables, and no progress bar")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from ensemble._sync import run_sync
    from ensemble.evals.runner import RunOptions, estimate_run, run_eval
    from ensemble.evals.schemas import dump

    if args.ensemble_schema:
        from ensemble.evals.spec import spec_schema

        emit_json(spec_schema())
        return 0
    batch, router = mode_options(args)
    spec, out = _spec(args)
    options = RunOptions(provider=provider_options(args), out=out, dry_run=args.dry_run,
                         progress=not args.json, on_status=status_printer, batch=batch,
                         router=router, skip_invalid=args.skip_invalid)
    if options.dry_run:
        doc = estimate_run(spec, options)
        if args.json:
            emit_json(doc)
        else:
            for member in doc.get("members", [doc]):
                print_dry_run(member)
        return 0
    summary = run_sync(run_eval(spec, options))
    if args.json:
        emit_json(dump(summary))
        return 0
    _table(summary)
    return 0


def _spec(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The run spec of the command line (`evals.spec.command_spec`: a spec file with the flags
    given replacing its values, or the flags alone) and the run folder (--out; a spec read
    from a run folder runs there)."""
    from ensemble.errors import InputError
    from ensemble.evals.spec import command_spec, spec_folder

    if args.spec and args.ensemble:
        raise InputError("give --spec or --ensemble, not both (they read the same spec)")
    if args.lam is not None and args.calibration:
        raise InputError("give --lam or --calibration, not both")
    path = args.spec or args.ensemble
    given = {"task": args.task, "n": args.n, "samples": args.samples,
             "aggregators": list(args.aggregator) or None, "lam1": args.lam,
             "calibration": [args.calibration] if args.calibration else None,
             "limit": args.limit, "seed": args.seed, "data": args.data,
             "open": True if args.open else None, "answer": args.answer,
             "max_tokens": args.max_tokens, "bootstrap": args.bootstrap,
             "adaptive": list(args.adaptive) or None, "max_n": args.max_n,
             "stop_cost": args.stop_cost, "fail_on_error": args.fail_on_error,
             "max_cost": args.max_cost}
    spec = command_spec(given, path=path, flag="--spec" if args.spec else "--ensemble",
                        model=args.model, temperatures=args.t, api_base=args.api_base)
    folder = spec_folder(path) if path and not args.out else None
    return spec, args.out or (str(folder) if folder else None)


def _title(summary: EvalSummary) -> str:
    """The task as people name it (a task file's name, not the registered "taskfile")."""
    return summary.title or summary.task


def _table(summary: EvalSummary) -> None:
    from ensemble.clitables import console

    con = console()
    lines = (mixed_table_lines(summary, width=con.width) if summary.ensemble
             else table_lines(summary, width=con.width))
    for line in lines:
        con.print(line)
    samples = summary.samples
    batches = samples.from_batches or 0
    cost = _cost_text(summary.cost, summary.requests + batches, samples.from_store or 0)
    con.print(f"requests {summary.requests} · "
              + (f"collected from batches {batches} · " if batches else "")
              + f"from store {samples.from_store} of {samples.total} · "
              + (f"shared {samples.shared} · " if samples.shared else "")
              + f"tokens {_tokens_text(summary)} · "
              f"cost {cost} · {summary.wall_time_s:.1f} s")
    # the folder on a line of its own, whole: folded into the line above at 80 columns it
    # began a line with "· outputs in" and could break the path
    con.print(f"outputs in {summary.run_dir}", soft_wrap=True, highlight=False)


def _tokens_text(summary: EvalSummary) -> str:
    """The tokens this run's requests paid for, and those of the samples behind the results
    where they differ (samples read from the store, or shared by questions with one prompt)."""
    def tokens(t: Tokens | None) -> str:
        if t is None or (t.prompt is None and t.completion is None):
            return "unknown"
        if t.prompt is None or t.completion is None:  # one part unknown, not 0
            known, what, other = ((t.completion, "completion", "prompt") if t.prompt is None
                                  else (t.prompt, "prompt", "completion"))
            return f"{known} {what} ({other} unknown)"
        return str(t.prompt + t.completion)

    paid, used = tokens(summary.tokens), tokens(summary.tokens_samples)
    if summary.tokens_samples is not None and used != paid:
        paid += f" now (the samples used: {used})"
    return paid


def _cost_text(cost: CostSummary, requests: int, stored: int) -> str:
    """What was spent now, and what the samples read from the store had cost."""
    def usd(x: float | None) -> str:
        return "unknown" if x is None else f"${x:.4f}"

    text = f"now {usd(cost.now_usd)}" if requests else "now $0 (no request)"
    if cost.recorded_usd is not None:
        # a replay pays nothing: its replies' cost is what was recorded, said as such
        text = f"now $0 (a replay: its replies had cost {usd(cost.recorded_usd)} when recorded)"
    if stored:
        text += f"; the {stored} stored samples had cost {usd(cost.stored_samples_usd)}"
    return text


def _iv(ci: list[float], digits: int = 3) -> str:
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _sem(x: float) -> str:
    return "∞" if x == float("inf") else f"{x:.4f}"


def _on(box: bool, row: ResultRow | ContrastRow) -> tuple[float, list[float], list[float]]:
    """A row's SEM and its two intervals on the table's scale: utility (±1 units) for the
    box-ball task, else accuracy."""
    if box:
        return (row.utility_sem or 0.0, row.utility_ci or row.ci,
                row.utility_ci_questions or row.ci_questions)
    return row.sem, row.ci, row.ci_questions


def table_lines(summary: EvalSummary, *, width: int = 80) -> list[Any]:
    """The eval's tables and notes as rich renderables, no wider than `width` (no number
    cut): the results, the paired differences, adaptive sampling, and what the numbers rest on
    (questions, intervals, invalid replies)."""
    marks: set[str] = set()
    results, dropped = _results_table(summary, width, marks)
    out: list[Any] = [results]
    diffs = _diffs_table(summary, width, dropped)
    if diffs is not None:
        out.append(diffs)
    adaptive = _adaptive_table(summary, width, dropped)
    if adaptive is not None:
        out.append(adaptive)
    from ensemble.clitables import dropped_note

    note = dropped_note(sorted(set(dropped)), width)
    notes = ([note] if note else []) + _notes(summary, marks)
    out.extend(notes)
    out.extend(f"[bold yellow]warning:[/] {w}" for w in summary.warnings)
    return out


def _scale(summary: EvalSummary) -> tuple[bool, int, int, str, bool]:
    """(utility metric, items, task's items, unit, a random subset)."""
    pop = summary.population
    return summary.layout.utility, pop.items, pop.total, pop.unit, pop.items < pop.total


def _results_table(summary: EvalSummary, width: int, marks: set[str]
                   ) -> tuple[Any, list[str]]:
    from ensemble.clitables import Column, fit_table

    box, items, total, unit, subset = _scale(summary)
    key = "utility" if box else "accuracy"
    by_t = {r.t: r.invalid_rate for r in summary.invalid_rate_by_t}
    cols = [Column("t"), Column("n"), Column("aggregator"), Column(key), Column("SEM", drop=2),
            Column("95% for the task" if subset else f"95% interval ({total} {unit})")]
    if subset:
        cols.append(Column(f"95% for these {items}", drop=1))
    cols.append(Column("invalid", drop=3))
    rows, sections = [], []
    last_t = None
    for r in summary.results:
        exact_q = r.questions_exact
        sem, ci, ciq = _on(box, r)
        value = (r.utility or 0.0) if box else r.accuracy
        none_valid = by_t.get(r.t) == 1.0 if r.t is not None else False
        same = r.identical and not none_valid  # all invalid: said below
        if same:
            marks.add("same")
        cells = ["" if r.t == last_t or r.t is None else f"{r.t:g}", str(r.n), r.aggregator,
                 f"{value:.4f}" if not none_valid else f"{value:.4f} (no valid reply)",
                 "0 (†)" if same and sem == 0 else _sem(sem), _iv(ci)]
        if not exact_q and not same and not none_valid:
            marks.add("k=n" if r.n >= summary.samples_per_question else "agree")
        if subset:
            cells.append("exact (†)" if same else _iv(ciq) + ("" if exact_q else " ‡"))
        elif not exact_q:
            cells[-1] += " ‡"
        inv = by_t.get(r.t) if r.t is not None else None
        cells.append("" if r.t == last_t or inv is None else f"{inv:.1%}")
        rows.append(cells)
        sections.append(is_baseline(r.aggregator))
        last_t = r.t
    return fit_table(cols, rows, width=width, sections=sections,
                     title=f"{_title(summary)} · {summary.model} · {_count_line(summary)}",
                     caption=summary.metric)


def _diffs_table(summary: EvalSummary, width: int, dropped: list[str]) -> Any:
    from ensemble.clitables import Column, fit_table

    diffs = summary.contrasts
    if not diffs:
        return None
    box, items, _, unit, subset = _scale(summary)
    cols = [Column("difference", wrap=True), Column("aggregator"), Column("estimate"),
            Column("SEM", drop=2), Column("95% for the task" if subset else "95% interval")]
    if subset:
        cols.append(Column(f"95% for these {items}", drop=1))
    from ensemble.evals.outputs import contrast_text

    rows = []
    for c in diffs:
        sem, ci, ciq = _on(box, c)
        val = (c.utility_difference or 0.0) if box else c.difference
        row = [contrast_text(c), c.aggregator, f"{val:+.4f}", _sem(sem), _iv(ci)]
        if subset:
            row.append(_iv(ciq) + ("" if c.questions_exact else " ‡"))
        rows.append(row)
    table, gone = fit_table(cols, rows, width=width,
                            title="Paired differences (the same " + unit + "; "
                            + ("utility, ±1 units" if box else "accuracy") + ")")
    dropped.extend(gone)
    return table


def _adaptive_table(summary: EvalSummary, width: int, dropped: list[str]) -> Any:
    from ensemble.clitables import Column, fit_table

    adaptive = summary.adaptive
    if not adaptive:
        return None
    cols = [Column("t"), Column("rule"), Column("samples / question"), Column("accuracy"),
            Column("95% interval", drop=1), Column(f"fixed n = {adaptive[0].n}", drop=2),
            Column("difference (95%)", drop=3), Column("saving"), Column("$ / question", drop=4)]
    rows = []
    votes = len({r.aggregator for r in adaptive}) > 1  # a soft rule's rows beside the vote's
    for r in adaptive:
        vs = r.vs_fixed
        cost = r.mean_cost_usd
        rule = f"{r.stop} (max {r.n})" + (f", {r.aggregator} vote" if votes else "")
        rows.append(["—" if r.t is None else f"{r.t:g}", rule,
                     f"{r.mean_samples:.2f} {_iv(r.mean_samples_ci, 2)}",
                     f"{r.accuracy:.4f}", _iv(r.ci), f"{vs.accuracy:.4f}",
                     f"{vs.difference:+.4f} {_iv(vs.difference_ci)}",
                     f"{r.saving:.0%}", "unknown" if cost is None else f"{cost:.3g}"])
    caption = ("accuracy of each row's vote of the samples used" if votes
               else adaptive[0].scored)
    table, gone = fit_table(cols, rows, width=width, caption=caption,
                            title="Adaptive sampling, replayed on the drawn samples (the same "
                                  "random orders of each question's samples for every row)")
    dropped.extend(gone)
    return table


def _notes(summary: EvalSummary, marks: set[str]) -> list[str]:
    _, items, total, unit, subset = _scale(summary)
    by_t = {r.t: r.invalid_rate for r in summary.invalid_rate_by_t}
    notes = []
    if subset:
        notes.append(f"{items} of the task's {total} {unit}, drawn at random (--limit "
                     f"{summary.population.limit}, --seed {summary.seed}): “for the task” "
                     f"includes the variation between {unit}; “for these {items}” only the "
                     "sampling noise of the answers.")
    if "same" in marks:
        ts = sorted({r.t for r in summary.results
                     if r.identical and r.t is not None and by_t.get(r.t) != 1.0})
        notes.append("† " + ", ".join(f"t = {t:g}" for t in ts) + ": all samples of each "
                     "question identical (no sampling noise to measure); "
                     + ("the interval for the task comes from the choice of " + unit + " alone."
                        if subset else "the value is exact for these " + unit + "."))
    why = []
    if "k=n" in marks:
        why.append(f"as many samples per question ({summary.samples_per_question}) "
                   "as the group size")
    if "agree" in marks:
        why.append("sampled answers (t > 0) identical within every question, which does not "
                   "show they have no noise")
    if why:
        notes.append("‡ " + "; ".join(why) + ": the answers' noise cannot be separated from "
                     "the variation between " + unit + ", so the wider interval for the task "
                     "(without the finite-population correction) is shown; draw more with "
                     "--samples.")
    if summary.invalid_rate > 0:
        notes.append(f"invalid replies {summary.invalid_rate:.1%}: {summary.invalid_policy}")
    notes.append(f"{baseline()} (follow one expert) does not depend on n: one row per t.")
    notes.extend(summary.notes)  # what the sampler noticed (e.g. n not supported)
    return [f"[dim]{n}[/]" for n in notes]


def mixed_table_lines(summary: EvalSummary, *, width: int = 80) -> list[Any]:
    """A mixed ensemble's tables: its members, the ensemble under each rule and each member
    alone, each rule minus majority / plurality on the same samples, and the ensemble under
    each rule minus its best member alone (no wider than `width`, no number cut)."""
    from ensemble.clitables import Column, dropped_note, fit_table
    from ensemble.evals.outputs import contrast_text

    box = _scale(summary)[0]
    key = "utility" if box else "accuracy"
    ens = summary.ensemble
    assert ens is not None, "a mixed ensemble's summary names its members"
    members, gone = fit_table(
        [Column("member", justify="left"), Column("model", justify="left"),
         Column("api_base", drop=1, justify="left"), Column("t"), Column("n"), Column("λ"),
         Column("λ from", drop=2, justify="left"), Column("samples", drop=3)],
        [[m.label, m.model, m.api_base or "", f"{m.temperature:g}", str(m.n),
          "unknown" if m.lam is None else fmt_lam(m.lam), m.lam_source or "",
          str(m.samples)] for m in ens.members],
        width=width, title=f"members ({ens.units})")
    ens_rows = [r for r in summary.results if r.member == "ensemble"]
    res, gone2 = fit_table(
        [Column("who", justify="left"), Column("t"), Column("n"), Column("aggregator"),
         Column(key), Column("SEM", drop=2), Column("95% for the task"),
         Column("95% for these", drop=1)],
        [[r.member or "", "" if r.t is None else f"{r.t:g}", str(r.n), r.aggregator,
          f"{(r.utility or 0.0) if box else r.accuracy:.4f}", _sem(_on(box, r)[0]),
          _iv(_on(box, r)[1]), _iv(_on(box, r)[2])] for r in summary.results],
        width=width, sections=[bool(ens_rows) and r is ens_rows[-1] for r in summary.results],
        title=f"{_title(summary)} · {summary.model} · {_count_line(summary)}",
        caption=summary.metric)
    out: list[Any] = [members, res]
    gone += gone2
    if summary.contrasts:
        d, gone3 = fit_table(
            [Column("difference", justify="left", wrap=True), Column("estimate"),
             Column("SEM", drop=2),
             Column("95% for the task"), Column("95% for these", drop=1)],
            [[contrast_text(c), f"{(c.utility_difference or 0.0) if box else c.difference:+.4f}",
              _sem(_on(box, c)[0]), _iv(_on(box, c)[1]), _iv(_on(box, c)[2])]
             for c in summary.contrasts],
            width=width, title="Paired differences (the ensemble's same samples; "
            + ("utility, ±1 units" if box else "accuracy") + ")")
        out.append(d)
        gone += gone3
    adaptive = _adaptive_table(summary, width, gone)
    if adaptive is not None:
        out.append(adaptive)
    note = dropped_note(sorted(set(gone)), width)
    if note:
        out.append(note)
    out.append(f"[dim]{ens.assumption}[/]")
    out.extend(f"[bold yellow]warning:[/] {w}" for w in summary.warnings)
    return out


def _count_line(summary: EvalSummary) -> str:
    """How many questions, of how many, and why."""
    pop = summary.population
    k = summary.samples_per_question
    text = (f"{pop.items} of {pop.total} {pop.unit} (--limit {pop.limit})"
            if pop.items < pop.total else f"all {pop.items} {pop.unit}")
    if summary.data.skipped:
        rows = counted(len(summary.data.skipped), "malformed data row")
        text += f", {rows} skipped (--skip-invalid)"
    return text + f" · {k} sample{'s' if k != 1 else ''} each"
