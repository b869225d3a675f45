"""JSON mode and the client's own formats voted (issue 30): `answer="json"` votes each key of
the replies' objects (a missing key abstains), `answer="format"` reads DSPy's sections, a JSON
object, `ANSWER: X`, `\\boxed{}` or `<answer>`. In-process through the fake provider's planted
expert; every expectation is the plurality of the samples the decision holds (what was
served), never a value written down."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ensemble import Ensemble
from ensemble.answers import ClientFormat, JsonObject, Number, Text, dspy_sections, object_in
from ensemble.testing import (
    FakeExpertProvider,
    FormatPlan,
    SimulatedExpert,
    StructuredPlan,
    ToolPlan,
)


def winners(values) -> set:
    counts = Counter(v for v in values if v is not None)
    top = max(counts.values())
    return {v for v, c in counts.items() if c == top}


def canonical(value):
    if isinstance(value, str):
        return Text().canonical(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Number().key_of(value)
    return json.dumps(value)


def fake(**plans) -> FakeExpertProvider:
    return FakeExpertProvider(expert=SimulatedExpert(seed=5, **plans))


def test_json_mode_votes_each_key_and_a_missing_key_abstains():
    plan = StructuredPlan({"city": "paris", "score": 7, "ok": True}, accuracy=0.6,
                          missing_rate=0.3)
    ens = Ensemble("sim-expert", provider=fake(structured=plan), n=11, answer="json")
    assert ens.params.as_dict()["response_format"] == {"type": "json_object"}
    missing = 0
    for i in range(3):
        d = ens.decide(f"Describe city {i} as JSON.")
        docs = [object_in(s.text) for s in d.samples]
        assert isinstance(d.decision["score"], int)  # integers stay integers
        for key in ("city", "score", "ok"):
            given = [doc[key] for doc in docs if doc is not None and key in doc]
            assert sum(d.fields[key].counts.values()) == len(given)  # the rest abstained
            assert d.fields[key].n_invalid == 11 - len(given)
            missing += 11 - len(given)
            assert canonical(d.decision[key]) in winners(canonical(v) for v in given)
    assert missing > 0  # some replies left keys out, and abstained on them


def test_dspy_sections_are_voted_field_by_field():
    prompt = ("[[ ## question ## ]]\nWhich city?\n\nRespond with the corresponding output "
              "fields, starting with the field `[[ ## reasoning ## ]]`, then "
              "`[[ ## answer ## ]]`, and then ending with the marker for "
              "`[[ ## completed ## ]]`.")
    kind = ClientFormat()
    ens = Ensemble("sim-expert", provider=fake(formats=FormatPlan(accuracy=0.6)), n=9,
                   answer=kind)
    d = ens.decide(prompt)
    sections = [dspy_sections(s.text) for s in d.samples]
    assert d.decision["format"] == "dspy"
    for field in ("reasoning", "answer"):
        assert Text().canonical(d.decision["fields"][field]) in winners(
            Text().canonical(sec[field]) for sec in sections)
    text = kind.render(d.decision)
    assert dspy_sections(text) == d.decision["fields"]
    assert text.endswith("[[ ## completed ## ]]")


def test_answer_lines_are_voted_as_one_answer():
    prompt = ("Answer the following multiple choice question. The entire content of your "
              "response should be of the following format: 'ANSWER: $LETTER' (without "
              "quotes) where LETTER is one of A,B,C,D.\n\nWhich?\n\nA) a\nB) b\nC) c\nD) d")
    ens = Ensemble("sim-expert", provider=fake(formats=FormatPlan(accuracy=0.5)), n=9,
                   answer="format")
    d = ens.decide(prompt)
    letters = [s.text.rsplit("ANSWER: ", 1)[1] for s in d.samples]
    assert d.decision in winners(letters) and set(letters) <= set("ABCD")


@pytest.mark.parametrize("text, key", [
    ("[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]", 'dspy {"answer":"Paris"}'),
    ('```json\n{"a": 1}\n```', 'json {"a":1}'),
    ("thinking...\nANSWER: B", "B"),
    ("so \\boxed{1,250}", "1250"),
    ("<answer>1250.0</answer>", "1250"),
    ("<answer>left box</answer>", "left box"),
])
def test_each_format_is_read(text, key):
    assert ClientFormat().parse(text) == key


def test_a_reply_in_no_format_is_voted_as_free_text():
    """Issue 38 item 5: the whole reply's normalised text, by plurality (was: abstained)."""
    assert ClientFormat().parse("Just some words!") == "text: just some words"
    assert ClientFormat().parse("   ") is None  # an empty reply still abstains
    d = Ensemble("sim-expert", provider=FakeExpertProvider(invalid_rate=1.0), n=3,
                 answer="format").decide("Anything?")
    assert d.decision == "text: i cannot decide which box it is" and d.n_invalid == 0
    assert d.fields["format"].value == "text"


def test_a_free_text_tie_goes_to_the_most_central_reply():
    from ensemble.aggregators import get_aggregator
    from ensemble.answers.formats import central

    keys = [ClientFormat().parse(t) for t in (
        "Paris is the capital of France.", "The capital of France is Paris, of course.",
        "Lyon, I think.", "paris is the capital of france")]
    v = get_aggregator("plurality", open=True, rng=0)(keys)
    assert central(v, keys).decision == "text: paris is the capital of france"  # 2 votes
    three = keys[:3]  # one vote each: a Paris text (near the other), never Lyon, any order
    picked = {central(get_aggregator("plurality", open=True, rng=s)(ks), ks).decision
              for s, ks in enumerate([three, three[::-1], three[1:] + three[:1]])}
    assert len(picked) == 1 and picked < set(three[:2])


def test_json_objects_in_text_are_read():
    kind = JsonObject()
    assert kind.parse('Sure: {"b": 2, "a": 1} done') == '{"a":1,"b":2}'
    assert kind.parse("no object") is None and kind.parse("[1, 2]") is None


def test_tool_calls_through_the_in_process_provider():
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]
    ens = Ensemble("sim-expert", provider=fake(tools=ToolPlan(accuracy=0.6)), n=9,
                   tools=tools)
    d = ens.decide("Find it.")
    from ensemble.providers.toolcalls import read_tool_calls

    args = [json.loads(read_tool_calls(s.text).tool_calls[0]["function"]["arguments"])["q"]
            for s in d.samples]
    assert d.tool_call.name == "lookup"
    assert Text().canonical(d.tool_call.arguments["q"]) in winners(
        Text().canonical(a) for a in args)
