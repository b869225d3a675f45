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

import time
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.tasks import Task

from .draw import Drawn, draw, estimate
from .plan import RunOptions, RunPlan, resolve
from .spec import RunSpec

__all__ = ["RunOptions", "dry_run", "finish", "run_eval", "run_facts", "run_plan",
           "summary_of"]


async def run_eval(spec: RunSpec, options: RunOptions | None = None) -> dict[str, Any]:
    """Draw what is missing, score every cell, write the outputs; return the summary (a dry
    run: what drawing would request and cost). The spec is read once, into its plan
    (`evals.plan.resolve`)."""
    plan = resolve(spec, options)
    if plan.dry_run:
        return dry_run(plan)
    return await run_plan(plan)


async def run_plan(plan: RunPlan) -> dict[str, Any]:
    """The steps of a resolved run: claim its folder, record its spec, draw what is missing,
    write the records, score, write the summary and the outputs; returns the summary."""
    from ensemble.jsonio import write_atomic

    from .rundir import claim_run_dir
    from .spec import SPEC_FILE

    claim_run_dir(plan.out, kind="eval", task=plan.task_name, model=plan.model,
                  identity=plan.identity, title=plan.title)
    write_atomic(plan.out / SPEC_FILE, plan.spec_json)
    drawn = await draw(plan.task, plan.questions, plan.draws, out=plan.out, policy=plan.policy,
                       build=plan.build, separate=plan.ensemble, whole=plan.layout.group)
    t1 = time.perf_counter()
    _write_records(plan, drawn)
    scored = _score(plan, drawn)
    return finish(plan.out, summary_of(plan, scored, drawn, t1=t1))


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


def _score(plan: RunPlan, drawn: Drawn) -> dict[str, Any]:
    """The tables: one model's cells (`evals.grid`), or a mixed ensemble's (`evals.mixed`)."""
    if plan.ensemble:
        from .mixed import analyse_mixed

        scored = analyse_mixed(plan, drawn.questions, drawn.answers)
        scored["adaptive"] = []
        if plan.stopping is not None:  # the cost rule over the members (`spec.check`)
            from .costeval import mixed_cost_rows

            scored["adaptive"] = mixed_cost_rows(plan, drawn)
        return scored
    from .grid import adaptive_rows, analyse, extra_rules

    answers = np.stack(drawn.answers)
    scored = analyse(plan, drawn.questions, answers)
    extra_rules(plan, drawn.questions, answers, scored)
    scored["adaptive"] = [] if plan.stopping is None else adaptive_rows(
        plan, drawn.questions, answers,
        costs=np.stack([drawn.costs(g, plan.stopping.max_n) for g in range(len(plan.members))]))
    return scored


UNITS = ("λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units, at each member's temperature; "
         "utility in ±1 units (accuracy = (1 + utility) / 2)")
SHARED_SIGNAL = ("the rules treat the members as groups of experts sharing one signal "
                 "structure: exact for one model at several temperatures, an approximation "
                 "across models (docs/ensembles.md)")


def summary_of(plan: RunPlan, scored: dict[str, Any], drawn: Drawn, *, t1: float
               ) -> dict[str, Any]:
    """summary.json of every run, one model's or a mixed ensemble's: the same fields
    (`evals.schemas.EvalSummary`), its tables from `scored`."""
    import dataclasses

    from .schemas import SUMMARY_VERSION

    members = plan.members
    same = len({repr(d.options.public()) for d in members}) == 1
    ensemble = None
    rules = list(plan.rules)
    if plan.ensemble:
        ensemble = {"members": [
            {"label": m.label, "model": m.model, "api_base": m.api_base, "n": m.n,
             "temperature": m.temperature, "lam": m.lam, "lam_source": m.lam_source,
             "samples": m.samples, "endpoint": e, "served_by": s}
            for m, e, s in zip(members, drawn.endpoints, drawn.served_by, strict=True)],
            "aggregators": rules, "units": UNITS, "assumption": SHARED_SIGNAL}
    endpoints = set(drawn.endpoints)
    return {
        "schema_version": SUMMARY_VERSION,
        "task": plan.task_name, "model": plan.model, "title": plan.title,
        "metric": scored["metric"], "estimator": scored["estimator"],
        "temperatures": scored["temperatures"], "ns": scored["ns"],
        "samples_per_question": scored["samples_per_question"],
        "bootstrap": plan.bootstrap, "seed": plan.seed,
        "population": scored["population"], "intervals": scored["intervals"],
        "results": scored["results"], "contrasts": scored["contrasts"],
        "invalid_rate": scored["invalid_rate"], "invalid_rate_by_t": scored["invalid_rate_by_t"],
        "invalid_policy": scored["invalid_policy"], "warnings": scored["warnings"],
        "adaptive": scored.get("adaptive", []), "ensemble": ensemble, "aggregators": rules,
        "lam1": plan.lam1, "layout": dataclasses.asdict(plan.layout),
        **run_facts(drawn, drawn.stats, out=plan.out, t1=t1),
        "data": data_notes(plan.task),
        "notes": [n for s in drawn.stats for n in s.notes],
        "provider": (members[0].options if same else plan.provider).public(),
        "endpoint": next(iter(endpoints)) if len(endpoints) == 1 else None,
        "served_by": ", ".join(dict.fromkeys(drawn.served_by)) or None,
    }


def run_facts(drawn: Drawn, stats: list[Any], *, out: Path, t1: float) -> dict[str, Any]:
    """The summary's account of a draw: requests, cost, tokens, samples, retries, time (the
    sums over the samplers; a cost is unknown when one sampler's is)."""
    from ensemble import __version__

    from .records import now_iso

    def total(attr: str) -> Any:
        vals = [getattr(s, attr) for s in stats]
        return None if any(v is None for v in vals) else sum(vals)

    used = [s for row in drawn.rows for s in (row or ()) if s is not None]

    def of_samples(attr: str, *, unknown_is_zero: bool = False) -> Any:
        # tokens a reply did not report count 0, as in the requests' `tokens`; an unknown
        # cost makes the sum unknown, as in `cost`
        vals = [getattr(s, attr) for s in used]
        if unknown_is_zero:
            return sum(v or 0 for v in vals)
        return None if any(v is None for v in vals) else sum(vals)

    return {
        "requests": total("requests"), "cost_usd": total("cost_usd"),
        "cost": {"now_usd": total("cost_usd"), "stored_samples_usd": total("stored_cost_usd"),
                 "samples_usd": of_samples("cost_usd"),
                 "note": "now: this run's requests; stored_samples: what the samples read "
                         "from the store had cost when drawn; samples: what the samples "
                         "behind the results cost, one shared by several questions counted "
                         "for each (null: price unknown)"
                         + ("; all members" if len(stats) > 1 else "")},
        "tokens": {"prompt": total("prompt_tokens"), "completion": total("completion_tokens")},
        "tokens_samples": {"prompt": of_samples("prompt_tokens", unknown_is_zero=True),
                           "completion": of_samples("completion_tokens", unknown_is_zero=True)},
        "samples": {"total": total("samples_total"), "from_store": total("samples_cached"),
                    "from_batches": total("samples_batch"), "shared": total("samples_shared")},
        "retries": total("retries"), "errors": total("errors"),
        "rate_limited": total("rate_limited"),
        "wall_time_s": drawn.wall_s, "analysis_time_s": time.perf_counter() - t1,
        "run_dir": str(out), "failed": drawn.failed.to_dict(),
        "created": now_iso(), "version": __version__,
    }


def finish(out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Check the summary against its model (a bug, not input, if it fails) and write the
    outputs."""
    from .outputs import write_outputs
    from .schemas import EvalSummary, dump

    summary = dump(EvalSummary.model_validate(summary))
    write_outputs(out, summary)
    return summary


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
