import pytest

from ensemble.errors import DataError
from tasks import get_task


def test_jsonl_and_csv(tmp_path):
    j = tmp_path / "q.jsonl"
    j.write_text('{"id": "q1", "question": "2+2?", "choices": ["3", "4"], "answer": "4"}\n'
                 '{"question": "Sky?", "choices": "blue|green", "answer": "blue", '
                 '"posterior": 0.9}\n')
    qs = get_task("jsonl", data=j).questions()
    assert [q.id for q in qs] == ["q1", "row-2"] and qs[1].posterior == 0.9
    assert get_task("jsonl", data=j).parse("<answer>blue</answer>") == "blue"
    c = tmp_path / "q.csv"
    c.write_text("question,choices,answer\nWhich?,A|B,B\n")
    assert get_task("jsonl", data=c).questions()[0].correct == "B"


def test_bad_rows_name_file_row_field(tmp_path):
    j = tmp_path / "bad.jsonl"
    j.write_text('{"question": "x", "choices": ["a", "b"], "answer": "c"}\n')
    with pytest.raises(DataError, match=r"bad.jsonl, row 1, field 'answer'"):
        get_task("jsonl", data=j).questions()
