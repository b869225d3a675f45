"""Users' own questions from JSONL and CSV files."""

import json

import pytest

from ensemble.errors import DataError, InputError
from ensemble.tasks import get_task


def test_jsonl_fields(tmp_path):
    j = tmp_path / "q.jsonl"
    j.write_text('{"id": "q1", "question": "2+2?", "choices": ["3", "4"], "answer": "4"}\n'
                 "\n"
                 '{"question": "Sky?", "choices": "Blue|Green", "answer": "blue", '
                 '"posterior": 0.9, "source": "me"}\n'
                 '{"question": "Pick", "choices": [1, 2, 3]}\n')
    t = get_task("jsonl", data=j)
    qs = t.questions()
    assert [q.id for q in qs] == ["q1", "row-3", "row-4"]
    assert qs[0].choices == ("3", "4") and qs[0].correct == "4"
    # the answer is matched case-insensitively and stored as spelled in the choices
    assert qs[1].correct == "Blue" and qs[1].posterior == 0.9
    assert qs[1].meta["extra"] == {"source": "me"}
    assert qs[2].choices == ("1", "2", "3") and qs[2].correct is None
    assert qs[0].prompt.startswith("2+2?") and "Choices: 3, 4" in qs[0].prompt
    assert "<answer></answer>" in qs[0].prompt
    assert t.parse("<answer>Blue</answer>") == "Blue"
    # per question: an answer from another question's choices is not valid for this one
    assert t.parse_for(qs[0], "<answer>Blue</answer>") is None
    assert t.parse_for(qs[0], "<answer>4</answer>") == "4"


def test_csv_with_quotes_and_row_numbers(tmp_path):
    c = tmp_path / "q.csv"
    c.write_text('id,question,choices,answer\n'
                 'a,"Which one,\nreally?",A|B,b\n'
                 'b,Yes?,"[""yes"", ""no""]",yes\n')
    qs = get_task("jsonl", data=c).questions()
    assert [q.id for q in qs] == ["a", "b"]
    assert qs[0].correct == "B" and qs[0].prompt.startswith("Which one,\nreally?")
    assert qs[1].choices == ("yes", "no")
    bad = tmp_path / "bad.csv"
    bad.write_text('question,choices,answer\nOk?,A|B,A\n"Two\nlines",A|B,C\n')
    # the record starts on line 3 of the file
    with pytest.raises(DataError, match=r"bad.csv, row 3, field 'answer': 'C' is not one"):
        get_task("jsonl", data=bad).questions()
    nohead = tmp_path / "nohead.csv"
    nohead.write_text("q,c\nx,A|B\n")
    with pytest.raises(DataError, match=r"nohead.csv, row 1, field 'question'"):
        get_task("jsonl", data=nohead).questions()


@pytest.mark.parametrize("line,field,why", [
    ('{"question": "x", "choices": ["a", "b"], "answer": "c"}', "answer", "not one of"),
    ('{"question": "", "choices": ["a", "b"]}', "question", "missing or empty"),
    ('{"question": "x", "choices": ["a"]}', "choices", "at least two"),
    ('{"question": "x", "choices": "a|a"}', "choices", "distinct"),
    ('{"question": "x", "choices": {"a": 1}}', "choices", "at least two"),
    ('{"question": "x", "choices": ["a", "b", "c"], "posterior": 0.5}', "posterior",
     "exactly two"),
    ('{"question": "x", "choices": ["a", "b"], "posterior": 1.5}', "posterior", "[0, 1]"),
    ('{"question": "x", "choices": ["a", "b"], "posterior": "high"}', "posterior", "[0, 1]"),
])
def test_bad_rows_name_file_row_field(tmp_path, line, field, why):
    j = tmp_path / "bad.jsonl"
    j.write_text('{"question": "fine", "choices": ["a", "b"]}\n' + line + "\n")
    with pytest.raises(DataError) as info:
        get_task("jsonl", data=j).questions()
    msg = str(info.value)
    assert msg.startswith(f"{j}, row 2, field '{field}': ") and why in msg


def test_bad_json_duplicates_skip_and_files(tmp_path):
    j = tmp_path / "q.jsonl"
    j.write_text('{"id": 1, "question": "a", "choices": "x|y"}\n'
                 "{not json}\n"
                 '["a list"]\n'
                 '{"id": "1", "question": "b", "choices": "x|y"}\n'
                 '{"question": "c", "choices": "x|y"}\n')
    with pytest.raises(DataError, match=r"q.jsonl, row 2: not valid JSON"):
        get_task("jsonl", data=j).questions()
    t = get_task("jsonl", data=j, skip_invalid=True)
    assert [q.id for q in t.questions()] == ["1", "row-5"]
    assert [(r, m.split(": ", 1)[0]) for r, m in t.skipped] == [
        (2, f"{j}, row 2"), (3, f"{j}, row 3"), (4, f"{j}, row 4, field 'id'")]
    assert "duplicate id '1' (first at row 1)" in t.skipped[2][1]
    with pytest.raises(DataError, match="file not found"):
        get_task("jsonl", data=tmp_path / "nope.jsonl").questions()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DataError, match="no questions"):
        get_task("jsonl", data=empty).questions()
    with pytest.raises(InputError, match="--data"):
        get_task("jsonl")


def test_seeded_subset(tmp_path):
    j = tmp_path / "q.jsonl"
    j.write_text("".join(json.dumps({"question": f"q{i}", "choices": "A|B", "answer": "A"})
                         + "\n" for i in range(50)))
    a = [q.id for q in get_task("jsonl", data=j, limit=10, seed=3).questions()]
    assert a == [q.id for q in get_task("jsonl", data=j, limit=10, seed=3).questions()]
    assert len(a) == 10 and a == sorted(a, key=lambda s: int(s.split("-")[1]))
