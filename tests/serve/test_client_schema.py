"""The client's schema at the endpoint (issue 38 items 2 and 4), with the official openai SDK
over real HTTP: the upstream receives the client's response_format as sent (`strict`,
`additionalProperties`, `pattern`, descriptions kept); the vote is field by field over close
splits the upstream plants (each field right in 3 of 5 replies, the most common whole object
wrong on one field), unions, dicts and arrays by their parts; every voted object is valid for
the client's schema. Expectations are computed from what the upstream served."""

from __future__ import annotations

import json
from collections import Counter

import openai
import pytest
from jsonschema import Draft202012Validator

from ensemble.serve import VotingServer, parse_config
from ensemble.testing import SimulatedServer, StructuredPlan

TICKET = {"type": "json_schema", "json_schema": {
    "name": "Ticket", "strict": True, "description": "A triaged ticket.", "schema": {
        "type": "object", "additionalProperties": False,
        "description": "What the ticket is about.",
        "properties": {
            "label": {"type": "string", "enum": ["bug", "feature", "docs", "question"]},
            "city": {"type": "string", "pattern": "^[a-z]+$"},
            "days": {"type": "integer", "minimum": 0}},
        "required": ["label", "city", "days"]}}}
PARTS = {"type": "json_schema", "json_schema": {"name": "Parts", "schema": {
    "type": "object", "required": ["answer", "counts", "tags", "labels"], "properties": {
        "answer": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}}}


def canon(v):
    return json.dumps(v, sort_keys=True)


@pytest.fixture(scope="module")
def env():
    with SimulatedServer(seed=12, keep_replies=True,
                         structured=StructuredPlan(splits=True)) as up:
        cfg = parse_config({"port": 0, "models": {"judge": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 5}}})
        with VotingServer(cfg) as srv:
            yield up, openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)


def _served(up, prompt):
    reps = [r for r in up.stats.replies if r.prompt == prompt]
    return reps, [json.loads(t) for r in reps for t in r.texts]


@pytest.mark.parametrize("fmt", [TICKET, PARTS], ids=["ticket", "unions-dicts-arrays"])
def test_close_splits_are_voted_field_by_field_over_twelve_prompts(env, fmt):
    up, client = env
    schema = fmt["json_schema"]["schema"]
    wrong = 0
    for i in range(12):
        prompt = f"Ticket {i}: triage it. ({fmt['json_schema']['name']})"
        r = client.chat.completions.create(model="judge", response_format=fmt,
                                           messages=[{"role": "user", "content": prompt}])
        voted = json.loads(r.choices[0].message.content)
        reps, docs = _served(up, prompt)
        assert len(docs) == 5
        # the upstream got the client's response_format as sent: strict and all
        assert all(rep.response_format == fmt for rep in reps)
        Draft202012Validator(schema).validate(voted)  # valid for the client's schema
        whole = Counter(canon(d) for d in docs).most_common(1)[0]
        assert whole[1] == 2 and canon(voted) != whole[0]  # the whole-object trap planted
        for name in schema["properties"]:
            top = Counter(canon(d[name]) for d in docs).most_common(1)[0]
            assert top[1] == 3  # 3 of 5 per field
            wrong += canon(voted[name]) != top[0]
        assert r.model_extra["ensemble"]["decision"] == voted
    assert wrong == 0
