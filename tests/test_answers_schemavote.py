"""A client's JSON schema voted by its parts (`ensemble.answers.JsonSchema`, issue 38 items 2
and 4): unions by branch then the branch's parts, dicts key by key, arrays element by element
(or as sets under uniqueItems), each leaf with its kind; a reply the schema rejects abstains;
a voted value the schema rejects is no decision, and why says so; a schema that cannot be
voted is refused in one line. Each expectation is the plurality of the planted replies."""

from __future__ import annotations

import json

import pytest

from ensemble.aggregators import get_aggregator
from ensemble.answers import JsonSchema
from ensemble.decision import tally
from ensemble.errors import InputError
from ensemble.sampling.types import Sample


def vote(schema, replies):
    kind = JsonSchema(schema)
    agg = get_aggregator("plurality", open=True, rng=0)
    samples = [Sample(key="p", index=i, text=r if isinstance(r, str) else json.dumps(r),
                      answer=kind.parse(r if isinstance(r, str) else json.dumps(r)))
               for i, r in enumerate(replies)]
    return tally([samples], kind=kind, aggregate=lambda keys, groups: agg(keys),
                 lams=(None,), stop=None)


def obj(props, required=None, **kw):
    return {"type": "object", "properties": props,
            "required": list(props) if required is None else required, **kw}


def test_close_splits_are_voted_field_by_field_not_as_whole_objects():
    schema = obj({"label": {"type": "string", "enum": ["bug", "feature", "docs", "question"]},
                  "city": {"type": "string"}, "days": {"type": "integer"}})
    whole = {"label": "bug", "city": "Paris", "days": 2}  # twice: the whole-object plurality
    d = vote(schema, [whole, whole, {"label": "bug", "city": "rome", "days": 3},
                      {"label": "docs", "city": "PARIS!", "days": 3},
                      {"label": "feature", "city": "oslo", "days": 3}])
    assert d.decision == {"label": "bug", "city": "Paris", "days": 3}
    assert isinstance(d.decision["days"], int)
    assert d.fields["days"].counts == {"3": 3, "2": 2}


def test_a_union_is_voted_by_branch_then_its_parts():
    schema = obj({"answer": {"anyOf": [{"type": "integer"}, obj({"city": {"type": "string"}}),
                                       {"type": "null"}]}})
    d = vote(schema, [{"answer": {"city": "Rome"}}, {"answer": {"city": "rome."}},
                      {"answer": {"city": "Oslo"}}, {"answer": 4}, {"answer": 4}])
    assert d.fields["answer(branch)"].counts == {"1": 3, "0": 2}
    assert d.decision == {"answer": {"city": "Rome"}}
    d = vote(schema, [{"answer": None}] * 3 + [{"answer": 4}] * 2)
    assert d.decision == {"answer": None}  # the null branch won


def test_a_type_list_is_a_union():
    d = vote(obj({"n": {"type": ["integer", "string"]}}),
             [{"n": "seven"}, {"n": "Seven"}, {"n": 7}, {"n": 7.0}, {"n": 7}])
    assert d.decision == {"n": 7}


def test_a_dict_is_voted_key_by_key_a_key_kept_when_most_replies_give_it():
    schema = obj({"counts": {"type": "object", "additionalProperties": {"type": "integer"}}})
    d = vote(schema, [{"counts": {"a": 1, "b": 2}}, {"counts": {"a": 1, "b": 3}},
                      {"counts": {"a": 2, "b": 3, "c": 9}}, {"counts": {"a": 1}},
                      {"counts": {"b": 3, "c": 9}}])
    assert d.decision == {"counts": {"a": 1, "b": 3}}  # c: 2 of 5 replies give it
    assert d.fields["counts.a"].counts == {"1": 3, "2": 1}


def test_an_array_is_voted_element_by_element_with_the_items_kind():
    schema = obj({"tags": {"type": "array", "items": {"type": "string"}}})
    d = vote(schema, [{"tags": ["Red", "blue"]}, {"tags": ["red", "Blue"]},
                      {"tags": ["RED", "green"]}, {"tags": ["red"]},
                      {"tags": ["red", "blue", "x"]}])
    assert d.fields["tags[len]"].counts == {"2": 3, "1": 1, "3": 1}
    assert [t.lower() for t in d.decision["tags"]] == ["red", "blue"]  # case variants one vote


def test_a_unique_items_array_is_voted_as_a_set():
    schema = obj({"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}})
    d = vote(schema, [{"tags": ["a", "b"]}, {"tags": ["b", "a", "c"]}, {"tags": ["B", "d"]},
                      {"tags": ["a"]}, {"tags": ["b", "c"]}])
    assert sorted(t.lower() for t in d.decision["tags"]) == ["a", "b"]  # held by 3+ of 5


def test_optional_properties_kept_when_most_replies_give_them():
    schema = obj({"a": {"type": "string"}, "note": {"type": "string"}}, required=["a"])
    d = vote(schema, [{"a": "x", "note": "hi"}, {"a": "x"}, {"a": "x"}])
    assert d.decision == {"a": "x"}


def test_a_reply_the_schema_rejects_abstains():
    schema = obj({"day": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
                 additionalProperties=False)
    d = vote(schema, [{"day": "next tuesday"}, {"day": "next tuesday"},
                      {"day": "2026-11-27"}, {"day": "2026-11-27", "extra": 1}])
    assert d.decision == {"day": "2026-11-27"} and d.n_invalid == 3


def test_a_voted_value_the_schema_rejects_is_no_decision_and_why_says_so():
    schema = obj({"lo": {"type": "integer"}, "hi": {"type": "integer"}},
                 **{"not": {"properties": {"lo": {"const": 5}, "hi": {"const": 1}},
                            "required": ["lo", "hi"]}})
    d = vote(schema, [{"lo": 5, "hi": 2}, {"lo": 5, "hi": 2}, {"lo": 4, "hi": 1},
                      {"lo": 6, "hi": 1}, {"lo": 3, "hi": 1}])  # each valid; voted {5, 1}
    assert d.decision is None
    assert "fails the request's schema" in d.why and "nothing is returned as valid" in d.why


@pytest.mark.parametrize(("schema", "says"), [
    (obj({"a": {"$ref": "#/$defs/Gone"}}), "does not resolve inside the schema"),
    (obj({"a": {"$ref": "https://example.com/s.json"}}), "not a reference inside the schema"),
    (obj({"a": {"allOf": [{"type": "string"}]}}), "allOf is not supported"),
    (obj({"a": {"type": "strnig"}}), "not a valid JSON schema"),
])
def test_a_schema_that_cannot_be_voted_is_refused_in_one_line(schema, says):
    with pytest.raises(InputError) as ei:
        JsonSchema(schema)
    assert says in str(ei.value) and "\n" not in str(ei.value)


def test_the_response_format_is_the_clients_own():
    fmt = {"type": "json_schema", "json_schema": {"name": "A", "strict": True, "schema": obj(
        {"a": {"type": "string", "pattern": "^x"}}, additionalProperties=False)}}
    assert JsonSchema(fmt["json_schema"]["schema"], response_format=fmt).response_format() \
        == fmt
