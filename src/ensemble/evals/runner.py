"""Run an eval: one orchestration for every run spec.

A run spec (`evals.spec.RunSpec`) names the task and the members: one model at k temperatures
is k members scored alone at each n (`evals.grid`), a mixed ensemble's members vote together
(`evals.mixed`). Every run goes the same twelve steps: check the spec, load the task, select
the questions, check them, resolve the members and rules, find the run folder, estimate (a dry
run stops there), claim the folder, record the spec, draw, write the records, score, and write
the summary (one builder, `summary_of`, validated by `evals.schemas.EvalSummary`).

Samples live in the run folder's store (`samples.sqlite`); rerunning the same spec on a
finished run makes no request and only recomputes. Outputs: summary.json (the `--json`
document of docs/evals.md), grid.csv, accuracy.png, spec.json and the run records
(evals/records.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.errors import InputError
from ensemble.providers.options import ProviderOptions
from ensemble.sampling.batch_options import BatchOptions
from ensemble.tasks import Task, layout_of, task_title

from .draw import DrawMember, Drawn, DrawPolicy, draw, estimate, requests_of
from .questions import check_scorable, load_task, select_questions
from .spec import RunSpec, bootstrap_of, check, profile_lam1, recorded_spec, seed_of, task_name

__all__ = ["RunMember", "RunOptions", "finish", "plan_members", "run_dir", "run_eval",
           "run_facts", "summary_of"]


@dataclass(frozen=True)
class RunOptions:
    """How a run reaches its provider, not what it is (that is its spec): `provider` holds the
    endpoint and its limits (the key hidden; a member's own api_base replaces the endpoint),
    `out` the run folder (default `runs/TASK[-DATA]-MODEL[@ENDPOINT]`); `dry_run` counts
    requests, tokens and price and sends nothing; `on_status` receives the run's "waiting: ..."
    lines; `batch` (its `BatchOptions`) draws through the provider's Batch API, `router` (a
    litellm Router config file) spreads online requests over several deployments;
    `skip_invalid` skips malformed data rows (counted in the summary) instead of refusing."""

    provider: ProviderOptions = field(default_factory=ProviderOptions)
    out: str | None = None
    dry_run: bool = False
    progress: bool = False
    on_status: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    batch: BatchOptions | None = None
    router: str | None = None
    skip_invalid: bool = False


@dataclass(frozen=True)
class RunMember:
    """A member as the run draws and scores it: its label (a mixed ensemble's; None for one
    model's temperature), model, temperature, samples per question, endpoint options, and in
    an ensemble its votes n and λ (ψ_λ units at its temperature, with where it came from)."""

    label: str | None
    model: str
    temperature: float
    samples: int
    options: ProviderOptions
    n: int | None = None
    lam: float | None = None
    lam_source: str | None = None

    @property
    def api_base(self) -> str | None:
        return self.options.endpoint.api_base


def _options(base: ProviderOptions, api_base: str | None) -> ProviderOptions:
    """The run's limits and key, with a member's own endpoint."""
    return base if api_base is None else ProviderOptions.build(base, api_base=api_base)


def plan_members(spec: RunSpec, options: RunOptions) -> tuple[RunMember, ...]:
    """The members of a checked spec, resolved: each one's endpoint, samples and (ensemble) λ
    from its lam, its calibration or the spec's profiles (matched by model and endpoint)."""
    if not spec.ensemble:
        return tuple(RunMember(None, m.model, float(m.temperature), spec.k(),
                               _options(options.provider, m.api_base)) for m in spec.members)
    from .mixed import member_label, resolve

    resolved = resolve(spec, options.provider.endpoint.api_base)
    out = []
    for s, m in zip(spec.members, resolved, strict=True):
        k = s.samples or max(m.n, spec.samples or m.n)
        own = ProviderOptions.build(options.provider, **{
            f: v for f, v in (("api_base", s.api_base), ("price_per_1k", s.price_per_1k))
            if v is not None})
        out.append(RunMember(member_label(s), m.model, float(m.temperature), k, own, n=m.n,
                             lam=m.lam, lam_source=m.lam_source))
    labels = [m.label for m in out]
    if len(set(labels)) < len(labels):
        raise InputError("--ensemble: two members have the same label; give each a 'label'")
    return tuple(out)


def run_name(spec: RunSpec, members: tuple[RunMember, ...]) -> str:
    """The run's model in tables: one model's name, or a mixed ensemble's `2×a + 1×b`."""
    if not spec.ensemble:
        return spec.model
    return " + ".join(f"{m.n}×{m.label}" for m in members)


def run_dir(spec: RunSpec, options: RunOptions) -> Path:
    """--out, or `runs/TASK[-DATA]-MODEL[@ENDPOINT]` (stable: rerunning the command resumes
    there; a mixed ensemble's without --out: `runs/TASK[-DATA]-model`). A task file's:
    `runs/TITLE-MODEL[@ENDPOINT]` (its `name` or stem), or the folder such a run had before
    (`runs/taskfile-STEM-...`) when that one exists: it resumes there."""
    from ensemble.tasks.taskfile import TASK_FILE, task_file_title

    from .records import default_run_dir, run_slug

    if options.out:
        return Path(options.out)
    name = task_name(spec)
    data = spec.data if layout_of(name).takes_data else None
    first = spec.members[0]
    model = "" if spec.ensemble else first.model
    api_base = (options.provider.endpoint.api_base if spec.ensemble
                else first.api_base or options.provider.endpoint.api_base)
    if name == TASK_FILE and data is not None:
        folder = default_run_dir(run_slug(task_file_title(data)), model, api_base=api_base)
        before = default_run_dir(name, model, data=data, api_base=api_base)
        return before if before.is_dir() and not folder.exists() else folder
    return default_run_dir(name, model, data=data, api_base=api_base)


def policy_of(spec: RunSpec, options: RunOptions) -> DrawPolicy:
    return DrawPolicy(fail_on_error=spec.fail_on_error, max_cost=spec.max_cost,
                      progress=options.progress, on_status=options.on_status,
                      batch=options.batch, router=options.router)


def _checked(spec: RunSpec, options: RunOptions) -> RunSpec:
    """The one validation of a run before any request: the spec's shape (`spec.check`), what
    the run's machinery cannot do with it, and one model's λ₁ from its calibration profile
    (of the model and endpoint evaluated)."""
    check(spec, None)
    if spec.ensemble:
        if options.batch is not None or options.router is not None:
            raise InputError("--ensemble samples each member online through its own endpoint: "
                             "drop --batch / --router")
        return spec
    if spec.lam1 is None and spec.calibration:
        one = spec.members[0]
        lam1 = profile_lam1(spec.calibration[0], one.model,
                            api_base=one.api_base or options.provider.endpoint.api_base)
        return spec.model_copy(update={"lam1": lam1})
    return spec


async def run_eval(spec: RunSpec, options: RunOptions | None = None) -> dict[str, Any]:
    """Draw what is missing, score every cell, write the outputs; return the summary (a dry
    run: what drawing would request and cost)."""
    options = options or RunOptions()
    spec = _checked(spec, options)
    task = load_task(spec, skip_invalid=options.skip_invalid)
    if spec.ensemble:
        from .openanswers import refuse_open

        refuse_open(task)
    questions = select_questions(spec, task)
    check_scorable(task, questions)
    members = plan_members(spec, options)
    rules = _rules(spec, task, questions, members)  # refused before any request
    out = run_dir(spec, options)
    draws = [DrawMember(m.model, m.temperature, m.samples, m.options) for m in members]
    build = requests_of(task, max_tokens=spec.max_tokens)
    if options.dry_run:
        return _dry_run(spec, task, questions, members, draws, out, build)
    from .rundir import claim_run_dir, spec_identity
    from .spec import write_spec

    recorded = recorded_spec(spec, api_base=options.provider.endpoint.api_base)
    if spec.ensemble:
        recorded = recorded.model_copy(update={"aggregators": rules})
    claim_run_dir(out, kind="eval", task=task_name(spec), model=run_name(spec, members),
                  identity=spec_identity(recorded), title=task_title(task))
    write_spec(out, recorded)
    drawn = await draw(task, questions, draws, out=out, policy=policy_of(spec, options),
                       build=build, separate=spec.ensemble, whole=task.layout.group)
    t1 = time.perf_counter()
    _write_records(spec, out, drawn, members, rules)
    scored = _score(spec, task, drawn, members, rules)
    return finish(out, summary_of(spec, task, members, scored, drawn, rules=rules,
                                  options=options, out=out, t1=t1))


def _rules(spec: RunSpec, task: Task, questions: list[Any],
           members: tuple[RunMember, ...]) -> list[str]:
    if spec.ensemble:
        from .mixed import ensemble_rules

        return ensemble_rules(spec, task, questions, [m.lam for m in members])
    from .grid import rules_of

    # the main vote as one model's cells name it (a two-choice task's majority is its
    # plurality), then the --aggregator rules
    return [task.layout.vote_rule, *rules_of(spec, questions)[1:]]


def _dry_run(spec: RunSpec, task: Task, questions: list[Any], members: tuple[RunMember, ...],
             draws: list[DrawMember], out: Path, build: Any) -> dict[str, Any]:
    """What drawing would request and cost: one model's one sampler, or each member's. `task`
    and `title` as in summary.json (a task file: "taskfile", and its `name` or stem)."""
    if not spec.ensemble:
        (doc,) = estimate(task, questions, draws, out=out, build=build)
        return {"task": task_name(spec), "title": task_title(task), "questions": len(questions),
                "temperatures": spec.temperatures, **doc}
    docs = estimate(task, questions, draws, out=out, build=build, separate=True)
    return {"task": task_name(spec), "title": task_title(task), "questions": len(questions),
            "members": [{"label": m.label, **d} for m, d in zip(members, docs, strict=True)]}


def _write_records(spec: RunSpec, out: Path, drawn: Drawn, members: tuple[RunMember, ...],
                   rules: list[str]) -> None:
    from .records import VoteMember, model_members, write_run_log

    if not spec.ensemble:
        write_run_log(out, drawn.questions, model_members(spec.temperatures, spec.n or ()),
                      drawn.rows, np.stack(drawn.answers),
                      rule=layout_of(task_name(spec)).vote_rule)
        return
    from .mixed import ensemble_vote

    voters = [VoteMember(m.temperature, (m.n or 1,), label=m.label, model=m.model)
              for m in members]
    write_run_log(out, drawn.questions, voters, drawn.rows, drawn.answers, rule=rules[0],
                  ensemble=ensemble_vote(rules, [m.lam for m in members]))


def _score(spec: RunSpec, task: Task, drawn: Drawn, members: tuple[RunMember, ...],
           rules: list[str]) -> dict[str, Any]:
    """The tables: one model's cells (`evals.grid`), or a mixed ensemble's (`evals.mixed`)."""
    if spec.ensemble:
        from .mixed import analyse_mixed

        scored = analyse_mixed(spec, drawn.questions, drawn.answers, members=members,
                               labels=[m.label or "" for m in members],
                               samples=[m.samples for m in members], aggregators=rules,
                               population=task.population())
        scored["adaptive"] = []
        if spec.adaptive:  # the cost rule over the members (`spec.check`: nothing else)
            from .costeval import mixed_cost_rows

            scored["adaptive"] = mixed_cost_rows(spec, task, drawn, members,
                                                 [m.samples for m in members])
        return scored
    from .grid import adaptive_rows, analyse, extra_rules

    answers = np.stack(drawn.answers)
    scored = analyse(spec, drawn.questions, answers, population=task.population())
    if len(rules) > 1:
        extra_rules(spec, drawn.questions, answers, scored)
    scored["adaptive"] = (adaptive_rows(spec, drawn.questions, answers, drawn.rows)
                          if spec.adaptive else [])
    return scored


UNITS = ("λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units, at each member's temperature; "
         "utility in ±1 units (accuracy = (1 + utility) / 2)")
SHARED_SIGNAL = ("the rules treat the members as groups of experts sharing one signal "
                 "structure: exact for one model at several temperatures, an approximation "
                 "across models (docs/ensembles.md)")


def summary_of(spec: RunSpec, task: Task, members: tuple[RunMember, ...],
               scored: dict[str, Any], drawn: Drawn, *, rules: list[str], options: RunOptions,
               out: Path, t1: float) -> dict[str, Any]:
    """summary.json of every run, one model's or a mixed ensemble's: the same fields
    (`evals.schemas.EvalSummary`), its tables from `scored`."""
    import dataclasses

    same = len({repr(d.options.public()) for d in members}) == 1
    ensemble = None
    if spec.ensemble:
        ensemble = {"members": [
            {"label": m.label, "model": m.model, "api_base": m.api_base, "n": m.n,
             "temperature": m.temperature, "lam": m.lam, "lam_source": m.lam_source,
             "samples": m.samples, "endpoint": e, "served_by": s}
            for m, e, s in zip(members, drawn.endpoints, drawn.served_by, strict=True)],
            "aggregators": rules, "units": UNITS, "assumption": SHARED_SIGNAL}
    endpoints = set(drawn.endpoints)
    return {
        "task": task_name(spec), "model": run_name(spec, members), "title": task_title(task),
        "metric": scored["metric"], "estimator": scored["estimator"],
        "temperatures": scored["temperatures"], "ns": scored["ns"],
        "samples_per_question": scored["samples_per_question"],
        "bootstrap": bootstrap_of(spec), "seed": seed_of(spec),
        "population": scored["population"], "intervals": scored["intervals"],
        "results": scored["results"], "contrasts": scored["contrasts"],
        "invalid_rate": scored["invalid_rate"], "invalid_rate_by_t": scored["invalid_rate_by_t"],
        "invalid_policy": scored["invalid_policy"], "warnings": scored["warnings"],
        "adaptive": scored.get("adaptive", []), "ensemble": ensemble, "aggregators": rules,
        "lam1": spec.lam1, "layout": dataclasses.asdict(task.layout),
        **run_facts(drawn, drawn.stats, out=out, t1=t1),
        "data": data_notes(task),
        "notes": [n for s in drawn.stats for n in s.notes],
        "provider": (members[0].options if same else options.provider).public(),
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
