"""The files a run writes, as typed models: summary.json of an eval, calibration.json of a
calibration. Each is built by keyword and validated before it is written; each has one JSON
schema (`EvalSummary.model_json_schema()`; `ensemble schema eval-summary` prints it).

Numbers that may be infinite (λ) are plain floats here; on disk they follow ensemble.jsonio's
encoding (null plus a `k_inf` sign marker), which `load` reverses.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "AdaptiveRow",
    "CalibrationSummary",
    "ContrastRow",
    "CostSummary",
    "EnsembleInfo",
    "EvalSummary",
    "FailedSummary",
    "FixedRow",
    "MemberInfo",
    "Population",
    "ResultRow",
]


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

    Mixed ensembles (`--ensemble`): `member` is "ensemble" (t null, n the total votes) or the
    label of a member scored alone at its own t and n."""

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
    accuracy: float
    sem: float
    ci: list[float]
    saving: float
    vs_fixed: dict[str, Any]
    fixed: list[FixedRow]
    mean_samples_by_member: list[float] | None = None  # the cost rule: votes of each member
    value_usd: float | None = None  # the cost rule: dollars a right decision is worth
    scored: str


class MemberInfo(_Model):
    """A member of a mixed ensemble as it was scored (λ in ψ_λ units at its temperature)."""

    label: str
    model: str
    api_base: str | None
    n: int
    temperature: float
    lam: float | None  # None: unknown; ±∞ on disk as null plus "lam_inf": "+" | "-"
    lam_source: str | None
    samples: int


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


class FailedSummary(_Model):
    count: int
    of: int
    ids: list[str]
    reasons: dict[str, int]
    file: str | None


class EvalSummary(BaseModel):
    """summary.json of `ensemble eval` (and its `--json` document)."""

    model_config = ConfigDict(extra="allow")  # features may add sections (documented there)

    task: str
    model: str
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
    contrasts: list[ContrastRow] = []
    invalid_rate: float
    invalid_rate_by_t: list[dict[str, float]]
    invalid_policy: str
    warnings: list[str] = []
    adaptive: list[AdaptiveRow] = []
    ensemble: EnsembleInfo | None = None  # mixed ensembles (`--ensemble`): its members
    aggregators: list[str] = []  # the rules scored (single model: beside the main vote)
    layout: dict[str, Any] | None = None  # the task's declared `TaskLayout` (how it is scored)
    requests: int
    cost_usd: float | None
    cost: CostSummary
    tokens: dict[str, int]
    samples: dict[str, int]
    retries: int
    errors: int
    rate_limited: int
    wall_time_s: float
    analysis_time_s: float
    run_dir: str
    data: dict[str, Any]
    failed: FailedSummary
    notes: list[str]
    provider: dict[str, Any]
    # where the samples came from (the store key's endpoint: the normalised api_base, a local
    # model's weights checksum; None: the provider's own public endpoint)
    endpoint: str | None = None
    # the provider that drew the samples: "openai" (the official SDK), "litellm", "local", ...
    served_by: str | None = None
    created: str
    version: str


class CalibrationSummary(BaseModel):
    """calibration.json of `ensemble calibrate` (and its `--json` document)."""

    model_config = ConfigDict(extra="allow")

    model: str
    endpoint: str | None = None  # where the samples came from (see EvalSummary.endpoint)
    units: str
    mode: str
    fits: list[dict[str, Any]]
    joint: dict[str, Any] | None
    recommendation: dict[str, Any] | None
    invalid: int
    requests: int
    cost_usd: float | None
