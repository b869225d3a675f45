"""A task file's run is named by the task, not by the registered "taskfile" it runs as: the
results table, summary.json's `title`, the view, compare and the default run folder say
`mammals` (the file's stem, or its `name:`), while what identifies the run (spec.json's task
and data, summary.json's `task`) stays as it was, so that a folder written before this change
(`runs/taskfile-mammals-MODEL@...`, its summary without a title) still resumes. Against the
simulated server over 127.0.0.1, through `ensemble eval` in this process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ensemble.evals.rundir import read_run
from ensemble.testing import SimulatedServer

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openai/sim-expert"


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=5) as srv:
        yield srv


@pytest.fixture
def here(tmp_path):
    """A working folder holding a copy of the example task files (runs/ goes there)."""
    shutil.copytree(ROOT / "tasks", tmp_path / "tasks")
    return tmp_path


def _eval(run_cli, server, here, task, *extra):
    r = run_cli("eval", task, "--model", MODEL, "--api-base", server.base_url, "--t", "1",
                "--n", "1", "--samples", "2", "--limit", "3", "--bootstrap", "100", *extra,
                cwd=here)
    assert r.returncode == 0, r.stderr
    return r


def _folders(here) -> list[str]:
    return sorted(p.name for p in (here / "runs").iterdir())


def test_the_table_summary_view_and_folder_name_the_task(run_cli, server, here):
    r = _eval(run_cli, server, here, "tasks/mammals.yaml")
    assert r.stdout.lstrip().startswith(f"mammals · {MODEL} · ")
    assert "taskfile" not in r.stdout
    [name] = _folders(here)
    assert name.startswith("mammals-openai-sim-expert@127.0.0.1-")
    summary = json.loads((here / "runs" / name / "summary.json").read_text())
    assert (summary["title"], summary["task"]) == ("mammals", "taskfile")
    spec = json.loads((here / "runs" / name / "spec.json").read_text())
    assert spec["task"] == "taskfile"  # its identity, as before
    assert Path(spec["data"]).resolve() == (here / "tasks" / "mammals.yaml").resolve()
    assert read_run(here / "runs" / name).title == "mammals"
    view = run_cli("view", here / "runs" / name, "--out", here / "view.html", cwd=here)
    assert view.returncode == 0, view.stderr
    assert "taskfile" not in (here / "view.html").read_text()


def test_the_dry_run_names_the_task_as_the_summary_does(run_cli, server, here):
    served = server.stats.requests
    r = _eval(run_cli, server, here, "tasks/mammals.yaml", "--dry-run", "--json")
    doc = json.loads(r.stdout)
    assert (doc["title"], doc["task"]) == ("mammals", "taskfile") and doc["dry_run"]
    assert doc["samples_missing"] == 6 and server.stats.requests == served
    mixed = here / "mixed.json"  # a mixed ensemble's dry run: one count per member
    mixed.write_text(json.dumps({"task": "tasks/mammals.yaml", "limit": 3, "members": [
        {"model": MODEL, "api_base": server.base_url, "n": n, "temperature": t}
        for n, t in ((1, 0.5), (2, 1.0))]}))
    r = run_cli("eval", "--ensemble", mixed, "--dry-run", "--json", cwd=here)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["title"], doc["task"], len(doc["members"])) == ("mammals", "taskfile", 2)
    assert server.stats.requests == served


def test_a_name_field_names_the_task(run_cli, server, here):
    text = (here / "tasks" / "mammals.yaml").read_text()
    (here / "tasks" / "critters.yaml").write_text("name: beasts\n" + text)
    r = _eval(run_cli, server, here, "tasks/critters.yaml", "--json")
    assert json.loads(r.stdout)["title"] == "beasts"
    [name] = _folders(here)
    assert name.startswith("beasts-openai-sim-expert@")


def test_a_folder_written_before_titles_resumes(run_cli, server, here):
    # what the command wrote before: runs/taskfile-mammals-MODEL@HOST, no title in summary.json
    port = server.base_url.split(":")[-1].split("/")[0]
    old = here / "runs" / f"taskfile-mammals-openai-sim-expert@127.0.0.1-{port}-v1"
    _eval(run_cli, server, here, "tasks/mammals.yaml", "--out", old)
    summary = json.loads((old / "summary.json").read_text())
    del summary["title"]
    (old / "summary.json").write_text(json.dumps(summary))
    assert read_run(old).title == "mammals"  # from its task file's stem
    served = server.stats.requests
    r = _eval(run_cli, server, here, "tasks/mammals.yaml", "--json")
    assert server.stats.requests == served  # resumed from its store: nothing drawn again
    assert json.loads(r.stdout)["run_dir"] == str(Path("runs") / old.name)
    assert _folders(here) == [old.name]
