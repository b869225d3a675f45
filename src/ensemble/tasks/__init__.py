"""Task definitions: dataset loading, prompt, answer parser, scoring. Look tasks up by name."""

from .base import (
    Question,
    Task,
    TaskBase,
    TaskLayout,
    get_task,
    layout_of,
    register_task,
    task_names,
    task_title,
)

__all__ = ["Question", "Task", "TaskBase", "TaskLayout", "get_task", "layout_of", "register_task",
           "task_names", "task_title"]
