"""Fixtures shared by the evals tests."""

from __future__ import annotations

import json
from typing import Any

import pytest


class Cli:
    """`ensemble ARGS` in this process (the run_cli fixture of tests/conftest.py), with the two
    outcomes most evals tests assert: a run's `--json` document, or a one-line refusal."""

    def __init__(self, run_cli: Any) -> None:
        self.run_cli = run_cli

    def __call__(self, *args: object) -> Any:
        """The command's CliRun (returncode, stdout, stderr)."""
        return self.run_cli(*args)

    def ok(self, *args: object) -> Any:
        """The `--json` document of a command that must succeed."""
        r = self.run_cli(*args, "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def refused(self, *args: object) -> str:
        """The one stderr line of a command that must be refused (non-zero, no traceback)."""
        return self.run_cli(*args).refusal()


@pytest.fixture
def cli(run_cli) -> Cli:
    """`cli(*args)`, `cli.ok(*args)` (the --json document), `cli.refused(*args)` (one line)."""
    return Cli(run_cli)
