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

__all__ = ["DEFAULT_BOOTSTRAP", "FLAGS", "SPEC_FILE", "SPEC_VERSION", "EnsembleSpec", "MemberSpec",
           "RunSpec", "bootstrap_of", "check", "command_spec", "folder_identity", "from_flags",
           "load_spec", "one_model", "profile_lam1", "recorded_spec", "seed_of", "spec_folder",
           "spec_identity", "spec_schema", "spec_text", "task_name"]

SPEC_FILE = "spec.json"
SPEC_VERSION = 1  # the format of a spec (a spec without `schema_version` is read as this one)


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


class RunSpec(BaseModel):
    """An eval run: the task, its members, the cells, the rules and the failure policy."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int | None = Field(
        None, description=f"the spec's format ({SPEC_VERSION}; leave it out in a spec you write)")
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
    bootstrap: int | None = Field(None, ge=2, description="bootstrap resamples (default 1000)")
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
        """One model's samples per question and temperature (default: the largest n)."""
        return self.samples if self.samples is not None else max(self.n or (1,))


DEFAULT_BOOTSTRAP = 1000


def seed_of(spec: RunSpec) -> int:
    """The run's seed (default 0)."""
    return spec.seed if spec.seed is not None else 0


def bootstrap_of(spec: RunSpec) -> int:
    """The run's bootstrap resamples (default 1000)."""
    return spec.bootstrap if spec.bootstrap is not None else DEFAULT_BOOTSTRAP


def task_name(spec: RunSpec) -> str:
    """The run's task (a spec run without one is refused before it gets here)."""
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
              model: str | None = None) -> RunSpec:
    """Read and validate a spec file (a run folder: its spec.json); a bad one is one InputError
    line naming the field and the fix. `model` (`--model`) is the model of the members that
    name none: a spec that leaves the provider to the command line (evals/paper-*.json)."""
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

    doc = upgrade(doc, current=SPEC_VERSION, where=f"{flag} {path}",
                  fix="write it as `ensemble schema run-spec` describes (schema_version may be "
                      "left out)")
    if isinstance(doc, dict) and isinstance(doc.get("calibration"), str):
        doc["calibration"] = [doc["calibration"]]
    if isinstance(doc, dict) and isinstance(doc.get("n"), int):
        doc["n"] = [doc["n"]]
    if isinstance(doc, dict) and isinstance(doc.get("members"), list):
        _fill_model(doc["members"], model, f"{flag} {path}")
    return _validated(doc, f"{flag} {path}")


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
            raise InputError(_flag_error(FLAGS[top], err)) from None
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
    known = {**MemberSpec.model_fields, **RunSpec.model_fields}
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
        wrong = [FLAGS[k] for k in ("n", "lam1", "adaptive", "max_n", "stop_cost")
                 if k in given]
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


def check(spec: RunSpec, where: str | None) -> None:
    """The one validation of a run spec beyond its fields' own: its run is a one-model grid (n
    at the top) or an ensemble (n per member), each whole, with enough samples for its n; else
    one InputError line naming the field (`where` the file; None: the command line's flags)
    and the fix."""
    at = where or "the command line"
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
        from ensemble.stopping import is_over_members, stop_rule_names

        bad = [r for r in spec.adaptive or () if not is_over_members(r)]
        if bad:
            raise InputError(f"--adaptive {bad[0]} scores one model; an ensemble's spec takes "
                             "the rules that choose among its members: "
                             f"{', '.join(stop_rule_names(over_members=True))}")
        for g, m in enumerate(spec.members):
            k = m.samples or max(m.n or 1, spec.samples or m.n or 1)
            if k < (m.n or 1):
                raise InputError(f"--ensemble: members.{g}.samples {k} is smaller than its n "
                                 f"({m.n}); draw at least n samples")
        return
    if spec.n is None:
        raise InputError(f'{at}: give n: at the top, e.g. "n": [1, 3, 5] (each member '
                         "alone at each n), or per member (they vote together)")
    if any(n < 1 for n in spec.n):
        raise InputError("group sizes --n must be integers >= 1")
    again = sorted({n for n in spec.n if spec.n.count(n) > 1})
    if again:
        raise InputError(f"--n {again[0]} is given twice: each group size is one row of the "
                         "table; give each once")
    from ensemble.stopping import stop_rule_names

    one = stop_rule_names(over_members=False)
    bad = [r for r in spec.adaptive or () if r not in one]
    if bad:
        raise InputError(f"--adaptive takes {', '.join(one)} for one model, got {bad[0]!r}"
                         + (f" ({bad[0]} chooses among an ensemble's members: give each its "
                            "n in a --spec file)" if bad[0] in stop_rule_names() else ""))
    _check_one_model(spec, where)
    if spec.k() < max(spec.n):
        raise InputError(f"--samples {spec.k()} is smaller than the largest n "
                         f"({max(spec.n)}); draw at least as many samples as the group size")
    if spec.max_n is not None and spec.max_n > spec.k():
        raise InputError(f"--max-n {spec.max_n} is more than the samples drawn per question "
                         f"(--samples {spec.k()}): draw at least --max-n samples")


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
        "members": members, "seed": seed_of(spec), "bootstrap": bootstrap_of(spec),
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
    (--adaptive), limit or seed rescores the same run."""
    from ensemble.providers.endpoints import normalise_api_base

    doc = spec.model_dump(mode="json", exclude_none=True)
    out: dict[str, Any] = {f: doc.get(f) for f in DRAW_FIELDS}
    out["members"] = [{f: m.get(f) for f in MEMBER_FIELDS} for m in doc.get("members", [])]
    for m in out["members"]:
        if m.get("api_base"):
            m["api_base"] = normalise_api_base(m["api_base"])
    return out


def folder_identity(out: Path) -> dict[str, Any] | None:
    """The identity (`spec_identity`) of the run recorded in a run folder's spec.json; None
    when there is none (a run written before specs were recorded)."""
    path = out / SPEC_FILE
    return spec_identity(load_spec(path, flag="--out")) if path.is_file() else None


def command_spec(given: dict[str, Any], *, path: str | None, flag: str, model: str | None,
                 temperatures: list[float] | None, api_base: str | None) -> RunSpec:
    """The run spec of `ensemble eval`'s command line: the file at `path` (`flag`: --spec or
    --ensemble), if any, with the flags `given` (spec field -> value) replacing its fields, or
    the flags alone; a task named by its file is the registered `taskfile` reading it; checked
    (`check`) when a file gave it. One InputError line when it cannot run."""
    where = f"{flag} {path}"
    if path and temperatures:  # before reading it: the file names the members' temperatures
        raise InputError(f"{where} names the members: drop --t")
    # --model with a file: the model of its members that name none (load_spec)
    file = load_spec(path, flag=flag, model=model) if path else None
    spec = from_flags(given, file=file, where=where, model=None if file else model,
                      temperatures=temperatures, api_base=api_base)
    if not spec.task:
        raise InputError("give the task: ensemble eval TASK ... (or \"task\" in the spec)")
    spec = _task_file(spec)
    if file is not None:
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
