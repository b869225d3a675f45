"""The questions of a run: its task (with its data, limit and seed), the subset `limit`
selects, and the check that each can be scored, all before any request (`evals.plan.resolve`
calls them)."""

from __future__ import annotations

from typing import Any

from ensemble.errors import InputError
from ensemble.tasks import Question, Task, layout_of

from .openanswers import build_task

__all__ = ["check_scorable", "load_task", "select_questions"]


def load_task(name: str, *, data: str | None = None, limit: int | None = None, seed: int = 0,
              open_answers: bool = False, answer: str | None = None,
              skip_invalid: bool = False) -> Task:
    """The registered task `name` (data, limit and seed passed to the tasks that read data;
    `skip_invalid`: malformed data rows skipped and counted instead of refused; the open-answer
    options `--open` and `--answer` to the tasks that take them)."""
    opts: dict[str, Any] = {}
    if layout_of(name).takes_data:
        opts.update(data=data, limit=limit, seed=seed, skip_invalid=skip_invalid)
    elif data is not None:
        raise InputError(f"task {name!r} takes no --data")
    return build_task(name, opts, open_answers=open_answers, answer=answer)


def select_questions(task: Task, *, limit: int | None = None, seed: int = 0) -> list[Question]:
    """The questions of a run. A task whose layout scores groups of questions as one item
    (box-ball's scenarios) takes `limit` whole items, drawn with `seed`; other tasks apply
    `limit` themselves (`load_task`)."""
    questions = list(task.questions())
    group = task.layout.group
    if group is not None and limit is not None:
        import random

        items = sorted({q.meta[group] for q in questions})
        keep = set(random.Random(seed).sample(items, min(limit, len(items))))
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
