"""Declarative task files (`ensemble.tasks.taskfile`): the examples in the repository's
`tasks/` folder run end to end through `ensemble eval path/to/task.yaml` against the simulated
server (in process, `cli.main`), and a bad task file is one line naming the problem."""

import csv
import json
from pathlib import Path

import pytest

from ensemble.errors import DataError, InputError
from ensemble.tasks import get_task, task_names
from ensemble.testing import SimulatedServer, answer_key_from_questions

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "tasks").glob("*.yaml"))


def _records(path: Path) -> list[dict]:
    if path.suffix == ".csv":
        return list(csv.DictReader(path.open(encoding="utf-8")))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def test_the_examples_are_three_and_registered():
    assert [p.name for p in EXAMPLES] == ["capitals.yaml", "mammals.yaml", "planets.yaml"]
    assert "taskfile" in task_names()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_end_to_end_against_the_simulator(path, tmp_path, run_cli):
    import yaml

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    records = _records(path.parent / doc["data"])
    task = get_task("taskfile", data=path)
    qs = task.questions()
    # one question per record, its id and right answer the fields the file names
    assert [q.id for q in qs] == [r[doc["id"]] for r in records]
    assert [q.correct for q in qs] == [r[doc["target"]] for r in records]
    # the file's choices, or each record's own (choices_field: capitals.yaml)
    choices = [tuple(r[doc["choices_field"]]) if "choices_field" in doc else tuple(doc["choices"])
               for r in records]
    assert [q.choices for q in qs] == choices
    assert task.max_tokens == doc["max_tokens"]
    first = {**records[0], "choices": ", ".join(choices[0])}
    assert qs[0].prompt == doc["prompt"].format(**first)

    out = tmp_path / "run"
    with SimulatedServer(lam1=3.0, answer_key=answer_key_from_questions(qs), seed=2) as srv:
        r = run_cli("eval", path, "--model", "openai/sim", "--api-base", srv.base_url,
                    "--t", 0.5, 1, "--n", 1, 3, "--samples", 3, "--bootstrap", 200,
                    "--out", out, "--json")
        assert r.returncode == 0, r.stderr
        served = srv.stats.requests
        assert served > 0
        again = run_cli("eval", "--spec", out, "--json")  # the recorded spec, from its store
        assert again.returncode == 0, again.stderr
        assert srv.stats.requests == served
    summary = json.loads(r.stdout)
    assert summary["task"] == "taskfile" and summary["population"]["items"] == len(records)
    assert summary["data"]["task_file"] == str(path)
    assert summary["invalid_rate"] == 0.0  # every simulated reply read as one of the choices
    assert {(c["t"], c["n"], c["aggregator"]) for c in summary["results"]} == {
        (t, n, "plurality") for t in (0.5, 1.0) for n in (1, 3)} | {
        (t, 1, "random-follow") for t in (0.5, 1.0)}
    # scored against the target field: at n = 1 the accuracy is the share of right samples
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    right = {q.id: q.correct for q in qs}
    for t in (0.5, 1.0):
        mine = [s for s in samples if s["t"] == t]
        share = sum(s["answer"] == right[s["id"]] for s in mine) / len(mine)
        cell = next(c for c in summary["results"]
                    if (c["t"], c["n"], c["aggregator"]) == (t, 1, "plurality"))
        assert cell["accuracy"] == pytest.approx(share)
    assert json.loads(again.stdout)["results"] == summary["results"]
    spec = json.loads((out / "spec.json").read_text())
    assert (spec["task"], spec["data"]) == ("taskfile", str(path))


def test_the_docs_example_is_the_mammals_task_file():
    import yaml

    text = (ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == yaml.safe_load((ROOT / "tasks" / "mammals.yaml").read_text())


def _task_file(tmp_path, text, data=None):
    if data is not None:
        (tmp_path / "q.jsonl").write_text(data)
    p = tmp_path / "t.yaml"
    p.write_text(text)
    return p


GOOD = ('data: q.jsonl\nprompt: "Is {x} even? Answer yes or no."\nanswer: choice\n'
        'choices: ["yes", "no"]\ntarget: y\n')
ROWS = '{"x": 2, "y": "yes"}\n{"x": 3, "y": "no"}\n'
OWN = GOOD.replace('choices: ["yes", "no"]\n', "choices_field: opts\n")  # each record's own


@pytest.mark.parametrize("text,data,needle", [
    (GOOD.replace("q.jsonl", "gone.jsonl"), ROWS, "data file"),
    (GOOD.replace("{x}", "{colour}"), ROWS, "names {colour}, a field this record has not"),
    (GOOD.replace("answer: choice", "answer: letter"), ROWS,
     "answer: Input should be 'choice', 'number', 'math' or 'text'"),
    (GOOD + "doc_to_text: x\n", ROWS, "doc_to_text: unknown key; the keys are description"),
    (GOOD.replace('choices: ["yes", "no"]\n', ""), ROWS, "answer: choice needs choices"),
    (GOOD.replace("{x}", "{x.real}"), ROWS, "{x.real} is not a field name"),
    (GOOD, '{"x": 2, "y": "maybe"}\n', "'maybe' is not one of the choices"),
    (GOOD, '{"x": 2}\n', "field 'y': missing or empty"),
    ("- a\n- b\n", ROWS, "a task file is a mapping"),
    ("data: [unclosed\n", ROWS, "not valid YAML at line"),
    (GOOD.replace('["yes", "no"]', "[yes, no]"), ROWS, 'quote the choices (["yes", "no"])'),
    (OWN, '{"x": 2, "y": "yes"}\n', "row 1, field 'opts': missing or empty (the record's choices"),
    (OWN, '{"x": 2, "y": "yes", "opts": ["yes"]}\n',
     "row 1, field 'opts': ['yes'] is not a list of at least two distinct"),
    (OWN, '{"x": 2, "y": "yes", "opts": {"a": "yes"}}\n', "field 'opts': {'a': 'yes'} is not a"),
    (OWN, '{"x": 2, "y": "maybe", "opts": ["yes", "no"]}\n',
     "field 'y': 'maybe' is not one of the choices ['yes', 'no']"),
    (OWN + 'choices: ["yes", "no"]\n', ROWS, "give choices (the same for every record) or "
     "choices_field (each record's own), not both"),
    (OWN.replace("answer: choice", "answer: number"), ROWS,
     "choices_field is for answer: choice, not number (drop it)"),
], ids=["missing-data", "unknown-field", "unknown-kind", "unknown-key", "no-choices",
        "attribute", "not-a-choice", "no-target", "not-a-mapping", "not-yaml", "yaml-bools",
        "own-missing", "own-one", "own-not-a-list", "own-not-a-choice", "own-and-fixed",
        "own-open"])
def test_a_bad_task_file_is_one_line(tmp_path, run_cli, text, data, needle):
    path = _task_file(tmp_path, text, data)
    r = run_cli("eval", path, "--model", "openai/sim", "--api-base", "http://127.0.0.1:9/v1",
                "--t", 1, "--n", 1, "--out", tmp_path / "run")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert needle in lines[0] and "Traceback" not in r.stderr, lines[0]


def test_missing_task_file_and_data_beside_it(tmp_path, run_cli):
    r = run_cli("eval", tmp_path / "nope.yaml", "--model", "openai/sim", "--t", 1, "--n", 1)
    assert r.returncode != 0 and "task file" in r.stderr and "not found" in r.stderr
    path = _task_file(tmp_path, GOOD, ROWS)
    r = run_cli("eval", path, "--data", tmp_path / "q.jsonl", "--model", "openai/sim",
                "--t", 1, "--n", 1)
    assert r.returncode != 0 and "names its own data file: drop --data" in r.stderr


def test_open_answers_and_data_relative_to_the_task_file(tmp_path, monkeypatch):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "q.json").write_text(json.dumps([{"q": "2+2", "a": "4"}, {"q": "1/2", "a": "0.5"}]))
    (sub / "t.yaml").write_text('data: q.json\nprompt: "What is {q}?"\nanswer: number\n'
                                'target: a\n')
    monkeypatch.chdir(tmp_path)  # the data file is found beside the task file, not here
    task = get_task("taskfile", data="sub/t.yaml")
    qs = task.questions()
    assert [q.id for q in qs] == ["row-1", "row-2"] and qs[1].correct == "0.5"
    assert task.answer_kind.is_open and qs[0].choices == ()
    assert task.parse_for(qs[1], "<answer>1/2</answer>") == "0.5"
    with pytest.raises(InputError, match="choices are for answer: choice"):
        (sub / "t.yaml").write_text('data: q.json\nprompt: "{q}"\nanswer: number\n'
                                    'choices: [a, b]\ntarget: a\n')
        get_task("taskfile", data="sub/t.yaml")


def test_skip_invalid_keeps_the_good_records(tmp_path):
    path = _task_file(tmp_path, GOOD, ROWS + "not json\n" + '{"x": 4, "y": "perhaps"}\n')
    with pytest.raises(DataError, match="row 3"):
        get_task("taskfile", data=path).questions()
    task = get_task("taskfile", data=path, skip_invalid=True)
    assert len(task.questions()) == 2 and [row for row, _ in task.skipped] == [3, 4]


def test_each_records_own_choices_from_a_csv_cell(tmp_path):
    # choices_field: a CSV cell holds 'A|B|C'; a reply is read against its record's choices
    # only, and a record whose choices are bad is skipped with --skip-invalid (named by row)
    (tmp_path / "q.csv").write_text("x,opts,y\n2,even|odd,even\n3,odd|even|prime,prime\n"
                                    "4,even,even\n")
    (tmp_path / "t.yaml").write_text(
        "data: q.csv\nprompt: \"Is {x} even, odd or prime? Answer with one of: {choices}.\"\n"
        "answer: choice\nchoices_field: opts\ntarget: y\n")
    task = get_task("taskfile", data=tmp_path / "t.yaml", skip_invalid=True)
    qs = task.questions()
    assert [q.choices for q in qs] == [("even", "odd"), ("odd", "even", "prime")]
    assert qs[1].prompt == "Is 3 even, odd or prime? Answer with one of: odd, even, prime."
    assert [q.correct for q in qs] == ["even", "prime"]
    assert task.parse_for(qs[1], "<answer>Prime</answer>") == "prime"
    assert task.parse_for(qs[0], "<answer>prime</answer>") is None  # not one of its choices
    [(row, why)] = task.skipped
    assert row == 4 and "opts" in why and "at least two distinct" in why
