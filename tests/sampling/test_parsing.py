import pytest

from ensemble.sampling.parsing import choice_parser, extract_answer

LETTERS = ["A", "B", "C", "D", "E"]


@pytest.mark.parametrize("text,expected", [
    ("<reason>x</reason><answer>B</answer>", "B"),
    ("<answer>b</answer>", "B"),
    ("<answer> (c) </answer>", "C"),
    ("<answer>A) 38</answer>", "A"),
    ("<answer>A</answer>", "A"),  # a single letter never becomes an empty string
    ("blah. The answer is D.", "D"),
    ("**E**", "E"),
    ("a", "A"),
    ("<answer># A single uppercase letter: the option you choose</answer>", None),
    ("no answer at all", None),
    ("", None),
    (None, None),
])
def test_extract_answer_letters(text, expected):
    assert extract_answer(text, LETTERS) == expected


def test_choice_parser_box():
    parse = choice_parser(["L", "R"])
    assert parse("<answer>L</answer>") == "L"
    assert parse("<answer>Left</answer>") is None
    assert parse("<answer>X</answer>") is None


def test_word_choices_named_once_in_free_text():
    assert extract_answer("Yes, Paris is in France.", ["yes", "no"]) == "yes"
    assert extract_answer("yes or no? hard to say", ["yes", "no"]) is None  # both named
    assert extract_answer("A is fine", ["A", "B"]) is None  # letters need the answer format
