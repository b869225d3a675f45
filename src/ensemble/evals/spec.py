"""The run spec: what an eval run draws and how it is scored, one model for every run.

A run is a task, its members, the samples each draws per question, the cells scored, the rules
and the failure policy. A single model at temperatures t1..tk is k members (model, ti) scored
alone at each group size of the top-level `n` (the cells of `ensemble eval --model M --t ...
--n ...`); a mixed ensemble gives each member its own `n`, and its members vote together under
each rule (`--ensemble`). The spec comes from the command line (`from_flags`), from a file
(`ensemble eval --spec FILE`, or `--ensemble FILE`: the same), or from both: a flag given
replaces the file's field. Every run records the spec it ran in `RUN/spec.json`
(`write_spec`), so `ensemble eval --spec RUN/spec.json` repeats it there.

    {"task": "boxball",
     "members": [{"model": "openai/gpt-4o-mini", "temperature": 0.5},
                 {"model": "openai/gpt-4o-mini", "temperature": 1.0}],
     "n": [1, 3, 5], "samples": 10, "limit": 50}

    {"task": "boxball",
     "members": [{"model": "openai/a", "api_base": "http://127.0.0.1:8001/v1", "n": 2,
                  "temperature": 1.0, "lam": 2.0},
                 {"model": "openai/b", "n": 1, "temperature": 1.0, "calibration": "runs/cal-b"}],
     "fail_on_error": 0.05}

λ is in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units: a member's `lam` at its temperature, `lam1` the one
model's λ at t = 1 (λ = λ₁ / t).

A recorded spec says its format (`"schema_version": 1`, SPEC_VERSION); a hand-written one may
leave it out (it is read as this version's), and one of a newer format is refused in one line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ensemble.errors import InputError
from ensemble.providers.options import check_field, option, options_in

from .intervals import MIN_BOOTSTRAP, check_bootstrap

__all__ = ["CALIBRATION_SAMPLES", "CALIBRATION_TASK", "DEFAULT_BOOTSTRAP", "FLAGS", "SPEC_FILE",
           "SPEC_VERSION", "EnsembleSpec", "FitSpec", "MemberSpec", "RunSpec", "bootstrap_of",
           "calibration_command_spec", "calibration_spec", "check", "command_spec", "from_flags",
           "load_spec", "one_model", "seed_of", "spec_folder", "spec_schema", "task_name"]

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


def seed_of(spec: RunSpec) -> int:
    """The run's seed (default 0)."""
    return spec.seed if spec.seed is not None else 0


def bootstrap_of(spec: RunSpec) -> int:
    """The run's bootstrap resamples (default 1000)."""
    return spec.bootstrap if spec.bootstrap is not None else DEFAULT_BOOTSTRAP


def task_name(spec: RunSpec) -> str:
    """The run's task (a calibration's default: box-ball; an eval without one is refused
    before it gets here)."""
    if not spec.task and spec.kind == "calibration":
        return CALIBRATION_TASK
    if not spec.task:
        raise InputError("give the task: ensemble eval TASK ... (or \"task\" in the spec)")
    return spec.task


def one_model(task: str, model: str, temperatures: Any, n: Any, *,
              api_base: str | None = None, **fields: Any) -> RunSpec:
    """The spec of one model at `temperatures`, scored alone at each group size in `n` (what
    `ensemble eval TASK --model M --t ... --n ...` runs); `fields`: the spec's other fields
    (samples, limit, seed, data, aggregators, lam1, ...). One InputError line when invalid.

        spec = one_model("boxball", "openai/gpt-4o-mini", [0.5, 1.0], [1, 3, 5], samples=10)
    """
    members = [{"model": model, "api_base": api_base, "temperature": t} for t in temperatures]
    spec = _validated({"task": task, "members": members, "n": list(n), **fields},
                      "the spec", flags=tuple(f for f in fields if f in FLAGS))
    check(spec, None)
    return spec


FIT_FIELDS = tuple(FitSpec.model_fields)


def calibration_spec(model: str, temperatures: Any, *, api_base: str | None = None,
                     **fields: Any) -> RunSpec:
    """The spec of a calibration of `model` at `temperatures` (what `ensemble calibrate
    --model M --t ...` runs); `fields`: the spec's other fields (task, data, samples, limit,
    seed, max_tokens, ...) and the fit's (mode, bias, mirror, n_budget, eval_dir,
    target_accuracy). One InputError line when invalid.

        spec = calibration_spec("openai/gpt-4o-mini", [0.5, 1.0], samples=20, limit=100)
    """
    fit = {k: fields.pop(k) for k in FIT_FIELDS if k in fields}
    members = [{"model": model, "api_base": api_base, "temperature": t} for t in temperatures]
    spec = _validated({"kind": "calibration", "members": members, "fit": fit, **fields},
                      "the spec", flags=tuple(f for f in fields
                                              if f in FLAGS or f in CALIBRATE_FLAGS))
    check(spec, None)
    return spec


class EnsembleSpec(RunSpec):
    """The run spec under the name `--ensemble` files were validated with (the same fields)."""


def spec_schema() -> dict[str, Any]:
    """The JSON schema of a spec file."""
    return RunSpec.model_json_schema()


# a spec field -> the flag of `ensemble eval` that gives it
FLAGS = {"task": "TASK", "n": "--n", "samples": "--samples", "aggregators": "--aggregator",
         "lam1": "--lam", "calibration": "--calibration", "limit": "--limit", "seed": "--seed",
         "data": "--data", "open": "--open", "answer": "--answer", "max_tokens": "--max-tokens",
         "bootstrap": "--bootstrap", "adaptive": "--adaptive", "max_n": "--max-n",
         "stop_cost": "--stop-cost", "fail_on_error": "--fail-on-error",
         "max_cost": "--max-cost"}

_FIX = {
    "members": 'give a list of members, e.g. [{"model": "openai/gpt-4o-mini", "n": 3, '
               '"temperature": 0.7}]',
    "model": "a litellm model string such as openai/gpt-4o-mini",
    "n": "an integer >= 1 (a member's votes per decision), or a list of them at the top",
    "temperature": "a number >= 0",
    "lam": "a number >= 0 in ψ_λ units (λ at this member's temperature), or leave it out",
    "lam1": "a number >= 0 in ψ_λ units (one model's λ at t = 1), or leave it out",
    "samples": "an integer >= 1, at least n",
    "calibration": "a path (member) or a list of paths (top level) to calibration profiles",
    "aggregators": "a list of registered rule names (`ensemble eval --help` lists them)",
    "task": "a task name, e.g. boxball",
}


def load_spec(path: str | os.PathLike[str], *, flag: str = "--spec",
              model: str | None = None, temperatures: list[float] | None = None) -> RunSpec:
    """Read and validate a spec file (a run folder: its spec.json); a bad one is one InputError
    line naming the field and the fix. `model` (`--model`) is the model of the members that
    name none: a spec that leaves the provider to the command line (evals/paper-*.json); a
    spec without members (none, or `[]`) takes them from `model` at `temperatures` (`--t`),
    and one with members refuses `temperatures`."""
    p = Path(path)
    if p.is_dir():
        p = p / SPEC_FILE
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{flag} {path}: not UTF-8 text (a binary file?); give the JSON "
                         "spec of the run") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{flag} {path}: not JSON ({exc.msg} at line {exc.lineno})"
                         ) from None
    except RecursionError:
        raise InputError(f"{flag} {path}: nested too deeply to read (a spec is an object of "
                         "a few levels); give the JSON spec of the run") from None
    from ensemble.jsonio import upgrade

    where = f"{flag} {path}"
    doc = upgrade(doc, current=SPEC_VERSION, migrations={1: dict}, where=where,
                  fix="write it as `ensemble schema run-spec` describes (schema_version may be "
                      "left out)")
    for key, one in (("calibration", str), ("n", int)):  # one where the field takes a list
        if isinstance(doc, dict) and isinstance(doc.get(key), one):
            doc[key] = [doc[key]]
    if isinstance(doc, dict) and doc.get("members") in (None, []):
        if not (model and temperatures):
            fix = "--t T" if model else "--model M" if temperatures else "--model M --t T"
            raise InputError(f"{where} names no members: give them in the file, e.g. "
                             '"members": [{"model": "openai/gpt-4o-mini", "temperature": 0.7}], '
                             f"or on the command line: {fix}")
        doc["members"] = [{"model": model, "temperature": t} for t in temperatures]
    elif temperatures:
        raise InputError(f"{where} names the members: drop --t (each has its temperature)")
    elif isinstance(doc, dict) and isinstance(doc.get("members"), list):
        _fill_model(doc["members"], model, where)
    return _validated(doc, where)


def _fill_model(members: list[Any], model: str | None, where: str) -> None:
    """The members without a model get `model` (--model); without --model one of them is an
    error naming it, and --model for a spec whose members all name theirs is refused."""
    unnamed = [m for m in members if isinstance(m, dict) and "model" not in m]
    if model is None:
        if unnamed:
            raise InputError(f"{where}: members.{members.index(unnamed[0])} names no model: "
                             "give --model M (the spec leaves the model to the command line)")
        return
    if not unnamed:
        raise InputError(f"{where} names the members: drop --model (every member names its "
                         "model)")
    for m in unnamed:
        m["model"] = model


def _validated(doc: Any, where: str, *, flags: tuple[str, ...] = ()) -> RunSpec:
    """A RunSpec from a document, or one InputError line naming the field (or, for a field
    in `flags`, the command-line flag that gave it) and the fix."""
    if not isinstance(doc, dict):
        raise InputError(f"{where}: a spec is a JSON object, not {type(doc).__name__} "
                         f"{_short(doc)}; fix: write it as {{\"task\": \"boxball\", "
                         f"\"members\": [{{\"model\": \"openai/gpt-4o-mini\"}}], ...}}")
    try:
        return RunSpec.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        top = str(err["loc"][0]) if err["loc"] else ""
        if top in flags:
            raise InputError(_flag_error(FLAGS.get(top) or CALIBRATE_FLAGS[top], err)) from None
        field = next((str(x) for x in reversed(err["loc"]) if isinstance(x, str)), "members")
        raise InputError(f"{where}: {loc}: {err['msg'].lower()}; fix: {_fix(field, err)}"
                         ) from None


def _short(doc: Any) -> str:
    text = json.dumps(doc) if isinstance(doc, (list, str, int, float)) else repr(doc)
    return text if len(text) <= 40 else text[:37] + "..."


def _fix(field: str, err: Any) -> str:
    """What to write instead: the field's own advice, its description for a known field with a
    bad value (`limit: 1e400`, `max_cost: -1`), removal only for a field the spec has not."""
    if field in _FIX:
        return _FIX[field]
    known = {**MemberSpec.model_fields, **RunSpec.model_fields, **FitSpec.model_fields}
    if field in known and err.get("type") != "extra_forbidden":
        ctx = err.get("ctx") or {}
        bound = next((f" {op} {ctx[k]}" for k, op in (("ge", ">="), ("gt", ">"), ("le", "<="),
                                                       ("lt", "<")) if k in ctx), "")
        finite = " (a finite number)" if "finite" in str(err.get("msg", "")) else ""
        return (f"give {field} a valid value{bound}{finite}: {known[field].description}"
                if known[field].description else f"give {field} a valid value{bound}{finite}")
    return ("remove it (allowed: " + ", ".join(MemberSpec.model_fields) + " per member; "
            + ", ".join(RunSpec.model_fields) + " at the top)")


def _flag_error(flag: str, err: Any) -> str:
    """A flag's value out of its field's bounds, in the words of the other options' checks."""
    got, ctx = err.get("input"), err.get("ctx") or {}
    what = "an integer" if isinstance(got, int) else "a number"
    for key, op in (("ge", ">="), ("gt", ">")):
        if key in ctx:
            return f"{flag} must be {what} {op} {ctx[key]}, got {got}"
    return f"{flag} {got}: {err['msg'].lower()}"


def spec_folder(path: str | os.PathLike[str]) -> Path | None:
    """The run folder a spec was recorded in (RUN, or RUN/spec.json beside the run's store or
    summary: a run stopped half-way too), where repeating it resumes; None for a spec written
    elsewhere."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    ran = (folder / "summary.json").is_file() or (folder / "samples.sqlite").is_file()
    return folder if ran and (p.is_dir() or p.name == SPEC_FILE) else None


def from_flags(given: dict[str, Any], *, file: RunSpec | None = None, where: str = "",
               model: str | None = None, temperatures: list[float] | None = None,
               api_base: str | None = None) -> RunSpec:
    """The spec of a command line: the file's, if any, with each field of `given` (spec field
    -> the flag's value, for the flags given) replacing its own; or, without a file, one model
    at `temperatures`. A flag that cannot apply to the file's run is one InputError line."""
    given = {k: v for k, v in given.items() if v is not None}
    if file is None:
        missing = [f for f, v in (("TASK", given.get("task")), ("--model", model),
                                  ("--t", temperatures), ("--n", given.get("n"))) if not v]
        if missing:
            raise InputError(f"give {', '.join(missing)} (or --spec FILE)")
        members = [{"model": model, "api_base": api_base, "temperature": t}
                   for t in temperatures or ()]
        return _validated({"members": members, **given}, "the command line",
                          flags=tuple(given))
    if model or temperatures:
        raise InputError(f"{where} names the members: drop "
                         + ", ".join(f for f, v in (("--model", model), ("--t", temperatures))
                                     if v))
    if file.ensemble:
        wrong = [FLAGS[k] for k in ("n", "lam1", "max_n") if k in given]
        if wrong:
            raise InputError(f"{where} is an ensemble (each member has its own n and λ): drop "
                             f"{', '.join(wrong)} (a member's n, lam or calibration go in the "
                             "spec)")
    task = given.pop("task", None)
    if task and file.task and task != file.task:
        raise InputError(f"{where} is a run of {file.task}, the command's TASK {task}: give one "
                         "(or make them the same)")
    doc = file.model_dump(exclude_none=True)
    if api_base:
        if all(m.api_base for m in file.members):
            raise InputError(f"every member of {where} names its api_base: drop --api-base")
        for m in doc["members"]:
            m.setdefault("api_base", api_base)
    if task:
        doc["task"] = task
    return _validated({**doc, **given}, where, flags=tuple(given))


def check(spec: RunSpec, where: str | None, *, flags: tuple[str, ...] = ()) -> None:
    """The one validation of a run spec beyond its fields' own: a one-model grid (n at the top)
    or an ensemble (n per member), whole, with samples enough for its n; else one InputError
    line naming the field (of the file `where`, or the flag: `flags`, or None) and the fix."""
    at = where or "the command line"

    def name(field: str) -> str:  # as the user gave it: its flag, or FILE: field
        return FLAGS[field] if where is None or field in flags else f"{where}: {field}"

    if spec.kind == "calibration":
        _check_calibration(spec, at)
        return
    if spec.bootstrap is not None:
        # checked here, not by the field: a run recorded with fewer (before this was checked)
        # still reads, and is refused only when it is run again
        check_bootstrap(spec.bootstrap,
                        name="--bootstrap" if where is None else f"{where}: bootstrap")
    if spec.fit is not None:
        raise InputError(f"{at}: fit is a calibration's (its mode, bias, ...): drop it, or give "
                         '"kind": "calibration" and run it with `ensemble calibrate --spec`')
    _check_names(spec, at)
    has = [i for i, m in enumerate(spec.members) if m.n is not None]
    if spec.n is not None and has:
        raise InputError(f"{at}: n is given at the top and for members.{has[0]}: give each "
                         "member its own n (they vote together as an ensemble) or n at the top "
                         "(each member alone at each n: one model at several temperatures), "
                         "not both")
    if spec.ensemble:
        if len(has) < len(spec.members):
            i = next(i for i, m in enumerate(spec.members) if m.n is None)
            raise InputError(f"{at}: members.{i} has no n: give every member of an ensemble "
                             "its votes per decision")
        if spec.lam1 is not None:
            raise InputError(f"{at}: lam1 is one model's λ₁: give each member its lam or "
                             "calibration")
        # every stopping rule applies: the cost rule chooses among the members, the others
        # read their pooled votes (as Ensemble(members=..., stop=NAME) draws)
        if spec.max_n is not None:
            raise InputError(f"{at}: max_n is one model's budget; an ensemble's members each "
                             "give at most their own n")
        for g, m in enumerate(spec.members):
            k = m.samples or max(m.n or 1, spec.samples or m.n or 1)
            if k < (m.n or 1):
                raise InputError(f"{at}: members.{g}.samples {k} is smaller than its n "
                                 f"({m.n}); draw at least n samples")
        _check_distinct(spec, at)
        return
    if spec.n is None:
        raise InputError(f'{at}: give n: at the top, e.g. "n": [1, 3, 5] (each member '
                         "alone at each n), or per member (they vote together)")
    if any(n < 1 for n in spec.n):
        raise InputError(f"{name('n')}: group sizes must be integers >= 1")
    again = sorted({n for n in spec.n if spec.n.count(n) > 1})
    if again:
        raise InputError(f"{name('n')}{':' if name('n') != '--n' else ''} {again[0]} is given "
                         "twice: each group size is one row of the table; give each once")
    from ensemble.stopping import stop_rule_names

    one = stop_rule_names(over_members=False)
    bad = [r for r in spec.adaptive or () if r not in one]
    if bad:
        raise InputError(f"{name('adaptive')} takes {', '.join(one)} for one model, got "
                         f"{bad[0]!r}"
                         + (f" ({bad[0]} chooses among an ensemble's members: give each its "
                            "n in a --spec file)" if bad[0] in stop_rule_names() else ""))
    _check_one_model(spec, where)
    if spec.k() < max(spec.n):
        raise InputError(f"{name('samples')} {spec.k()} is smaller than the largest n "
                         f"({max(spec.n)}); draw at least as many samples as the group size")
    if spec.max_n is not None and spec.max_n > spec.k():
        raise InputError(f"{name('max_n')} {spec.max_n} is more than the samples drawn per "
                         f"question ({name('samples').removeprefix(f'{where}: ')} {spec.k()}): "
                         f"draw at least {name('max_n').removeprefix(f'{where}: ')} samples")


# what only an eval's spec says: a calibration fits single answers, it takes no vote
EVAL_ONLY = ("n", "aggregators", "lam1", "calibration", "open", "answer", "bootstrap",
             "adaptive", "max_n", "stop_cost", "value_usd", "cost_credit")


def _check_distinct(spec: RunSpec, at: str) -> None:
    """Members with distinct labels (`label`, else model@t), each drawing its own samples."""
    from ensemble.providers.endpoints import normalise_api_base

    labels: dict[str, int] = {}
    draws: dict[tuple[str, str | None, float], int] = {}
    for i, m in enumerate(spec.members):
        label = m.label or f"{m.model}@t={m.temperature:g}"
        key = (m.model, normalise_api_base(m.api_base) if m.api_base else None, m.temperature)
        if key in draws:
            raise InputError(f"{at}: members {draws[key]} and {i} are {m.model} at t = "
                             f"{m.temperature:g}: they would share the stored samples; give "
                             "one member with n = the sum of theirs")
        if label in labels:
            raise InputError(f"{at}: members {labels[label]} and {i} have the same label "
                             f"{label!r}: give each member its own \"label\" (the tables "
                             "name members by it)")
        labels[label], draws[key] = i, i


def _check_calibration(spec: RunSpec, at: str) -> None:
    """A calibration's spec: one model (one endpoint) at distinct temperatures, nothing an
    eval scores, a target accuracy only with an eval run to read it from."""
    from ensemble.providers.endpoints import normalise_api_base

    extra = [f for f in EVAL_ONLY if getattr(spec, f) is not None]
    if extra:
        raise InputError(f"{at}: a calibration takes no {extra[0]} (it fits λ on single "
                         "answers; it takes no vote): drop it")
    first = spec.members[0]
    where = (first.model, normalise_api_base(first.api_base) if first.api_base else None)
    seen: set[float] = set()
    for i, m in enumerate(spec.members):
        if (m.model, normalise_api_base(m.api_base) if m.api_base else None) != where:
            raise InputError(f"{at}: members.{i} is another model or endpoint ({m.model}): a "
                             "calibration fits one model; calibrate each on its own")
        bad = [f for f in ("n", "lam", "calibration", "samples", "label", "price_per_1k")
               if getattr(m, f) is not None]
        if bad:
            raise InputError(f"{at}: members.{i}.{bad[0]}: a calibration's members are its "
                             "model's temperatures (model, api_base, temperature)")
        if m.temperature in seen:
            raise InputError(f"--t {m.temperature:g} is given twice: each temperature is fitted "
                             "once (and λ(t) = λ₁/t is tested across distinct ones); give each "
                             "once")
        seen.add(m.temperature)
    fit = spec.fit
    if fit is not None and fit.target_accuracy is not None and not fit.eval_dir:
        raise InputError("--target-accuracy needs --eval-dir: the accuracy of a vote depends on "
                         "your task, so give an `ensemble eval` run of it at these temperatures")


def _check_names(spec: RunSpec, where: str) -> None:
    """Every rule and stopping rule the spec names is registered (one line listing them)."""
    from ensemble.rules import aggregator_names
    from ensemble.stopping import stop_rule_names

    for field, names, known in (("aggregators", spec.aggregators, aggregator_names),
                                ("adaptive", spec.adaptive, stop_rule_names)):
        for i, name in enumerate(names or ()):
            if name not in known():
                raise InputError(f"{where}: {field}.{i}: unknown rule {name!r}; choose from "
                                 f"{', '.join(known())}")


def _check_one_model(spec: RunSpec, where: str | None) -> None:
    from ensemble.providers.endpoints import normalise_api_base

    def endpoint(m: MemberSpec) -> tuple[str, str | None]:
        return m.model, normalise_api_base(m.api_base) if m.api_base else None

    at = where or "the command line"
    first = spec.members[0]
    seen: dict[float, int] = {}
    for i, m in enumerate(spec.members):
        if endpoint(m) != endpoint(first):
            raise InputError(f"{at}: n at the top scores one model at several temperatures, "
                             f"and members.{i} is another model or endpoint ({m.model}): give "
                             "each member its own n to score them together, or run each model "
                             "on its own and compare the runs")
        extra = [f for f in ("lam", "calibration", "samples", "label") if getattr(m, f)]
        if extra:
            top = {"lam": "lam1", "calibration": "calibration", "samples": "samples"}
            raise InputError(f"{at}: members.{i}.{extra[0]}: a member of one model's run (n "
                             "at the top) takes model, api_base and temperature; "
                             + (f"give {top[extra[0]]} at the top" if extra[0] in top
                                else "its rows are named by their temperature"))
        if m.temperature in seen:
            if where is None:
                raise InputError(f"--t {m.temperature:g} is given twice: each temperature is "
                                 "one member of the run; give each once")
            raise InputError(f"{where}: members.{seen[m.temperature]} and {i} are both t = "
                             f"{m.temperature:g}: give each temperature once")
        seen[m.temperature] = i
    if spec.calibration is not None and len(spec.calibration) != 1:
        raise InputError(f"{at}: one model's run takes one calibration profile (its λ₁), "
                         f"got {len(spec.calibration)}")


def command_spec(given: dict[str, Any], *, path: str | None, flag: str, model: str | None,
                 temperatures: list[float] | None, api_base: str | None) -> RunSpec:
    """The run spec of `ensemble eval`'s command line: the file at `path` (`flag`: --spec or
    --ensemble), if any, with the flags `given` (spec field -> value) replacing its fields, or
    the flags alone; a task named by its file is the registered `taskfile` reading it; checked
    (`check`) when a file gave it. One InputError line when it cannot run."""
    where = f"{flag} {path}"
    # --model with a file: the model of its members that name none, or with --t the members
    # of a file that names none (load_spec)
    file = load_spec(path, flag=flag, model=model, temperatures=temperatures) if path else None
    if file is not None and file.kind != "eval":
        raise InputError(f"{where} is a calibration's spec: run it with `ensemble calibrate "
                         f"--spec {path}`")
    spec = from_flags(given, file=file, where=where, model=None if file else model,
                      temperatures=None if file else temperatures, api_base=api_base)
    if not spec.task:
        raise InputError("give the task: ensemble eval TASK ... (or \"task\" in the spec)")
    spec = _task_file(spec)
    if file is not None:
        check(spec, where, flags=tuple(k for k, v in given.items() if v is not None))
    return spec


# a field of a calibration's spec (or its fit) -> the flag of `ensemble calibrate` that gives it
CALIBRATE_FLAGS = {"task": "--task", "samples": "--samples", "data": "--data", "limit": "--limit",
                   "seed": "--seed", "max_tokens": "--max-tokens",
                   "fail_on_error": "--fail-on-error", "max_cost": "--max-cost",
                   "mode": "--mode", "bias": "--no-bias", "mirror": "--mirror",
                   "n_budget": "--n-budget", "eval_dir": "--eval-dir",
                   "target_accuracy": "--target-accuracy"}


def calibration_command_spec(given: dict[str, Any], *, path: str | None, model: str | None,
                             temperatures: list[float] | None, api_base: str | None
                             ) -> RunSpec:
    """The run spec of `ensemble calibrate`'s command line: `--spec FILE` (a calibration's
    spec, or the folder of one, which records it) with the flags `given` (a spec or fit field
    -> its value) replacing its fields, or the flags alone (`--model`, `--t`); checked. One
    InputError line when it cannot run."""
    given = {k: v for k, v in given.items() if v is not None}
    fit = {k: given.pop(k) for k in FIT_FIELDS if k in given}
    where = f"--spec {path}"
    if path is None:
        missing = [f for f, v in (("--model", model), ("--t", temperatures)) if not v]
        if missing:
            raise InputError(f"give {', '.join(missing)} (or --spec FILE)")
        return calibration_spec(str(model), temperatures or (), api_base=api_base, **given,
                                **fit)
    if temperatures:
        raise InputError(f"{where} names the temperatures: drop --t")
    file = load_spec(path, flag="--spec", model=model)
    if file.kind != "calibration":
        raise InputError(f"{where} is an eval's spec: run it with `ensemble eval --spec "
                         f"{path}`")
    doc = file.model_dump(exclude_none=True)
    if api_base:
        if all(m.api_base for m in file.members):
            raise InputError(f"every member of {where} names its api_base: drop --api-base")
        for m in doc["members"]:
            m.setdefault("api_base", api_base)
    doc["fit"] = {**doc.get("fit", {}), **fit}
    spec = _validated({**doc, **given}, where, flags=tuple(given))
    check(spec, where)
    return spec


def _task_file(spec: RunSpec) -> RunSpec:
    """A task named by its file (`ensemble eval tasks/yesno.yaml`, or "task" in a spec) is
    the registered `taskfile` task reading that file as its data."""
    from ensemble.tasks.taskfile import TASK_FILE, is_task_file

    if not spec.task or not is_task_file(spec.task):
        return spec
    if spec.data:
        raise InputError(f"{spec.task} is a task file, which names its own data file: drop "
                         "--data")
    return spec.model_copy(update={"task": TASK_FILE, "data": spec.task})
