"""One reader of a user's data file (`tasks.records.data_records`) serves the `jsonl` task and
task files: a task file's data now meets the row handling the jsonl task had alone, a JSONL line
holding a lone surrogate escape is that row's error (it could never be sent to a model), and a
CSV row of empty cells (a spreadsheet's trailing row) is no record."""

from __future__ import annotations

import pytest

from ensemble.errors import DataError
from ensemble.tasks import get_task

TASK = ('data: {data}\nprompt: "Is a {{animal}} a mammal?"\nanswer: choice\n'
        'choices: ["yes", "no"]\ntarget: mammal\n')


def _task_file(tmp_path, name: str, data: str):
    (tmp_path / name).write_text(data, encoding="utf-8")
    path = tmp_path / "t.yaml"
    path.write_text(TASK.format(data=name))
    return path


def test_a_lone_surrogate_in_a_task_files_jsonl_names_its_row(tmp_path):
    path = _task_file(tmp_path, "a.jsonl", '{"animal": "cat", "mammal": "yes"}\n'
                                           '{"animal": "\\ud800", "mammal": "no"}\n')
    with pytest.raises(DataError, match="row 2.*surrogate"):
        get_task("taskfile", data=path).questions()
    task = get_task("taskfile", data=path, skip_invalid=True)
    assert [q.id for q in task.questions()] == ["row-1"] and task.skipped[0][0] == 2


def test_a_csv_row_of_empty_cells_is_no_record_in_either_task(tmp_path):
    path = _task_file(tmp_path, "a.csv", "animal,mammal\ncat,yes\ntrout,no\n,\n")
    assert [q.id for q in get_task("taskfile", data=path).questions()] == ["row-2", "row-3"]
    (tmp_path / "q.csv").write_text("question,choices,answer\nA cat?,yes|no,yes\n,,\n")
    assert [q.id for q in get_task("jsonl", data=tmp_path / "q.csv").questions()] == ["row-2"]
