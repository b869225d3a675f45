"""Declarative tasks: a YAML (or JSON) file naming a data file, a prompt template and an answer
kind, run as any built-in task (`ensemble eval path/to/task.yaml ...`), as
lm-evaluation-harness's YAML tasks are. The `jsonl` task generalised: the records keep their own
fields and the template says how a prompt is written from them.

    name: mammals                  # optional: the task's name in tables and run folders
                                   # (default: the file's stem)
    description: Is the animal a mammal? (yes/no)
    data: mammals.jsonl            # relative to this file: .jsonl, .json (a list) or .csv
    prompt: "Is a {animal} a mammal? Answer yes or no, in <answer></answer>."
    answer: choice                 # choice | number | math | text
    choices: [yes, no]             # answer: choice only; {choices} in the prompt lists them
    # or, when each record offers its own (as MathQA's do): the field holding them
    # choices_field: options       # a list in each record ("A|B|C" in a CSV cell)
    target: label                  # the field holding the right answer
    id: name                       # optional: the field holding each record's id (else row-N)
    max_tokens: 256                # optional: the completion budget of a reply (default 1024)

The file is validated by `TaskFileSpec` (unknown keys refused); every problem is one line naming
the file (and the row and field of the data) and the fix.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ensemble.answers import Choice, resolve_answer
from ensemble.errors import DataError, InputError
from ensemble.sampling.parsing import extract_answer
from ensemble.wording import control_character

from .base import (
    Question,
    TaskBase,
    TaskLayout,
    read_questions,
    record_choices,
    register_task,
    seeded_subset,
)
from .records import data_records

__all__ = ["SUFFIXES", "TASK_FILE", "TaskFile", "TaskFileSpec", "is_task_file", "load_task_file",
           "task_file_title"]

# the registered name; the task file itself is the run's `data`. What identifies a run (its
# spec: task and data), never shown: tables, plots and folders show the file's `title`
TASK_FILE = "taskfile"
SUFFIXES = (".yaml", ".yml", ".json")
MAX_TOKENS = 1_000_000  # no model's completion budget comes near: 1000000000000 is a typo


class TaskFileSpec(BaseModel):
    """A declarative task file (`ensemble schema` style: every key declared, others refused)."""

    model_config = ConfigDict(extra="forbid")

    description: str = Field("", description="what the task asks, for its readers")
    name: str | None = Field(None, min_length=1, max_length=80,
                             description="the task's name in tables, plots and the run "
                                         "folder's default name (default: the file's stem)")
    data: str = Field(min_length=1, description="the records: a .jsonl, .json (a list of "
                                                "objects) or .csv file, relative to the task "
                                                "file")
    prompt: str = Field(min_length=1, description="the prompt, each {field} filled from the "
                                                  "record ({choices}: the choices, comma "
                                                  "separated)")
    answer: Literal["choice", "number", "math", "text"] = Field(
        description="how a reply is read: one of the choices, or an open number, math "
                    "expression or text")
    choices: list[str] | None = Field(None, min_length=2, description="answer: choice: the "
                                                                       "allowed answers")
    choices_field: str | None = Field(None, min_length=1,
                                      description="answer: choice, instead of choices: the "
                                                  "record's field holding its own choices (a "
                                                  "list, or 'A|B|C' in a CSV cell)")
    target: str = Field(min_length=1, description="the record's field holding the right answer")
    id: str | None = Field(None, description="the record's field holding its id (default "
                                             "row-N, N its row in the data file)")
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, strict=True,
                                   description="the completion budget of a reply (default "
                                               "1024), a whole number")

    @field_validator("name")
    @classmethod
    def _printable_name(cls, raw: str | None) -> str | None:
        bad = control_character(raw or "")
        if bad is not None:
            raise ValueError(f"holds the control character {bad}: a name is shown in tables, "
                             "plots and the run folder's name, where it would act on the "
                             "terminal; write it without")
        return raw

    @field_validator("choices", mode="before")
    @classmethod
    def _choices_as_written(cls, raw: Any) -> Any:
        if isinstance(raw, list):
            if any(isinstance(c, bool) for c in raw):
                raise ValueError("YAML reads yes, no, true and false unquoted as booleans: "
                                 'quote the choices (["yes", "no"])')
            return [str(c) if isinstance(c, (int, float)) else c for c in raw]
        return raw

    @model_validator(mode="after")
    def _choices_for_choice(self) -> TaskFileSpec:
        if self.answer == "choice":
            if self.choices and self.choices_field:
                raise ValueError("give choices (the same for every record) or choices_field "
                                 "(each record's own), not both")
            if self.choices_field:
                return self
            if not self.choices:
                raise ValueError("answer: choice needs choices: [...] (at least two), or "
                                 "choices_field: FIELD naming each record's own")
            keys = [c.strip().casefold() for c in self.choices]
            if not all(keys) or len(set(keys)) != len(keys):
                raise ValueError("choices must be distinct and non-empty")
        elif self.choices is not None:
            raise ValueError(f"choices are for answer: choice, not {self.answer} (drop them)")
        elif self.choices_field is not None:
            raise ValueError(f"choices_field is for answer: choice, not {self.answer} (drop "
                             "it)")
        return self

    def fields(self) -> list[str]:
        """The record fields the prompt names (`{choices}` included when written)."""
        out: list[str] = []
        try:
            parts = list(string.Formatter().parse(self.prompt))
        except ValueError as exc:  # "Single '}' encountered in format string", ...
            raise ValueError(f"prompt: {str(exc).lower()}: write {{field}} for a record's "
                             "field; a literal brace is written {{ or }}") from None
        for _, name, spec, conv in parts:
            if name is None:
                continue
            if not name.isidentifier():
                raise ValueError(f"prompt: {{{name}}} is not a field name: write {{field}} "
                                 "with a field of the records (literal braces: {{ and }})")
            if spec or conv:
                raise ValueError(f"prompt: {{{name}{'!' + conv if conv else ''}"
                                 f"{':' + spec if spec else ''}}} formats its field: write "
                                 f"{{{name}}}")
            if name not in out:
                out.append(name)
        return out


def is_task_file(name: str) -> bool:
    """`ensemble eval NAME` names a task file, not a registered task (a path or a .yaml,
    .yml or .json file name: registered names are neither)."""
    return name.lower().endswith(SUFFIXES) or "/" in name or "\\" in name


def task_file_title(path: str | Path, spec: TaskFileSpec | None = None) -> str:
    """A task file's name for people: its `name`, else the file's stem (refused when it holds
    a control character, as a `name` is)."""
    spec = spec if spec is not None else load_task_file(path)
    if spec.name and spec.name.strip():
        return spec.name.strip()
    stem = Path(path).stem
    bad = control_character(stem)
    if bad is not None:
        raise InputError(f"task file {str(path)!r}: its name holds the control character "
                         f"{bad}, and without name: it names the task in tables, plots and "
                         "the run folder: rename the file, or give name: NAME")
    return stem


class _RepeatedKey(ValueError):
    pass


def _unique_keys_loader() -> type:
    """yaml's SafeLoader refusing a mapping that gives one key twice (plain YAML keeps the
    last silently; JSON, which YAML reads too, alike)."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise _RepeatedKey(f"{key!r} is given twice (lines {seen[key]} and {line}): "
                                       "give each key once")
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys


def load_task_file(path: str | Path) -> TaskFileSpec:
    """Read and validate a task file; a bad one is one InputError line naming the key and
    the fix."""
    import yaml

    p = Path(path)
    try:
        doc = yaml.load(p.read_text(encoding="utf-8"), Loader=_unique_keys_loader())  # noqa: S506
    except _RepeatedKey as exc:
        raise InputError(f"task file {p}: {exc}") from None
    except RecursionError:
        raise InputError(f"task file {p}: nested too deeply to read (a task file is a mapping "
                         "of a few levels)") from None
    except FileNotFoundError:
        raise InputError(f"task file {p} not found: give the path of a .yaml or .json task "
                         "file (docs/tasks.md)") from None
    except OSError as exc:
        raise InputError(f"task file {p}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"task file {p}: not UTF-8 text; give a YAML or JSON task file"
                         ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"task file {p}: not valid YAML{at} "
                         f"({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(doc, dict):
        raise InputError(f"task file {p}: a task file is a mapping of data, prompt, answer, "
                         "target, ... (docs/tasks.md), not "
                         f"{type(doc).__name__}")
    try:
        spec = TaskFileSpec.model_validate(doc)
        spec.fields()
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = ("unknown key; the keys are " + ", ".join(TaskFileSpec.model_fields))
        raise InputError(f"task file {p}: {key + ': ' if key else ''}{msg}") from None
    except ValueError as exc:
        raise InputError(f"task file {p}: {exc}") from None
    return spec


@register_task(TASK_FILE)
class TaskFile(TaskBase):
    """The task a declarative task file describes (`data`: the task file's path; see the
    module docstring). `limit` picks a seeded subset of the records (kept in file order);
    `skip_invalid=True` skips malformed records, listing them in `skipped`."""

    name = TASK_FILE
    layout = TaskLayout(takes_data=True, per_question_choices=True)
    max_tokens: int | None = 1024

    def __init__(self, *, data: str | Path | None = None, limit: int | None = None,
                 seed: int = 0, skip_invalid: bool = False) -> None:
        super().__init__()
        if data is None:
            raise InputError("the taskfile task needs the task file: ensemble eval "
                             "path/to/task.yaml ... (or --data path/to/task.yaml)")
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise InputError(f"limit must be an integer >= 1, got {limit!r}")
        self.path = Path(data)
        self.spec = load_task_file(self.path)
        self.title = task_file_title(self.path, self.spec)  # the registered name is generic
        self.data_path = self.path.parent / self.spec.data
        if self.data_path.is_dir():
            raise InputError(f"task file {self.path}: data {self.data_path} is a folder; give "
                             "a .jsonl, .json or .csv file (data: is read relative to the task "
                             "file)")
        if not self.data_path.is_file():
            raise InputError(f"task file {self.path}: data file {self.data_path} not found "
                             "(data: is read relative to the task file)")
        if self.spec.max_tokens is not None:
            self.max_tokens = self.spec.max_tokens
        # the file's choices (none with choices_field: each question has its record's)
        self.choices = tuple(c.strip() for c in self.spec.choices or ())
        # how replies are read: a choice among the file's choices (each question's own:
        # `parse_for`), or its open kind
        self.kind: Any = (Choice(self.choices or None) if self.spec.answer == "choice"
                          else resolve_answer(self.spec.answer))
        self.answer_kind = self.kind
        self.limit, self.seed, self.skip_invalid = limit, seed, skip_invalid
        self._total = 0
        self._qs: list[Question] | None = None

    def questions(self) -> list[Question]:
        """One question per record (all, or the seeded subset of `limit`), in file order."""
        if self._qs is not None:
            return self._qs
        out = read_questions(data_records(self.data_path, json_list=True), self._question,
                             path=str(self.data_path), id_field=self.spec.id,
                             skip_invalid=self.skip_invalid, skipped=self.skipped,
                             empty="no records in the file")
        self._total = len(out)
        self._qs = seeded_subset(out, self.limit, self.seed)
        return self._qs

    def _question(self, row: int, rec: Any) -> Question:
        where: dict[str, Any] = {"path": str(self.data_path), "row": row}
        if not isinstance(rec, Mapping):
            raise DataError("expected an object (a record with named fields)", **where)
        choices = self.choices
        if self.spec.choices_field:
            field = self.spec.choices_field
            if rec.get(field) in (None, "", []):
                raise DataError("missing or empty (the record's choices, the task file's "
                                "choices_field)", field=field, **where)
            got = record_choices(rec[field])
            if got is None:
                raise DataError(f"{rec[field]!r} is not a list of at least two distinct, "
                                "non-empty choices (a list, or 'A|B|C')", field=field, **where)
            choices = got
        values = {**rec, "choices": ", ".join(choices)} if choices else dict(rec)
        for name in self.spec.fields():
            if name not in values:
                raise DataError(f"the prompt of {self.path} names {{{name}}}, a field this "
                                f"record has not (its fields: {', '.join(map(str, rec))}); "
                                "fix the template or the data", field=name, **where)
        prompt = self.spec.prompt.format(**{k: _text(v) for k, v in values.items()
                                            if isinstance(k, str)})
        raw = rec.get(self.spec.target)
        if raw in (None, ""):
            raise DataError("missing or empty (the right answer, the task file's target)",
                            field=self.spec.target, **where)
        if choices:
            correct = {c.casefold(): c for c in choices}.get(str(raw).strip().casefold())
            if correct is None:
                raise DataError(f"{raw!r} is not one of the choices {list(choices)}",
                                field=self.spec.target, **where)
        else:
            correct = self.kind.canonical(str(raw))
            if correct is None:
                raise DataError(f"{raw!r} is not a valid {self.spec.answer} answer",
                                field=self.spec.target, **where)
        qid = rec.get(self.spec.id) if self.spec.id else None
        if self.spec.id and qid in (None, ""):
            raise DataError("missing or empty (the record's id)", field=self.spec.id, **where)
        meta: dict[str, Any] = {"row": row}
        if not choices:
            meta["answer"] = str(raw)  # the right answer as written (open answers' spelling)
        return Question(id=f"row-{row}" if qid is None else str(qid), prompt=prompt,
                        choices=choices, correct=correct, meta=meta)

    def population(self) -> int:
        """The usable records of the data file, before `limit`."""
        self.questions()
        return self._total

    def data_notes(self) -> dict[str, Any]:
        """The task file, its data file and its description."""
        return {"task_file": str(self.path), "data_file": str(self.data_path),
                "description": self.spec.description}

    def parse(self, text: str) -> str | None:
        """The answer in a completion: one of the file's choices (with choices_field: the
        `<answer>` as written; `parse_for` reads each question's own), or the open kind's
        key."""
        return self.kind.parse(text) if text else None

    def parse_for(self, question: Question, text: str | None) -> str | None:
        """The answer in a completion: one of the question's choices, or the open kind's."""
        if not text:
            return None
        return extract_answer(text, question.choices) if question.choices else self.parse(text)


def _text(value: Any) -> str:
    """A record's value as the prompt shows it (lists comma separated)."""
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return "" if value is None else str(value)
