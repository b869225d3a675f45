"""The questions of a run: its task (with the data, limit and seed of its spec), the subset
`limit` selects, and the check that each can be scored, all before any request."""

from __future__ import annotations

from typing import Any

from ensemble.errors import InputError
from ensemble.tasks import Question, Task, layout_of

from .openanswers import build_task
from .spec import RunSpec, seed_of, task_name

__all__ = ["check_scorable", "load_task", "select_questions"]


def load_task(spec: RunSpec, *, skip_invalid: bool = False) -> Task:
    """The task of a spec (data, limit and seed passed to the tasks that read data;
    `skip_invalid`: malformed data rows skipped and counted instead of refused)."""
    name = task_name(spec)
    opts: dict[str, Any] = {}
    if layout_of(name).takes_data:
        opts.update(data=spec.data, limit=spec.limit, seed=seed_of(spec),
                    skip_invalid=skip_invalid)
    elif spec.data is not None:
        raise InputError(f"task {name!r} takes no --data")
    return build_task(name, opts, open_answers=bool(spec.open), answer=spec.answer)


def select_questions(spec: RunSpec, task: Task) -> list[Question]:
    """The questions of a run. A task whose layout scores groups of questions as one item
    (box-ball's scenarios) takes `limit` whole items, drawn with `seed`; other tasks apply
    `limit` themselves (`load_task`)."""
    questions = list(task.questions())
    group = task.layout.group
    if group is not None and spec.limit is not None:
        import random

        items = sorted({q.meta[group] for q in questions})
        keep = set(random.Random(seed_of(spec)).sample(items, min(spec.limit, len(items))))
        questions = [q for q in questions if q.meta[group] in keep]
    if not questions:
        raise InputError("the task has no questions")
    return questions


def check_scorable(task: Task, questions: list[Question]) -> None:
    """Every question of a task scored by accuracy needs its right answer (before any
    request)."""
    if task.layout.utility:
        return
    bad = next((q for q in questions if q.correct is None), None)
    if bad is not None:
        raise InputError(f"question {bad.id!r} has no answer: every question needs one to be "
                         "scored (field 'answer')")
