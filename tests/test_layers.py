"""The package boundaries, read from the source: the core never imports the tasks or the evals,
and only the CLI imports its commands. Imports inside functions count too."""

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"


@functools.cache
def _parsed(path: Path, mtime_ns: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _tree(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once per process (the checks below read every module of
    the package, several times over: parsing was most of this file's ~7 s of CPU). Read only."""
    return _parsed(path, path.stat().st_mtime_ns)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a file, relative imports resolved."""
    package = path.relative_to(SRC).with_suffix("").parts[:-1]
    if path.name == "__init__.py":
        package = path.relative_to(SRC).parts[:-1]
    out = []
    for node in ast.walk(_tree(path)):
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
    assert "ensemble.errors" in mods and "ensemble.sampling.store" in mods


def _core_files() -> list[Path]:
    """src/ensemble without its tasks and evals subpackages: the core."""
    sub = (SRC / "ensemble" / "tasks", SRC / "ensemble" / "evals")
    return [p for p in _files("ensemble") if not any(p.is_relative_to(s) for s in sub)]


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_core_imports_neither_tasks_nor_evals(path):
    bad = [f"{path.name}:{line} imports {mod}" for line, mod in _imports(path)
           if mod.split(".")[:2] in (["ensemble", "tasks"], ["ensemble", "evals"])]
    assert not bad, bad


def test_tasks_and_evals_are_subpackages_not_top_level():
    # a top-level `evals` would shadow OpenAI's evals on PyPI (and `tasks` any other)
    assert not (SRC / "evals").exists() and not (SRC / "tasks").exists()
    assert (SRC / "ensemble" / "evals" / "__init__.py").exists()


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


# -- the evals keep the house rules (shared/DESIGN.md section 3) -------------------------------
TASK_NAMES = ("boxball", "mathqa", "jsonl")
# rules are asked what they declare (ensemble.rules: main_vote, baseline, is_baseline, ...),
# never compared by name: neither the constants nor the built-in names written out
RULE_CONSTANTS = ("PLURALITY", "MAJORITY", "RANDOM_FOLLOW", "WEIGHTED", "LAM_WEIGHTED", "ROBUST")
RULE_NAMES = ("plurality", "majority", "random-follow", "weighted", "lam-weighted", "robust")


def _module(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_under(path: Path, top: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in a file under `top`, relative ones resolved."""
    package = _module(path, top).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join([*base, node.module] if node.module else base)
            out.append((node.lineno, mod, [a.name for a in node.names]))
    return out


def _evals_breaks(root: Path, top: Path | None = None) -> list[str]:
    """What the package at `root` breaks: task names compared as strings, import cycles
    between its modules (imports inside functions count), leading-underscore names imported
    from another of its modules, modules over 700 lines, functions over 100."""
    top = top or root.parent
    files = {_module(p, top): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    out: list[str] = []
    for mod, path in files.items():
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(top)
        if text.count("\n") + 1 > 700:
            out.append(f"{where}: module over 700 lines")
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 > 100:
                    out.append(f"{where}:{node.lineno} {node.name}: function over 100 lines")
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value in TASK_NAMES
                    for c in [node.left, *node.comparators]):
                out.append(f"{where}:{node.lineno}: task name compared as a string")
            if isinstance(node, ast.Compare) and any(
                    (isinstance(c, ast.Name) and c.id in RULE_CONSTANTS)
                    or (isinstance(c, ast.Constant) and c.value in RULE_NAMES)
                    for side in [node.left, *node.comparators]
                    for c in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set))
                              else [side])):
                out.append(f"{where}:{node.lineno}: rule compared by name")
        for line, target, names in _imports_under(path, top):
            for name in names:
                full = f"{target}.{name}"
                dest = full if full in files else target
                if dest in files and dest != mod:
                    graph[mod].add(dest)
                if (name.startswith("_") and not name.startswith("__") and dest != mod
                        and (target in files or target.split(".")[0] == "ensemble")):
                    out.append(f"{where}:{line}: imports private {name} from {target}")
            if not names and target in files and target != mod:
                graph[mod].add(target)

    def reach(start: str) -> set[str]:
        todo, got = [start], set()
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in got:
                    got.add(nxt)
                    todo.append(nxt)
        return got

    seen: set[str] = set()
    for mod in sorted(files):
        if mod in seen or mod not in reach(mod):
            continue
        cycle = sorted(m for m in reach(mod) if mod in reach(m))
        seen.update(cycle)
        out.append("import cycle: " + " <-> ".join(cycle))
    return out


def test_evals_keep_the_house_rules():
    breaks = _evals_breaks(SRC / "ensemble" / "evals", SRC)
    assert not breaks, breaks


def test_the_evals_rules_check_sees_what_it_names(tmp_path):
    # the check fails on each thing it names, in a planted package
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import _hidden\n\n\ndef f(task, rule):\n"
                              "    return task == 'boxball' or rule in (ROBUST, 'x')\n")
    (pkg / "b.py").write_text("def _hidden():\n    from . import a\n    return a\n\n\n"
                              "def g():\n" + "    x = 1\n" * 100 + "    return x\n" + "\n" * 600)
    found = "\n".join(_evals_breaks(pkg))
    for needle in ("task name compared", "rule compared by name", "imports private _hidden",
                   "import cycle",
                   "function over 100 lines", "module over 700 lines"):
        assert needle in found, (needle, found)

# -- the spec is read once (issue 36.7): evals.plan.resolve; every step takes the plan ----------
# the spec's own modules (its fields, its check, composing and reading it), and the resolver
SPEC_HOMES = ("spec.py", "specfields.py", "speccheck.py", "plan.py")
SPEC_TYPES = {"RunSpec", "MemberSpec", "EnsembleSpec"}
# what the other modules may import from the spec's module: the type (to pass a spec on), and
# what makes a spec or reads a file, not what reads a spec
SPEC_IMPORTS = SPEC_TYPES - {"MemberSpec"} | {"SPEC_FILE", "SPEC_VERSION", "calibration_spec",
                                              "calibration_command_spec", "command_spec",
                                              "load_spec", "one_model", "spec_folder",
                                              "spec_schema"}


def _annotated_spec(node: ast.expr | None) -> bool:
    if node is None:
        return False
    text = ast.unparse(node)
    return any(t in text.replace(".", " ").replace("[", " ").replace("|", " ").split()
               for t in SPEC_TYPES)


def _spec_breaks(root: Path, top: Path | None = None) -> list[str]:
    """Where a module of the package at `root` (but its spec.py and plan.py) reads a run spec:
    imports a spec-reading name from spec.py, or uses a value that is a spec (a parameter
    annotated RunSpec, or a name bound to what a spec constructor returns) other than by
    passing it on: as an argument of a call to the resolver, the spec's module or a function
    that takes a spec itself, or in what it returns."""
    top = top or root.parent
    files = sorted(root.rglob("*.py"))
    homes = [p for p in files if p.name in SPEC_HOMES and p.parent == root]
    making, passing = set(), set()
    for path in homes:
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                passing.add(node.name)
                if _annotated_spec(node.returns):
                    making.add(node.name)
    trees = {p: _tree(p) for p in files if p not in homes}
    for tree in trees.values():  # a function that takes a spec passes it on (checked too)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    _annotated_spec(a.annotation) for a in [*node.args.args,
                                                            *node.args.kwonlyargs]):
                passing.add(node.name)
    out: list[str] = []
    for path, tree in trees.items():
        where = path.relative_to(top)
        for line, target, names in _imports_under(path, top):
            if target.endswith(".spec") and target.split(".")[-2] == root.name:
                out += [f"{where}:{line}: imports {n} from the spec's module" for n in names
                        if n not in SPEC_IMPORTS]
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            specs = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]
                     if _annotated_spec(a.annotation)}
            for node in ast.walk(fn):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                        and ast.unparse(node.value.func).split(".")[-1] in making):
                    specs |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            if not specs:
                continue
            passed: set[int] = set()
            for node in ast.walk(fn):
                if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in passing:
                    passed |= {id(a) for a in [*node.args, *(k.value for k in node.keywords)]}
                if isinstance(node, ast.Return) and node.value is not None:
                    elts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                    passed |= {id(e) for e in elts}
            for node in ast.walk(fn):
                if (isinstance(node, ast.Name) and node.id in specs
                        and isinstance(node.ctx, ast.Load) and id(node) not in passed):
                    out.append(f"{where}:{node.lineno} {fn.name}: reads the run spec {node.id}")
    return out


def test_only_the_resolver_reads_a_run_spec():
    breaks = _spec_breaks(SRC / "ensemble" / "evals", SRC)
    assert not breaks, breaks


def test_the_run_spec_check_sees_a_read(tmp_path):
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "spec.py").write_text("class RunSpec:\n    task = 'x'\n\n\n"
                                 "def seed_of(spec: RunSpec) -> int:\n    return 0\n\n\n"
                                 "def load_spec(path) -> RunSpec:\n    return RunSpec()\n")
    (pkg / "plan.py").write_text("from .spec import RunSpec\n\n\n"
                                 "def resolve(spec: RunSpec):\n    return spec.task\n")
    (pkg / "ok.py").write_text("from .plan import resolve\nfrom .spec import RunSpec, load_spec\n"
                               "\n\ndef run(spec: RunSpec):\n    return resolve(spec)\n\n\n"
                               "def cli(path):\n    spec = load_spec(path)\n"
                               "    return run(spec), spec\n")
    (pkg / "grid.py").write_text("from .spec import RunSpec, seed_of\n\n\n"
                                 "def analyse(spec: RunSpec):\n    return spec.task\n\n\n"
                                 "def other(path):\n    from .spec import load_spec\n\n"
                                 "    spec = load_spec(path)\n    return len(spec.task)\n")
    found = _spec_breaks(pkg)
    assert set(found) == {
        "planted/grid.py:1: imports seed_of from the spec's module",
        "planted/grid.py:5 analyse: reads the run spec spec",
        "planted/grid.py:12 other: reads the run spec spec"}, found


# -- src/ensemble: one-way imports, public seams, small modules and functions -------------------
# (the evals side has its own tests below/above; these read only src/ensemble)
def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ensemble_graph() -> dict[str, set[str]]:
    """module -> the ensemble modules it imports (at any depth: inside functions too)."""
    files = _files("ensemble")
    names = {_module_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    for p in files:
        me = _module_name(p)
        deps = set()
        for _, mod in _imports(p):
            while mod and mod not in names:  # `from pkg.mod import name` -> pkg.mod
                mod = mod.rpartition(".")[0]
            if mod and mod != me:
                deps.add(mod)
        graph[me] = deps
    return graph


def test_no_import_cycle_between_ensemble_modules():
    graph = _ensemble_graph()
    # a package's __init__ re-exports its modules; an edge into a package stands for the
    # names it re-exports, so only edges between modules that are not package inits count
    # when they close a loop through the package itself
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_no_private_name_imported_from_another_ensemble_module():
    bad = []
    for p in _files("ensemble"):
        tree = _tree(p)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                bad += [f"{p.relative_to(SRC)}:{node.lineno} {a.name} from {node.module}"
                        for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad


@pytest.mark.parametrize("path", _files("ensemble"), ids=lambda p: str(p.relative_to(SRC)))
def test_ensemble_modules_stay_small(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 700, f"{path.relative_to(SRC)} has {lines} lines: it is two things"


def test_ensemble_functions_stay_short():
    bad = []
    for p in _files("ensemble"):
        for node in ast.walk(_tree(p)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > 100:
                    bad.append(f"{p.relative_to(SRC)}:{node.lineno} {node.name} {n} lines")
    assert not bad, bad


def test_the_provider_seam_imports_nothing_concrete():
    # the registry reaches each provider inside its factory, and no provider module imports
    # the registry back: no cycle can form through the seam
    concrete = {"litellm", "litellm_batch", "litellm_lib", "local", "router"}
    for name in ("base", "registry", "builtin"):
        top = [mod for node in ast.parse((SRC / "ensemble" / "providers" / f"{name}.py")
                                         .read_text(encoding="utf-8")).body
               if isinstance(node, ast.ImportFrom)
               for mod in [node.module or ""]]
        assert not [m for m in top if m in concrete], (name, top)
    # (the built-ins' factories register like any other provider's, each importing its
    # provider only when called; the registry names that module, never imports it)
    graph = _ensemble_graph()
    assert not [m for m in graph if m.startswith("ensemble.providers.") and
                "ensemble.providers.registry" in graph[m]
                and m not in ("ensemble.providers", "ensemble.providers.builtin")]
    assert "ensemble.providers.builtin" not in graph["ensemble.providers.registry"]


# -- one way down: the layers of src, top to bottom ----------------------------------------------
# A module imports only from its own layer and the layers below it (imports inside functions
# and under TYPE_CHECKING count). Written once here and once in docs/architecture.md ("The
# layers"), which a test below holds to this list. A package covers its modules, except the
# root `ensemble`, which is only its __init__ (the public API, re-exported lazily).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("commands", ("ensemble.cli", "ensemble.__main__", "ensemble.commands", "ensemble.cliargs",
                  "ensemble.clitables", "ensemble.evals.commands")),
    ("evals", ("ensemble.evals",)),
    ("tasks", ("ensemble.tasks",)),
    ("public", ("ensemble",)),
    ("servers", ("ensemble.serve", "ensemble.testing", "ensemble.integrations")),
    ("fleet", ("ensemble.fleet",)),
    ("api", ("ensemble.vote", "ensemble.api", "ensemble.drawing", "ensemble.spending",
             "ensemble.decision", "ensemble.members", "ensemble.profile")),
    ("answers", ("ensemble.answers",)),
    ("sampling", ("ensemble.sampling",)),
    ("providers", ("ensemble.providers",)),
    ("local", ("ensemble.local",)),
    ("rules", ("ensemble.aggregators", "ensemble.rules", "ensemble.soft", "ensemble.stopping",
               "ensemble.credit",
               "ensemble.calibration", "ensemble.boxball", "ensemble.report",
               "ensemble.cost")),
    ("theory", ("ensemble.theory", "ensemble.qr")),
    ("base", ("ensemble.errors", "ensemble.secrets", "ensemble.jsonio", "ensemble._sync",
              "ensemble.registry", "ensemble.wording", "ensemble.lazy")),
]
ROOT_ONLY = ("ensemble",)  # entries that name a package's __init__ alone


def _layer_of(mod: str, layers: list[tuple[str, tuple[str, ...]]]) -> int | None:
    """The index of the layer that holds `mod` (the longest entry that covers it)."""
    best: tuple[int, int] | None = None
    for i, (_, entries) in enumerate(layers):
        for e in entries:
            if mod == e or (mod.startswith(e + ".") and e not in ROOT_ONLY):
                if best is None or len(e) > best[1]:
                    best = (i, len(e))
    return None if best is None else best[0]


def _layer_breaks(top: Path, packages: list[str],
                  layers: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Every import of a module from a layer above its own, and every module in no layer."""
    files = {_module(p, top): p for pkg in packages for p in sorted((top / pkg).rglob("*.py"))}
    out: list[str] = []
    for mod, path in files.items():
        mine = _layer_of(mod, layers)
        if mine is None:
            out.append(f"{mod}: in no layer (place it in LAYERS and docs/architecture.md)")
            continue
        for line, target, names in _imports_under(path, top):
            # `from pkg import mod` imports pkg.mod; `from mod import name` imports mod
            wanted = {f"{target}.{n}" if f"{target}.{n}" in files else target for n in names}
            for dest in sorted(wanted or {target}):
                while dest and dest not in files:  # `import pkg.mod.attr` -> pkg.mod
                    dest = dest.rpartition(".")[0]
                theirs = _layer_of(dest, layers) if dest else None
                if theirs is not None and theirs < mine:
                    out.append(f"{path.relative_to(top)}:{line}: {mod} ({layers[mine][0]}) "
                               f"imports {dest} ({layers[theirs][0]}), a layer above it")
    return out


def test_imports_point_down_the_layers():
    breaks = _layer_breaks(SRC, ["ensemble"], LAYERS)
    assert not breaks, "\n".join(breaks)


def test_the_layers_check_sees_an_import_upwards(tmp_path):
    # a planted package: `low` imports `high` inside a function and under TYPE_CHECKING,
    # `stray` is in no layer; `high` importing `low` is the right way and passes
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "high.py").write_text("from .low import f\n")
    (pkg / "low.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                "    from planted.high import g\n\n\ndef f():\n"
                                "    from . import high\n    return high\n")
    (pkg / "stray.py").write_text("")
    layers = [("top", ("planted.high",)), ("bottom", ("planted.low", "planted"))]
    found = _layer_breaks(tmp_path, ["planted"], layers)
    assert sorted(found) == sorted([
        "planted/low.py:4: planted.low (bottom) imports planted.high (top), a layer above it",
        "planted/low.py:8: planted.low (bottom) imports planted.high (top), a layer above it",
    ]), found
    layers = [("top", ("planted.high",)), ("bottom", ("planted.low",))]
    assert any("planted.stray: in no layer" in b
               for b in _layer_breaks(tmp_path, ["planted"], layers))
    # the root `ensemble` entry is its __init__ alone: a module under it is in no layer
    assert _layer_of("ensemble.newthing", LAYERS) is None
    assert LAYERS[_layer_of("ensemble", LAYERS) or 0][0] == "public"


def test_the_docs_list_the_layers_of_the_test():
    text = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## The layers", 1)[1].split("```", 2)[1].partition("\n")[2]  # after ```text
    doc: list[tuple[str, tuple[str, ...]]] = []
    for raw in block.strip("\n").splitlines():
        words = tuple(raw.split())
        if raw[:1].isspace():  # a continued line
            doc[-1] = (doc[-1][0], doc[-1][1] + words)
        else:
            doc.append((words[0], words[1:]))
    assert doc == LAYERS


def test_no_two_test_files_share_a_name():
    """pytest imports test files by basename (the test folders are not packages): two files of one
    name fail the whole run to collect ('import file mismatch') whenever both are collected."""
    tests = Path(__file__).resolve().parent
    seen: dict[str, Path] = {}
    twice = []
    for path in sorted(tests.rglob("test_*.py")):
        if "bench" in path.relative_to(tests).parts:
            continue
        if path.name in seen:
            twice.append(f"{seen[path.name].relative_to(tests)} and {path.relative_to(tests)}")
        seen.setdefault(path.name, path)
    assert not twice, "test files share a name: " + "; ".join(twice)
