"""The task interface: a dataset of questions, a prompt for each, a parser and scoring."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Question", "Task", "get_task", "register_task", "task_names"]


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


@runtime_checkable
class Task(Protocol):
    """What every task provides.

    A task may also set `max_tokens` (an int): the completion budget a reply needs, used when
    the user gives no --max-tokens, so that a model that rambles (a small local model) cannot
    run a single sample to thousands of tokens.
    """

    name: str

    def questions(self) -> Sequence[Question]:
        """All questions of the task, in a stable order."""
        ...

    def parse(self, text: str) -> str | None:
        """The normalised answer in a completion, or None when it is invalid."""
        ...


_REGISTRY: dict[str, Callable[..., Task]] = {}


def register_task(name: str) -> Callable[[Callable[..., Task]], Callable[..., Task]]:
    """Class decorator: make a task constructible by name with `get_task`."""

    def deco(factory: Callable[..., Task]) -> Callable[..., Task]:
        _REGISTRY[name] = factory
        return factory

    return deco


def get_task(name: str, **options: Any) -> Task:
    """Build the task called `name`; unknown names raise InputError listing the known ones."""
    from ensemble.errors import InputError

    _load_builtin()
    try:
        factory = _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise InputError(f"unknown task {name!r}; known tasks: {known}") from None
    return factory(**options)


def task_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def _load_builtin() -> None:
    import importlib

    for mod in ("boxball", "mathqa", "jsonl"):
        try:
            importlib.import_module(f"tasks.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"tasks.{mod}":
                raise
