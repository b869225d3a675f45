"""The documents a run writes, as typed models with every field declared (`extra="forbid"`):
summary.json of an eval (one model or a mixed ensemble alike), calibration.json of a
calibration. Each is built by keyword and validated before it is written, and read back
through the same model (`evals.rundir.read_run`); each has one JSON schema (`ensemble schema
eval-summary`, `ensemble schema calibration`).

Numbers that may be infinite (λ) are plain floats here; on disk they follow ensemble.jsonio's
encoding (null plus a `k_inf` sign marker), which the reader reverses.

Each document says its format in `schema_version` (`ensemble.jsonio.upgrade`): summary.json
is format 3 (its adaptive rows' `mean_tokens` since 3), calibration.json format 3 (each fit
says what its interval is since 3); a document
without one (written before formats were
numbered, format 1) is migrated on reading (`read_document`), filling in what the versions of
that time did not write yet, and one too early to bring forward, or newer than this ensemble,
is refused in one line.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ensemble.jsonio import VERSION_KEY
from ensemble.tasks import TaskLayout

__all__ = [
    "CALIBRATION_VERSION",
    "SUMMARY_VERSION",
    "AdaptiveRow",
    "CalibrationFit",
    "CalibrationJoint",
    "CalibrationMeta",
    "CalibrationSummary",
    "ContrastRow",
    "CostSummary",
    "DataNotes",
    "EnsembleInfo",
    "EvalSummary",
    "FailedSummary",
    "FixedRow",
    "InvalidByT",
    "MemberInfo",
    "Population",
    "ProviderInfo",
    "RecommendOption",
    "Recommendation",
    "ResultRow",
    "SampleCounts",
    "SkippedRow",
    "Tables",
    "Target",
    "Tokens",
    "dump",
    "read_document",
]

SUMMARY_VERSION = 3  # summary.json (1: before formats were numbered; 3: mean_tokens in rows)
CALIBRATION_VERSION = 3  # calibration.json (1: before formats were numbered; 3: fits' interval)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Cell(_Model):
    """What every estimate carries: value, SEM and the two intervals (see docs/statistics.md)."""

    sem: float
    ci: list[float]  # 95% for the task
    sem_questions: float
    ci_questions: list[float]  # 95% for these questions
    items: int
    identical: bool = False  # every item's answers identical (t = 0): no sampling noise seen
    questions_exact: bool = True  # False: K = n, the jackknife is not available
    covers: dict[str, str] = {}
    # box-ball: the same in utility (±1 units)
    utility_sem: float | None = None
    utility_ci: list[float] | None = None
    utility_sem_questions: float | None = None
    utility_ci_questions: list[float] | None = None


class ResultRow(_Cell):
    """One (t, n, aggregator) cell of the results table (the eval JSON contract's keys first).

    Mixed ensembles: `member` is "ensemble" (t null, n the total votes) or the label of a
    member scored alone at its own t and n."""

    t: float | None
    n: int
    aggregator: str
    accuracy: float
    utility: float | None = None
    member: str | None = None


class ContrastRow(_Cell):
    """A paired difference: kind "temperature" (t − lowest t), "ensemble" (n − 1),
    "aggregator" (a rule − majority), or "vs-best-member" (a mixed ensemble under a rule −
    its best member alone, `vs_member`, at that member's t and n)."""

    kind: str
    t: float | None
    vs_t: float | None
    member: str | None = None
    n: int
    vs_n: int
    aggregator: str
    vs_aggregator: str | None = None
    vs_member: str | None = None
    difference: float
    utility_difference: float | None = None


class FixedRow(_Model):
    n: int
    accuracy: float
    sem: float
    ci: list[float]


class VsFixed(_Model):
    """An adaptive rule against fixed n = its max n, on the same random orders."""

    n: int
    accuracy: float
    difference: float
    difference_ci: list[float]


class AdaptiveRow(_Model):
    """A stopping rule replayed on the drawn samples, beside fixed n (evals/adaptive.py), or
    the cost rule over a mixed run's members (evals/costeval.py: t null)."""

    t: float | None
    n: int  # the rule's max n (the cost rule: every member's n)
    aggregator: str
    stop: str
    mean_samples: float
    mean_samples_ci: list[float]
    mean_cost_usd: float | None = None  # dollars of the samples it used per question (None: a
    # price unknown)
    mean_tokens: float | None = None  # completion tokens of the samples it used per question
    # (None: some sample's are unknown, or a summary of format 2 or older)
    accuracy: float
    sem: float
    ci: list[float]
    saving: float
    vs_fixed: VsFixed
    fixed: list[FixedRow]
    mean_samples_by_member: list[float] | None = None  # the cost rule: votes of each member
    value_usd: float | None = None  # the cost rule: dollars a right decision is worth
    credit: str | None = None  # the cost rule: what a decision earns ("reference" or "qr")
    scored: str


class MemberInfo(_Model):
    """A member of a mixed ensemble as it was scored (λ in ψ_λ units at its temperature), and
    where its samples came from (`endpoint`, `served_by`: see EvalSummary)."""

    label: str
    model: str
    api_base: str | None
    n: int
    temperature: float
    lam: float | None  # None: unknown; ±∞ on disk as null plus "lam_inf": "+" | "-"
    lam_source: str | None
    samples: int
    endpoint: str | None = None
    served_by: str | None = None


class EnsembleInfo(_Model):
    members: list[MemberInfo]
    aggregators: list[str]
    units: str
    assumption: str


class Population(_Model):
    items: int
    total: int
    unit: str
    limit: int | None = None
    fraction: float


class CostSummary(_Model):
    now_usd: float | None
    stored_samples_usd: float | None
    note: str
    # what the samples behind the results cost, summed over samples.jsonl (a sample several
    # questions share counted for each); None: some sample's cost is unknown, or an old summary
    samples_usd: float | None = None
    # a replay: what the replies it served had cost when recorded (it paid nothing: now_usd
    # is 0); None: no reply was replayed, or a recorded cost is unknown
    recorded_usd: float | None = None


class FailedSummary(_Model):
    count: int
    of: int
    ids: list[str]
    reasons: dict[str, int]
    file: str | None


class Tokens(_Model):
    prompt: int | None
    completion: int | None


class SampleCounts(_Model):
    total: int | None
    from_store: int | None
    from_batches: int | None = None  # collected from the provider's Batch API by this run
    # read from the store after another request drew them while this run went on: a question
    # whose prompt another question has too, or another process on the same store
    shared: int | None = None


class InvalidByT(_Model):
    """The invalid-reply rate of one member (a temperature of one model; `member` its index in
    a mixed ensemble)."""

    t: float
    member: float | None = None
    invalid_rate: float


class SkippedRow(_Model):
    row: int
    reason: str


class DataNotes(_Model):
    """What the data said: malformed rows skipped (--skip-invalid), counts of rows with issues,
    the answer kind of open answers, and what a task says about its data (`Task.data_notes`:
    mathqa --open's `not_numeric`; a task file's paths and description). A task that notes
    something else declares it here."""

    skipped: list[SkippedRow] | None = None
    issues: dict[str, int] | None = None
    answer: str | None = None
    not_numeric: int | None = None  # mathqa --open: right options that are not plain numbers
    task_file: str | None = None  # a declarative task file (`ensemble eval path/to/task.yaml`)
    data_file: str | None = None  # the data file it reads
    description: str | None = None  # what the task file says it is


class ProviderInfo(_Model):
    """The provider options of the run (`ProviderOptions.public()`: the key as a fingerprint)."""

    api_base: str | None
    api_key: str | None
    timeout: float
    max_concurrency: int
    rpm: float | None
    tpm: float | None
    max_attempts: int
    max_retry_time: float
    max_failures: int
    price_per_1k: tuple[float, float] | None  # USD per 1,000 (prompt, completion) tokens


class Tables(_Model):
    """What the scoring step computes of a run (`evals.grid.analyse`, `evals.mixed`): the
    part of summary.json that is its tables, with what they say about themselves."""

    metric: str
    estimator: str
    temperatures: list[float]
    ns: list[int]
    samples_per_question: int
    population: Population
    intervals: dict[str, str]
    results: list[ResultRow]
    contrasts: list[ContrastRow]
    invalid_rate: float
    invalid_rate_by_t: list[InvalidByT]
    invalid_policy: str
    warnings: list[str]
    adaptive: list[AdaptiveRow] = []
    notes: list[str] = []  # what the scoring says of itself (a rule's weighing of the run)


class EvalSummary(_Model):
    """summary.json of `ensemble eval` (and its `--json` document): one model at k temperatures
    (k members scored alone at each n) and a mixed ensemble (`ensemble`: its members, voting
    together) have the same fields, built in one place (`evals.runner`)."""

    schema_version: int = Field(default=SUMMARY_VERSION,
                                description="the format of this document")
    task: str  # the registered task the spec names (a task file: "taskfile", its path in data)
    model: str
    # the task's name for people: the task's, or a task file's `name` or stem (None: a run
    # written before summaries had it; `RunFolder.title` derives it)
    title: str | None = None
    metric: str
    estimator: str
    temperatures: list[float]
    ns: list[int]
    samples_per_question: int
    bootstrap: int
    seed: int
    population: Population
    intervals: dict[str, str]
    results: list[ResultRow]
    contrasts: list[ContrastRow]
    invalid_rate: float
    invalid_rate_by_t: list[InvalidByT]
    invalid_policy: str
    warnings: list[str]
    adaptive: list[AdaptiveRow]
    ensemble: EnsembleInfo | None  # a mixed ensemble: its members; None for one model
    aggregators: list[str]  # the rules scored, the main vote first
    lam1: float | None  # one model's λ₁ for the rules (ψ_λ units at t = 1); None: not given
    layout: TaskLayout  # the task's declared layout (how it is scored)
    requests: int
    cost_usd: float | None
    cost: CostSummary
    tokens: Tokens  # this run's requests: what this process paid for
    tokens_samples: Tokens | None = None  # the samples behind the results (samples.jsonl)
    samples: SampleCounts
    retries: int
    errors: int
    rate_limited: int
    wall_time_s: float
    analysis_time_s: float
    run_dir: str
    data: DataNotes
    failed: FailedSummary
    notes: list[str]
    provider: ProviderInfo
    # where the samples came from (the store key's endpoint: the normalised api_base, a local
    # model's weights checksum; None: the provider's own public endpoint, or members drawn from
    # several: see ensemble.members)
    endpoint: str | None
    # the provider that drew the samples: "openai" (the official SDK), "litellm", "local", ...
    # (members drawn by several: joined by ", ")
    served_by: str | None
    created: str
    version: str


class CalibrationFit(_Model):
    """λ at one temperature (ψ_λ units; ±∞ on disk as null plus a sign marker)."""

    t: float | None
    lam: float
    se: float | None
    ci: list[float]
    bias: float | None
    bias_se: float | None
    separated: bool
    n_questions: int
    n_valid: int
    deviance: float | None
    gof_pvalue: float | None
    deviance_pvalue: float | None
    gof_reps: int | None
    boot_seed: int | None
    notes: list[str]
    # what `ci` is (ensemble.calibration's PROFILE_INTERVAL, ONE_SIDED_INTERVAL,
    # LOGPROB_INTERVAL); None: written before format 3, when it was not said
    interval: str | None = None


class CalibrationJoint(_Model):
    """The joint fit λ(t) = λ₁ / t and its test."""

    lam1: float
    se: float | None
    ci: list[float]
    lrt_pvalue: float | None
    holds: bool | None
    gof_pvalue: float | None
    deviance_pvalue: float | None
    bias_form: str | None
    biases: list[float] | None
    gof_reps: int | None
    boot_seed: int | None


class RecommendOption(_Model):
    t: float | None
    lam: float
    aggregator: str
    worst_regret: float
    robust_f: list[float]
    eval_accuracy: float | None
    eval_sem: float | None


class Target(_Model):
    """The cheapest eval cell reaching `--target-accuracy` (or the best one, when none does)."""

    accuracy: float
    met: bool
    text: str
    t: float | None = None
    n: int | None = None
    aggregator: str | None = None
    value: float | None = None
    ci: list[float] | None = None
    ensemble: str | None = None


class Recommendation(_Model):
    n: int
    g: float
    t: float | None
    aggregator: str
    lam: float
    worst_regret: float
    summary: str
    why: str
    ensemble: str
    caveats: list[str]
    options: list[RecommendOption]
    target: Target | None


class CalibrationMeta(_Model):
    """What a calibration ran: its model and endpoint, task, mode, sizes and provenance."""

    model: str
    api_base: str | None
    endpoint: str | None
    served_by: str | None
    task: str
    data: str | None
    mode: str
    questions: int
    samples_per_question: int
    temperatures: list[float]
    bias: bool
    mirror: bool
    seed: int
    limit: int | None
    created: str
    version: str
    requests: int
    cost_usd: float | None
    invalid: int
    run_dir: str
    bootstrap: str | None


class CalibrationSummary(_Model):
    """calibration.json of `ensemble calibrate` (and its `--json` document)."""

    schema_version: int = Field(default=CALIBRATION_VERSION,
                                description="the format of this document")
    model: str
    endpoint: str | None  # where the samples came from (see EvalSummary.endpoint)
    meta: CalibrationMeta
    units: str
    mode: Literal["sample", "logprob"]
    fits: list[CalibrationFit]
    joint: CalibrationJoint | None
    recommendation: Recommendation | None
    invalid: int
    requests: int
    cost_usd: float | None
    rate_limited: int
    failed: FailedSummary
    report: dict[str, str]  # "html", "md": the report's files
    profile: str  # profile.json


def dump(doc: BaseModel) -> dict[str, Any]:
    """A document as the JSON it is written as (fields left at their defaults in rows are
    left out, as the rows' builders leave them; its format always said)."""
    out = doc.model_dump(mode="python", exclude_unset=True)
    version = getattr(doc, VERSION_KEY, None)
    return out if version is None else {VERSION_KEY: version, **out}


def read_document(model: type[EvalSummary] | type[CalibrationSummary], text: str, *,
                  where: str, fix: str) -> EvalSummary | CalibrationSummary:
    """summary.json (`EvalSummary`) or calibration.json (`CalibrationSummary`) from its text:
    its format brought to this version's (`ensemble.jsonio.upgrade`: an older one migrated,
    a newer one refused in one InputError line beginning with `where`, `fix` saying what
    rewrites an old one), then validated by its model (a pydantic ValidationError, for the
    caller to name the field; a JSON error as ValueError)."""
    import json

    from ensemble.jsonio import from_jsonable, upgrade

    if model is EvalSummary:
        current, steps = SUMMARY_VERSION, {1: _summary_from_1, 2: _summary_from_2}
    else:
        current, steps = CALIBRATION_VERSION, {1: _calibration_from_1, 2: _calibration_from_2}
    doc = upgrade(json.loads(text), current=current, migrations=steps, where=where, fix=fix)
    return model.model_validate(from_jsonable(doc))


def _summary_from_2(doc: dict[str, Any]) -> dict[str, Any]:
    """summary.json of format 2 (2026-11-26 to 27): its adaptive rows lack `mean_tokens`, which
    reads as unknown (None): nothing to change."""
    return doc


def _calibration_from_2(doc: dict[str, Any]) -> dict[str, Any]:
    """calibration.json of format 2 (2026-11-25 to 27): its fits do not say what their interval
    is, which reads as unknown (None): nothing to change. (Its logprob fits' Wald intervals
    were too narrow: docs/calibration.md, "Logprob mode".)"""
    return doc


# -- migrations: format 1 (unnumbered, as written up to 2026-11-25) to 2 -----------------------
# They work on the JSON as written (±∞ still as null plus a `_inf` marker), before decoding.

def _endpoint(api_base: Any) -> str | None:
    """Where the samples of an old run came from: the store key's endpoint of its api_base."""
    from ensemble.providers.endpoints import normalise_api_base

    return normalise_api_base(api_base) if isinstance(api_base, str) and api_base else None


def _summary_from_1(doc: dict[str, Any]) -> dict[str, Any]:
    """summary.json before formats were numbered. Those of 2026-11-23 to 25 lack what later
    versions added (the rules scored, the task's layout, one model's λ₁, adaptive rows, where
    the samples came from, the provider that drew them) and wrote a mixed ensemble's provider
    options per member and an infinite member λ as a boolean `lam_inf`: filled in and
    rewritten as now. Earlier ones, without the intervals for the questions run, cannot be."""
    from ensemble.errors import InputError
    from ensemble.rules import is_baseline
    from ensemble.tasks import layout_of

    rows = doc.get("results")
    if (not isinstance(rows, list) or any(k not in doc for k in ("estimator", "population",
                                                                  "intervals"))
            or any(isinstance(r, dict) and "ci_questions" not in r for r in rows)):
        raise ValueError("written by an early version of ensemble (before summaries had the "
                         "intervals for the questions run, 2026-11-23), which this one cannot "
                         "read; its store keys samples without their endpoint, so a rerun draws "
                         "them again")
    ens = doc.setdefault("ensemble", None)
    members = [m for m in (ens.get("members") or []) if isinstance(m, dict)] if isinstance(
        ens, dict) else []
    for m in members:
        if isinstance(m.get("lam_inf"), bool):
            # the flag of 2026-11-23 meant λ = +∞ (λ >= 0); now the sign marker of jsonio
            if m.pop("lam_inf"):
                m["lam"], m["lam_inf"] = None, "+"
        m.setdefault("endpoint", _endpoint(m.get("api_base")))
    if "aggregators" not in doc:
        if isinstance(ens, dict) and isinstance(ens.get("aggregators"), list):
            doc["aggregators"] = list(ens["aggregators"])
        else:  # one model: its rows' rules, the main vote (the first row's) first
            names = [r.get("aggregator") for r in rows if isinstance(r, dict)]
            doc["aggregators"] = [a for a in dict.fromkeys(names)
                                  if a and not is_baseline(str(a))]
    if "layout" not in doc:
        import dataclasses

        try:
            layout = layout_of(str(doc.get("task")))
        except InputError:  # a task no longer registered: the default layout
            layout = TaskLayout()
        doc["layout"] = dataclasses.asdict(layout)
    provider = doc.get("provider")
    if isinstance(provider, dict) and provider and all(
            isinstance(v, dict) for v in provider.values()):
        # a mixed ensemble's options per member label: one set when they agree; else the
        # first member's limits without an endpoint (each member names its own api_base)
        infos = list(provider.values())
        one = dict(infos[0])
        if any(i != infos[0] for i in infos[1:]):
            one["api_base"] = None
        doc["provider"] = one
    if "endpoint" not in doc:  # one endpoint for all the samples, or None
        if members:
            ends = {m["endpoint"] for m in members}
            doc["endpoint"] = ends.pop() if len(ends) == 1 else None
        elif isinstance(doc.get("provider"), dict):
            doc["endpoint"] = _endpoint(doc["provider"].get("api_base"))
    for key in ("lam1", "served_by"):
        doc.setdefault(key, None)
    doc.setdefault("adaptive", [])
    return doc


def _calibration_from_1(doc: dict[str, Any]) -> dict[str, Any]:
    """calibration.json before formats were numbered: those of 2026-11-23 to 25 lack where the
    samples came from and who drew them, the bootstrap behind the p-values and the bias form
    of the joint fit; filled in (unknown: null). Earlier ones, without `meta`, cannot be."""
    meta = doc.get("meta")
    if not isinstance(meta, dict) or not isinstance(doc.get("fits"), list):
        raise ValueError("written by an early version of ensemble (before calibrations "
                         "recorded what they ran, `meta`, 2026-11-23), which this one cannot "
                         "read; its store keys samples without their endpoint, so a rerun draws "
                         "them again")
    endpoint = _endpoint(meta.get("api_base"))
    doc.setdefault("endpoint", endpoint)
    meta.setdefault("endpoint", endpoint)
    for key in ("served_by", "bootstrap"):
        meta.setdefault(key, None)
    for fit in doc["fits"]:
        if isinstance(fit, dict):
            for key in ("deviance_pvalue", "gof_reps", "boot_seed"):
                fit.setdefault(key, None)
    joint = doc.get("joint")
    if isinstance(joint, dict):
        for key in ("gof_pvalue", "deviance_pvalue", "bias_form", "biases", "gof_reps",
                    "boot_seed"):
            joint.setdefault(key, None)
    return doc
