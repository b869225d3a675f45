"""The run spec's fields: a member (`MemberSpec`), a calibration's fit (`FitSpec`), a run
(`RunSpec`, and `EnsembleSpec`, the same under the name `--ensemble` files were read with),
the spec's format version and defaults, and the flag of `ensemble eval` / `ensemble calibrate`
that gives each field (messages name a field as the user gave it).

`evals.spec` composes and reads specs of these fields (and is where they are imported from);
`evals.speccheck` checks one whole.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from ensemble.providers.options import check_field, option, options_in

from .intervals import MIN_BOOTSTRAP

__all__ = ["CALIBRATE_FLAGS", "CALIBRATION_SAMPLES", "CALIBRATION_TASK", "DEFAULT_BOOTSTRAP",
           "FIT_FIELDS", "FLAGS", "SPEC_FILE", "SPEC_VERSION", "EnsembleSpec", "FitSpec",
           "MemberSpec", "RunSpec"]

SPEC_FILE = "spec.json"
# the format of a spec (a spec without `schema_version` is read as this one); 2 adds a run's
# `kind` and a calibration's `fit` (format 1 is an eval's spec, the same fields otherwise)
SPEC_VERSION = 2
CALIBRATION_SAMPLES = 20  # a calibration's samples per question and temperature by default
CALIBRATION_TASK = "boxball"  # what a calibration fits on when its spec names no task


class MemberSpec(BaseModel):
    """One member: `model` at `temperature`; `n` its votes per decision in an ensemble."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="litellm model string, e.g. openai/gpt-4o-mini")
    # the provider options a member takes are declared once (`ensemble.providers.options`,
    # "member"): their words and their checks come from there
    api_base: str | None = Field(None, description=option("api_base").help)
    n: int | None = Field(None, ge=1, description="votes of this member per decision: the "
                                                  "members vote together (leave it out when "
                                                  "n is given at the top)")
    temperature: float = Field(ge=0, allow_inf_nan=False, description="sampling temperature")
    lam: float | None = Field(None, ge=0, description="λ at this temperature (ψ_λ units)")
    calibration: str | None = Field(None, description="calibration profile (or folder) giving "
                                                      "this member's λ₁; λ = λ₁ / t")
    samples: int | None = Field(None, ge=1, description="samples per question (default: "
                                                        "the larger of n and --samples)")
    label: str | None = Field(None, description="name in the tables (default model@t)")
    price_per_1k: tuple[float, float] | None = Field(
        None, description=option("price_per_1k").help)

    @field_validator(*(o.name for o in options_in("member")), mode="before")
    @classmethod
    def _declared(cls, value: Any, info: ValidationInfo) -> Any:
        return check_field(str(info.field_name), value)


class FitSpec(BaseModel):
    """How a calibration fits λ per temperature (`ensemble calibrate`'s options)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["sample", "logprob"] = Field(
        "sample", description="sample: k answers per question and t, fitted as binomial "
                              "counts; logprob: one reply's top logprobs for P(L)")
    bias: bool = Field(True, description="fit a bias term (a constant preference for L)")
    mirror: bool = Field(False, description="the paper's symmetric mirroring of each question")
    n_budget: int = Field(5, ge=1, description="the samples per decision you can afford (the "
                                               "recommendation's n)")
    eval_dir: str | None = Field(None, description="an eval run of your task at these "
                                                   "temperatures, for expected accuracy")
    target_accuracy: float | None = Field(
        None, gt=0, lt=1, description="with eval_dir: recommend the fewest samples per decision "
                                      "whose eval accuracy reaches it")


class RunSpec(BaseModel):
    """A run: an eval (the task, its members, the cells, the rules and the failure policy) or a
    calibration (`kind`: the task, one model at its temperatures, the fit)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int | None = Field(
        None, description=f"the spec's format ({SPEC_VERSION}; leave it out in a spec you write)")
    kind: Literal["eval", "calibration"] = Field(
        "eval", description="eval: score votes (`ensemble eval`); calibration: fit λ per "
                            "temperature (`ensemble calibrate`)")
    task: str | None = Field(None, description="mathqa | boxball | jsonl | a registered task "
                                               "(or the command's TASK)")
    members: list[MemberSpec] = Field(min_length=1)
    n: list[int] | None = Field(None, min_length=1, description=(
        "the cells of one model at several temperatures: each member alone at each group size "
        "n (then no member has its own n)"))
    samples: int | None = Field(None, ge=1, description="samples per question and member "
                                                        "(default: the largest n)")
    aggregators: list[str] | None = Field(
        None, description="rules to score (default: majority or plurality; an ensemble with "
                          "every λ known also lam-weighted, and robust on binary tasks)")
    lam1: float | None = Field(None, ge=0, allow_inf_nan=False,
                               description="one model's λ₁ (ψ_λ units at t = 1) for the rules")
    calibration: list[str] | None = Field(
        None, description="calibration profiles: an ensemble's matched to members by (model, "
                          "api_base); one model's gives its λ₁")
    limit: int | None = Field(None, ge=1, description="a random subset of the task (boxball: "
                                                      "scenarios)")
    seed: int | None = Field(None, ge=0, description="seed of the subset and the bootstrap")
    data: str | None = Field(None, description="the task's data file")
    open: bool | None = Field(None, description="mathqa: open answers (a number)")
    answer: Literal["number", "math", "text"] | None = Field(
        None, description="jsonl: the answer kind of rows without choices")
    max_tokens: int | None = Field(None, ge=1, description="completion token limit per sample")
    # its minimum is checked by `check`, not here: a run recorded with fewer still reads
    bootstrap: int | None = Field(None, description=(
        f"bootstrap resamples (default 1000; at least {MIN_BOOTSTRAP}: fewer cannot place a "
        "95% interval)"))
    adaptive: list[str] | None = Field(
        None, description="stopping rules (registered names): one model's scored beside fixed "
                          "n (bayes, beta); an ensemble's chooses among its members (cost)")
    max_n: int | None = Field(None, ge=1, description="the adaptive rules' budget")
    stop_cost: float | None = Field(None, gt=0, description="the adaptive rules' cost per sample "
                                    "(for the rules that take a cost)")
    value_usd: float | None = Field(None, gt=0, description="the cost rule's dollars per right "
                                    "decision (default: it loses at most 0.005 accuracy "
                                    "against the strongest member alone)")
    cost_credit: Literal["reference", "qr"] | None = Field(
        None, description="what the cost rule's decision earns: agreement with the strongest "
                          "member's unlimited vote (reference, the default) or P(it is right) "
                          "under quantal response through the members' λ (qr)")
    fit: FitSpec | None = Field(None, description="a calibration's fit (kind calibration)")
    fail_on_error: float | None = Field(None, ge=0, description="failure policy: the share "
                                                                "(< 1) or count of questions "
                                                                "that may fail")
    max_cost: float | None = Field(None, gt=0, description="stop spending above this (USD)")

    @property
    def ensemble(self) -> bool:
        """The members vote together (each has its own n), not one model's cells."""
        return any(m.n is not None for m in self.members)

    @property
    def temperatures(self) -> tuple[float, ...]:
        """The members' temperatures, in order (one model's: its rows)."""
        return tuple(float(m.temperature) for m in self.members)

    @property
    def model(self) -> str:
        """One model's name (its first member's)."""
        return self.members[0].model

    def k(self) -> int:
        """One model's samples per question and temperature (default: the largest n; a
        calibration's: 20, and 1 in logprob mode, whose one reply carries the logprobs)."""
        if self.kind == "calibration":
            if self.fit is not None and self.fit.mode == "logprob":
                return 1
            return self.samples if self.samples is not None else CALIBRATION_SAMPLES
        return self.samples if self.samples is not None else max(self.n or (1,))


DEFAULT_BOOTSTRAP = 1000


class EnsembleSpec(RunSpec):
    """The run spec under the name `--ensemble` files were validated with (the same fields)."""


FIT_FIELDS = tuple(FitSpec.model_fields)


# a spec field -> the flag of `ensemble eval` that gives it
FLAGS = {"task": "TASK", "n": "--n", "samples": "--samples", "aggregators": "--aggregator",
         "lam1": "--lam", "calibration": "--calibration", "limit": "--limit", "seed": "--seed",
         "data": "--data", "open": "--open", "answer": "--answer", "max_tokens": "--max-tokens",
         "bootstrap": "--bootstrap", "adaptive": "--adaptive", "max_n": "--max-n",
         "stop_cost": "--stop-cost", "fail_on_error": "--fail-on-error",
         "max_cost": "--max-cost"}


# a field of a calibration's spec (or its fit) -> the flag of `ensemble calibrate` that gives it
CALIBRATE_FLAGS = {"task": "--task", "samples": "--samples", "data": "--data", "limit": "--limit",
                   "seed": "--seed", "max_tokens": "--max-tokens",
                   "fail_on_error": "--fail-on-error", "max_cost": "--max-cost",
                   "mode": "--mode", "bias": "--no-bias", "mirror": "--mirror",
                   "n_budget": "--n-budget", "eval_dir": "--eval-dir",
                   "target_accuracy": "--target-accuracy"}
