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
from typing import Any

from pydantic import ValidationError

from ensemble.errors import InputError

from .speccheck import check
from .specfields import (
    CALIBRATE_FLAGS,
    CALIBRATION_SAMPLES,
    CALIBRATION_TASK,
    DEFAULT_BOOTSTRAP,
    FIT_FIELDS,
    FLAGS,
    SPEC_FILE,
    SPEC_VERSION,
    EnsembleSpec,
    FitSpec,
    MemberSpec,
    RunSpec,
)

__all__ = ["CALIBRATION_SAMPLES", "CALIBRATION_TASK", "DEFAULT_BOOTSTRAP", "FLAGS", "SPEC_FILE",
           "SPEC_VERSION", "EnsembleSpec", "FitSpec", "MemberSpec", "RunSpec", "bootstrap_of",
           "calibration_command_spec", "calibration_spec", "check", "command_spec", "from_flags",
           "load_spec", "one_model", "seed_of", "spec_folder", "spec_schema", "task_name"]


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


def spec_schema() -> dict[str, Any]:
    """The JSON schema of a spec file."""
    return RunSpec.model_json_schema()


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
    doc = _file_doc(file, where, api_base)
    if task:
        doc["task"] = task
    return _validated({**doc, **given}, where, flags=tuple(given))


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
    doc = _file_doc(file, where, api_base)
    doc["fit"] = {**doc.get("fit", {}), **fit}
    spec = _validated({**doc, **given}, where, flags=tuple(given))
    check(spec, where)
    return spec


def _file_doc(file: RunSpec, where: str, api_base: str | None) -> dict[str, Any]:
    """A spec file's fields, `--api-base` given to the members that name none (refused when
    every member names its own: the flag would change nothing)."""
    doc = file.model_dump(exclude_none=True)
    if api_base:
        if all(m.api_base for m in file.members):
            raise InputError(f"every member of {where} names its api_base: drop --api-base")
        for m in doc["members"]:
            m.setdefault("api_base", api_base)
    return doc


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
