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
task whose answer kind is open (its rules checked for open answers: robust is refused).
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

from .draw import Build, DrawMember, DrawPolicy, calibration_requests, requests_of
from .questions import check_scorable, load_task, select_questions
from .scoring import ensemble_rules, one_model_rules
from .spec import (
    CALIBRATION_TASK,
    SPEC_FILE,
    SPEC_VERSION,
    MemberSpec,
    RunSpec,
    bootstrap_of,
    check,
    load_spec,
    seed_of,
    task_name,
)

__all__ = ["DRAW_FIELDS", "MEMBER_FIELDS", "Fit", "PlanMember", "RunOptions", "RunPlan",
           "Stopping", "calibration_identity", "folder_identity", "member_label",
           "profile_lam1", "recorded_spec", "resolve", "resolve_to_draw", "spec_identity",
           "spec_text"]


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
class Fit:
    """How a calibration fits λ: mode ("sample": binomial counts of k answers; "logprob": one
    reply's top logprobs), a bias term, the paper's mirroring, the samples per decision its
    recommendation is for, and an eval run (and a target accuracy) to recommend from."""

    mode: str = "sample"
    bias: bool = True
    mirror: bool = False
    n_budget: int = 5
    eval_dir: str | None = None
    target_accuracy: float | None = None


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
    kind: str = "eval"  # or "calibration": what the run does with its samples
    fit: Fit | None = None  # a calibration's

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


# what a drawing entry point says of a spec it does not draw: (one of the other kind, a dry run)
_REFUSALS = {
    "eval": ("this spec is a calibration's: run it with `ensemble calibrate --spec`, or "
             "evals.calibrate.run_calibration",
             "a dry run sends nothing and writes no summary: call estimate_run(spec, options) "
             "for what the run would request and cost"),
    "calibration": ("this spec is an eval's: run it with `ensemble eval --spec`, or "
                    "evals.runner.run_eval",
                    "a dry run sends nothing and writes nothing: call "
                    "evals.runner.estimate_run(spec, options)"),
}


def resolve_to_draw(spec: RunSpec, options: RunOptions | None, kind: str) -> RunPlan:
    """The plan of a run of `kind` that draws (`runner.run_eval`, `calibrate.run_calibration`),
    or one InputError line for a spec of the other kind or a dry run (`runner.estimate_run`
    plans those)."""
    plan = resolve(spec, options)
    other_kind, dry = _REFUSALS[kind]
    if plan.kind != kind:
        raise InputError(other_kind)
    if plan.dry_run:
        raise InputError(dry)
    return plan


def resolve(spec: RunSpec, options: RunOptions | None = None) -> RunPlan:
    """The plan of a spec, or one InputError line for anything that cannot run, before any
    request: the spec's shape (`spec.check`), the task and its questions, the members and
    their λ, the rules and stopping rules, and what the run's machinery cannot do."""
    options = options or RunOptions()
    check(spec, None)
    if spec.kind == "calibration":
        return _calibration(spec, options)
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
    questions = select_questions(task, limit=spec.limit, seed=seed_of(spec))
    check_scorable(task, questions)
    members = _members(spec, options)
    rules = _rules(spec, task, questions, members, lam1)  # refused before any request
    stopping = _stopping(spec, members)
    requests = reads(rules) | _stop_reads(stopping)
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
        lam1=lam1, stopping=stopping, limit=spec.limit, seed=seed_of(spec),
        bootstrap=bootstrap_of(spec), population=task.population(), data=spec.data,
        out=_run_dir(spec, name, options), model=_run_name(spec, members),
        provider=options.provider, policy=policy,
        build=requests_of(task, max_tokens=spec.max_tokens, extra=requests.sampling()),
        dry_run=options.dry_run, spec_json=spec_text(recorded),
        identity=spec_identity(recorded))


def _calibration(spec: RunSpec, options: RunOptions) -> RunPlan:
    """The plan of a calibration: one model at its temperatures over the questions of a task
    with posteriors, `limit` of them drawn at random with `seed` (questions, not the task's
    items: each question is one observation of the fit; docs/statistics.md)."""
    import random

    name = task_name(spec)
    if not layout_of(name).calibrates:
        raise InputError(f"calibration needs questions with a posterior (P(first choice)); "
                         f"task {name!r} has none: use boxball, or jsonl with a posterior "
                         "field")
    task = load_task(name, data=spec.data)
    questions = list(task.questions())
    if any(q.posterior is None for q in questions):
        raise InputError("calibration questions need a `posterior` field (P(first choice))")
    seed = seed_of(spec)
    if spec.limit is not None and spec.limit < len(questions):
        keep = sorted(random.Random(seed).sample(range(len(questions)), spec.limit))
        questions = [questions[i] for i in keep]
    fit = Fit(**(spec.fit.model_dump() if spec.fit is not None else {}))
    members = tuple(PlanMember(None, m.model, float(m.temperature), spec.k(),
                               _options(options.provider, m.api_base)) for m in spec.members)
    base = spec.members[0].api_base or options.provider.endpoint.api_base
    recorded = recorded_spec(spec, api_base=options.provider.endpoint.api_base)
    return RunPlan(
        task=task, task_name=name, title=task_title(task), questions=questions,
        members=members, ensemble=False, ns=(), rules=(), requests=reads(()), lam1=None,
        stopping=None, limit=spec.limit, seed=seed, bootstrap=bootstrap_of(spec),
        population=len(questions), data=spec.data,
        out=_calibration_dir(spec, name, base, options), model=spec.model,
        provider=options.provider,
        policy=DrawPolicy(fail_on_error=spec.fail_on_error, max_cost=spec.max_cost,
                          progress=options.progress, on_status=options.on_status,
                          batch=options.batch, router=options.router),
        build=calibration_requests(task, mode=fit.mode, max_tokens=spec.max_tokens),
        dry_run=options.dry_run, spec_json=spec_text(recorded),
        identity=spec_identity(recorded), kind="calibration", fit=fit)


def _calibration_dir(spec: RunSpec, name: str, api_base: str | None,
                     options: RunOptions) -> Path:
    """--out, or `runs/calibrate-MODEL` (box-ball) / `runs/calibrate-jsonl-DATA-MODEL`: the
    same command finds the same folder, so a rerun resumes from its store."""
    from .records import default_run_dir

    if options.out:
        return Path(options.out)
    data = spec.data if layout_of(name).takes_data else None
    return default_run_dir(name, spec.model, data=data, kind="calibrate",
                           short=name == CALIBRATION_TASK, api_base=api_base)


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
        raise InputError("two members have the same label; give each its own 'label'")
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
            raise InputError(f"members {seen[key]} and {i} are {m.model} at t = "
                             f"{m.temperature:g}: they would share the stored samples; give "
                             "one member with n = the sum of theirs")
        seen[key] = i
    return resolve_members(ms, calibration=spec.calibration)


def _rules(spec: RunSpec, task: Task, questions: list[Question],
           members: tuple[PlanMember, ...], lam1: float | None) -> tuple[str, ...]:
    """The rules to score, the main vote first, each refused in one line when it cannot apply
    to these questions."""
    kind = task.answer_kind
    open_kind = kind.name if kind is not None and kind.is_open else None
    if spec.ensemble:
        return tuple(ensemble_rules(spec.aggregators, task.layout, questions,
                                    [m.lam for m in members], open_kind=open_kind))
    return tuple(one_model_rules(list(spec.aggregators or ()), task.layout, questions, lam1,
                                 open_kind=open_kind))


def _stop_reads(stopping: Stopping | None) -> Requests:
    """What the stopping rules read from each sample (a rule on soft evidence: logprobs)."""
    from ensemble.stopping import stop_rules

    out = reads(())
    for name in stopping.rules if stopping is not None else ():
        got = getattr(stop_rules.get(name), "requests", None)
        if isinstance(got, Requests):
            out = out | got
    return out


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


# -- what a run records of its spec, and the identity of the run a folder holds ----------------
def profile_lam1(path: str, model: str | None, *, api_base: str | None = None,
                 flag: str = "--calibration") -> float:
    """λ₁ of a calibration profile for one model's rules, checked before any request: fitted,
    finite and >= 0, and of the model and endpoint being evaluated (matched as the Python
    API matches an ensemble's profiles: `members.profile_for`)."""
    import math

    from ensemble.members import profile_for
    from ensemble.profile import CalibrationProfile

    prof = CalibrationProfile.load(path)
    if prof.lam1 is None:
        raise InputError(f"{flag} {path}: the profile has no fitted λ₁; give --lam or "
                         "another profile")
    if not math.isfinite(prof.lam1) or prof.lam1 < 0:
        raise InputError(f"{flag} {path}: λ₁ = {prof.lam1:g} is not a rationality "
                         "(λ₁ must be finite and >= 0); rerun `ensemble calibrate` or give --lam")
    if model:
        try:
            profile_for([(path, prof)], model, api_base, fix="or give --lam")
        except InputError as exc:
            raise InputError(f"{flag} {path}: {exc}") from None
    return float(prof.lam1)


def _absolute(path: str | None) -> str | None:
    return None if path is None else str(Path(path).resolve())


def recorded_spec(spec: RunSpec, *, api_base: str | None = None) -> RunSpec:
    """The spec a run ran, complete: its seed and bootstrap, absolute paths, and each member's
    endpoint (`api_base`: the run's, for members without their own), so that `ensemble eval
    --spec` on it repeats the run."""
    members = [m.model_copy(update={"api_base": m.api_base or api_base,
                                    "calibration": _absolute(m.calibration)})
               for m in spec.members]
    return spec.model_copy(update={
        "schema_version": SPEC_VERSION,
        "members": members, "seed": seed_of(spec),
        "bootstrap": bootstrap_of(spec) if spec.kind == "eval" else None,
        "data": _absolute(spec.data), "open": spec.open or None,
        "calibration": [_absolute(c) for c in spec.calibration] if spec.calibration else None})


def spec_text(spec: RunSpec) -> str:
    """RUN/spec.json's text: the spec the run ran (only the fields set)."""
    from ensemble.jsonio import dumps

    return dumps(spec.model_dump(mode="json", exclude_none=True), indent=2) + "\n"


# what a run draws from: another value is another run's samples (the store keeps both apart,
# but summary.json, the records and spec.json would be overwritten)
DRAW_FIELDS = ("task", "data", "open", "answer", "max_tokens")
MEMBER_FIELDS = ("model", "api_base", "temperature", "label")


def spec_identity(spec: RunSpec) -> dict[str, Any]:
    """A run spec as the identity of its run: what it draws from (its task and data, the
    answer kind and completion budget of its requests, each member's model, endpoint
    (normalised), temperature and label). What is scored from those samples may change in the
    same folder: a rerun with more samples, other n, rules (--aggregator), stopping rules
    (--adaptive), limit or seed rescores the same run. A calibration's: its endpoint and data
    file (`calibration_identity`; other temperatures add to the same run)."""
    from ensemble.providers.endpoints import normalise_api_base

    if spec.kind == "calibration":
        return calibration_identity(spec.members[0].api_base, spec.data)
    doc = spec.model_dump(mode="json", exclude_none=True)
    out: dict[str, Any] = {f: doc.get(f) for f in DRAW_FIELDS}
    out["members"] = [{f: m.get(f) for f in MEMBER_FIELDS} for m in doc.get("members", [])]
    for m in out["members"]:
        if m.get("api_base"):
            m["api_base"] = normalise_api_base(m["api_base"])
    return out


def calibration_identity(api_base: str | None, data: str | None) -> dict[str, Any]:
    """What identifies a calibration beside its task and model: its endpoint and data file."""
    from ensemble.providers.endpoints import normalise_api_base

    return {"kind": "calibration", "api_base": normalise_api_base(api_base) if api_base else None,
            "data": str(Path(data).resolve()) if data else None}


def folder_identity(out: Path) -> dict[str, Any] | None:
    """The identity (`spec_identity`) of the run recorded in a run folder's spec.json; None
    when there is none (a run written before specs were recorded)."""
    path = out / SPEC_FILE
    return spec_identity(load_spec(path, flag="--out")) if path.is_file() else None
