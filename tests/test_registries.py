"""The one registration convention (`ensemble.registry`): one shape of registering function,
built-ins and plug-ins discovered lazily the same way, plug-ins under their package's
namespace, a provider prefix two plug-ins claim refused in one line. Plug-ins here are real
distributions (a `.dist-info` with its `entry_points.txt`) put on `sys.path`; each test reads
a group of its own through a fresh `Registry`, so the package's registries are untouched."""

from __future__ import annotations

import textwrap

import pytest

from ensemble.errors import InputError
from ensemble.registry import Registry, registration
from ensemble.rules import main_vote


def _dist(root, name, group, entry_points, modules):
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{entry_points}\n")
    for module, code in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(code))


PLUGIN = """
    import registry_under_test as r

    def plurality():
        return "{name}'s plurality"

    def only():
        return "{name}'s only"

    r.REG.add("plurality", plurality)
    r.REG.add("only", only)
"""


@pytest.fixture
def reg(tmp_path, monkeypatch, request):
    """A registry of a group of its own, whose built-in is a function of the package (it is
    defined under `ensemble`), and the module plug-ins register into it through."""
    group = f"test.ensemble.{request.node.name}"
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "registry_under_test.py").write_text("REG = None\n")
    import registry_under_test

    r = Registry("thing", group)
    r.add("plurality", main_vote)
    monkeypatch.setattr(registry_under_test, "REG", r)
    yield r, group, tmp_path
    _forget_plugins()


def _forget_plugins():
    """The plug-ins' modules of a test are its own: the next test imports its own anew."""
    import sys

    for name in [m for m in sys.modules if m.startswith(("pkg_", "registry_under_test",
                                                          "lazy_builtins"))]:
        del sys.modules[name]


def test_a_plug_in_is_named_by_its_package_and_may_reuse_a_built_in_name(reg):
    r, group, root = reg
    _dist(root, "pkg-a", group, "a = pkg_a", {"pkg_a": PLUGIN.format(name="a")})
    assert r.names() == ["pkg_a/only", "pkg_a/plurality", "plurality"]
    assert r.get("plurality") is main_vote  # the short name stays the built-in's
    assert r.get("pkg_a/plurality")() == "a's plurality"
    assert r.get("only")() == "a's only"  # nothing else has it: the short name finds it
    assert r.canonical("only") == "pkg_a/only"
    assert "only" in r.names() and "pkg_a/only" in r and "nope" not in r


def test_a_short_name_two_plug_ins_share_is_one_line_naming_both(reg):
    r, group, root = reg
    _dist(root, "pkg-a", group, "a = pkg_a", {"pkg_a": PLUGIN.format(name="a")})
    _dist(root, "pkg-b", group, "b = pkg_b", {"pkg_b": PLUGIN.format(name="b")})
    with pytest.raises(InputError, match=r"^the thing 'only' is ambiguous: pkg_a/only or "
                                         r"pkg_b/only; give the full name$"):
        r.get("only")
    assert r.get("pkg_b/only")() == "b's only" and r.get("plurality") is main_vote
    assert "only" not in r.names()  # not one of them: `in` answers as a look-up would


def test_a_prefix_two_plug_ins_claim_is_one_clear_error(tmp_path, monkeypatch, caplog):
    """Registries without namespaces (providers: a model string's prefix): neither plug-in
    serves the prefix both claim, each use of it is one line naming both; others work."""
    group = "test.ensemble.prefixes"
    monkeypatch.syspath_prepend(str(tmp_path))
    code = "def make(model, options):\n    return {name!r}\n"
    _dist(tmp_path, "pkg-c", group, "mine = pkg_c:make\nown = pkg_c:make",
          {"pkg_c": code.format(name="c")})
    _dist(tmp_path, "pkg-d", group, "mine = pkg_d:make", {"pkg_d": code.format(name="d")})
    r = Registry("provider", group, namespaced=False)
    with caplog.at_level("WARNING", logger="ensemble.plugins"):
        with pytest.raises(InputError, match=r"^the provider 'mine' is claimed by two plug-ins, "
                                             r"pkg_c:make \(pkg-c 0.1\) and pkg_d:make "
                                             r"\(pkg-d 0.1\): uninstall one$"):
            r.get("mine")
    assert r.get("own")("x", None) == "c"
    assert [rec.getMessage() for rec in caplog.records] == [
        "ensemble: warning: skipped the plug-in of pkg-d 0.1 (entry point "
        "test.ensemble.prefixes: mine = pkg_d:make): the provider 'mine' is also claimed by "
        "pkg_c:make (pkg-c 0.1); fix or uninstall it"]
    _forget_plugins()


def test_discovery_is_lazy_and_built_ins_load_like_plug_ins(tmp_path, monkeypatch):
    """A registry imports its built-ins' modules and reads its entry points on the first
    look-up, not before, once."""
    group = "test.ensemble.lazy"
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "lazy_builtins.py").write_text("LOADS = []\n")
    _dist(tmp_path, "pkg-e", group, "e = pkg_e",
          {"pkg_e": "import lazy_builtins\nlazy_builtins.LOADS.append('e')\n"})
    import sys

    r = Registry("thing", group, builtins=("lazy_builtins",))
    assert "lazy_builtins" not in sys.modules and "pkg_e" not in sys.modules
    assert r.names() == [] and sys.modules["lazy_builtins"].LOADS == ["e"]
    r.names()
    assert sys.modules["lazy_builtins"].LOADS == ["e"]
    _forget_plugins()


def test_every_registering_function_has_one_shape():
    """`@register_x`, `@register_x("name")`, `@register_x(name="name")`, `register_x("name",
    obj)` and `register_x(obj)`, for the four kinds alike."""
    seen = []

    def add(obj, name):
        seen.append((obj, name))
        return obj

    def register(*args, name=None):
        return registration(args, name, add, what="register_thing")

    class Thing:
        name = "thing"

    assert register(Thing) is Thing
    assert register("x")(Thing) is Thing
    assert register(name="y")(Thing) is Thing
    assert register("z", Thing) is Thing
    assert seen == [(Thing, None), (Thing, "x"), (Thing, "y"), (Thing, "z")]
    with pytest.raises(InputError, match="two names"):
        register("a", name="b")


def test_the_four_kinds_take_the_one_shape():
    from ensemble import RuleBase, register_rule, register_stop_rule
    from ensemble.providers import register_provider, registered_providers
    from ensemble.rules import rules
    from ensemble.stopping import StoppingRule, stop_rules
    from ensemble.tasks import TaskBase, get_task, register_task, task_names
    from ensemble.tasks.base import task_registry as tasks

    class Keen(RuleBase):
        """decide for the first valid vote"""

        name = "test-keen"

    class Halt(StoppingRule):
        name = "test-halt"

    class Probe(TaskBase):
        name = "test-probe"

    class Coin:
        name = "test-coin"

    try:
        assert register_rule(Keen) is Keen and register_stop_rule(Halt) is Halt
        assert register_task(Probe) is Probe and register_provider(Coin) is Coin
        assert rules.get("test-keen").summary == "decide for the first valid vote"
        assert stop_rules.get("test-halt") is Halt and "test-probe" in task_names()
        assert isinstance(get_task("test-probe"), Probe) and "test-coin" in registered_providers()
        register_task("test-probe-2", Probe)
        assert "test-probe-2" in task_names()
        with pytest.raises(InputError, match="'plurality' is the name of a built-in aggregator"):
            register_rule("plurality", Keen)
    finally:
        rules.remove("test-keen")
        stop_rules.remove("test-halt")
        tasks.remove("test-probe")
        tasks.remove("test-probe-2")
        from ensemble.providers.registry import provider_registry

        provider_registry.remove("test-coin")
