"""Run an eval: sample a (question × temperature) grid once, then analyse it.

Samples live in the run directory's store (`samples.sqlite`); rerunning the same command on a
finished run makes no request and only recomputes. Outputs: summary.json (the `--json`
document of docs/evals.md: results with `ci` and `ci_questions`, contrasts, tokens, cost, wall
time), grid.csv, accuracy.png and the run records (evals/records.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.errors import InputError
from ensemble.providers.options import ProviderOptions
from ensemble.rules import RANDOM_FOLLOW
from ensemble.sampling.batch_options import BatchOptions
from ensemble.tasks import Question, Task, layout_of

from .draw import DrawMember, Drawn, DrawPolicy, draw, estimate, requests_of
from .openanswers import build_task
from .scoring import (
    ESTIMATOR,
    INVALID_WARN,
    METRIC,
    answer_codes,
    box_answer_counts,
    box_layout,
    check_aggregators,
    item_cells,
    lam_at,
    option_codes,
    run_rows,
)
from .spec import RunSpec, profile_lam1, recorded_spec, write_spec

__all__ = [
    "EvalConfig",
    "analyse",
    "config_of",
    "check_scorable",
    "finish",
    "run_facts",
    "load_task",
    "run_dir",
    "run_eval",
    "select_questions",
]


@dataclass(frozen=True)
class EvalConfig:
    """What an eval run does. `provider` holds the endpoint and its limits (the key hidden);
    `fail_on_error` and `max_cost` are the run's failure policy and spending cap
    (evals/failures.py); `on_status` receives the run's "waiting: ..." lines; `batch` (its
    `BatchOptions`) draws through the provider's Batch API, `router` (a litellm Router config
    file) spreads online requests over several deployments."""

    task: str
    model: str = ""  # a mixed ensemble (`run_mixed`) names its members instead
    temperatures: tuple[float, ...] = ()
    ns: tuple[int, ...] = ()
    samples: int | None = None
    limit: int | None = None
    seed: int = 0
    data: str | None = None
    out: str | None = None
    provider: ProviderOptions = field(default_factory=ProviderOptions)
    bootstrap: int = 1000
    max_tokens: int | None = None
    skip_invalid: bool = False
    fail_on_error: float | None = None
    max_cost: float | None = None
    adaptive: tuple[str, ...] = ()  # stopping rules to score beside fixed n (registered names)
    max_n: int | None = None  # the adaptive rules' budget (default: the samples per question)
    stop_cost: float | None = None  # the bayes rule's cost per sample (default: its own)
    dry_run: bool = False  # count requests, tokens and price; send nothing
    progress: bool = False
    on_status: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    batch: BatchOptions | None = None
    router: str | None = None
    aggregators: tuple[str, ...] = ()  # extra rules beside majority / plurality (--aggregator)
    lam1: float | None = None  # λ₁ (ψ_λ units at t = 1; λ = λ₁ / t) for lam-weighted / robust
    open: bool = False  # mathqa --open: the question without options, the answer a number
    answer: str | None = None  # jsonl --answer: the kind of rows without choices

    def k(self) -> int:
        """Samples per question and temperature (default: the largest n)."""
        return self.samples if self.samples is not None else max(self.ns)

    def validate(self) -> None:
        """Check a single-model run before any request (one InputError line)."""
        if not self.model:
            raise InputError("give the model with --model (or --ensemble SPEC.json)")
        if not self.temperatures:
            raise InputError("give at least one temperature with --t")
        if any(t < 0 for t in self.temperatures):
            raise InputError("temperatures must be >= 0")
        twice = sorted({t for t in self.temperatures if self.temperatures.count(t) > 1})
        if twice:
            raise InputError(f"--t {twice[0]:g} is given twice: each temperature is one "
                             "member of the run; give each once")
        if not self.ns or any(n < 1 for n in self.ns):
            raise InputError("group sizes --n must be integers >= 1")
        again = sorted({n for n in self.ns if self.ns.count(n) > 1})
        if again:
            raise InputError(f"--n {again[0]} is given twice: each group size is one row of "
                             "the table; give each once")
        if self.k() < max(self.ns):
            raise InputError(f"--samples {self.k()} is smaller than the largest n "
                             f"({max(self.ns)}); draw at least as many samples as the group size")
        from ensemble.stopping import stop_rule_names

        one = stop_rule_names(over_members=False)
        bad = [r for r in self.adaptive if r not in one]
        if bad:
            raise InputError(f"--adaptive takes {', '.join(one)} for one model, got {bad[0]!r}"
                             + (f" ({bad[0]} chooses among an ensemble's members: give each its "
                                "n in a --spec file)" if bad[0] in stop_rule_names() else ""))
        if self.max_n is not None and self.max_n > self.k():
            raise InputError(f"--max-n {self.max_n} is more than the samples drawn per question "
                             f"(--samples {self.k()}): draw at least --max-n samples")
        self.validate_common()

    def validate_common(self) -> None:
        """What a single-model run and a mixed ensemble both check before any request."""
        if self.bootstrap < 2:
            raise InputError("--bootstrap must be >= 2")
        if self.seed < 0:
            raise InputError(f"--seed must be an integer >= 0, got {self.seed}")
        if self.limit is not None and self.limit < 1:
            raise InputError("--limit must be >= 1")


def config_of(spec: RunSpec, **runtime: Any) -> EvalConfig:
    """The EvalConfig of a run spec (`evals.spec`), with the options of the run's machinery
    (provider limits and key, out, dry run, progress, batch, router) in `runtime`. One model's
    run takes its endpoint from its members and its λ₁ from `lam1` or its calibration
    profile; an ensemble's members are the spec's (`mixed.run_mixed`)."""
    from dataclasses import fields

    provider = runtime.pop("provider", None) or ProviderOptions()
    run = {f.name: getattr(spec, f.name) for f in fields(EvalConfig)
           if f.name in RunSpec.model_fields and getattr(spec, f.name) is not None}
    run["adaptive"] = tuple(spec.adaptive or ())
    run["aggregators"] = tuple(spec.aggregators or ())
    if spec.ensemble:
        return EvalConfig(provider=provider, **run, **runtime)
    one = spec.members[0]
    if one.api_base:
        provider = ProviderOptions.build(provider, api_base=one.api_base)
    if spec.lam1 is None and spec.calibration:
        run["lam1"] = profile_lam1(spec.calibration[0], one.model)
    return EvalConfig(model=one.model, temperatures=tuple(m.temperature for m in spec.members),
                      ns=tuple(spec.n or ()), provider=provider, **run, **runtime)


def load_task(cfg: EvalConfig) -> Task:
    """The task of a config (data, limit and seed passed to the tasks that read data)."""
    opts: dict[str, Any] = {}
    if layout_of(cfg.task).takes_data:
        opts.update(data=cfg.data, limit=cfg.limit, seed=cfg.seed, skip_invalid=cfg.skip_invalid)
    elif cfg.data is not None:
        raise InputError(f"task {cfg.task!r} takes no --data")
    return build_task(cfg.task, opts, open_answers=cfg.open, answer=cfg.answer)


def run_dir(cfg: EvalConfig) -> Path:
    """--out, or `runs/TASK[-DATA]-MODEL[@ENDPOINT]` (stable: rerunning the command resumes
    there)."""
    from .records import default_run_dir

    data = cfg.data if layout_of(cfg.task).takes_data else None
    return Path(cfg.out) if cfg.out else default_run_dir(cfg.task, cfg.model, data=data,
                                                         api_base=cfg.provider.endpoint.api_base)


def select_questions(cfg: EvalConfig, task: Task) -> list[Question]:
    """The questions of a run. A task whose layout scores groups of questions as one item
    (box-ball's scenarios) takes `limit` whole items, drawn with `seed`; other tasks apply
    `limit` themselves (`load_task`)."""
    questions = list(task.questions())
    group = task.layout.group
    if group is not None and cfg.limit is not None:
        import random

        items = sorted({q.meta[group] for q in questions})
        keep = set(random.Random(cfg.seed).sample(items, min(cfg.limit, len(items))))
        questions = [q for q in questions if q.meta[group] in keep]
    if not questions:
        raise InputError("the task has no questions")
    return questions


def check_scorable(task: Task, questions: list[Question]) -> None:
    """Every question of a task scored by accuracy needs its right answer (before any
    request)."""
    if task.layout.utility:
        return
    bad = next((q for q in questions if q.correct is None), None)
    if bad is not None:
        raise InputError(f"question {bad.id!r} has no answer: every question needs one to be "
                         "scored (field 'answer')")


def policy_of(cfg: EvalConfig) -> DrawPolicy:
    return DrawPolicy(fail_on_error=cfg.fail_on_error, max_cost=cfg.max_cost,
                      progress=cfg.progress, on_status=cfg.on_status, batch=cfg.batch,
                      router=cfg.router)


async def run_eval(cfg: EvalConfig) -> dict[str, Any]:
    """Draw what is missing, score every cell, write the outputs; return the summary."""
    cfg.validate()
    task = load_task(cfg)
    questions = select_questions(cfg, task)
    check_scorable(task, questions)
    if cfg.aggregators:  # refused before any request when a rule cannot apply
        check_aggregators(list(cfg.aggregators), binary=all(len(q.choices) == 2
                                                            for q in questions),
                          n_options=max(len(q.choices) for q in questions), lams=[cfg.lam1],
                          where="--aggregator", utility=task.layout.utility)
    out = run_dir(cfg)
    members = [DrawMember(cfg.model, t, cfg.k(), cfg.provider) for t in cfg.temperatures]
    build = requests_of(task, max_tokens=cfg.max_tokens)
    if cfg.dry_run:
        (doc,) = estimate(task, questions, members, out=out, build=build)
        return {"task": cfg.task, "questions": len(questions),
                "temperatures": cfg.temperatures, **doc}
    from .rundir import claim_run_dir

    claim_run_dir(out, kind="eval", task=cfg.task, model=cfg.model)
    write_spec(out, recorded_spec(cfg))
    drawn = await draw(task, questions, members, out=out, policy=policy_of(cfg), build=build,
                       whole=task.layout.group)
    questions = drawn.questions
    answers = np.stack(drawn.answers)
    t1 = time.perf_counter()
    from .records import model_members, write_run_log

    write_run_log(out, questions, model_members(cfg.temperatures, cfg.ns), drawn.rows, answers,
                  rule=task.layout.vote_rule)
    summary = analyse(cfg, questions, answers, population=task.population())
    if cfg.aggregators:
        extra_rules(cfg, questions, answers, summary)
    if cfg.adaptive:
        summary["adaptive"] = adaptive_rows(cfg, questions, answers, drawn.rows)
    (stats,) = drawn.stats
    summary.update(run_facts(drawn, [stats], out=out, t1=t1))
    summary.update({"data": _data_notes(task), "notes": list(stats.notes),
                    "provider": cfg.provider.public(), "endpoint": drawn.endpoints[0],
                    "served_by": drawn.served_by[0]})
    return finish(out, summary)


def run_facts(drawn: Drawn, stats: list[Any], *, out: Path, t1: float) -> dict[str, Any]:
    """The summary's account of a draw: requests, cost, tokens, samples, retries, time (the
    sums over the samplers; a cost is unknown when one sampler's is)."""
    from ensemble import __version__

    from .records import now_iso

    def total(attr: str) -> Any:
        vals = [getattr(s, attr) for s in stats]
        return None if any(v is None for v in vals) else sum(vals)

    return {
        "requests": total("requests"), "cost_usd": total("cost_usd"),
        "cost": {"now_usd": total("cost_usd"), "stored_samples_usd": total("stored_cost_usd"),
                 "note": "now: this run's requests; stored_samples: what the samples read "
                         "from the store had cost when drawn (null: price unknown)"
                         + ("; all members" if len(stats) > 1 else "")},
        "tokens": {"prompt": total("prompt_tokens"), "completion": total("completion_tokens")},
        "samples": {"total": total("samples_total"), "from_store": total("samples_cached"),
                    "from_batches": total("samples_batch")},
        "retries": total("retries"), "errors": total("errors"),
        "rate_limited": total("rate_limited"),
        "wall_time_s": drawn.wall_s, "analysis_time_s": time.perf_counter() - t1,
        "run_dir": str(out), "failed": drawn.failed.to_dict(),
        "created": now_iso(), "version": __version__,
    }


def finish(out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Check the summary against its schema (a bug, not input, if it fails) and write the
    outputs."""
    from .outputs import write_outputs
    from .schemas import EvalSummary

    summary = EvalSummary.model_validate(summary).model_dump(mode="python", exclude_unset=True)
    write_outputs(out, summary)
    return summary


def _data_notes(task: Task) -> dict[str, Any]:
    notes: dict[str, Any] = {}
    if task.skipped:
        notes["skipped"] = [{"row": r, "reason": why} for r, why in task.skipped]
    if task.issues:
        notes["issues"] = {kind: len(rows) for kind, rows in task.issues.items()}
    kind = task.answer_kind
    if kind is not None and kind.is_open:
        notes["answer"] = kind.name
    notes.update(task.data_notes())
    return notes


def analyse(cfg: EvalConfig, questions: list[Question], answers: np.ndarray, *,
            population: int | None = None) -> dict[str, Any]:
    """The result grid from answers[t, q, k] (None = invalid); no requests.

    `population` is the number of items (questions; scenarios for boxball) in the whole task,
    of which these are a random subset when `--limit` binds (default: worked out from the
    task). Every value is an exact, unbiased estimate from the samples (`evals.analysis`);
    `ci` is the 95% interval for the task, `ci_questions` the one for these questions only
    (`evals.intervals`). Contrasts: each temperature minus the lowest (kind "temperature")
    and each group size minus one expert at the same temperature (kind "ensemble").
    """
    temps = [float(t) for t in cfg.temperatures]
    ns = sorted(set(cfg.ns))
    layout = layout_of(cfg.task)
    box = layout.utility
    rule = layout.vote_rule
    invalid = np.array([[a is None for a in answers[ti].ravel()]
                        for ti in range(answers.shape[0])], dtype=float)
    # n = 1 is always computed: the ensemble contrasts compare each n with one expert
    cells = item_cells(layout, questions, answers, sorted(set(ns) | {1}))
    items = cells[0][rule, ns[0]].items
    if population is None:
        population = load_task(cfg).population()
    total = max(population, items)
    unit = layout.unit
    keys = [(rule, n) for n in ns] + [(RANDOM_FOLLOW, 1)]
    row = run_rows(layout, items=items, total=total, seed=cfg.seed, bootstrap=cfg.bootstrap)

    results = [row(cells[ti][key], diff=False, t=t, n=key[1], aggregator=key[0])
               for ti, t in enumerate(temps) for key in keys]
    contrasts: list[dict[str, Any]] = []
    base = min(range(len(temps)), key=lambda i: temps[i])
    for ti, t in enumerate(temps):
        if ti != base:
            contrasts += [row(cells[ti][key].minus(cells[base][key], same_answers=False),
                              diff=True, kind="temperature", t=t, vs_t=temps[base], n=key[1],
                              vs_n=key[1], aggregator=key[0]) for key in keys]
    for ti, t in enumerate(temps):
        contrasts += [row(cells[ti][rule, n].minus(cells[ti][rule, 1], same_answers=True),
                          diff=True, kind="ensemble", t=t, vs_t=t, n=n, vs_n=1, aggregator=rule)
                      for n in ns if n > 1]
    by_t = [float(invalid[ti].mean()) for ti in range(len(temps))]
    warnings = []
    asked = {layout.item(q) for q in questions}
    if len(asked) > items:
        gone = len(asked) - items
        one = unit[:-1] if unit.endswith("s") else unit
        warnings.append(f"{gone} {one if gone == 1 else unit} left out: the question "
                        "of a colour it can show is missing (a vote's utility needs both)")
    high = [f"t = {t:g}: {r:.0%}" for t, r in zip(temps, by_t, strict=True) if r > INVALID_WARN]
    if high:
        warnings.append(f"over {INVALID_WARN:.0%} of the replies are invalid ("
                        + "; ".join(high) + "); invalid answers abstain and a group without a "
                        "valid answer counts as wrong, so the numbers measure the answer format "
                        "as much as the answers: check the prompt, the parser or --max-tokens")
    some = f"these {items} of the task's {total} {unit}, drawn at random (--limit)"
    return {
        "task": cfg.task, "model": cfg.model, "metric": METRIC[box],
        "estimator": ESTIMATOR[box], "temperatures": temps, "ns": ns,
        "samples_per_question": cfg.k(), "bootstrap": cfg.bootstrap, "seed": cfg.seed,
        "population": {"items": items, "total": total, "unit": unit, "limit": cfg.limit,
                       "fraction": items / total},
        "intervals": {
            "ci": "95% interval for the task: the mean over all " + f"{total} {unit}"
                  + (f"; {some}, so it includes the variation between {unit}"
                     if items < total else " (all were run)")
                  + f"; bootstrap over {unit} with the finite-population correction",
            "ci_questions": f"95% interval for these {items} {unit} only: the sampling noise "
                            "of the answers (jackknife); where a cell has as many samples per "
                            "question as its group size this noise cannot be separated, and "
                            "the task's interval without the finite-population correction "
                            "(wider) is shown",
        },
        "results": results,
        "contrasts": contrasts,
        "invalid_rate": float(invalid.mean()),
        "invalid_rate_by_t": [{"t": t, "invalid_rate": r}
                              for t, r in zip(temps, by_t, strict=True)],
        "invalid_policy": "invalid answers abstain from the vote; a group with no valid answer "
                          "counts as wrong; random-follow counts an invalid answer as wrong",
        "warnings": warnings,
        "layout": dataclasses.asdict(layout),
    }


def extra_rules(cfg: EvalConfig, questions: list[Any], answers: np.ndarray,
                summary: dict[str, Any]) -> None:
    """Add the `--aggregator` rules to a single-model summary: rows at each (t, n) and their
    paired difference from the main vote (kind "aggregator", the same samples). λ = λ₁ / t
    (ψ_λ units; ∞ at t = 0); one model is one group, so lam-weighted is the main vote."""
    from .groups import box_group_values, group_rule, vote_group_values

    layout = layout_of(cfg.task)
    box = layout.utility
    names = check_aggregators(list(cfg.aggregators), binary=box or all(
        len(q.choices) == 2 for q in questions), n_options=max(len(q.choices) for q in questions),
        lams=[cfg.lam1], where="--aggregator", utility=box)
    # the main vote as the cells name it (a two-choice task's majority is its plurality)
    main, extra = layout.vote_rule, names[1:]
    summary["aggregators"] = [main, *extra]
    if not extra:
        return
    temps = [float(t) for t in cfg.temperatures]
    ns = sorted(set(cfg.ns))
    cells = item_cells(layout, questions, answers, ns)
    items = cells[0][main, ns[0]].items
    row = run_rows(layout, items=items, total=summary["population"]["total"], seed=cfg.seed + 1,
                   bootstrap=cfg.bootstrap)

    if box:
        scen, joint, loc = box_layout(questions)
    else:
        choices, idx, correct = option_codes(questions)
    for ti, t in enumerate(temps):
        lam = lam_at(cfg.lam1, t)
        for n in ns:
            if box:
                counts = box_answer_counts(answers[ti], loc, len(scen))[None]
                got = box_group_values(counts, joint, [n], {r: group_rule(r, [lam])
                                                            for r in extra})
            else:
                got = vote_group_values([answer_codes(answers[ti], idx)], correct, [n],
                                        {r: [lam] for r in extra}, n_options=len(choices))
            for r in extra:
                summary["results"].append(row(got[r], diff=False, t=t, n=n, aggregator=r))
                summary["contrasts"].append(row(
                    got[r].minus(cells[ti][main, n], same_answers=True), diff=True,
                    kind="aggregator", t=t, vs_t=t, n=n, vs_n=n, aggregator=r,
                    vs_aggregator=main))
    summary["results"].sort(key=lambda r: (r["t"], r["aggregator"] == RANDOM_FOLLOW))


def adaptive_rows(cfg: EvalConfig, questions: list[Any], answers: np.ndarray,
                  rows: Any = None) -> list[dict[str, Any]]:
    """Rows for each stopping rule of `cfg.adaptive` beside fixed n, per temperature, replayed on
    the drawn samples (`evals.adaptive`): the same random orders of each question's samples for
    the adaptive and the fixed rows, so the two are comparable and their difference paired.

    Multiple choice: accuracy of the plurality of the samples the rule used. Box-ball: per
    question P(ω = decision | colour), weighted by P(scenario, colour) (each expert here sees the
    question's own ball: this is not the eval's exact-utility table, which lets each expert draw
    its own ball); the fixed rows beside it are scored the same way. With the drawn `rows`
    (the draw's samples), each row's `mean_cost_usd` is the dollars of the samples it used.
    """
    from ensemble.stopping import StopSpec, stop_rules

    from .adaptive import adaptive_eval, boxball_inputs, question_codes

    layout = layout_of(cfg.task)
    box = layout.utility
    max_n = cfg.max_n or cfg.k()
    if box:
        values, weights, groups = boxball_inputs(questions)
        codes, _, _ = question_codes(questions, answers, options=("L", "R"))
        kw: dict[str, Any] = {"values": values, "weights": weights, "groups": groups}
    else:
        codes, correct, n_options = question_codes(questions, answers)
        kw = {"correct": correct, "n_options": n_options}
    fixed_ns = sorted({n for n in cfg.ns if n <= max_n} | {max_n})
    if rows is not None:
        T, Q = codes.shape[:2]
        costs = np.full(codes.shape, np.nan)
        for i, row in enumerate(rows):
            for smp in row or ():
                if smp is not None and smp.cost_usd is not None and smp.index < max_n:
                    costs[i // Q, i % Q, smp.index] = smp.cost_usd
        kw["costs"] = costs[:, :, :max_n]
    rows = []
    for stop in cfg.adaptive:
        takes_cost = "cost" in stop_rules.get(stop).params
        spec = StopSpec(stop=stop, max_n=max_n, cost=cfg.stop_cost if takes_cost else None)
        results = adaptive_eval(codes[:, :, :max_n], spec, fixed_ns=fixed_ns,
                                reps=cfg.bootstrap, rng=cfg.seed, **kw)
        for t, res in zip(cfg.temperatures, results, strict=True):
            row = res.row(t=float(t), aggregator=layout.vote_rule)
            row["fixed"] = [{"n": n, "accuracy": e.value, "sem": e.sem, "ci": list(e.ci)}
                            for n, e in sorted(res.fixed.items())]
            row["scored"] = ("P(ω = decision | colour), weighted by P(scenario, colour)" if box
                             else "accuracy of the plurality of the samples used")
            rows.append(row)
    return rows
