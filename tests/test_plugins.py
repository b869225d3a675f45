"""Installed plug-ins, as a user's machine has them: a distribution's `.dist-info` with its
`entry_points.txt` on the path of a fresh process. A plug-in that fails to import, or that
claims a name a built-in owns, costs one warning line naming its distribution and entry point;
every command, the Python API and the built-ins it clashed with work as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

GROUPS = ("ensemble.rules", "ensemble.stop_rules", "ensemble.tasks", "ensemble.providers",
          "ensemble.commands")

# what the fresh process does: every command the issue names, the Python API, a built-in rule,
# stop rule, task and provider by name; each outcome goes to a JSON file (stdout is the
# commands' own)
SCRIPT = textwrap.dedent("""
    import contextlib, io, json, sys

    from ensemble import Ensemble, aggregator_info
    from ensemble.cli import main
    from ensemble.testing import FakeExpertProvider, SimulatedServer

    out = {}

    def run(key, argv):
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        out[key] = {"rc": rc, "stdout": buf.getvalue()}

    run("version", ["--version"])
    run("theory", ["theory", "threshold", "--n-max", "3", "--json"])
    run("serve_help", ["serve", "--help"])
    run("eval_help", ["eval", "--help"])
    with SimulatedServer(lam1=3.0, seed=1) as srv:
        run("eval", ["eval", "boxball", "--model", "openai/sim", "--api-base", srv.base_url,
                     "--t", "1", "--n", "1", "3", "--samples", "3", "--limit", "2",
                     "--adaptive", "beta", "--out", sys.argv[2], "--json"])
    with Ensemble("sim", provider=FakeExpertProvider(lam1=3.0, seed=1), n=3,
                  choices=["L", "R"], stop="beta") as ens:
        d = ens.decide("Which box? <answer>L</answer> or <answer>R</answer>")
    out["decide"] = {"aggregator": d.aggregator, "n": d.n_samples, "stop": d.stop}
    out["plurality"] = aggregator_info("plurality").build.__module__
    from ensemble import aggregator_names, stop_rule_names
    from ensemble.providers import registered_providers
    from ensemble.tasks import task_names

    out["names"] = {"rules": aggregator_names(), "stops": stop_rule_names(),
                    "tasks": task_names(), "providers": registered_providers()}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
""")


def _dist(root: Path, name: str, entry_points: str, modules: dict[str, str] | None = None
          ) -> None:
    """A distribution as pip installs one: NAME-VERSION.dist-info with its entry points, and
    its modules beside it."""
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for module, code in (modules or {}).items():
        (root / f"{module}.py").write_text(textwrap.dedent(code))


def _run(tmp_path: Path) -> tuple[dict, list[str]]:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"),
                                         *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "out.json"),
                           str(tmp_path / "run")], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads((tmp_path / "out.json").read_text()), proc.stderr.splitlines()


def _everything_works(out: dict) -> None:
    for key in ("version", "theory", "serve_help", "eval_help", "eval"):
        assert out[key]["rc"] == 0, (key, out[key])
    assert out["version"]["stdout"].startswith("ensemble ")
    assert json.loads(out["theory"]["stdout"])[0]["g"] is None  # g(1) = ∞
    assert "--aggregator" in out["serve_help"]["stdout"]
    summary = json.loads(out["eval"]["stdout"])
    assert {(r["n"], r["aggregator"]) for r in summary["results"]} >= {(1, "majority"),
                                                                       (3, "majority")}
    assert out["decide"] == {"aggregator": "plurality", "n": out["decide"]["n"], "stop": "beta"}
    assert out["plurality"] == "ensemble.aggregators"


def _warnings(lines: list[str], dist: str) -> list[str]:
    return [line for line in lines if dist in line]


CLASHES = {
    "clash_rules": """
        from ensemble import RuleBase, register_rule

        @register_rule(summary="a plug-in's own plurality")
        class Plurality(RuleBase):
            name = "plurality"

            def aggregate(self, answers, *, choices, weights, groups):
                raise RuntimeError("the plug-in's plurality voted")
        """,
    "clash_stops": """
        from ensemble.stopping import StoppingRule, register_stop_rule

        @register_stop_rule
        class Beta(StoppingRule):
            name = "beta"
            about = "a plug-in's own beta"
            params = ()

            def __init__(self, *, max_n):
                raise RuntimeError("the plug-in's beta stopped")
        """,
    "clash_tasks": """
        from ensemble.tasks import TaskBase, register_task

        @register_task("boxball")
        class Boxball(TaskBase):
            name = "boxball"

            def questions(self):
                raise RuntimeError("the plug-in's boxball asked")
        """,
    "clash_providers": """
        def make(model, options):
            raise RuntimeError("the plug-in's openai served")
        """,
    "clash_commands": """
        def register(sub):
            p = sub.add_parser("eval", help="a plug-in's own eval")
            p.set_defaults(func=lambda args: 3)
        """,
}


def test_broken_and_clashing_plug_ins_cost_one_warning_line_each(tmp_path):
    """Two distributions in every group: one whose entry points name a module that is not
    there, one whose plug-ins take a built-in's name (plurality, beta, boxball, the openai
    prefix, the eval command)."""
    site = tmp_path / "site"
    site.mkdir()
    _dist(site, "broken-plugin", "\n".join(
        f"[{group}]\nbroken = nonexistent_module{':make' if group.endswith('providers') else ''}"
        for group in GROUPS) + "\n")
    _dist(site, "clash-plugin", """
        [ensemble.rules]
        plurality = clash_rules
        [ensemble.stop_rules]
        beta = clash_stops
        [ensemble.tasks]
        boxball = clash_tasks
        [ensemble.providers]
        openai = clash_providers:make
        [ensemble.commands]
        eval = clash_commands
        """, CLASHES)
    out, lines = _run(tmp_path)
    _everything_works(out)  # and with the built-in plurality, beta, boxball, openai and eval
    # one line per entry point, each naming its distribution, group and entry point
    broken = _warnings(lines, "broken-plugin")
    assert len(broken) == len(GROUPS), lines
    for group in GROUPS:
        mine = [w for w in broken if f"{group}: broken = nonexistent_module" in w]
        assert len(mine) == 1, (group, broken)
        assert "No module named 'nonexistent_module'" in mine[0]
    # a plug-in's rule, stopping rule and task live under its namespace (issue 36.4): reusing
    # a built-in's name costs nothing, the short name stays the built-in's
    names = out["names"]
    assert {"plurality", "clash_rules/plurality"} <= set(names["rules"])
    assert {"beta", "clash_stops/beta"} <= set(names["stops"])
    assert {"boxball", "clash_tasks/boxball"} <= set(names["tasks"])
    # a provider's prefix and a command are not namespaced: claiming a built-in's is one line
    clash = _warnings(lines, "clash-plugin")
    assert len(clash) == 2, lines
    for group, name in (("ensemble.providers", "openai"), ("ensemble.commands", "eval")):
        mine = [w for w in clash if f"{group}: {name} = clash_" in w]
        assert len(mine) == 1 and f"{name!r} is the name of a built-in" in mine[0], (group, clash)
    assert "openai" in names["providers"]
    assert all(line.startswith("ensemble: warning: ") for line in broken + clash)




def test_in_a_fresh_process_fake_models_resolve_without_importing_ensemble_testing():
    """`fake/x` went to litellm unless `ensemble.testing` had been imported first (issue 36.4):
    the fake provider is a built-in, named by the registry and imported when asked for."""
    code = textwrap.dedent("""
        import sys
        from ensemble import Ensemble
        from ensemble.providers import ProviderOptions, provider_for, registered_providers

        assert "fake" in registered_providers()
        assert "ensemble.testing" not in sys.modules and "litellm" not in sys.modules
        print(type(provider_for("fake/x", ProviderOptions())).__name__)
        with Ensemble("fake/x", n=3, temperature=1.0, choices=["L", "R"]) as ens:
            d = ens.decide("Which box? Answer <answer>L</answer> or <answer>R</answer>.")
        print(d.n_samples, "litellm" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["FakeExpertProvider", "3", "False"]
