"""Tool calls voted (issue 30): `Ensemble(tools=[...])` sends the tools upstream, and the vote
decides the kind of reply, then the tool, then each argument with the kind its JSON schema
implies. The simulated server plants a call per prompt with seeded noise; every expectation is
computed from what it served for that prompt (`stats.replies`), never written down."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ensemble import Ensemble
from ensemble.answers import Number, Text, ToolCall, ToolCalls, tools_of
from ensemble.errors import InputError
from ensemble.providers.toolcalls import read_tool_calls, reply_text
from ensemble.testing import SimulatedServer, ToolPlan

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": "integer"}}, "required": ["city", "unit"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {
        "zone": {"type": "string"}}, "required": ["zone"]}}}
TOOLS = [WEATHER, TIME]


def winners(values) -> set:
    """The plurality winners (all of them, when tied) of some canonical values."""
    counts = Counter(v for v in values if v is not None)
    top = max(counts.values())
    return {v for v, c in counts.items() if c == top}


def served_calls(up: SimulatedServer, prompt: str) -> list[dict | None]:
    """Each sample the upstream served for a prompt: its first call's name and arguments, or
    None for a text reply."""
    out: list[dict | None] = []
    for rep in up.stats.replies:
        if rep.prompt == prompt:
            for calls in rep.tool_calls:
                out.append({"name": calls[0]["function"]["name"],
                            "arguments": json.loads(calls[0]["function"]["arguments"])}
                           if calls else None)
    return out


def canonical(value):
    if isinstance(value, str):
        return Text().canonical(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Number().key_of(value)
    return value


def test_the_vote_is_the_plurality_of_what_was_served_part_by_part():
    with SimulatedServer(seed=3, tools=ToolPlan(accuracy=0.7), keep_replies=True) as up:
        ens = Ensemble("openai/sim-expert", api_base=up.base_url, n=9, temperature=0.7,
                       tools=TOOLS, seed=0)
        for i in range(4):
            prompt = f"Task {i}: what should we look up?"
            d = ens.decide(prompt)
            served = served_calls(up, prompt)
            assert len(served) == 9 and all(s is not None for s in served)
            assert d.fields["kind"].value == "tool_call"
            assert d.tool_call is not None and d.decision == d.tool_call
            assert d.tool_call.name in winners(s["name"] for s in served)
            assert sum(d.fields["tool"].counts.values()) == 9
            chose = [s for s in served if s["name"] == d.tool_call.name]
            for arg, value in d.tool_call.arguments.items():
                got = winners(canonical(s["arguments"].get(arg)) for s in chose)
                assert canonical(value) in got, (arg, value, got)
                assert sum(d.fields[f"arguments.{arg}"].counts.values()) <= len(chose)
            # valid against the tool's schema: the required arguments, typed
            tool = next(t for t in tools_of(TOOLS) if t.name == d.tool_call.name)
            tool.arguments_kind().model.model_validate(d.tool_call.arguments)
        # the tools reached the upstream with every request
        assert up.stats.requests >= 1


def test_a_text_majority_is_voted_as_text_among_the_text_replies():
    plan = ToolPlan(accuracy=0.9, text_rate=0.8)
    with SimulatedServer(seed=1, tools=plan, keep_replies=True) as up:
        ens = Ensemble("openai/sim-expert", api_base=up.base_url, n=9, temperature=0.7,
                       tools=TOOLS, answer="text")
        d = ens.decide("Say hello, or call a tool.")
        served = served_calls(up, "Say hello, or call a tool.")
        assert winners("tool_call" if s else "text" for s in served) == {"text"}
        assert d.fields["kind"].value == "text"
        assert d.tool_call is None and d.tool_calls == ()
        assert d.decision == "direct"  # the simulator's text reply's ANSWER:


def test_parallel_calls_are_voted_position_by_position():
    with SimulatedServer(seed=4, tools=ToolPlan(accuracy=0.8, parallel=2),
                         keep_replies=True) as up:
        ens = Ensemble("openai/sim-expert", api_base=up.base_url, n=7, temperature=0.7,
                       tools=TOOLS)
        prompt = "Look two things up."
        d = ens.decide(prompt)
        assert len(d.tool_calls) == 2 and d.fields["calls"].value == "2"
        rows = [calls for rep in up.stats.replies if rep.prompt == prompt
                for calls in rep.tool_calls]
        for i, call in enumerate(d.tool_calls):
            names = [c[i]["function"]["name"] for c in rows]
            assert call.name in winners(names)
            assert f"calls[{i}].tool" in d.fields


def test_a_tool_call_is_kept_as_text_and_read_back():
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_time", "arguments": '{"zone": "UTC"}'}}
    text = reply_text(None, [call])
    assert text is not None and read_tool_calls(text).tool_calls == (call,)
    assert reply_text("plain", None) == "plain" and read_tool_calls("plain") is None
    kind = ToolCalls(TOOLS)
    assert kind.parse(text) == 'get_time {"zone":"UTC"}'  # readable in Decision.votes
    assert kind.parse("<answer>hi</answer>") == "text: hi"
    assert ToolCall("get_time", {"zone": "UTC"}).to_openai()["function"]["arguments"] \
        == '{"zone": "UTC"}'


@pytest.mark.parametrize("tools, message", [
    ([{"type": "web_search"}], "only function tools"),
    ([{"type": "function", "function": {"description": "x"}}], "needs a name"),
    ([WEATHER, WEATHER], "named twice"),
    ([], "non-empty list"),
])
def test_bad_tools_are_one_line(tools, message):
    with pytest.raises(InputError, match=message):
        Ensemble("openai/sim-expert", api_base="http://127.0.0.1:9/v1", tools=tools)


def test_the_responses_api_form_of_a_tool_is_read_too():
    flat = [{"type": "function", "name": "get_time", "parameters": TIME["function"]["parameters"]}]
    assert [t.name for t in tools_of(flat)] == ["get_time"]


def test_free_form_arguments_are_voted_key_by_key_not_dropped():
    tools = [{"type": "function", "function": {"name": "run"}},  # no parameters declared
             {"type": "function", "function": {"name": "set", "parameters": {
                 "type": "object", "properties": {"opts": {"type": "object"}}}}}]
    from ensemble.aggregators import get_aggregator

    rule = get_aggregator("plurality", open=True)
    kind = ToolCalls(tools)

    def vote(name, args_list):
        texts = [reply_text(None, [{"id": "c", "type": "function", "function": {
            "name": name, "arguments": json.dumps(a)}}]) for a in args_list]
        return kind.vote_fields([kind.parse(t) for t in texts], lambda keys: rule(keys))

    call, fields = vote("run", [{"cmd": "ls", "n": 2}, {"cmd": "ls", "n": 3}, {"cmd": "ls"}])
    assert call.arguments["cmd"] == "ls" and fields["arguments.n"].n_invalid == 1
    call, _ = vote("set", [{"opts": {"a": 1}}, {"opts": {"a": 1}}, {"opts": {"b": 2}}])
    assert call.arguments == {"opts": {"a": 1}}


def test_tool_calls_are_stored_and_voted_again_from_the_store(tmp_path):
    store = str(tmp_path / "s.db")
    with SimulatedServer(seed=6, tools=ToolPlan(accuracy=0.7)) as up:
        kw = dict(api_base=up.base_url, n=5, temperature=0.7, tools=TOOLS, store=store, seed=0)
        with Ensemble("openai/sim-expert", **kw) as ens:
            first = ens.decide("Look it up.")
        requests = up.stats.requests
        with Ensemble("openai/sim-expert", **kw) as ens:
            again = ens.decide("Look it up.")
        assert up.stats.requests == requests  # nothing asked twice
        assert all(s.cached for s in again.samples)
        assert again.tool_call == first.tool_call and again.votes == first.votes
        # another tool set is another request: not read from the first one's samples
        with Ensemble("openai/sim-expert", **{**kw, "tools": [TIME]}) as ens:
            ens.decide("Look it up.")
        assert up.stats.requests > requests


def test_array_and_dict_arguments_are_voted_by_their_parts():
    """38 (the Python API's half of item 4): a tool's array and dict arguments are voted as
    serve votes a client's schema, element by element and key by key, not as exact JSON
    (where case variants split one answer: here the exact-JSON plurality is the 2-of-5 wrong
    ["crash"] and {"x": 9})."""
    tools = [{"type": "function", "function": {"name": "tag", "parameters": {
        "type": "object", "required": ["tags", "counts"], "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}}}}}}]
    from ensemble.aggregators import get_aggregator

    rule = get_aggregator("plurality", open=True)
    kind = ToolCalls(tools)
    args = [{"tags": ["Bug", "ui"], "counts": {"a": 1, "b": 2}},
            {"tags": ["bug", "UI"], "counts": {"a": 1, "b": 3}},
            {"tags": ["bug.", "ui"], "counts": {"b": 2, "a": 2}},
            {"tags": ["crash"], "counts": {"x": 9}},
            {"tags": ["crash"], "counts": {"x": 9}}]
    texts = [reply_text(None, [{"id": "c", "type": "function", "function": {
        "name": "tag", "arguments": json.dumps(a)}}]) for a in args]
    call, fields = kind.vote_fields([kind.parse(t) for t in texts], lambda keys: rule(keys))
    assert call.arguments["tags"] in (["bug", "ui"], ["Bug", "ui"])
    assert [t.lower() for t in call.arguments["tags"]] == ["bug", "ui"]
    assert call.arguments["counts"] == {"a": 1, "b": 2}
    assert fields["arguments.tags[len]"].votes == {"2": 3, "1": 2}
    assert fields["arguments.counts.a"].votes == {"1": 2, "2": 1}
