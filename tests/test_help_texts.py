"""`ensemble COMMAND --help` as a new user reads it (defects3's walk): every option says what it
does, and every command says what it is for. Before: `theory robust --n/--lam` (41.31),
`sample --max-tokens/--progress/--json` and the --json of eval, calibrate, compare, view,
models list and batches were listed bare, `sample --help` had no description, and its --t and
-k did not say their defaults. Read from the help text itself (argparse's layout: an option
at two spaces, its help beside it or on the lines below)."""

from __future__ import annotations

import os
import re


def _commands(run_cli, *path: str) -> list[tuple[str, ...]]:
    """Every command under `path` (itself included), from the help's listing of them."""
    text = run_cli(*path, "--help").stdout
    found = [path]
    listing = text.split("positional arguments:", 1)[1].split("options:", 1)[0] \
        if "positional arguments:" in text else ""
    if re.search(r"^  (COMMAND|WHAT)$", listing, re.M):
        for name in re.findall(r"^    ([a-z][a-z-]*)", listing, re.M):
            found += _commands(run_cli, *path, name)
    return found


def _bare_options(text: str) -> list[str]:
    lines = text.split("options:", 1)[1].splitlines() if "options:" in text else []
    bare = []
    for i, line in enumerate(lines):
        if not line.startswith("  -"):
            continue
        beside = re.search(r"\S {2,}\S", line[2:])
        below = i + 1 < len(lines) and lines[i + 1].startswith(" " * 8)
        if not beside and not below:
            bare.append(line.strip())
    return bare


def test_every_option_says_what_it_does_and_every_command_what_it_is_for(run_cli):
    bare, silent = [], []
    for path in _commands(run_cli):
        text = run_cli(*path, "--help").stdout
        bare += [f"ensemble {' '.join(path)} {o}" for o in _bare_options(text)]
        body = text.split("\n\n", 1)[1]  # what follows the usage lines
        if len(path) == 1 and body.startswith(("positional arguments:", "options:")):
            silent.append(" ".join(path))
    assert bare == [], bare
    assert silent == [], silent


def test_sample_says_what_it_does_and_its_defaults(run_cli):
    out = run_cli("sample", "--help").stdout
    assert not out.split("\n\n", 1)[1].startswith("positional"), out  # a description first
    assert "default 1.0" in out and "default 5" in out, out


def test_the_default_run_folder_is_the_one_the_help_describes(run_cli, tmp_path):
    """`--out`'s help said runs/TASK-MODEL; a run against an --api-base is in
    runs/TASK-MODEL@ENDPOINT (the README's demo opens such a folder)."""
    from ensemble.testing import SimulatedServer

    help_text = " ".join(run_cli("eval", "--help").stdout.split())
    assert "runs/TASK-MODEL, with -DATA for a --data file and @ENDPOINT" in help_text
    with SimulatedServer(seed=1) as srv:
        port = srv.base_url.rsplit(":", 1)[1].split("/")[0]
        r = run_cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                    srv.base_url, "--t", "1", "--n", "1", "--samples", "1", "--limit", "2",
                    "--bootstrap", "100", cwd=tmp_path, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    folder = f"runs/boxball-openai-sim-expert@127.0.0.1-{port}-v1"
    assert (tmp_path / folder).is_dir()
    assert f"outputs in {folder}" in r.stdout.splitlines(), r.stdout  # a line of its own


def test_evals_limit_help_counts_boxball_as_it_is(run_cli):
    """It said each of the 216 scenarios asks 2 questions (432); a colour a scenario cannot
    show asks none: 400."""
    from ensemble.tasks.boxball import BoxBallTask

    task = BoxBallTask()
    help_text = " ".join(run_cli("eval", "--help").stdout.split())
    assert f"of its {task.population()}" in help_text
    assert f"{len(task.questions())} in all" in help_text


def test_docs_cli_says_which_commands_take_json(run_cli):
    """docs/cli.md: every command that reports something takes --json, all but the two servers
    and `models pull` (it left out `serve`); and its schema row lists every schema name."""
    from pathlib import Path

    doc = " ".join((Path(__file__).parents[1] / "docs" / "cli.md").read_text().split())
    assert "all but `serve` and `testing serve`, which run a server, and `models pull`" in doc
    servers = {("serve",), ("testing", "serve"), ("models", "pull")}
    for path in _commands(run_cli)[1:]:
        text = run_cli(*path, "--help").stdout
        if re.search(r"^  (COMMAND|WHAT)$", text, re.M):
            continue  # a group of commands
        assert ("--json" in text) == (path not in servers), path
    names = re.search(r"\{([a-z,-]+)\}", run_cli("schema", "--help").stdout).group(1)
    row = re.search(r"`ensemble schema ([a-z|\\-]+)`", doc).group(1).replace("\\", "")
    assert sorted(row.split("|")) == sorted(names.split(","))
