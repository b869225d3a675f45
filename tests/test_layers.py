"""The package boundaries, read from the source: the core never imports the tasks or the evals,
and only the CLI imports its commands. Imports inside functions count too."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a file, relative imports resolved."""
    package = path.relative_to(SRC).with_suffix("").parts[:-1]
    if path.name == "__init__.py":
        package = path.relative_to(SRC).parts[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join((*base, node.module) if node.module else base)
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
    return out


def _files(*parts: str) -> list[Path]:
    return sorted(SRC.joinpath(*parts).rglob("*.py"))


def test_resolves_relative_imports():
    mods = {m for _, m in _imports(SRC / "ensemble" / "sampling" / "sampler.py")}
    assert "ensemble.errors" in mods and "ensemble.sampling.options" in mods


@pytest.mark.parametrize("path", _files("ensemble"), ids=lambda p: str(p.relative_to(SRC)))
def test_core_imports_neither_tasks_nor_evals(path):
    bad = [f"{path.name}:{line} imports {mod}" for line, mod in _imports(path)
           if mod.split(".")[0] in ("tasks", "evals")]
    assert not bad, bad


def test_only_the_cli_imports_the_commands():
    allowed = {SRC / "ensemble" / "cli.py", *_files("ensemble", "commands")}
    bad = [f"{p.relative_to(SRC)}:{line} imports {mod}"
           for p in _files() if p not in allowed
           for line, mod in _imports(p)
           if mod == "ensemble.commands" or mod.startswith("ensemble.commands.")]
    assert not bad, bad


def test_eval_commands_come_through_the_entry_point_group():
    from ensemble.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {"eval", "calibrate", "compare", "view", "theory", "sample"} <= set(sub.choices)
