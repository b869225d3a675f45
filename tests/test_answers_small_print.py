"""Open answers read what was written, or nothing (issue 41 items 10 and 11): an empty
`<answer></answer>` is no answer (it read as the text "answer answer" and the empties voted
together), and a number joined to another (a range, a time, a decimal comma) is refused rather
than read as its last piece; exponents and digits grouped by spaces are read whole."""

from __future__ import annotations

import json

import pytest

from ensemble import Ensemble
from ensemble.answers import Number, Text


@pytest.mark.parametrize("reply", ["<answer></answer>", "<answer> </answer>",
                                   "<reason>hm</reason><answer>\n</answer>"])
def test_an_empty_answer_tag_is_no_answer(reply):
    assert Text().parse(reply) is None
    assert Number().parse(reply) is None


def test_empty_answers_are_invalid_in_a_vote(tmp_path):
    rec = tmp_path / "rec.jsonl"
    rec.write_text(json.dumps({"prompt": "Capital of France?", "samples": [
        "<answer></answer>", "<answer>Paris</answer>", "<answer></answer>",
        "<answer></answer>"]}) + "\n")
    with Ensemble(f"replay/{rec}", n=4, temperature=1.0, answer="text") as ens:
        d = ens.decide("Capital of France?")
    assert d.n_invalid == 3 and d.decision == "Paris" and dict(d.votes) == {"paris": 1}


@pytest.mark.parametrize("raw, value", [
    ("10^3", 1000), ("2^10", 1024), ("2^{10}", 1024), ("10^{-3}", 0.001), ("5 m^2", 5),
    ("5 m^{2}", 5), ("1 000 000", 1_000_000), ("1,250", 1250), ("12 apples at $3 is 36", 36),
    ("5-3=2", 2), ("x = -3", -3), ("- 49", -49)])
def test_numbers_are_read_whole(raw, value):
    assert Number().parse(raw) == Number().key_of(value)


@pytest.mark.parametrize("raw", ["2-3", "2 - 3", "2–3", "2 to 3", "2 or 3", "1,25", "12:30",
                                 "2023-05-01", "1, 2, 3", "x^2"])
def test_what_is_not_one_number_is_refused(raw):
    assert Number().parse(raw) is None
