"""MathQA loading against the real test split (../shared/data/mathqa/test.json)."""

import json
import re

import pytest

from ensemble.errors import DataError, InputError
from ensemble.tasks import get_task
from ensemble.tasks.mathqa import PROMPT_TEMPLATE, parse_options


def test_all_2985_records_parse_with_counted_exceptions(mathqa_path):
    task = get_task("mathqa", data=mathqa_path)
    qs = task.questions()
    # every record yields five non-empty options and a valid letter; none is skipped
    assert len(qs) == 2985 and task.skipped == []
    assert all(len(q.meta["options"]) == 5 and all(q.meta["options"]) for q in qs)
    assert all(q.correct in "ABCDE" and q.choices == ("A", "B", "C", "D", "E") for q in qs)
    # no option keeps a label in its text after the repairs
    assert not any(re.match(r"^[a-e]\s*[).:]\s", v) for q in qs for v in q.meta["options"])
    # The exceptions, found by inspecting all 2985 records (counts of records):
    # - 66 list_syntax: "['a ) 2 : 3', 'b ) 4 : 5', ...]" (rows 82, 95, 188, ...)
    # - 49 doubled_label: 47 with every label doubled, "a ) a ) 2 , b ) b ) 5 ..." (rows 85,
    #   135, ...; row 628 is also list_syntax: "['a ) a ) 4 inches', ...]"), and rows 550
    #   ("d ) d ) 12 , e ) e ) 5") and 2502
    #   ("b ) b ) 120 % , c ) c ) 96 % ...")
    # - 4 label_echo: rows 797 ("b ) b . 120 %"), 1271 and 1782 ("a ) a . 0.6 , b ) b . 1.2"),
    #   2069 ("a ) a : 45 , b ) b : 25 ...")
    #   -> 118 records repaired in all (66 + 49 + 4 - 1, row 628 counted twice)
    # - 11 duplicate_correct_value, kept: the right option's value also appears under another
    #   letter (rows 286, 316, 576, 797, 1117, 1184, 1235, 1468, 2344), and rows 2237 and 2319
    #   whose five options are identical ("m" five times, "sec" five times: the numbers were
    #   lost in the source data), so no answer can be told right from its options.
    counts = {k: len(v) for k, v in task.issues.items()}
    assert counts == {"list_syntax": 66, "doubled_label": 49, "label_echo": 4,
                      "duplicate_correct_value": 11}
    assert task.repaired == 118
    assert sorted(task.issues["label_echo"]) == [797, 1271, 1782, 2069]
    assert sorted(task.issues["duplicate_correct_value"]) == [
        286, 316, 576, 797, 1117, 1184, 1235, 1468, 2237, 2319, 2344]
    assert qs[1271].meta["options"] == ["0.6", "1.2", "2.1", "3", "5.4"]
    assert qs[2237].meta["ambiguous"] and not qs[0].meta["ambiguous"]


@pytest.mark.parametrize("text,expected", [
    ("a ) 38 , b ) 27.675 , c ) 30 , d ) data inadequate , e ) none of these",
     ["38", "27.675", "30", "data inadequate", "none of these"]),
    # commas inside values
    ("a ) $ 306 , b ) $ 275 , c ) $ 510 , d ) $ 1,250 , e ) $ 2,550",
     ["$ 306", "$ 275", "$ 510", "$ 1,250", "$ 2,550"]),
    ("a ) 1 , 200 , b ) 2 , c ) 3 , d ) 4 , e ) 5", ["1 , 200", "2", "3", "4", "5"]),
    # ")" inside values
    ("a ) ( 40,0 ) , b ) ( 30,0 ) , c ) ( 0,40 ) , d ) ( 40,30 ) , e ) ( 0,30 )",
     ["( 40,0 )", "( 30,0 )", "( 0,40 )", "( 40,30 )", "( 0,30 )"]),
    ("a ) 1 / pi , b ) sqrt ( 2.88 / pi ) , c ) 1 , d ) 2 / sqrt ( pi ) , e ) pi / 2",
     ["1 / pi", "sqrt ( 2.88 / pi )", "1", "2 / sqrt ( pi )", "pi / 2"]),
    # missing spaces
    ("a)38,b)27,c)30,d)1,e)none", ["38", "27", "30", "1", "none"]),
    ("a ) a ) 2 , b ) b ) 5 , c ) c ) 7 , d ) d ) 5 , e ) e ) 8", ["2", "5", "7", "5", "8"]),
    ("['a ) 1 cm', 'b ) 3 cm', 'c ) 6 cm', 'd ) 4 cm', 'e ) 2 cm']",
     ["1 cm", "3 cm", "6 cm", "4 cm", "2 cm"]),
    ("a ) a : 45 , b ) b : 25 , c ) c : 37.5 , d ) d : 36 , e ) e : 42",
     ["45", "25", "37.5", "36", "42"]),
    ("a ) ca n ' t say , b ) 1 , c ) 2 , d ) 3 , e ) 4", ["ca n ' t say", "1", "2", "3", "4"]),
])
def test_parse_options_messy(text, expected):
    assert parse_options(text)[0] == expected


@pytest.mark.parametrize("text,reason", [
    ("a ) 1 , b ) 2 , c ) 3 , d ) 4", "option e) not found"),
    ("a ) 1 , b ) 2 , c ) 3 , d ) 4 , e ) 5 , f ) 6", "more than five"),
    ("a ) 1 , b ) , c ) 3 , d ) 4 , e ) 5", "option b) is empty"),
    ("1 , 2 , 3 , 4 , 5", "option a) not found"),
])
def test_parse_options_rejects(text, reason):
    with pytest.raises(ValueError, match=re.escape(reason)):
        parse_options(text)


def test_seeded_subset_and_prompt(mathqa_path):
    a = get_task("mathqa", data=mathqa_path, limit=500, seed=0).questions()
    b = get_task("mathqa", data=mathqa_path, limit=500, seed=0).questions()
    c = get_task("mathqa", data=mathqa_path, limit=500, seed=1).questions()
    assert [q.id for q in a] == [q.id for q in b] and len(a) == 500
    assert [q.id for q in a] != [q.id for q in c]
    rows = [q.meta["row"] for q in a]
    assert rows == sorted(rows) and len(set(rows)) == 500  # sorted stably, no repeats
    assert len(get_task("mathqa", data=mathqa_path, limit=5000).questions()) == 2985
    # the paper's prompt, options "A) ..." one per line, the answer letter asked uppercase
    q = get_task("mathqa", data=mathqa_path).questions()[0]
    rec = json.loads(mathqa_path.read_text())[0]
    opts = "\n".join(f"{L}) {v}" for L, v in zip("ABCDE", q.meta["options"], strict=False))
    assert q.prompt == PROMPT_TEMPLATE.format(question=rec["Problem"].strip(), options=opts)
    assert q.prompt.startswith("### Scenario:\nPlease review the following math question")
    assert "### Options:\nA) " in q.prompt and "uppercase letter" in q.prompt
    assert q.correct == rec["correct"].upper()
    task = get_task("mathqa", data=mathqa_path)
    assert task.parse("<reason>...</reason><answer>c</answer>") == "C"
    assert task.parse("<answer># A single uppercase letter</answer>") is None


def test_malformed_rows_are_named(tmp_path):
    bad = tmp_path / "bad.json"
    good = {"Problem": "1+1?", "options": "a ) 1 , b ) 2 , c ) 3 , d ) 4 , e ) 5",
            "correct": "b"}
    bad.write_text(json.dumps([good, {"Problem": "x", "options": "a ) 1 , b ) 2",
                                      "correct": "a"}, {**good, "correct": "g"}, [1, 2],
                               {"options": good["options"], "correct": "a"}]))
    with pytest.raises(DataError, match=r"bad.json, row 1, field 'options': option c\)"):
        get_task("mathqa", data=bad).questions()
    t = get_task("mathqa", data=bad, skip_invalid=True)
    assert [q.id for q in t.questions()] == ["mathqa-0"]
    assert [(r, why.split(": ")[0]) for r, why in t.skipped] == [
        (1, f"{bad}, row 1, field 'options'"), (2, f"{bad}, row 2, field 'correct'"),
        (3, f"{bad}, row 3"), (4, f"{bad}, row 4, field 'Problem'")]


def test_bad_files(tmp_path):
    with pytest.raises(DataError, match="missing.json: file not found"):
        get_task("mathqa", data=tmp_path / "missing.json").questions()
    broken = tmp_path / "broken.json"
    broken.write_text('[{"Problem": ')
    with pytest.raises(DataError, match="broken.json: not valid JSON"):
        get_task("mathqa", data=broken).questions()
    obj = tmp_path / "obj.json"
    obj.write_text('{"Problem": "x"}')
    with pytest.raises(DataError, match="expected a JSON list"):
        get_task("mathqa", data=obj).questions()
    with pytest.raises(InputError, match="limit"):
        get_task("mathqa", data=obj, limit=0)


def test_no_data_without_the_hub_says_pass_data(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_datasets(name, *a, **k):
        if name == "datasets":
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(InputError, match="pass --data PATH"):
        get_task("mathqa").questions()
