"""Run an eval: one orchestration for every run plan.

A run spec (`evals.spec.RunSpec`) names the task and the members: one model at k temperatures
is k members scored alone at each n (`evals.grid`), a mixed ensemble's members vote together
(`evals.mixed`). `evals.plan.resolve` reads it once into a `RunPlan` (task, questions,
members with their λ and prices, cells, rules, folder: every check before any request), and
every step here takes the plan: estimate (a dry run stops there), claim the folder, record the
spec, draw, write the records, score, and write the summary (one builder, `summary_of`,
validated by `evals.schemas.EvalSummary`).

Samples live in the run folder's store (`samples.sqlite`); rerunning the same spec on a
finished run makes no request and only recomputes. Outputs: summary.json (the `--json`
document of docs/evals.md), grid.csv, accuracy.png, spec.json and the run records
(evals/records.py).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.tasks import Task

from .draw import Drawn, draw, estimate
from .outputs import write_outputs
from .plan import RunOptions, RunPlan, resolve, resolve_to_draw
from .schemas import (
    SUMMARY_VERSION,
    CostSummary,
    DataNotes,
    EnsembleInfo,
    EvalSummary,
    FailedSummary,
    MemberInfo,
    ProviderInfo,
    SampleCounts,
    Tables,
    Tokens,
)
from .spec import RunSpec

__all__ = ["RunOptions", "chance_of", "draw_plan", "dry_run", "estimate_run", "run_eval",
           "run_facts", "run_plan", "summary_of"]


async def run_eval(spec: RunSpec, options: RunOptions | None = None) -> EvalSummary:
    """Draw what is missing, score every cell, write the outputs; return the summary. The
    spec is read once, into its plan (`evals.plan.resolve`). A dry run (`RunOptions(dry_run=
    True)`) is `estimate_run`, which sends nothing: here it is refused."""
    return await run_plan(resolve_to_draw(spec, options, "eval"))


def estimate_run(spec: RunSpec, options: RunOptions | None = None) -> dict[str, Any]:
    """What running the spec (an eval or a calibration) would request and cost (`--dry-run`):
    nothing is sent and nothing is written."""
    return dry_run(resolve(spec, options))


async def draw_plan(plan: RunPlan) -> Drawn:
    """The steps every run kind shares: claim its folder, record its spec, draw what is
    missing into its store (the failure policy applied)."""
    from ensemble.jsonio import write_atomic

    from .rundir import claim_run_dir
    from .spec import SPEC_FILE

    claim_run_dir(plan.out, kind=plan.kind, task=plan.task_name, model=plan.model,
                  identity=plan.identity, title=plan.title)
    write_atomic(plan.out / SPEC_FILE, plan.spec_json)
    return await draw(plan.task, plan.questions, plan.draws, out=plan.out, policy=plan.policy,
                      build=plan.build, separate=plan.ensemble,
                      whole=plan.layout.group if plan.kind == "eval" else None)


async def run_plan(plan: RunPlan) -> EvalSummary:
    """An eval's steps on its plan: draw (`draw_plan`), write the records, score, write the
    summary and the outputs; returns the summary."""
    drawn = await draw_plan(plan)
    t1 = time.perf_counter()
    samples = sum(len(r or ()) for r in drawn.rows)
    with _steps(plan.policy.progress) as step:
        step(f"writing the records of {samples} samples")
        _write_records(plan, drawn)
        step(f"scoring {samples} samples")
        tables = _score(plan, drawn)
        summary = summary_of(plan, tables, drawn, t1=t1)
        step("writing the summary, grid.csv and the figure")
        write_outputs(plan.out, summary, chance=chance_of(plan.task, drawn.questions))
    return summary


@contextmanager
def _steps(show: bool) -> Iterator[Callable[[str], None]]:
    """A line on stderr saying which step runs after the draw, when `show` and stderr is a
    terminal (the analysis of 5000 x 40 stored samples was silent for 17 s after the bar);
    it goes away when done. Yields the function that names the next step."""
    if not (show and sys.stderr.isatty()):
        yield lambda _: None
        return
    from rich.console import Console

    with Console(stderr=True).status("", spinner="dots") as status:
        yield lambda what: status.update(what)


def dry_run(plan: RunPlan) -> dict[str, Any]:
    """What drawing would request and cost: one model's one sampler, or each member's. `task`
    and `title` as in summary.json (a task file: "taskfile", and its `name` or stem)."""
    head = {"task": plan.task_name, "title": plan.title, "questions": len(plan.questions)}
    if not plan.ensemble:
        (doc,) = estimate(plan.task, plan.questions, plan.draws, out=plan.out, build=plan.build)
        return {**head, "temperatures": plan.temperatures, **doc}
    docs = estimate(plan.task, plan.questions, plan.draws, out=plan.out, build=plan.build,
                    separate=True)
    return {**head, "members": [{"label": m.label, **d}
                                for m, d in zip(plan.members, docs, strict=True)]}


def _write_records(plan: RunPlan, drawn: Drawn) -> None:
    from .records import VoteMember, model_members, write_run_log

    if not plan.ensemble:
        write_run_log(plan.out, drawn.questions, model_members(plan.temperatures, plan.ns),
                      drawn.rows, np.stack(drawn.answers), rule=plan.layout.vote_rule)
        return
    from .mixed import ensemble_vote

    voters = [VoteMember(m.temperature, (m.n or 1,), label=m.label, model=m.model)
              for m in plan.members]
    write_run_log(plan.out, drawn.questions, voters, drawn.rows, drawn.answers,
                  rule=plan.rules[0],
                  ensemble=ensemble_vote(list(plan.rules), [m.lam for m in plan.members]))


def _score(plan: RunPlan, drawn: Drawn) -> Tables:
    """The tables: one model's cells (`evals.grid`), or a mixed ensemble's (`evals.mixed`)."""
    if plan.ensemble:
        from .mixed import analyse_mixed

        tables = analyse_mixed(plan, drawn.questions, drawn.answers, drawn.rows)
        if plan.stopping is not None:  # the cost rule, and the rules over pooled votes
            from .pooled import mixed_adaptive_rows

            tables.adaptive = mixed_adaptive_rows(plan, drawn)
        return tables
    from .grid import adaptive_rows, analyse, extra_rules

    answers = np.stack(drawn.answers)
    tables = analyse(plan, drawn.questions, answers)
    extra_rules(plan, drawn.questions, answers, tables, drawn.rows)
    if plan.stopping is not None:
        members = range(len(plan.members))
        tables.adaptive = adaptive_rows(
            plan, drawn.questions, answers,
            costs=np.stack([drawn.costs(g, plan.stopping.max_n) for g in members]),
            tokens=np.stack([drawn.tokens(g, plan.stopping.max_n) for g in members]),
            rows=drawn.rows,
            notes=tables.notes)
    return tables


UNITS = ("λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units, at each member's temperature; "
         "utility in ±1 units (accuracy = (1 + utility) / 2)")
SHARED_SIGNAL = ("the rules treat the members as groups of experts sharing one signal "
                 "structure: exact for one model at several temperatures, an approximation "
                 "across models (docs/ensembles.md)")


def summary_of(plan: RunPlan, tables: Tables, drawn: Drawn, *, t1: float) -> EvalSummary:
    """summary.json of every run, one model's or a mixed ensemble's: the same fields
    (`evals.schemas.EvalSummary`), built by keyword from the plan, the tables and the draw."""
    members = plan.members
    same = len({repr(d.options.public()) for d in members}) == 1
    ensemble = None
    rules = list(plan.rules)
    if plan.ensemble:
        ensemble = EnsembleInfo(members=[
            MemberInfo(label=m.label or "", model=m.model, api_base=m.api_base, n=m.n or 1,
                       temperature=m.temperature, lam=m.lam, lam_source=m.lam_source,
                       samples=m.samples, endpoint=e, served_by=s)
            for m, e, s in zip(members, drawn.endpoints, drawn.served_by, strict=True)],
            aggregators=rules, units=UNITS, assumption=SHARED_SIGNAL)
    endpoints = set(drawn.endpoints)
    return EvalSummary(
        schema_version=SUMMARY_VERSION,
        task=plan.task_name, model=plan.model, title=plan.title,
        # the tables' fields by name (Tables is the part of summary.json scoring computes);
        # its notes join the draw's below
        **{name: getattr(tables, name) for name in Tables.model_fields if name != "notes"},
        bootstrap=plan.bootstrap, seed=plan.seed, ensemble=ensemble, aggregators=rules,
        lam1=plan.lam1, layout=plan.layout,
        **run_facts(drawn, drawn.stats, out=plan.out, t1=t1),
        data=DataNotes(**data_notes(plan.task)),
        notes=[*(n for s in drawn.stats for n in s.notes), *tables.notes],
        provider=ProviderInfo(**(members[0].options if same else plan.provider).public()),
        endpoint=next(iter(endpoints)) if len(endpoints) == 1 else None,
        served_by=", ".join(dict.fromkeys(drawn.served_by)) or None,
    )


def run_facts(drawn: Drawn, stats: list[Any], *, out: Path, t1: float) -> dict[str, Any]:
    """The summary's account of a draw (`EvalSummary` fields): requests, cost, tokens,
    samples, retries, time (the sums over the samplers; a cost is unknown when one sampler's
    is)."""
    from ensemble import __version__

    from .records import now_iso

    def total(attr: str) -> Any:
        vals = [getattr(s, attr) for s in stats]
        return None if any(v is None for v in vals) else sum(vals)

    used = [s for row in drawn.rows for s in (row or ()) if s is not None]

    def of_samples(attr: str) -> Any:
        # an unknown count or cost (a reply that did not report it, a replay of a recording
        # without it) makes the sum unknown: it was shown as 0 (issue 41 item 16)
        vals = [getattr(s, attr) for s in used]
        return None if any(v is None for v in vals) else sum(vals)

    def paid_tokens(attr: str) -> int | None:
        return None if total(f"{attr}_unknown") else total(attr)

    recorded = total("recorded_replies")

    return {
        "requests": total("requests"), "cost_usd": total("cost_usd"),
        "cost": CostSummary(
            now_usd=total("cost_usd"), stored_samples_usd=total("stored_cost_usd"),
            samples_usd=of_samples("cost_usd"),
            recorded_usd=total("recorded_cost_usd") if recorded else None,
            note="now: this run's requests; stored_samples: what the samples read from the "
                 "store had cost when drawn; samples: what the samples behind the results "
                 "cost, one shared by several questions counted for each (null: price "
                 "unknown)" + ("; recorded: what the replies a replay served had cost when "
                               "recorded (it pays nothing now)" if recorded else "")
                 + ("; all members" if len(stats) > 1 else "")),
        "tokens": Tokens(prompt=paid_tokens("prompt_tokens"),
                         completion=paid_tokens("completion_tokens")),
        "tokens_samples": Tokens(prompt=of_samples("prompt_tokens"),
                                 completion=of_samples("completion_tokens")),
        "samples": SampleCounts(total=total("samples_total"), from_store=total("samples_cached"),
                                from_batches=total("samples_batch"),
                                shared=total("samples_shared")),
        "retries": total("retries"), "errors": total("errors"),
        "rate_limited": total("rate_limited"),
        "wall_time_s": drawn.wall_s, "analysis_time_s": time.perf_counter() - t1,
        "run_dir": str(out), "failed": FailedSummary(**drawn.failed.to_dict()),
        "created": now_iso(), "version": __version__,
    }


def chance_of(task: Task, questions: Sequence[Any]) -> float | None:
    """The accuracy (utility) of a uniform guess, for the figure's dashed line: the task's
    own, else the mean of 1/len(choices) over the questions; None for open answers (their
    options are the answers given)."""
    if task.layout.chance is not None:
        return task.layout.chance
    kind = task.answer_kind
    if kind is not None and kind.is_open:
        return None
    inv = [1 / len(q.choices) for q in questions if q.choices]
    return float(np.mean(inv)) if inv else None


def data_notes(task: Task) -> dict[str, Any]:
    """The summary's `data` block: rows skipped, issues counted, open answers' kind, and what
    the task counts about its data."""
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
