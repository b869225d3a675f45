"""The one reader of run folders (view, compare and calibrate read them here), and the check
that keeps one folder to one run.

A run folder holds `summary.json` (`ensemble eval`) or `calibration.json` (`ensemble
calibrate`), the records `questions.jsonl`, `samples.jsonl` and (evals) `votes.jsonl`, the
spec it ran (`spec.json`, evals) and the store `samples.sqlite`. `read_run` reads them into a
typed `RunFolder` (each document through its model, `evals.schemas` and `evals.records`);
`claim_run_dir` refuses, before any request, to write a run into a folder that holds another
one, which would mix or overwrite its files: a run's identity is what its spec draws from
(another kind, task, data file, model, endpoint or temperature is another run); what is scored
from those samples (n, samples, rules, stopping rules, limit, seed) and the failure and
spending policy may change, rescoring or continuing the same run there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ensemble.errors import InputError, StoreError
from ensemble.sampling.store import SampleStore, is_sample_store
from ensemble.tasks import TaskLayout

from .records import (
    QUESTIONS_FILE,
    SAMPLES_FILE,
    VOTES_FILE,
    QuestionRecord,
    SampleRecord,
    VoteRecord,
    read_questions,
    read_samples,
    read_votes,
)
from .schemas import (
    CALIBRATION_VERSION,
    SUMMARY_VERSION,
    CalibrationSummary,
    EvalSummary,
    read_document,
)

__all__ = ["CALIBRATION_FILE", "STORE_FILE", "SUMMARY_FILE", "RunFolder", "claim_run_dir",
           "eval_summary", "read_run", "read_summary", "title_of"]

SUMMARY_FILE = "summary.json"
STORE_FILE = "samples.sqlite"
CALIBRATION_FILE = "calibration.json"
_COMMAND = {"eval": "ensemble eval", "calibration": "ensemble calibrate"}


@dataclass(frozen=True)
class RunFolder:
    """A run folder, read back typed: its document (summary.json: `EvalSummary`, or
    calibration.json: `CalibrationSummary`), its records and the layout it was scored with."""

    path: Path
    doc: EvalSummary | CalibrationSummary
    questions: tuple[QuestionRecord, ...]
    samples: tuple[SampleRecord, ...]
    votes: tuple[VoteRecord, ...]

    @property
    def kind(self) -> str:
        """"eval" or "calibration"."""
        return "eval" if isinstance(self.doc, EvalSummary) else "calibration"

    @property
    def summary(self) -> EvalSummary:
        """An eval's summary (a calibration folder has none: a bug to ask)."""
        assert isinstance(self.doc, EvalSummary), self.path
        return self.doc

    @property
    def task(self) -> str:
        return self.doc.task if isinstance(self.doc, EvalSummary) else self.doc.meta.task

    @property
    def title(self) -> str:
        """The task as people name it (see `title_of`)."""
        return title_of(self.doc)

    @property
    def model(self) -> str:
        return self.doc.model

    @property
    def created(self) -> str:
        return self.doc.created if isinstance(self.doc, EvalSummary) else self.doc.meta.created

    @property
    def layout(self) -> TaskLayout:
        """The layout the run was scored with (a calibration: its task's)."""
        if isinstance(self.doc, EvalSummary):
            return self.doc.layout
        from ensemble.tasks import layout_of

        try:
            return layout_of(self.doc.meta.task)
        except InputError:
            return TaskLayout()

    @property
    def mixed(self) -> bool:
        """A mixed ensemble's run: its cells are members, not temperatures."""
        return isinstance(self.doc, EvalSummary) and self.doc.ensemble is not None


def title_of(doc: EvalSummary | CalibrationSummary) -> str:
    """The task of a run as people name it: the summary's `title`; a run written before
    summaries had one: its task file's stem, or its task."""
    if isinstance(doc, EvalSummary):
        if doc.title:
            return doc.title
        if doc.data.task_file:
            return Path(doc.data.task_file).stem
        return doc.task
    return doc.meta.task


def _kind(path: Path) -> str | None:
    if (path / CALIBRATION_FILE).is_file():
        return "calibration"
    if (path / SUMMARY_FILE).is_file():
        return "eval"
    return None


def read_summary(path: Path, kind: str) -> EvalSummary | CalibrationSummary:
    """A run's document, validated by its model (an older format migrated, `read_document`);
    InputError naming the file and the fix when it cannot be read or is not one (a damaged
    file, or one written by a newer or a much older version)."""
    doc_file = path / (CALIBRATION_FILE if kind == "calibration" else SUMMARY_FILE)
    model: type[EvalSummary | CalibrationSummary] = (
        CalibrationSummary if kind == "calibration" else EvalSummary)
    fix = (f"rerun the `{_COMMAND[kind]}` command that wrote it to rewrite it (from its store, "
           "no request)")
    try:
        return read_document(model, doc_file.read_text(encoding="utf-8"), where=str(doc_file),
                             fix=f"rerun the `{_COMMAND[kind]}` command that wrote it")
    except (OSError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            where = ".".join(str(x) for x in err["loc"]) or "(top level)"
            why = f"not a {model.__name__} ({where}: {err['msg'].lower()})"
        else:
            why = f"cannot read it ({exc})"
        raise InputError(f"{doc_file}: {why}; {fix}") from None


def read_run(path: str | os.PathLike[str], *, kinds: tuple[str, ...] = ("eval", "calibration"),
             votes: bool = True) -> RunFolder:
    """Read a run folder of one of `kinds`; InputError (one line naming the fix) for a folder
    that is not such a run, or one written before the records."""
    p = Path(path)
    what = " or ".join(f"`{_COMMAND[k]}`" for k in kinds)
    if not p.is_dir():
        raise InputError(f"{p} is not a folder: give the run folder written by {what} (its "
                         "--out)")
    kind = _kind(p)
    if kind is None or kind not in kinds:
        files = " or ".join(CALIBRATION_FILE if k == "calibration" else SUMMARY_FILE
                            for k in kinds)
        raise InputError(f"{p} is not a{'n eval' if kinds == ('eval',) else ''} run folder "
                         f"(no {files}): give the folder written by {what}")
    need = [QUESTIONS_FILE, SAMPLES_FILE] + ([VOTES_FILE] if kind == "eval" and votes else [])
    missing = [f for f in need if not (p / f).is_file()]
    if missing:
        raise InputError(f"{p} has no {' or '.join(missing)} (written by an older version): "
                         f"rerun the same `{_COMMAND[kind]}` command; it recomputes the records "
                         "from its store without new requests")
    doc = read_summary(p, kind)
    return RunFolder(p, doc, tuple(read_questions(p)), tuple(read_samples(p)),
                     tuple(read_votes(p)) if kind == "eval" and votes else ())


def eval_summary(path: Path, *, flag: str) -> EvalSummary:
    """The summary.json of an eval run named by an option (`--eval-dir`); InputError naming
    the option and the fix when the folder is not one."""
    if not (path / SUMMARY_FILE).is_file():
        raise InputError(f"{flag} {path}: not an eval run folder (no {SUMMARY_FILE}); give the "
                         "folder of an `ensemble eval` run")
    doc = read_summary(path, "eval")
    assert isinstance(doc, EvalSummary)
    return doc


def _make_run_dir(out: Path) -> None:
    """Create the run folder, or one InputError line: a file in its place, a path that
    cannot be created (a read-only or special file system, no permission)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a folder: give a folder for the run "
                         "(it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {out}: cannot create the folder ({exc.strerror or exc}): give "
                         "a folder you can write to") from None


def claim_run_dir(out: Path, *, kind: str, task: str, model: str,
                  identity: dict[str, Any] | None = None, title: str | None = None) -> None:
    """Refuse (one line, before any request) to write a run into a folder holding another:
    another kind (a calibration in an eval's folder, or back), task or model, or (`identity`:
    `plan.spec_identity` of the run's recorded spec, or a calibration's endpoint and data) another
    source of samples. The same run again resumes there, a run whose document this version
    cannot read (damaged, or too old to migrate) included: it rewrites it. `title`: the task
    as the messages name it (a task file's name; default `task`)."""
    from .spec import SPEC_FILE

    _make_run_dir(out)
    there = _kind(out) if out.is_dir() else None
    if there is None:
        _refuse_foreign(out, kind=kind, title=title or task, model=model, identity=identity)
        _mark_run_dir(out)
        return
    was = _held(out, there)
    title = title or task
    if (there, was.task, was.model) != (kind, task, model):
        raise InputError(f"--out {out} holds another run ({_COMMAND[there]} of "
                         f"{was.title} with {was.model}); writing {_COMMAND[kind]} of {title} "
                         f"with {model} there "
                         "would mix or overwrite its files: give another --out")
    if identity is None or was.identity is None:
        return
    diff = _first_difference(was.identity, identity)
    if diff is not None:
        field, a, b = diff
        raise InputError(f"--out {out} holds another run ({_COMMAND[kind]} of {title} with "
                         f"{model}: its {field} is {a}, this run's {b}); writing it there would "
                         "overwrite that run's summary and records: give another --out"
                         + (f", or repeat that run with `{_COMMAND[kind]} --spec {out}`"
                            if (out / SPEC_FILE).is_file() else ""))


def _refuse_foreign(out: Path, *, kind: str, title: str, model: str,
                    identity: dict[str, Any] | None) -> None:
    """A folder without a run's document is written only when it is empty, or when this
    project made it (its sample store: a run stopped before its summary); anything else holds
    someone's files, which the run's would replace (grid.csv, votes.jsonl, ...)."""
    from .plan import folder_identity

    entries = sorted(p.name for p in out.iterdir())
    if not entries:
        return
    if not _store_there(out, entries):
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more"
                                          if len(entries) > 3 else "")
        raise InputError(f"--out {out} is not a run folder (it holds {shown}, which this "
                         "project did not write, and the run would replace files there): give "
                         "a new or empty folder, or the folder of an earlier run to resume it")
    recorded = folder_identity(out)
    if recorded is None:
        return
    there = recorded.get("kind") or "eval"
    if there != kind:
        raise InputError(f"--out {out} holds another run ({_COMMAND[there]}, stopped before "
                         f"its summary); writing {_COMMAND[kind]} of {title} with {model} there "
                         "would mix or overwrite its files: give another --out")
    if identity is not None:
        diff = _first_difference(recorded, identity)
        if diff is not None:
            field, a, b = diff
            raise InputError(f"--out {out} holds another run (stopped before its summary; its "
                             f"{field} is {a}, this run's {b}); writing it there would overwrite "
                             f"its spec: give another --out, or resume that run with "
                             f"`{_COMMAND[kind]} --spec {out}`")


def _store_there(out: Path, entries: list[str]) -> bool:
    """Whether `out` holds a sample store; a store file alone that is not one yet may be
    another run's being made this moment (two runs started at once on one new folder):
    wait a little for it."""
    alone = all(e.startswith(STORE_FILE) for e in entries)
    return is_sample_store(out / STORE_FILE, wait=10.0 if alone else 0.0)


def _mark_run_dir(out: Path) -> None:
    """Make the run's store first, before any other file: a folder this project writes into
    says so from its first file on, so that a run stopped at any point resumes there."""
    try:
        SampleStore(out / STORE_FILE).close()
    except StoreError as exc:
        raise InputError(f"--out {out}: {exc}; give a folder you can write to") from None


@dataclass(frozen=True)
class _Held:
    """The run a folder holds, as `claim_run_dir` compares it: its task, model and title, and
    what it draws from (None: the folder does not say)."""

    task: str
    model: str
    title: str
    identity: dict[str, Any] | None


def _held(out: Path, kind: str) -> _Held:
    """The run in `out`, read through its typed document; when this version cannot read that
    (too old to migrate, or fields damaged), its task and model as written, so that
    rerunning the command that wrote it rewrites it rather than being refused forever. A
    document that is not JSON, or was written by a newer ensemble, is refused in one line."""
    from .plan import calibration_identity, folder_identity

    drawn = folder_identity(out)
    try:
        doc = read_summary(out, kind)
    except InputError as exc:
        raw = _raw_head(out, kind, exc)
        return _Held(raw[0], raw[1], raw[0], drawn)
    if isinstance(doc, CalibrationSummary):
        return _Held(doc.meta.task, doc.model, title_of(doc),
                     calibration_identity(doc.meta.api_base, doc.meta.data))
    return _Held(doc.task, doc.model, title_of(doc), drawn)


def _raw_head(out: Path, kind: str, exc: InputError) -> tuple[str, str]:
    """(task, model) of a document `read_summary` refused, from its JSON as written; `exc`
    again when even that cannot be read or it is newer than this version."""
    import json

    from ensemble.jsonio import VERSION_KEY

    name = CALIBRATION_FILE if kind == "calibration" else SUMMARY_FILE
    try:
        raw = json.loads((out / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = None
    current = CALIBRATION_VERSION if kind == "calibration" else SUMMARY_VERSION
    newer = isinstance(raw, dict) and not isinstance(raw.get(VERSION_KEY, 1), int) or (
        isinstance(raw, dict) and raw.get(VERSION_KEY, 1) > current)
    if not isinstance(raw, dict) or newer:
        raise InputError(f"--out {out} holds a run whose {name} cannot be read ({exc}); give "
                         "another --out") from None
    meta = raw.get("meta") if kind == "calibration" else raw
    task = meta.get("task") if isinstance(meta, dict) else None
    return str(task), str(raw.get("model"))


def _first_difference(a: Any, b: Any, where: str = "") -> tuple[str, Any, Any] | None:
    """The first field (dotted path) where two JSON documents differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            d = _first_difference(a.get(k), b.get(k), f"{where}.{k}" if where else k)
            if d is not None:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = _first_difference(x, y, f"{where}.{i}")
            if d is not None:
                return d
        return None
    if a != b:
        return where or "(spec)", _text(a), _text(b)
    return None


def _text(v: Any) -> str:
    return "not set" if v is None else str(v)
