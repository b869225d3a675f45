"""The one reader of run folders (view, compare and calibrate read them here), and the check
that keeps one folder to one run.

A run folder holds `summary.json` (`ensemble eval`) or `calibration.json` (`ensemble
calibrate`), the records `questions.jsonl`, `samples.jsonl` and (evals) `votes.jsonl`, and the
store `samples.sqlite`. `read_run` reads them into a `RunFolder`; `claim_run_dir` refuses, before
any request, to write a run into a folder that holds another one (another kind, task or
model), which would mix or overwrite its files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ensemble.errors import InputError
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

__all__ = ["CALIBRATION_FILE", "SUMMARY_FILE", "RunFolder", "claim_run_dir", "eval_summary",
           "read_run", "read_summary"]

SUMMARY_FILE = "summary.json"
CALIBRATION_FILE = "calibration.json"
_COMMAND = {"eval": "ensemble eval", "calibration": "ensemble calibrate"}


@dataclass(frozen=True)
class RunFolder:
    """A run folder, read back: its kind ("eval" or "calibration"), its document
    (summary.json or calibration.json), its records and the layout it was scored with."""

    path: Path
    kind: str
    doc: dict[str, Any]
    layout: TaskLayout
    questions: tuple[QuestionRecord, ...]
    samples: tuple[SampleRecord, ...]
    votes: tuple[VoteRecord, ...]

    @property
    def task(self) -> str:
        return str(self.doc.get("task") or (self.doc.get("meta") or {}).get("task") or "boxball")

    @property
    def model(self) -> str:
        return str(self.doc.get("model") or (self.doc.get("meta") or {}).get("model") or "?")

    @property
    def mixed(self) -> bool:
        """A mixed ensemble's run (`--ensemble`): its cells are members, not temperatures."""
        return bool(self.doc.get("ensemble"))


def _kind(path: Path) -> str | None:
    if (path / CALIBRATION_FILE).is_file():
        return "calibration"
    if (path / SUMMARY_FILE).is_file():
        return "eval"
    return None


def read_summary(path: Path, kind: str) -> dict[str, Any]:
    """A run's document; InputError naming the file and the fix when it cannot be read."""
    from ensemble.jsonio import loads

    doc_file = path / (CALIBRATION_FILE if kind == "calibration" else SUMMARY_FILE)
    try:
        doc = loads(doc_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {doc_file}: {exc}; rerun `{_COMMAND[kind]}` to rewrite "
                         "it") from None
    if not isinstance(doc, dict):
        raise InputError(f"{doc_file} is not a run document; rerun `{_COMMAND[kind]}` to "
                         "rewrite it")
    return doc


def read_run(path: str | os.PathLike[str], *, kinds: tuple[str, ...] = ("eval", "calibration"),
             votes: bool = True) -> RunFolder:
    """Read a run folder of one of `kinds`; InputError (one line naming the fix) for a folder
    that is not such a run, or one written before the records."""
    from .outputs import run_layout

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
    return RunFolder(p, kind, doc, run_layout(doc), tuple(read_questions(p)),
                     tuple(read_samples(p)),
                     tuple(read_votes(p)) if kind == "eval" and votes else ())


def eval_summary(path: Path, *, flag: str) -> dict[str, Any]:
    """The summary.json of an eval run named by an option (`--eval-dir`); InputError naming
    the option and the fix when the folder is not one."""
    if not (path / SUMMARY_FILE).is_file():
        raise InputError(f"{flag} {path}: not an eval run folder (no {SUMMARY_FILE}); give the "
                         "folder of an `ensemble eval` run")
    return read_summary(path, "eval")


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


def claim_run_dir(out: Path, *, kind: str, task: str, model: str) -> None:
    """Refuse (one line, before any request) to write a run into a folder holding another:
    another kind (a calibration in an eval's folder, or back), another task or another model.
    The same run again resumes there."""
    _make_run_dir(out)
    there = _kind(out) if out.is_dir() else None
    if there is None:
        return
    doc = read_summary(out, there)
    meta = doc.get("meta") or {}
    had = (there, str(doc.get("task") or meta.get("task")),
           str(doc.get("model") or meta.get("model")))
    if had == (kind, task, model):
        return
    raise InputError(f"--out {out} holds another run ({_COMMAND[had[0]]} of {had[1]} with "
                     f"{had[2]}); writing {_COMMAND[kind]} of {task} with {model} there would "
                     "mix or overwrite its files: give another --out")
