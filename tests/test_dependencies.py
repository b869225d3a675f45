"""Dependencies are used through their public API only (DESIGN.md §5: litellm changes its
internals every week, and a fresh install resolves the newest release), and every one declared
is used.

Read from the source with the AST: no module imports a leading-underscore name from litellm, and
no code reads, assigns or patches a leading-underscore attribute of a litellm object (a module
imported from litellm, or the module returned by `ensemble.providers.litellm.litellm()`); every
distribution in pyproject.toml's `dependencies` is imported by some module of the package.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for the tests of this file."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _litellm_uses(path: Path) -> list[str]:
    tree = _tree(path)
    bound: set[str] = set()  # names bound to litellm modules or objects
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "litellm":
                    if any(_private(p) for p in a.name.split(".")):
                        found.append(f"{path.name}:{node.lineno} import {a.name}")
                    bound.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "litellm":
            parts = (node.module or "").split(".")
            for a in node.names:
                if _private(a.name) or any(_private(p) for p in parts):
                    found.append(f"{path.name}:{node.lineno} from {node.module} import {a.name}")
                bound.add(a.asname or a.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            f = node.value.func
            if isinstance(f, ast.Name) and f.id == "litellm":  # ll = litellm()
                bound.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{path.name}:{node.lineno} {root.id}...{node.attr}")
            if isinstance(root, ast.Call) and isinstance(root.func, ast.Name) \
                    and root.func.id == "litellm":
                found.append(f"{path.name}:{node.lineno} litellm().{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2:
            obj, name = node.args[0], node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) \
                    and _private(name.value) and isinstance(obj, ast.Name) and obj.id in bound:
                found.append(f"{path.name}:{node.lineno} {node.func.id}({obj.id}, "
                             f"{name.value!r})")
    return found


def test_no_private_litellm_name_is_imported_read_or_patched():
    found = [u for p in sorted(SRC.rglob("*.py")) for u in _litellm_uses(p)]
    assert not found, "private litellm names used: " + "; ".join(found)


def test_the_checker_sees_a_patch(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from litellm.llms.custom_httpx import http_handler as hh\n"
                   "hh.AsyncHTTPHandler._create_httpx_transport = staticmethod(len)\n"
                   "def f():\n    ll = litellm()\n    return ll._hidden\n"
                   "from litellm.utils import _private_helper\n", encoding="utf-8")
    found = _litellm_uses(bad)
    assert len(found) == 3, found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_IMPORT = re.compile(r"^\s*(?:from\s+(\w+)[\w.]*\s+import|import\s+(\w+))", re.MULTILINE)


def _imported(root: Path) -> set[str]:
    """The top-level modules the package's source imports (inside functions too; read as
    text, a tenth of parsing every module)."""
    names: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        for m in _IMPORT.finditer(path.read_text(encoding="utf-8")):
            names.add(m.group(1) or m.group(2))
    return names


def test_every_declared_dependency_is_imported():
    """A dependency declared and never imported costs every install and says something false
    about the code (asyncio-throttle was one until issue 36)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    modules: dict[str, set[str]] = {}
    for module, dists in packages_distributions().items():
        for dist in dists:
            modules.setdefault(_normal(dist), set()).add(module)
    imported = _imported(SRC / "ensemble")
    unused = []
    for requirement in declared:
        dist = _normal(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])
        provides = modules.get(dist)
        if provides is None:
            pytest.skip(f"{dist} is not installed here")
        if not provides & imported:
            unused.append(dist)
    assert not unused, f"declared in pyproject.toml, imported nowhere in src/ensemble: {unused}"
