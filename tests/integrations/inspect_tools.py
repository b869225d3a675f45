"""An inspect_ai task with one tool (`use_tools`), used by tests/serve/test_clients.py: the
model's voted tool call is executed by inspect and its result sent back as a `tool` message."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import tool


@tool
def add():
    async def execute(x: int, y: int) -> int:
        """Add two integers.

        Args:
            x: the first integer
            y: the second integer
        """
        return x + y

    return execute


@task
def add_with_tools() -> Task:
    return Task(dataset=[Sample(input="What is 17 + 25? Use the add tool.", target="42")],
                solver=[use_tools(add()), generate()])
