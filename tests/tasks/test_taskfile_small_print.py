"""Issue 41 item 20, task-file small print: a duplicate YAML key took the last value silently
(the error then blamed the data), `max_tokens: true` was read as 1 and 1000000000000 taken,
`{animal` / `animal}` gave Python's format-string errors, a folder as data path said "not
found", and "nested too deeply" did not name the file. Each is one line naming the task file
and the fix, before any request (`ensemble eval --dry-run` sends nothing)."""

from __future__ import annotations

import json

import pytest

DATA = '{"animal": "cat", "mammal": "yes"}\n{"animal": "trout", "mammal": "no"}\n'
BASE = ('data: a.jsonl\nprompt: "Is the {animal} a mammal? {choices}"\nanswer: choice\n'
        'choices: ["yes", "no"]\ntarget: mammal\n')
CASES = {
    "duplicate-key": (BASE + "target: animal\n", "'target' is given twice (lines 5 and 6)"),
    "max-tokens-bool": (BASE + "max_tokens: true\n", "max_tokens"),
    "max-tokens-huge": (BASE + "max_tokens: 1000000000000\n", "max_tokens"),
    "open-brace": (BASE.replace("{animal}", "{animal"), "a literal brace is written {{ or }}"),
    "close-brace": (BASE.replace("{animal}", "animal}"), "a literal brace is written {{ or }}"),
    "data-folder": (BASE.replace("a.jsonl", "folder"), "is a folder"),
    "nested": ("description: " + "[" * 3000 + "]" * 3000 + "\n" + BASE, "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_task_file_small_print_is_one_line_naming_the_file(case, tmp_path, run_cli):
    text, said = CASES[case]
    (tmp_path / "a.jsonl").write_text(DATA)
    (tmp_path / "folder").mkdir()
    task = tmp_path / "t.yaml"
    task.write_text(text)
    r = run_cli("eval", task, "--model", "openai/x", "--api-base", "http://127.0.0.1:9",
                "--t", "1", "--n", "1", "--dry-run")
    line = r.refusal()
    assert f"task file {task}" in line and said in line, line


def test_a_json_task_file_with_a_repeated_key_is_refused_too(tmp_path, run_cli):
    (tmp_path / "a.jsonl").write_text(DATA)
    task = tmp_path / "t.json"
    task.write_text('{"data": "a.jsonl", "prompt": "Is the {animal} a mammal? {choices}", '
                    '"answer": "choice", "choices": ["yes", "no"], "target": "mammal", '
                    '"target": "animal"}')
    r = run_cli("eval", task, "--model", "openai/x", "--t", "1", "--n", "1", "--dry-run")
    assert r.returncode != 0 and "'target' is given twice" in r.stderr, r.stderr
    assert json.loads(task.read_text())["target"] == "animal"  # what json alone would take


def test_skip_invalid_with_every_record_invalid_says_so(tmp_path, run_cli):
    """It said "no records in the file" (there were 2)."""
    (tmp_path / "a.jsonl").write_text(DATA.replace('"yes"', '"maybe"').replace('"no"', '"?"'))
    task = tmp_path / "t.yaml"
    task.write_text(BASE)
    r = run_cli("eval", task, "--model", "openai/x", "--t", "1", "--n", "1", "--dry-run",
                "--skip-invalid")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert "all 2 records are invalid (--skip-invalid skipped each); row 1:" in lines[0]


def test_a_csv_with_a_long_cell_is_read(tmp_path, run_cli):
    """A cell over the csv module's default 131072 characters was refused as malformed."""
    import csv

    with open(tmp_path / "a.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerows([["animal", "mammal"], ["cat " * 50_000, "yes"], ["trout", "no"]])
    task = tmp_path / "t.yaml"
    task.write_text(BASE.replace("a.jsonl", "a.csv"))
    r = run_cli("eval", task, "--model", "openai/x", "--t", "1", "--n", "1", "--dry-run",
                "--price-per-1k-tokens", "1,1")
    assert r.returncode == 0, r.stderr
