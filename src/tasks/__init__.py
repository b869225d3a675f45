"""Task definitions: dataset loading, prompt, answer parser, scoring. Look tasks up by name."""

from .base import Question, Task, get_task, register_task, task_names

__all__ = ["Question", "Task", "get_task", "register_task", "task_names"]
