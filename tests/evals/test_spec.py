"""The run spec (`evals.spec`): one model for a single model's run and a mixed ensemble's,
built from the command line or a file (`ensemble eval --spec FILE`), recorded in RUN/spec.json,
end to end through the CLI against the simulated HTTP server; and bad specs, one line each."""

import json

import pytest

from ensemble.errors import InputError
from ensemble.evals.spec import RunSpec, from_flags, load_spec
from ensemble.testing import SimulatedServer


@pytest.fixture
def _cli(run_cli):
    """`ensemble ...` in this process (the run_cli fixture of tests/conftest.py)."""

    def run(*args, timeout=300):
        return run_cli("eval", *map(str, args))

    return run


def _numbers(summary):
    keys = ("t", "n", "aggregator", "utility", "utility_sem", "utility_ci", "accuracy", "items")
    return [tuple(json.dumps(r.get(k)) for k in keys) for r in summary["results"]], [
        (c["kind"], c["t"], c["n"], c["aggregator"], c["utility_difference"], c["utility_ci"])
        for c in summary["contrasts"]]


def test_spec_file_single_model_run_equals_the_cli_run_and_repeats_from_its_folder(tmp_path, _cli):
    common = ["--samples", 4, "--limit", 5, "--bootstrap", 200, "--json"]
    with SimulatedServer(lam1=4.0, seed=3) as srv:
        spec = tmp_path / "one-model.json"
        spec.write_text(json.dumps({
            "task": "boxball", "n": [1, 3],
            "members": [{"model": "openai/sim", "api_base": srv.base_url, "temperature": t}
                        for t in (0.5, 1.0)]}))
        cli = _cli("boxball", "--model", "openai/sim", "--api-base", srv.base_url, "--t", 0.5,
                   1, "--n", 1, 3, "--out", tmp_path / "cli", *common)
        assert cli.returncode == 0, cli.stderr
        served = srv.stats.requests
        # the flags compose with the file: --samples, --limit, --bootstrap are the CLI's here
        fromfile = _cli("--spec", spec, "--out", tmp_path / "file", *common)
        assert fromfile.returncode == 0, fromfile.stderr
        assert srv.stats.requests == 2 * served  # a folder of its own: drawn again
        # repeat from the run's folder: its spec.json, its store, no request
        again = _cli("--spec", tmp_path / "cli", "--json")
        assert again.returncode == 0, again.stderr
        assert srv.stats.requests == 2 * served
    a, b, c = (json.loads(r.stdout) for r in (cli, fromfile, again))
    assert _numbers(a) == _numbers(b) == _numbers(c)
    assert b["model"] == a["model"] == "openai/sim" and c["requests"] == 0
    assert c["run_dir"] == str(tmp_path / "cli")
    rec = load_spec(tmp_path / "cli" / "spec.json")
    assert rec == load_spec(tmp_path / "file")  # the same run, recorded the same
    assert rec.task == "boxball" and rec.n == [1, 3] and (rec.samples, rec.limit) == (4, 5)
    assert [(m.model, m.api_base, m.temperature) for m in rec.members] == [
        ("openai/sim", srv.base_url, 0.5), ("openai/sim", srv.base_url, 1.0)]


def test_mixed_spec_file_records_its_spec_and_repeats(tmp_path, _cli):
    """One model at two temperatures voting together (each member its own n), through
    --ensemble as documented; the recorded spec repeats it with --spec."""
    with SimulatedServer(lam1=4.0, seed=5) as srv:
        spec = tmp_path / "mixed.json"
        spec.write_text(json.dumps({"task": "boxball", "members": [
            {"model": "openai/sim", "api_base": srv.base_url, "n": 2, "temperature": 0.5,
             "lam": 8.0},
            {"model": "openai/sim", "api_base": srv.base_url, "n": 1, "temperature": 1.0,
             "lam": 4.0}], "aggregators": ["majority", "lam-weighted"]}))
        first = _cli("boxball", "--ensemble", spec, "--samples", 3, "--limit", 4, "--out",
                     tmp_path / "run", "--bootstrap", 200, "--json")
        assert first.returncode == 0, first.stderr
        served = srv.stats.requests
        again = _cli("--spec", tmp_path / "run" / "spec.json", "--json")
        assert again.returncode == 0, again.stderr
        assert srv.stats.requests == served
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    assert a["results"] == b["results"] and b["requests"] == 0
    assert [r["member"] for r in a["results"]] == ["ensemble", "ensemble",
                                                   "openai/sim@t=0.5", "openai/sim@t=1"]
    rec = load_spec(tmp_path / "run")
    assert rec.ensemble and rec.aggregators == ["majority", "lam-weighted"]
    assert (rec.samples, rec.limit, rec.bootstrap) == (3, 4, 200)


ONE = {"task": "boxball", "n": [1], "members": [{"model": "openai/a", "temperature": 1.0}]}
ENS = {"task": "boxball", "members": [{"model": "openai/a", "n": 1, "temperature": 1.0,
                                       "api_base": "http://127.0.0.1:9/v1"}]}


def _with(doc, **kw):
    return {**doc, **kw}


@pytest.mark.parametrize("doc, args, needle", [
    (ONE, ["--model", "openai/b"], "names the members: drop --model"),
    (ONE, ["--t", "0.5"], "drop --t"),
    (ONE, ["mathqa"], "a run of boxball, the command's TASK mathqa"),
    (_with(ONE, task=None), [], "give the task"),
    (_with(ONE, n=None), [], 'give n: at the top, e.g. "n": [1, 3, 5]'),
    (_with(ONE, members=[{"model": "openai/a", "temperature": 1.0, "n": 1}]), [],
     "n is given at the top and for members.0"),
    (_with(ONE, members=[{"model": "openai/a", "temperature": 1.0},
                         {"model": "openai/b", "temperature": 0.5}]), [],
     "members.1 is another model or endpoint"),
    (_with(ONE, members=[{"model": "openai/a", "temperature": 1.0},
                         {"model": "openai/a", "temperature": 1.0}]), [],
     "members.0 and 1 are both t = 1"),
    (_with(ONE, members=[{"model": "openai/a", "temperature": 1.0, "lam": 2}]), [],
     "members.0.lam: a member of one model's run"),
    (_with(ONE, samples=0), [], "samples: input should be greater than or equal to 1"),
    (_with(ONE, cells=[1]), [], "cells: extra inputs are not permitted; fix: remove it"),
    (_with(ONE, n=[3]), ["--samples", "2"], "--samples 2 is smaller than the largest n"),
    (ENS, ["--n", "3"], "is an ensemble (each member has its own n and λ): drop --n"),
    (ENS, ["--lam", "2"], "drop --lam"),
    (ENS, ["--api-base", "http://127.0.0.1:9/v1"], "names its api_base: drop --api-base"),
    (_with(ENS, lam1=2.0), [], "lam1 is one model's λ₁"),
    (ONE, ["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
])
def test_bad_spec_is_one_line(tmp_path, doc, args, needle, _cli):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps({k: v for k, v in doc.items() if v is not None}))
    r = _cli("--spec", p, *args, "--dry-run", timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_unreadable_specs_are_one_line(tmp_path, _cli):
    (tmp_path / "bad.json").write_text("{")
    for args, needle in ([tmp_path / "nope.json"], "cannot read it"), (
            [tmp_path / "bad.json"], "not JSON"), ([tmp_path], "cannot read it"):
        r = _cli("--spec", *args, timeout=120)
        assert r.returncode == 1 and needle in r.stderr and len(r.stderr.splitlines()) == 1
    r = _cli("--spec", tmp_path / "bad.json", "--ensemble", tmp_path / "bad.json")
    assert r.returncode == 1 and "not both" in r.stderr


def test_flags_replace_the_files_fields():
    file = RunSpec.model_validate(_with(ONE, samples=5, limit=3, aggregators=["robust"]))
    got = from_flags({"limit": 7, "aggregators": ["lam-weighted"], "lam1": 2.0}, file=file,
                     where="--spec f", api_base="http://127.0.0.1:9/v1")
    assert (got.samples, got.limit, got.aggregators, got.lam1) == (5, 7, ["lam-weighted"], 2.0)
    assert got.members[0].api_base == "http://127.0.0.1:9/v1"
    cli = from_flags({"task": "boxball", "n": [1, 3]}, model="openai/a",
                     temperatures=[0.5, 1.0])
    assert not cli.ensemble and [m.temperature for m in cli.members] == [0.5, 1.0]
    with pytest.raises(InputError, match="give TASK, --n"):
        from_flags({}, model="openai/a", temperatures=[1.0])


def test_schema_names_the_run_spec(run_cli):
    r = run_cli("schema", "run-spec")
    doc = json.loads(r.stdout)
    assert doc["title"] == "RunSpec" and doc["required"] == ["members"]
    assert {"task", "members", "n", "samples", "aggregators", "fail_on_error",
            "max_cost"} <= set(doc["properties"])


ONE = {"task": "boxball", "members": [{"model": "openai/x", "temperature": 1}], "n": [1]}


@pytest.mark.parametrize("text, says, not_says", [
    ("[1, 2, 3]", "a spec is a JSON object, not list", "give a list of members"),
    (json.dumps(ONE)[:-1] + ', "limit": 1e400}', "give limit a valid value", "remove it"),
    (json.dumps({**ONE, "max_cost": -1}), "give max_cost a valid value > 0", "remove it"),
    (json.dumps({**ONE, "bogus": 1}), "bogus: extra inputs are not permitted; fix: remove it",
     "give bogus"),
])
def test_spec_errors_suggest_the_right_fix(tmp_path, text, says, not_says):
    """Issue 32 item 10: a top-level list is not "give a list of members"; a known field with
    a bad value is not "remove it" (only an unknown field is)."""
    f = tmp_path / "spec.json"
    f.write_text(text)
    with pytest.raises(InputError) as e:
        load_spec(f)
    assert says in str(e.value) and not_says not in str(e.value), str(e.value)
