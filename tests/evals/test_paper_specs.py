"""The paper's experiments as run specs (the repository's `evals/` folder): each reproduces a
panel of the paper's Figure 2 (t in {0, 0.5, 1}, n in {1, 3, 5}, 20 answers per question and
temperature; box-ball: all scenarios, majority; MathQA: 500 random test questions, plurality)
with one `ensemble eval --spec evals/paper-X.json --model M --api-base URL` command. Each spec
is validated, and run with --limit 3 against the simulated server in process (`cli.main`)."""

import json
from pathlib import Path

import pytest

from ensemble.errors import InputError
from ensemble.evals.spec import check, load_spec
from ensemble.testing import SimulatedServer

ROOT = Path(__file__).resolve().parents[2]
SPECS = {"boxball": ROOT / "evals" / "paper-boxball.json",
         "mathqa": ROOT / "evals" / "paper-mathqa.json"}
# the paper (shared/DESIGN.md section 2): the grid of Figure 2 and each panel's questions
TEMPERATURES, NS, SAMPLES = (0.0, 0.5, 1.0), [1, 3, 5], 20
PANEL = {"boxball": {"limit": None, "vote": "majority"},  # all 216 scenarios (400 questions)
         "mathqa": {"limit": 500, "vote": "plurality"}}


def test_the_specs_are_the_papers_two_panels():
    assert sorted(p.name for p in (ROOT / "evals").glob("*.json")) == [
        "paper-boxball.json", "paper-mathqa.json"]


@pytest.mark.parametrize("task", sorted(SPECS))
def test_spec_is_valid_and_the_papers_grid(task):
    spec = load_spec(SPECS[task], model="openai/gpt-4o-mini")
    check(spec, str(SPECS[task]))
    assert spec.task == task and not spec.ensemble
    assert tuple(m.temperature for m in spec.members) == TEMPERATURES
    assert {m.model for m in spec.members} == {"openai/gpt-4o-mini"}  # from the command line
    assert all(m.api_base is None for m in spec.members)  # no provider pinned
    assert (spec.n, spec.samples, spec.limit, spec.seed) == (NS, SAMPLES, PANEL[task]["limit"],
                                                             0)
    assert spec.bootstrap == 1000 and spec.data is None  # MathQA's file: --data
    raw = json.loads(SPECS[task].read_text())
    assert all("model" not in m and "api_base" not in m for m in raw["members"])


def test_a_spec_without_a_model_needs_model(tmp_path, run_cli):
    r = run_cli("eval", "--spec", SPECS["boxball"], "--limit", 3)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "give --model M" in lines[0], r.stderr
    with pytest.raises(InputError, match=r"members.0 names no model: give --model M"):
        load_spec(SPECS["boxball"])
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"task": "boxball", "n": [1], "members": [
        {"model": "openai/a", "temperature": 1.0}]}))
    with pytest.raises(InputError, match="names the members: drop --model"):
        load_spec(named, model="openai/b")


@pytest.mark.parametrize("task", sorted(SPECS))
def test_spec_runs_with_a_limit_against_the_simulator(task, tmp_path, run_cli, request):
    data = ["--data", request.getfixturevalue("mathqa_path")] if task == "mathqa" else []
    out = tmp_path / "run"
    with SimulatedServer(lam1=8.93, seed=4) as srv:
        r = run_cli("eval", "--spec", SPECS[task], "--model", "openai/sim", "--api-base",
                    srv.base_url, "--limit", 3, *data, "--out", out, "--json")
        assert r.returncode == 0, r.stderr
        assert srv.stats.requests > 0
    summary = json.loads(r.stdout)
    vote = PANEL[task]["vote"]
    assert summary["task"] == task and summary["model"] == "openai/sim"
    assert tuple(summary["temperatures"]) == TEMPERATURES and summary["ns"] == NS
    assert summary["samples_per_question"] == SAMPLES
    assert summary["population"]["limit"] == 3 and summary["population"]["items"] == 3
    # the table's cells: the vote at every (t, n) of the grid, and random-follow once per t
    assert sorted((c["t"], c["n"], c["aggregator"]) for c in summary["results"]) == sorted(
        [(t, n, vote) for t in TEMPERATURES for n in NS]
        + [(t, 1, "random-follow") for t in TEMPERATURES])
    assert summary["samples"]["total"] == len(TEMPERATURES) * SAMPLES * (
        6 if task == "boxball" else 3)  # 3 scenarios ask 2 questions each
    rec = load_spec(out)  # the run recorded what it ran: the spec, its model and endpoint
    assert [(m.model, m.api_base, m.temperature) for m in rec.members] == [
        ("openai/sim", srv.base_url, t) for t in TEMPERATURES]
    assert (rec.n, rec.samples, rec.limit) == (NS, SAMPLES, 3)
