"""The task interface: a dataset of questions, a prompt for each, a parser and scoring."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, overload, runtime_checkable

from ensemble.errors import InputError
from ensemble.registry import Names, Registry, own_name, registration

if TYPE_CHECKING:
    from ensemble.answers import AnswerKind

__all__ = ["Question", "Task", "TaskBase", "TaskLayout", "fit_csv_cells", "get_task", "layout_of",
           "read_questions", "record_choices", "register_task", "seeded_subset", "task_names",
           "task_registry", "task_title"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Question:
    """One question of a task.

    `choices` are the normalised answers a parser may return (e.g. ("L", "R") or "A".."E").
    `correct` is the right choice when the task is scored. `posterior` is, for calibration
    tasks, the exact Bayesian posterior P(ω = 1 | signal), where answering `choices[0]` is the
    report X = 1.
    """

    id: str
    prompt: str
    choices: tuple[str, ...]
    correct: str | None = None
    posterior: float | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskLayout:
    """How a task is scored, declared by the task (evals ask the layout, never the name).

    `metric`: "accuracy" (a vote's accuracy over questions with a right answer) or "utility"
    (the paper's box-and-ball: each expert draws its own signal, the vote's expected utility in
    ±1 units is computed exactly from each signal's answer frequencies; answers are the
    binary choices, the first one the report X = 1).
    `group`: the `Question.meta` key whose questions are scored together as one item (box-ball:
    "scenario", one question per ball colour); None: each question is an item.
    `unit`: what an item is called in tables ("questions", "scenarios").
    `takes_data`: the task reads --data (and --skip-invalid).
    `chance`: the accuracy (utility) of a uniform guess when the task fixes it; None: the mean
    of 1/len(choices) over the questions.
    `per_question_choices`: questions offer different choices, so an answer is parsed against
    the question's own (`Task.parse_for`) instead of the task-wide parser.
    `calibrates`: its questions may carry the exact posterior P(first choice), so λ can be
    fitted on it (`ensemble calibrate --task`).
    """

    metric: Literal["accuracy", "utility"] = "accuracy"
    group: str | None = None
    unit: str = "questions"
    takes_data: bool = False
    chance: float | None = None
    per_question_choices: bool = False
    calibrates: bool = False

    @property
    def utility(self) -> bool:
        """Scored as the box-and-ball expected utility (±1 units), not a vote's accuracy."""
        return self.metric == "utility"

    @property
    def vote_rule(self) -> str:
        """The main vote: majority over two answers (box-ball), plurality otherwise."""
        from ensemble.rules import main_vote

        return main_vote(self.utility)

    def item(self, q: Any) -> str:
        """The item a question (or its run record) belongs to."""
        return str(q.meta[self.group]) if self.group else str(q.id)


@runtime_checkable
class Task(Protocol):
    """What every task provides.

    `layout` says how the task is scored (see `TaskLayout`); `max_tokens` the completion budget
    a reply needs, used when the user gives no --max-tokens, so that a model that rambles (a
    small local model) cannot run a single sample to thousands of tokens; `skipped` the data
    rows left out as (row, reason) and `issues` the repairs made per kind (both empty for a
    generated task); `answer_kind` how answers are read and voted (an `ensemble.answers`
    kind; None: each question's own choices), an open kind making the run score open answers;
    `data_notes()` what else the run's summary records about the data (its `data` block).
    """

    name: str
    layout: TaskLayout
    max_tokens: int | None
    skipped: list[tuple[int, str]]
    issues: dict[str, list[int]]

    @property
    def answer_kind(self) -> AnswerKind | None:
        """How answers are read and voted; None: each question's own choices."""
        ...

    def data_notes(self) -> dict[str, Any]:
        """What the task says about its data for the summary's `data` block (JSON values),
        beyond `skipped` and `issues`; each key is a field `evals.schemas.DataNotes` declares
        (summary.json allows no other)."""
        ...

    def population(self) -> int:
        """How many items (see `TaskLayout.group`) the whole task has, before any limit."""
        ...

    def parse_for(self, question: Question, text: str | None) -> str | None:
        """The answer in a completion, one of `question.choices`, or None."""
        ...

    def questions(self) -> Sequence[Question]:
        """All questions of the task, in a stable order."""
        ...

    def parse(self, text: str) -> str | None:
        """The normalised answer in a completion, or None when it is invalid."""
        ...


class TaskBase:
    """Defaults for a task of your own: multiple choice scored by accuracy, each question an
    item, answers read by `parse` (override `parse_for` to read them per question), no
    completion budget, nothing skipped. Subclass it and give `name`, `questions` and `parse`."""

    name: str = ""
    layout: TaskLayout = TaskLayout()
    max_tokens: int | None = None
    answer_kind: AnswerKind | None = None

    def __init__(self) -> None:
        self.skipped: list[tuple[int, str]] = []
        self.issues: dict[str, list[int]] = {}

    def questions(self) -> Sequence[Question]:
        raise NotImplementedError

    def parse(self, text: str) -> str | None:
        raise NotImplementedError

    def parse_for(self, question: Question, text: str | None) -> str | None:
        return None if text is None else self.parse(text)

    def population(self) -> int:
        return len({self.layout.item(q) for q in self.questions()})

    def data_notes(self) -> dict[str, Any]:
        return {}


def record_choices(raw: Any) -> tuple[str, ...] | None:
    """A record's own choices: a list (`["12", "15"]`), a JSON list written as text, or
    `"A|B|C"` (what a CSV cell holds); None unless at least two, distinct (without case) and
    non-empty. The `jsonl` task's `choices` and a task file's `choices_field` read them."""
    if isinstance(raw, str):
        s = raw.strip()
        if s.startswith("["):
            try:
                raw = json.loads(s)
            except json.JSONDecodeError:
                return None
        else:
            raw = s.split("|")
    if not isinstance(raw, list):
        return None
    if not all(isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in raw):
        return None
    out = tuple(str(c).strip() for c in raw)
    if len(out) < 2 or not all(out) or len({c.casefold() for c in out}) != len(out):
        return None
    return out


def task_title(task: Any) -> str:
    """The task's name for people (tables, plots, the run folder): its `title` when it has
    one (a task file: its `name`, or the file's stem), else its registered `name`."""
    return getattr(task, "title", None) or task.name


def _builtin_modules() -> list[str]:
    """The built-in tasks: every module of this package (each registers its tasks with
    `register_task`), imported on the first look-up; no list to keep."""
    import pkgutil
    from pathlib import Path

    package = __name__.rpartition(".")[0]
    return [f"{package}.{info.name}" for info in pkgutil.iter_modules([str(Path(__file__).parent)])
            if not info.name.startswith("_")]


task_registry: Registry[Callable[..., Task]] = Registry(
    "task", "ensemble.tasks", builtins=_builtin_modules,
    adopt=lambda name, obj: register_task(name, obj))


def read_questions(records: Iterable[tuple[int, Any]], make: Callable[[int, Any], Question], *,
                   path: str, id_field: str | None, skip_invalid: bool,
                   skipped: list[tuple[int, str]], empty: str) -> list[Question]:
    """A data file's questions, one per record `(row, record or DataError)`: `make` reads a
    record, ids are unique, and a bad record is a DataError naming its row (or, with
    `skip_invalid`, goes to `skipped` with its reason); no question at all is `empty`."""
    from ..errors import DataError

    out: list[Question] = []
    seen: dict[str, int] = {}
    for row, rec in records:
        try:
            if isinstance(rec, DataError):
                raise rec
            q = make(row, rec)
            if q.id in seen:
                raise DataError(f"duplicate id {q.id!r} (first at row {seen[q.id]})",
                                path=path, row=row, field=id_field)
            seen[q.id] = row
            out.append(q)
        except DataError as exc:
            if not skip_invalid:
                raise
            skipped.append((row, str(exc)))
    if not out and skipped:
        # every record was skipped: "no records in the file" said there were none
        n, (row, why) = len(skipped), skipped[0]
        raise DataError(f"{'the one record is' if n == 1 else f'all {n} records are'} "
                        f"invalid (--skip-invalid skipped {'it' if n == 1 else 'each'}); "
                        f"row {row}: {why}", path=path)
    if not out:
        raise DataError(empty, path=path)
    return out


def fit_csv_cells(text: str) -> None:
    """Let the csv module read cells as long as `text` (its default limit, 131072 characters,
    refused a valid file with one long cell); no cell of a text is longer than the text."""
    import csv

    if len(text) > csv.field_size_limit():
        csv.field_size_limit(len(text))


def seeded_subset(items: list[T], limit: int | None, seed: int) -> list[T]:
    """A task's `limit`: that many of its items, drawn with `seed` and kept in file order (all
    of them without a limit, or when there are no more)."""
    if limit is None or limit >= len(items):
        return items
    picked = sorted(random.Random(seed).sample(range(len(items)), limit))
    return [items[i] for i in picked]


@overload
def register_task(factory: F, /) -> F: ...
@overload
def register_task(name: str, factory: F, /, *, replace: bool = ...) -> F: ...
@overload
def register_task(name: str | None = None, /, *, replace: bool = ...) -> Callable[[F], F]: ...
def register_task(*args: Any, name: str | None = None, replace: bool = False) -> Any:
    """Register a task: a `TaskBase` subclass (or any factory of a `Task`), constructible by
    name with `get_task`, known by its `name` attribute or the name given. The one shape of
    every registering function (`ensemble.registry`): `@register_task`,
    `@register_task("mine")` or `register_task("mine", factory)`; plug-ins register through
    the entry-point group `ensemble.tasks`, an installed plug-in's task named
    `package/name`."""

    def add(factory: Any, given: str | None) -> Any:
        if not callable(factory):
            raise InputError(f"register_task takes a task class or factory, got {factory!r}")
        task_registry.add(own_name(factory, given, what="register_task"), factory,
                      replace=replace)
        return factory

    return registration(args, name, add, what="register_task")


def get_task(name: str, **options: Any) -> Task:
    """Build the task called `name`; unknown names raise InputError listing the known ones."""
    factory = task_registry.get(name)
    task = factory(**options)
    missing = [a for a in ("layout", "max_tokens", "skipped", "issues", "answer_kind",
                           "data_notes", "population", "parse_for", "questions", "parse")
               if not hasattr(task, a)]
    if missing:
        raise InputError(f"task {name!r} does not declare {', '.join(missing)}: subclass "
                         "ensemble.tasks.TaskBase (docs/tasks.md) or give them")
    return task


def layout_of(name: str) -> TaskLayout:
    """The layout of the task called `name` (a run folder's task), without building it."""
    layout = getattr(task_registry.get(name), "layout", None)
    if not isinstance(layout, TaskLayout):
        raise InputError(f"task {name!r} declares no layout: give its class a `layout` "
                         "(ensemble.tasks.TaskLayout)")
    return layout


def task_names() -> Names:
    """The registered tasks' names (`in` finds a plug-in's task by its short name too)."""
    return task_registry.names()
