"""The legible record of a run: what was asked, every sample drawn, and the votes.

A run folder holds, beside `samples.sqlite` (the durable store) and `summary.json`:

    questions.jsonl   one line per question:  QuestionRecord (id, prompt, choices, truth, meta)
    samples.jsonl     one line per sample:    SampleRecord   (id, t, sample, text, answer, ...)
    votes.jsonl       one line per (question, t, n, aggregator): VoteRecord, the votes of the
                      first n samples by index and their decision

`samples.jsonl` refers to its prompt through `id` (the prompt is written once, in
questions.jsonl). The three files are rewritten by every run of the folder, never appended, so
they always describe the run's current state; they are written through one buffered writer
each, into a temporary file renamed into place at the end (a reader never sees half a file).
The tables of `summary.json` average over many random n-subsets of the samples (bootstrap);
`votes.jsonl` shows one of them, the first n by index, so a person can follow a vote by hand.

Calibration runs (`ensemble calibrate`) write questions.jsonl (with each question's exact
`posterior`) and samples.jsonl in the same schema, and no votes.jsonl: a calibration measures
single answers (the share of the first choice, "L", against the posterior), it takes no vote.

Each record type is a pydantic model: `SampleRecord.model_json_schema()` is its schema, and
`read_samples` / `read_questions` / `read_votes` validate what they read. Every line says its
format, `schema_version` (RECORDS_VERSION; a line without one, written before formats were
numbered, is format 1, the same fields): a line of a newer format is refused in one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ensemble.jsonio import VERSION_KEY
from ensemble.rules import baseline

__all__ = [
    "QUESTIONS_FILE",
    "RECORDS_VERSION",
    "SAMPLES_FILE",
    "VOTES_FILE",
    "FailureRecord",
    "JsonlWriter",
    "default_run_dir",
    "endpoint_slug",
    "now_iso",
    "run_slug",
    "QuestionRecord",
    "SampleRecord",
    "VoteMember",
    "VoteRecord",
    "model_members",
    "read_questions",
    "read_samples",
    "read_votes",
    "write_questions",
    "write_run_log",
    "write_samples",
    "write_votes",
]

QUESTIONS_FILE = "questions.jsonl"
SAMPLES_FILE = "samples.jsonl"
VOTES_FILE = "votes.jsonl"
RECORDS_VERSION = 2  # the format of every line of the three files
# 1 -> 2: a sample may carry `lp`, its compact logprobs (nothing else changed)
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: lambda doc: doc}

Source = Literal["cache", "online", "batch"]

# a mixed ensemble's decisions for one question, from each member's first n_g answers:
# (aggregator, decision, tie, P(decide choices[0]) or None) per rule
EnsembleVote = Callable[[Any, list[list[str | None]]],
                        list[tuple[str, str | None, bool, float | None]]]


class QuestionRecord(BaseModel):
    """One question of the run, as the task defines it."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RECORDS_VERSION  # the line's format

    id: str
    prompt: str
    choices: list[str]
    correct: str | None = None  # the right choice (box-ball: the Bayes-optimal box; None at 1/2)
    posterior: float | None = None  # calibration tasks: exact P(ω = 1 | signal)
    meta: dict[str, Any] = {}


class SampleRecord(BaseModel):
    """One sample drawn for the run (from the store or online)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RECORDS_VERSION  # the line's format

    id: str  # the question's id in the task (see questions.jsonl for its prompt)
    t: float
    sample: int  # the sample's index for this (question, t): 0, 1, ...
    text: str | None  # the model's raw reply
    answer: str | None  # the parsed answer; None when invalid
    valid: bool
    correct: bool | None  # answer == the question's truth; None when the task has no truth
    tokens: int | None  # completion tokens of this sample (prompt tokens are per request)
    cost_usd: float | None  # None when the price is unknown
    latency_s: float | None
    source: Source  # "cache": read from the store; "online": drawn now; "batch": a Batch API
    # mixed ensembles (`--ensemble`): the member that drew it (its label) and its model
    member: str | None = None
    model: str | None = None
    # its compact logprobs when drawn with them (`ensemble.sampling.logprobs`: the answer
    # span's token logprobs, the top-k at its first token, the trace's summary), which the
    # rules that weigh samples read (compare and view rescore them from here)
    lp: dict[str, Any] | None = None


class VoteRecord(BaseModel):
    """The vote of the first n samples (by index) of one question at one temperature.

    Mixed ensembles (`--ensemble`): `member` is a member's label (its own vote, at its t and
    n) or "ensemble" (t null; n the total votes; `votes` the first n_g samples of each member
    in member order, `by_member` their counts; `p_first` the rule's P(decide choices[0]) on a
    binary question: robust may randomise)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RECORDS_VERSION  # the line's format

    id: str
    t: float | None
    member: str | None = None
    model: str | None = None  # a mixed ensemble's member: its model
    by_member: dict[str, dict[str, int]] | None = None
    n: int
    aggregator: str
    votes: list[str | None]  # the answers of samples 0..n-1 (None: invalid)
    counts: dict[str, int]
    decision: str | None  # None: no valid vote, or a tie left open
    tie: bool = False  # the vote is tied (decision None: a coin decides it in the tables)
    p_first: float | None = None  # the ensemble's P(decide choices[0]) on a binary question
    correct: bool | None


class FailureRecord(BaseModel):
    """One request that failed for good (failures.jsonl, evals/failures.py): the question, its
    temperature and the sample indices it carried, and the provider's error."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RECORDS_VERSION  # the line's format
    id: str
    t: float
    indices: list[int]
    error: str  # the error's class name, e.g. "ContentRefusedError"
    status: int | None  # the HTTP status, if the provider answered
    reason: str  # a short label: "400 content policy", "timeout", ...
    message: str  # one line, keys redacted


class JsonlWriter:
    """Write records as JSON lines into `path`, through one buffered file, replaced atomically;
    with `version`, a dict record without its own `schema_version` gets that one, first.

        with JsonlWriter(out / SAMPLES_FILE, version=RECORDS_VERSION) as w:
            w.write({...})          # a dict (fast path) or a pydantic model
    """

    def __init__(self, path: str | os.PathLike[str], *, buffer: int = 1 << 20,
                 version: int | None = None) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._fh = open(self._tmp, "w", encoding="utf-8", buffering=buffer)  # noqa: SIM115
        self._head = None if version is None else f'{{"{VERSION_KEY}": {int(version)}, '
        self.lines = 0

    def write(self, record: BaseModel | dict[str, Any]) -> None:
        doc = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
        text = json.dumps(doc, ensure_ascii=False, allow_nan=False)
        if self._head is not None and doc and VERSION_KEY not in doc:
            text = self._head + text[1:]  # the version first, without copying the record
        self._fh.write(text)
        self._fh.write("\n")
        self.lines += 1

    def write_all(self, records: Iterable[BaseModel | dict[str, Any]]) -> None:
        for r in records:
            self.write(r)

    def close(self, *, keep: bool = True) -> None:
        if self._fh.closed:
            return
        self._fh.close()
        if keep:
            os.replace(self._tmp, self.path)
        else:
            self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(keep=exc_type is None)


def _read(path: Path, model: type[BaseModel]) -> Iterator[Any]:
    from ensemble.errors import DataError

    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise DataError(f"cannot read {exc.strerror or exc}; is this a run folder written by "
                        "`ensemble eval` or `ensemble calibrate`?", path=str(path)) from None
    with fh:
        i = 0
        while True:
            i += 1
            try:
                line = fh.readline()
            except UnicodeDecodeError:
                raise DataError(f"not UTF-8 text from about line {i} on (a binary or damaged "
                                "file?); rerun the command that wrote the run, or restore the "
                                "file", path=str(path)) from None
            if not line:
                break
            if not line.strip():
                continue
            try:
                rec = model.model_validate_json(line)
            except ValueError as exc:
                rec, error = None, str(exc).splitlines()[0]
            if rec is not None and getattr(rec, VERSION_KEY) == RECORDS_VERSION:
                yield rec
                continue
            yield _upgraded(line, model, path, i, error if rec is None else None)


def _upgraded(line: str, model: type[BaseModel], path: Path, row: int, error: str | None
              ) -> Any:
    """A line of another format than RECORDS_VERSION (or one that did not validate: `error`):
    refused in one line when it is newer, else brought forward and validated."""
    from ensemble.errors import DataError, InputError
    from ensemble.jsonio import upgrade

    try:
        doc = json.loads(line)
        doc = upgrade(doc, current=RECORDS_VERSION, migrations=MIGRATIONS,
                      where=f"{path}, row {row}",
                      fix="rerun the command that wrote the run to rewrite it")
    except InputError:
        raise
    except ValueError:
        doc = None
    if error is None and doc is not None:
        try:
            return model.model_validate(doc)
        except ValueError as exc:
            error = str(exc).splitlines()[0]
    raise DataError(f"not a valid {model.__name__}: {error}", path=str(path), row=row)


def read_questions(run: str | os.PathLike[str]) -> Iterator[QuestionRecord]:
    """The questions of a run folder."""
    return _read(Path(run) / QUESTIONS_FILE, QuestionRecord)


def read_samples(run: str | os.PathLike[str]) -> Iterator[SampleRecord]:
    """The samples of a run folder, in the order written (question, t, then index)."""
    return _read(Path(run) / SAMPLES_FILE, SampleRecord)


def read_votes(run: str | os.PathLike[str]) -> Iterator[VoteRecord]:
    """The first-n votes of a run folder."""
    return _read(Path(run) / VOTES_FILE, VoteRecord)


@dataclass(frozen=True)
class VoteMember:
    """A member of a run as votes.jsonl writes it: its temperature `t`, the group sizes `ns` of
    its votes, and for a mixed ensemble its `label` and `model` (None for a single model, whose
    members are its temperatures; those also get a random-follow vote, `follow`)."""

    t: float
    ns: tuple[int, ...]
    label: str | None = None
    model: str | None = None
    follow: bool = False


def model_members(temperatures: Iterable[float], ns: Iterable[int]) -> list[VoteMember]:
    """A single model's members: one per temperature, voting at every n, plus random-follow."""
    sizes = tuple(sorted(set(ns)))
    return [VoteMember(float(t), sizes, follow=True) for t in temperatures]


def write_run_log(out: str | os.PathLike[str], questions: Any, members: Sequence[VoteMember],
                  rows: Any, answers: Any, *, rule: str,
                  ensemble: EnsembleVote | None = None) -> dict[str, int]:
    """Write questions.jsonl, samples.jsonl and votes.jsonl for an eval run.

    `rows[g * Q + qi]` holds the samples of question qi for member g (the draw's order);
    `answers[g][qi][k]` the answer each counts as (None: invalid or not one of the question's
    choices). `rule` names the members' vote in votes.jsonl (the task's main vote); ties
    are left open (decision None, `tie` true). `ensemble` decides a mixed ensemble's votes (see
    `write_votes`). Returns the number of lines written per file.
    """
    out = Path(out)
    labels = None if members[0].label is None else [(m.label or "", m.model or "")
                                                    for m in members]
    return {"questions": write_questions(out, questions),
            "samples": write_samples(out, questions, [m.t for m in members], rows, answers,
                                     members=labels),
            "votes": write_votes(out, questions, members, answers, rule=rule,
                                 ensemble=ensemble)}


def write_questions(out: str | os.PathLike[str], questions: Any) -> int:
    """Write questions.jsonl (one QuestionRecord per question); returns the lines written."""
    with JsonlWriter(Path(out) / QUESTIONS_FILE, version=RECORDS_VERSION) as w:
        for q in questions:
            w.write({"id": q.id, "prompt": q.prompt, "choices": list(q.choices),
                     "correct": q.correct, "posterior": q.posterior,
                     "meta": {k: (list(v) if isinstance(v, tuple) else v)
                              for k, v in dict(q.meta).items()}})
        return w.lines


def write_samples(out: str | os.PathLike[str], questions: Any, temperatures: Any, rows: Any,
                  answers: Any, *, members: Sequence[tuple[str, str]] | None = None) -> int:
    """Write samples.jsonl (one SampleRecord per sample drawn); returns the lines written.

    `rows` and `answers` as in `write_run_log`; a missing row or sample (None: the provider
    refused that question for good) writes nothing. `members`: (label, model) per index ti
    (mixed ensembles), written as each sample's `member` and `model`.
    """
    Q = len(questions)
    with JsonlWriter(Path(out) / SAMPLES_FILE, version=RECORDS_VERSION) as w:
        for i, row in enumerate(rows):
            ti, qi = divmod(i, Q)
            q, t = questions[qi], float(temperatures[ti])
            for k, s in enumerate(row or ()):
                if s is None:
                    continue
                a = answers[ti][qi][k]
                rec = {"id": q.id, "t": t, "sample": s.index, "text": s.text, "answer": a,
                       "valid": a is not None,
                       "correct": None if q.correct is None else a == q.correct,
                       "tokens": s.completion_tokens, "cost_usd": s.cost_usd,
                       "latency_s": s.latency_s,
                       "source": "cache" if s.cached else s.source}
                if members is not None:
                    rec["member"], rec["model"] = members[ti]
                if s.answer_lp is not None:
                    rec["lp"] = s.answer_lp
                w.write(rec)
        return w.lines


def write_votes(out: str | os.PathLike[str], questions: Any, members: Sequence[VoteMember],
                answers: Any, *, rule: str, ensemble: EnsembleVote | None = None) -> int:
    """Write votes.jsonl: per question, each member's vote of its first n samples for each of
    its n (with its `member` label in a mixed ensemble; random-follow for a single model's
    members), then, when `ensemble` is given, the ensemble's decision under each of its rules
    (`member` "ensemble", t null, n the total votes)."""
    with JsonlWriter(Path(out) / VOTES_FILE, version=RECORDS_VERSION) as w:
        for qi, q in enumerate(questions):
            rows = [list(answers[g][qi]) for g in range(len(members))]
            for m, row in zip(members, rows, strict=True):
                who = {} if m.label is None else {"member": m.label, "model": m.model}
                for n in m.ns:
                    if n <= len(row):
                        w.write({**_vote(q, m.t, n, rule, row[:n]), **who})
                if m.follow:
                    first = row[0] if row else None
                    w.write({"id": q.id, "t": m.t, "n": 1, "aggregator": baseline(),
                             "votes": row[:1],
                             "counts": {first: 1} if first is not None else {},
                             "decision": first, "tie": False,
                             "correct": None if q.correct is None else first == q.correct})
            if ensemble is None:
                continue
            firsts = [row[:m.ns[0]] for m, row in zip(members, rows, strict=True)]
            by_member = {m.label or "": _counts(v) for m, v in zip(members, firsts, strict=True)}
            pooled = [a for v in firsts for a in v]
            for agg, decision, tie, p_first in ensemble(q, firsts):
                w.write({"id": q.id, "t": None, "member": "ensemble",
                         "n": sum(m.ns[0] for m in members), "aggregator": agg,
                         "votes": pooled, "counts": _counts(pooled), "by_member": by_member,
                         "decision": decision, "tie": tie, "p_first": p_first,
                         "correct": None if q.correct is None or tie
                         else decision == q.correct})
        return w.lines


def _counts(votes: list[str | None]) -> dict[str, int]:
    from collections import Counter

    return dict(Counter(a for a in votes if a is not None))


def _vote(q: Any, t: float, n: int, rule: str, votes: list[str | None]) -> dict[str, Any]:
    """The plurality (majority) vote of `votes`; a tie is left open."""
    c = _counts(votes)
    top = sorted(c.items(), key=lambda kv: -kv[1])
    tie = len(top) > 1 and top[0][1] == top[1][1]
    decision = top[0][0] if top and not tie else None
    # a tie is decided by a coin in the tables: neither right nor wrong here; no valid vote
    # at all counts as wrong, as in the tables
    return {"id": q.id, "t": t, "n": n, "aggregator": rule, "votes": votes, "counts": c,
            "decision": decision, "tie": tie,
            "correct": None if q.correct is None or tie else decision == q.correct}


def run_slug(model: str) -> str:
    """A folder-safe name for a model: `openai/gpt-4o-mini` -> `openai-gpt-4o-mini`; a local
    GGUF path -> `local-<file stem>` (the path's folders say nothing a person needs)."""
    if model.startswith(("local/", "local:")):
        stem = Path(model[6:]).name
        stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
        model = f"local-{stem}" if stem else "local"
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in model)
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-.") or "model"


def default_run_dir(task: str, model: str, *, data: str | os.PathLike[str] | None = None,
                    kind: str = "eval", short: bool = False, api_base: str | None = None
                    ) -> Path:
    """The folder a run writes to without --out: `runs/[calibrate-]TASK[-DATA]-MODEL[@HOST]`.

    A pure function of what the command says (task, model, the data file's name for a task
    that reads one: give `data` only then, and the endpoint), never of the date: rerunning the
    same command finds the same folder, and resumes from its store. The date of each run is in
    its summary.json / profile.json instead. `short` leaves the task out (the command's default
    task: box-ball calibrations keep the short `runs/calibrate-MODEL`). With an api_base the
    endpoint is part of the name (`@127.0.0.1-8000-v1`): two servers that share a model name
    are two runs, never one folder.
    """
    parts = [] if kind == "eval" else [kind]
    if not short:
        parts.append(task)
    if data is not None:
        parts.append(run_slug(Path(data).stem))
    parts.append(run_slug(model))
    name = "-".join(parts)
    if api_base:
        name += "@" + endpoint_slug(api_base)
    return Path("runs") / name


def endpoint_slug(api_base: str) -> str:
    """A folder-safe name for an endpoint: `http://127.0.0.1:8000/v1` -> `127.0.0.1-8000-v1`
    (the scheme and credentials dropped; host, port and path kept)."""
    from ensemble.providers.endpoints import normalise_api_base

    where = normalise_api_base(api_base).split("://", 1)[-1]
    slug = "".join(c if c.isalnum() or c in "_." else "-" for c in where).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug or "endpoint"


def now_iso() -> str:
    """The date and time of a run (UTC, ISO 8601): metadata, never part of a folder's name."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")
