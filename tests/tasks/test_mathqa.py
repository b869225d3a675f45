import json

import pytest

from ensemble.errors import DataError, InputError
from tasks import get_task
from tasks.mathqa import parse_options


def test_all_2985_records_parse(mathqa_path):
    task = get_task("mathqa", data=mathqa_path)
    qs = task.questions()
    # every record yields five options and a valid letter; none is skipped
    assert len(qs) == 2985 and task.skipped == []
    assert all(len(q.meta["options"]) == 5 and all(q.meta["options"]) for q in qs)
    assert all(q.correct in "ABCDE" for q in qs)
    # the explained exceptions: records with duplicated labels or list syntax, repaired
    assert task.repaired == 114


@pytest.mark.parametrize("text,expected", [
    ("a ) 38 , b ) 27.675 , c ) 30 , d ) data inadequate , e ) none of these",
     ["38", "27.675", "30", "data inadequate", "none of these"]),
    ("a ) $ 306 , b ) $ 275 , c ) $ 510 , d ) $ 1,250 , e ) $ 2,550",
     ["$ 306", "$ 275", "$ 510", "$ 1,250", "$ 2,550"]),
    ("a ) a ) 2 , b ) b ) 5 , c ) c ) 7 , d ) d ) 5 , e ) e ) 8", ["2", "5", "7", "5", "8"]),
    ("['a ) 1 cm', 'b ) 3 cm', 'c ) 6 cm', 'd ) 4 cm', 'e ) 2 cm']",
     ["1 cm", "3 cm", "6 cm", "4 cm", "2 cm"]),
])
def test_parse_options_messy(text, expected):
    assert parse_options(text)[0] == expected


def test_seeded_subset_and_prompt(mathqa_path):
    a = get_task("mathqa", data=mathqa_path, limit=500, seed=0).questions()
    b = get_task("mathqa", data=mathqa_path, limit=500, seed=0).questions()
    assert [q.id for q in a] == [q.id for q in b] and len(a) == 500
    assert "### Options:\nA) " in a[0].prompt and "<answer></answer>" in a[0].prompt


def test_malformed_rows_are_named(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"Problem": "x", "options": "a ) 1 , b ) 2", "correct": "a"}]))
    with pytest.raises(DataError, match=r"bad.json, row 0, field 'options'"):
        get_task("mathqa", data=bad).questions()
    t = get_task("mathqa", data=bad, skip_invalid=True)
    assert t.questions() == [] and len(t.skipped) == 1
    with pytest.raises(DataError, match="file not found"):
        get_task("mathqa", data=tmp_path / "missing.json").questions()
    with pytest.raises(InputError, match="--data"):
        get_task("mathqa")
