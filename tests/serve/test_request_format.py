"""A request's own format decides how it is voted (issue 38 items 1 and 8), with the official
openai SDK over real HTTP: tools plus a response_format (json_schema or json_object), with a
history that ends in a tool's result, is voted field by field over the upstream's planted close
splits (each field right in 3 of 5 replies, the most common whole object wrong on one field),
as the same request without tools is; a server started with choices votes a request's schema
or JSON mode instead of refusing it. Expectations come from what the upstream served."""

from __future__ import annotations

import json
from collections import Counter

import openai
import pytest

from ensemble.serve import VotingServer, parse_config
from ensemble.testing import SimulatedServer, StructuredPlan, ToolPlan

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}}}
TICKET = {"type": "json_schema", "json_schema": {"name": "Ticket", "strict": True, "schema": {
    "type": "object", "additionalProperties": False, "required": ["label", "city", "days"],
    "properties": {"label": {"type": "string", "enum": ["bug", "feature", "docs", "question"]},
                   "city": {"type": "string"}, "days": {"type": "integer"}}}}}


def canon(v):
    return json.dumps(v, sort_keys=True)


@pytest.fixture(scope="module")
def env():
    plan = StructuredPlan({"label": "bug", "city": "paris", "days": 3}, splits=True)
    with SimulatedServer(seed=21, keep_replies=True, tools=ToolPlan(accuracy=1.0),
                         structured=plan) as up:
        cfg = parse_config({"port": 0, "models": {
            "agent": {"model": "openai/sim-expert", "api_base": up.base_url, "n": 5},
            "abc": {"model": "openai/sim-expert", "api_base": up.base_url, "n": 5,
                    "choices": ["A", "B", "C"]}}})
        with VotingServer(cfg) as srv:
            yield up, openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)


def _history(i: int, tag: str) -> list[dict]:
    return [{"role": "user", "content": f"Ticket {i}: what is it about?"},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{i}", "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "paris"}'}}]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"sunny {i} {tag}"}]


def _check(up, prompt: str, voted: dict) -> int:
    docs = [json.loads(t[t.index("{"):]) for r in up.stats.replies if r.prompt == prompt
            for t in r.texts]
    assert len(docs) == 5
    whole = Counter(canon(d) for d in docs).most_common(1)[0]
    assert whole[1] == 2 and canon(voted) != whole[0]  # the whole-object trap
    wrong = 0
    for name in docs[0]:
        top = Counter(canon(d[name]) for d in docs).most_common(1)[0]
        assert top[1] == 3
        wrong += canon(voted.get(name)) != top[0]
    return wrong


@pytest.mark.parametrize("fmt", [TICKET, {"type": "json_object"}], ids=["schema", "json"])
def test_tools_and_a_format_after_a_tool_result_are_voted_field_by_field(env, fmt):
    up, client = env
    wrong = 0
    for i in range(12):
        r = client.chat.completions.create(model="agent", messages=_history(i, fmt["type"]),
                                           tools=[WEATHER], response_format=fmt)
        msg, ens = r.choices[0].message, r.model_extra["ensemble"]
        assert msg.tool_calls is None and ens["fields"]["kind"]["decision"] == "text"
        voted = json.loads(msg.content)
        assert ens["decision"] == voted
        wrong += _check(up, f"sunny {i} {fmt['type']}", voted)
    assert wrong == 0


@pytest.mark.parametrize("fmt", [TICKET, {"type": "json_object"}], ids=["schema", "json"])
def test_a_server_with_choices_votes_a_requests_own_format(env, fmt):
    up, client = env
    prompt = f"Ticket 99: what is it about? ({fmt['type']})"
    r = client.chat.completions.create(model="abc", response_format=fmt,
                                       messages=[{"role": "user", "content": prompt}])
    assert _check(up, prompt, json.loads(r.choices[0].message.content)) == 0
