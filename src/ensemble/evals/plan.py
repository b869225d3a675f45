"""The plan of a run: its spec resolved once, before any request.

`resolve(spec, options)` is the one reader of a run spec (`evals.spec.RunSpec`): it checks it,
loads the task and selects its questions, resolves each member (its endpoint and limits, its
price, its samples per question and, in an ensemble, its votes n and its λ with where that came
from), the rules (the main vote first) and what they read from each sample, the stopping rules,
the run folder and the spec to record. Every step after it (estimate, claim, draw, records,
score, summary, outputs: `evals.runner`) takes the `RunPlan`; no other module reads a spec
(tests/test_layers.py checks it).

Where what comes next goes: what the rules read from each sample beyond its hard answer (soft
votes' logprobs) is `RunPlan.requests`, asked of the provider by `RunPlan.build`, and comes back
per sample through the draw (`evals.draw.Drawn`), as each sample's tokens and dollars do
(`Drawn.costs`); a mixed ensemble's members voting on open answers are an ensemble plan over a
task whose answer kind is open (refused here for now, `openanswers.refuse_open`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ensemble.errors import InputError
from ensemble.providers.options import ProviderOptions
from ensemble.rules import Requests, reads
from ensemble.sampling.batch_options import BatchOptions
from ensemble.tasks import Question, Task, TaskLayout, layout_of, task_title

from .draw import Build, DrawMember, DrawPolicy, requests_of
from .questions import check_scorable, load_task, select_questions
from .scoring import ensemble_rules, one_model_rules
from .spec import (
    MemberSpec,
    RunSpec,
    bootstrap_of,
    check,
    profile_lam1,
    recorded_spec,
    seed_of,
    spec_identity,
    spec_text,
    task_name,
)

__all__ = ["PlanMember", "RunOptions", "RunPlan", "Stopping", "member_label", "resolve"]


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
class PlanMember:
    """A member as the run draws and scores it: its label (a mixed ensemble's; None for one
    model's temperature), model, temperature, samples per question, endpoint options (limits,
    key, price), and in an ensemble its votes n and λ (ψ_λ units at its temperature, with
    where it came from)."""

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

    @property
    def draw(self) -> DrawMember:
        """What the draw step needs of it."""
        return DrawMember(self.model, self.temperature, self.samples, self.options)


@dataclass(frozen=True)
class Stopping:
    """The stopping rules replayed on the drawn samples (`--adaptive`): their names, the most
    samples one may use per question (one model's), the cost of a sample for the rules that
    take one, and the cost rule's dollars per right decision and what a decision earns (an
    ensemble's)."""

    rules: tuple[str, ...]
    max_n: int
    cost: float | None = None
    value_usd: float | None = None
    credit: str = "reference"


@dataclass(frozen=True)
class RunPlan:
    """A run, resolved: what it asks (task, questions, members, requests), how it scores them
    (cells, rules, λ, stopping rules, seed, bootstrap, the task's size), and where it goes
    (folder, model name, provider options, draw policy, the spec to record)."""

    task: Task
    task_name: str  # the registered task (a task file: "taskfile", its path the data)
    title: str  # the task as people name it
    questions: list[Question]
    members: tuple[PlanMember, ...]
    ensemble: bool  # the members vote together (each its own n), not one model's cells
    ns: tuple[int, ...]  # one model's group sizes, ascending (an ensemble: its members' n)
    rules: tuple[str, ...]  # the rules scored, the main vote first
    requests: Requests  # what the rules read from each sample beyond its hard answer
    lam1: float | None  # one model's λ₁ (ψ_λ units at t = 1)
    stopping: Stopping | None
    limit: int | None
    seed: int
    bootstrap: int
    population: int  # the task's items (questions; box-ball: scenarios)
    data: str | None  # the task's data file
    out: Path
    model: str  # the run's model in tables: one model's name, or `2×a + 1×b`
    provider: ProviderOptions  # the run's own options (a member may name its own endpoint)
    policy: DrawPolicy
    build: Build = field(repr=False, compare=False)
    dry_run: bool = False
    spec_json: str = ""  # RUN/spec.json as this run records it
    identity: dict[str, Any] = field(default_factory=dict)  # what it draws from

    @property
    def layout(self) -> TaskLayout:
        return self.task.layout

    @property
    def temperatures(self) -> tuple[float, ...]:
        return tuple(m.temperature for m in self.members)

    @property
    def samples(self) -> int:
        """Samples per question (one model's; an ensemble: its members' largest)."""
        return max(m.samples for m in self.members)

    @property
    def draws(self) -> list[DrawMember]:
        return [m.draw for m in self.members]


def member_label(m: MemberSpec) -> str:
    """A member's name in the tables: its label, or `model@t=T`."""
    return m.label or f"{m.model}@t={m.temperature:g}"


def resolve(spec: RunSpec, options: RunOptions | None = None) -> RunPlan:
    """The plan of a spec, or one InputError line for anything that cannot run, before any
    request: the spec's shape (`spec.check`), the task and its questions, the members and
    their λ, the rules and stopping rules, and what the run's machinery cannot do."""
    options = options or RunOptions()
    check(spec, None)
    if spec.ensemble and (options.batch is not None or options.router is not None):
        raise InputError("--ensemble samples each member online through its own endpoint: "
                         "drop --batch / --router")
    base = options.provider.endpoint.api_base
    lam1 = spec.lam1
    if not spec.ensemble and lam1 is None and spec.calibration:
        first = spec.members[0]
        lam1 = profile_lam1(spec.calibration[0], first.model, api_base=first.api_base or base)
    name = task_name(spec)
    task = load_task(name, data=spec.data, limit=spec.limit, seed=seed_of(spec),
                     open_answers=bool(spec.open), answer=spec.answer,
                     skip_invalid=options.skip_invalid)
    if spec.ensemble:
        from .openanswers import refuse_open

        refuse_open(task)
    questions = select_questions(task, limit=spec.limit, seed=seed_of(spec))
    check_scorable(task, questions)
    members = _members(spec, options)
    rules = _rules(spec, task, questions, members, lam1)  # refused before any request
    requests = reads(rules)
    recorded = recorded_spec(spec, api_base=base)
    if spec.ensemble:
        recorded = recorded.model_copy(update={"aggregators": list(rules)})
    policy = DrawPolicy(fail_on_error=spec.fail_on_error, max_cost=spec.max_cost,
                        progress=options.progress, on_status=options.on_status,
                        batch=options.batch, router=options.router)
    ns = (tuple(sorted(set(spec.n or ()))) if not spec.ensemble
          else tuple(m.n or 1 for m in members))
    return RunPlan(
        task=task, task_name=name, title=task_title(task), questions=questions,
        members=members, ensemble=spec.ensemble, ns=ns, rules=rules, requests=requests,
        lam1=lam1, stopping=_stopping(spec, members), limit=spec.limit, seed=seed_of(spec),
        bootstrap=bootstrap_of(spec), population=task.population(), data=spec.data,
        out=_run_dir(spec, name, options), model=_run_name(spec, members),
        provider=options.provider, policy=policy,
        build=requests_of(task, max_tokens=spec.max_tokens, extra=requests.sampling()),
        dry_run=options.dry_run, spec_json=spec_text(recorded),
        identity=spec_identity(recorded))


def _options(base: ProviderOptions, api_base: str | None) -> ProviderOptions:
    """The run's limits and key, with a member's own endpoint."""
    return base if api_base is None else ProviderOptions.build(base, api_base=api_base)


def _members(spec: RunSpec, options: RunOptions) -> tuple[PlanMember, ...]:
    """The members of a checked spec: each one's endpoint, samples and (ensemble) λ from its
    lam, its calibration or the spec's profiles (matched by model and endpoint, as the Python
    API matches an ensemble's: `members.resolve_members`)."""
    if not spec.ensemble:
        return tuple(PlanMember(None, m.model, float(m.temperature), spec.k(),
                                _options(options.provider, m.api_base)) for m in spec.members)
    resolved = _resolved_lams(spec, options.provider.endpoint.api_base)
    out = []
    for s, m in zip(spec.members, resolved, strict=True):
        k = s.samples or max(m.n, spec.samples or m.n)
        own = ProviderOptions.build(options.provider, **{
            f: v for f, v in (("api_base", s.api_base), ("price_per_1k", s.price_per_1k))
            if v is not None})
        out.append(PlanMember(member_label(s), m.model, float(m.temperature), k, own, n=m.n,
                              lam=m.lam, lam_source=m.lam_source))
    labels = [m.label for m in out]
    if len(set(labels)) < len(labels):
        raise InputError("--ensemble: two members have the same label; give each a 'label'")
    return tuple(out)


def _resolved_lams(spec: RunSpec, api_base: str | None) -> tuple[Any, ...]:
    """An ensemble's members with their λ (`members.resolve_members`: typed in, their own
    calibration, or the spec's profile of their model and endpoint; `api_base` the run's, for
    members without their own); two members sharing model, endpoint and temperature are
    refused (they would share the stored samples)."""
    from ensemble.members import Member, resolve_members
    from ensemble.providers.endpoints import normalise_api_base

    ms = [Member(m.model, n=int(m.n or 0), temperature=m.temperature,
                 api_base=m.api_base or api_base, lam=m.lam, calibration=m.calibration,
                 options=ProviderOptions(price_per_1k=m.price_per_1k))
          for m in spec.members]
    seen: dict[tuple[str, str | None, float], int] = {}
    for i, m in enumerate(ms):
        key = (m.model, normalise_api_base(m.api_base) if m.api_base else None, m.temperature)
        if key in seen:
            raise InputError(f"--ensemble: members {seen[key]} and {i} are {m.model} at t = "
                             f"{m.temperature:g}: they would share the stored samples; give "
                             "one member with n = the sum of theirs")
        seen[key] = i
    return resolve_members(ms, calibration=spec.calibration)


def _rules(spec: RunSpec, task: Task, questions: list[Question],
           members: tuple[PlanMember, ...], lam1: float | None) -> tuple[str, ...]:
    """The rules to score, the main vote first, each refused in one line when it cannot apply
    to these questions."""
    if spec.ensemble:
        return tuple(ensemble_rules(spec.aggregators, task.layout, questions,
                                    [m.lam for m in members]))
    return tuple(one_model_rules(list(spec.aggregators or ()), task.layout, questions, lam1))


def _stopping(spec: RunSpec, members: tuple[PlanMember, ...]) -> Stopping | None:
    if not spec.adaptive:
        return None
    if spec.ensemble and "cost" in spec.adaptive:  # before any request, not after the draw
        from .prices import check_priced

        check_priced(members, why='"adaptive": ["cost"] (the cost rule)')
    max_n = spec.max_n or (sum(m.n or 1 for m in members) if spec.ensemble else spec.k())
    return Stopping(tuple(spec.adaptive), max_n, cost=spec.stop_cost, value_usd=spec.value_usd,
                    credit=spec.cost_credit or "reference")


def _run_name(spec: RunSpec, members: tuple[PlanMember, ...]) -> str:
    """The run's model in tables: one model's name, or a mixed ensemble's `2×a + 1×b`."""
    if not spec.ensemble:
        return spec.model
    return " + ".join(f"{m.n}×{m.label}" for m in members)


def _run_dir(spec: RunSpec, name: str, options: RunOptions) -> Path:
    """--out, or `runs/TASK[-DATA]-MODEL[@ENDPOINT]` (stable: rerunning the command resumes
    there; a mixed ensemble's without --out: `runs/TASK[-DATA]-model`). A task file's:
    `runs/TITLE-MODEL[@ENDPOINT]` (its `name` or stem), or the folder such a run had before
    (`runs/taskfile-STEM-...`) when that one exists: it resumes there."""
    from ensemble.tasks.taskfile import TASK_FILE, task_file_title

    from .records import default_run_dir, run_slug

    if options.out:
        return Path(options.out)
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
