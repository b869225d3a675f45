"""Answer kinds: parsing to canonical keys, equivalence, typed decisions, field kinds."""

import enum
import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from ensemble.aggregators import get_aggregator
from ensemble.answers import (
    Choice,
    Exact,
    Math,
    Number,
    Structured,
    Text,
    mbr_choice,
    merge_same,
    resolve_answer,
    spellings,
)
from ensemble.errors import InputError
from ensemble.testing import write_number
from ensemble.testing.openexpert import FORMS


@pytest.mark.parametrize("raw", ["1250", "1,250", "1250.0", "$1,250", "\\boxed{1250}",
                                 "<answer>\\boxed{1,250}</answer>", "1.25e3", "1.25E+3",
                                 "1.25 \\times 10^{3}", "1{,}250", "\\$1,250.00", "1\\,250",
                                 "The answer is 1250 dollars.", "<answer>$1,250</answer>"])
def test_number_spellings_are_one_key(raw):
    assert Number().parse(raw) == "1250"


@pytest.mark.parametrize("raw,key", [("- 49", "-49"), ("−7", "-7"), ("3/4", "0.75"),
                                     ("\\frac{3}{4}", "0.75"), ("\\dfrac{-3}{4}", "-0.75"),
                                     ("50%", "50"), ("12.50", "12.5"), ("0.1", "0.1"),
                                     ("x = 3.0", "3"), ("-0.0", "0")])
def test_number_keys(raw, key):
    assert Number().parse(raw) == key


@pytest.mark.parametrize("raw", ["", "   ", "no number here", "<answer>none</answer>", "1/0",
                                 # mixed numbers (issue 32): not read, rather than read as 1/2
                                 "1 1/2", "<answer>1 1/2</answer>", r"1\frac{1}{2}",
                                 r"\boxed{3\frac{1}{4}}", "-2 3/4"])
def test_number_invalid(raw):
    assert Number().parse(raw) is None


def test_simulator_forms_parse_back():
    for x in (1250.0, 12.5, -49.0, 0.75, 1000000.0):
        for form in FORMS:
            assert float(Number().parse(write_number(x, form))) == x, (x, form)


def test_number_tolerance_and_value():
    n = Number(rel_tol=1e-6)
    assert n.same("1250", "1250.0001") and not n.same("1250", "1251")
    assert Number(abs_tol=0.5).same("1", "1.4")
    assert n.value("1250", {"$1,250": 2}) == 1250.0
    merged = merge_same(n, ["1250", "1250.0001", None, "1251", "1250"])
    assert merged == ["1250", "1250", None, "1251", "1250"]
    with pytest.raises(InputError, match="rel_tol"):
        Number(rel_tol=-1)


def test_math_equivalence_and_cache():
    m = Math()
    a, b = m.parse("<answer>x^2+2x+1</answer>"), m.parse("$(x+1)^2$")
    assert a and b and a != b and m.same(a, b)
    assert m.parse("\\frac{1}{2}") == m.parse("0.5") == m.parse("1/2")
    assert not m.same(m.parse("\\sqrt{2}"), m.parse("1.5"))
    assert Math(cache=False).parse("\\boxed{\\pi/4}") == m.parse("\\pi/4")
    merged = merge_same(m, [a, b, m.parse("x+1")])
    assert merged[0] == merged[1] != merged[2]


def test_text_normalisation_and_similarity():
    t = Text()
    assert t.parse("<answer>  Paris, France! </answer>") == t.parse("paris   FRANCE") == \
        "paris france"
    assert not t.same("paris", "pariss")
    assert t.value("paris france", {"Paris, France": 2, "paris france": 1}) == "Paris, France"
    fuzzy = Text(similarity=0.8)
    assert fuzzy.same("the capital is paris", "the capital is pariss")
    assert mbr_choice(["the cat sat", "the cat sat down", "a dog ran"]) in (
        "the cat sat", "the cat sat down")
    with pytest.raises(InputError):
        Text(similarity=0)


def test_spellings_kept_per_key():
    merged = ["1250", "1250", "7", None]
    got = spellings(merged, ["1,250", "$1,250", "7", None])
    assert got == {"1250": {"1,250": 1, "$1,250": 1}, "7": {"7": 1}}


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    x: float
    ok: bool


class Outer(BaseModel):
    label: Literal["yes", "no"]
    colour: Colour
    count: int
    note: str
    inner: Inner
    tags: list[str]


def test_structured_field_kinds_and_vote():
    s = Structured(Outer)
    kinds = {k: type(v) for k, v in s.fields.items()}
    assert kinds == {"label": Choice, "colour": Choice, "count": Number, "note": Text,
                     "inner": Structured, "tags": Exact}
    assert s.fields["colour"].choices == ("red", "blue")
    docs = [
        '{"label": "yes", "colour": "red", "count": 3, "note": "Fine.", '
        '"inner": {"x": 1.5, "ok": true}, "tags": ["a"]}',
        '```json\n{"label": "yes", "colour": "blue", "count": 3.0, "note": "fine", '
        '"inner": {"x": 1.5, "ok": false}, "tags": ["a"]}\n```',
        '{"label": "no", "colour": "red", "count": 4, "note": "Fine.", '
        '"inner": {"x": 2, "ok": true}, "tags": ["b"]}',
        '{"label": "maybe"}',
        "not json",
    ]
    keys = [s.parse(d) for d in docs]
    assert keys[3] is None and keys[4] is None and all(keys[:3])
    agg = get_aggregator("plurality", open=True, rng=0)
    decision, fields = s.vote_fields(keys, lambda k: agg(k))
    assert decision == Outer(label="yes", colour=Colour.RED, count=3, note="Fine.",
                             inner=Inner(x=1.5, ok=True), tags=["a"])
    assert fields["label"].votes == {"yes": 2, "no": 1} and fields["label"].invalid == 2
    assert fields["count"].votes == {"3": 2, "4": 1}
    assert fields["note"].votes == {"fine": 3}
    assert set(fields) == {"label", "colour", "count", "note", "inner.x", "inner.ok",
                           "tags[len]", "tags[0]"}  # a list by its parts (below)
    assert fields["inner.ok"].value is True


class Triage(BaseModel):
    tags: list[str]
    counts: dict[str, int]
    answer: int | str
    labels: list[Literal["ui", "db", "net"]] = Field(json_schema_extra={"uniqueItems": True})
    note: str | None = None


def test_structured_lists_dicts_and_unions_are_voted_by_their_parts():
    """38 (the Python API's half of item 4): `Ensemble(answer=Model)` votes a model's lists,
    dicts and unions by their JSON schema's parts, as serve votes a client's schema, not as
    exact JSON: case variants and key order no longer split one answer (the exact-JSON
    plurality of each field here is the 2-of-5 wrong value)."""
    s = Structured(Triage)
    rows = [{"tags": ["Bug", "ui"], "counts": {"a": 1, "b": 2}, "answer": 7,
             "labels": ["ui", "db"]},
            {"tags": ["bug", "UI"], "counts": {"a": 1, "b": 3}, "answer": 8,
             "labels": ["db", "ui"]},
            {"tags": ["bug.", "ui"], "counts": {"b": 2, "a": 2}, "answer": 7,
             "labels": ["ui", "db", "net"]},
            {"tags": ["crash"], "counts": {"x": 9}, "answer": "seven", "labels": ["net"]},
            {"tags": ["crash"], "counts": {"x": 9}, "answer": "seven", "labels": ["ui"]}]
    keys = [s.parse(json.dumps(r)) for r in rows]
    assert all(keys)
    agg = get_aggregator("plurality", open=True, rng=0)
    decision, fields = s.vote_fields(keys, lambda k: agg(k))
    assert [t.lower() for t in decision.tags] == ["bug", "ui"]
    assert decision.counts == {"a": 1, "b": 2}
    assert decision.answer == 7  # the integer branch (3 of 5), then its value (2 of 3)
    assert sorted(decision.labels) == ["db", "ui"]  # a set: held by more than half
    assert decision.note is None
    assert fields["tags[len]"].votes == {"2": 3, "1": 2}
    assert fields["answer(branch)"].votes == {"0": 3, "1": 2}
    assert fields["counts.a"].votes == {"1": 2, "2": 1}


def test_resolve_answer():
    assert resolve_answer(None, ["A", "B"]) == Choice(("A", "B"))
    assert isinstance(resolve_answer("number"), Number)
    assert isinstance(resolve_answer(Outer), Structured)
    assert resolve_answer(Text(similarity=0.9)) == Text(similarity=0.9)
    with pytest.raises(InputError, match="unknown answer kind"):
        resolve_answer("numbers")
    with pytest.raises(InputError, match="needs choices"):
        resolve_answer("choice")
    with pytest.raises(InputError, match="pydantic model"):
        resolve_answer(3.5)


def test_open_rules():
    with pytest.raises(InputError, match="open"):
        get_aggregator("robust", lam=2.0, open=True)
    maj = get_aggregator("majority", open=True, rng=0)
    assert maj(["7", "7", "7", "8", None]).decision == "7"
    v = maj(["7", "7", "8", "9"])
    assert v.decision is None and v.notes


def test_text_unwraps_latex_markup():
    """Issue 32 item 11: `--answer text` read `<answer>\\boxed{1250}</answer>` as `boxed 1250`."""
    t = Text()
    assert t.parse(r"<answer>\boxed{1250}</answer>") == "1250"
    assert t.parse(r"<answer>\boxed{\text{Paris}}</answer>") == t.parse("<answer>paris</answer>")
    assert t.value("1250", {r"\boxed{1250}": 2, "1250": 1}) == "1250"
