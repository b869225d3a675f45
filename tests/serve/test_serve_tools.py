"""Tool calls, JSON mode and the client's own formats at the endpoint (issue 30), driven by the
official openai SDK through real HTTP, the simulator (its tool, JSON-mode and format plans) as
the upstream. Every expectation is the plurality of what the upstream served for that prompt
(`stats.replies`), never a value written down."""

from __future__ import annotations

import json
from collections import Counter

import openai
import pytest

from ensemble.answers import Number, Text, tools_of
from ensemble.serve import VotingServer, parse_config
from ensemble.testing import FormatPlan, SimulatedServer, StructuredPlan, ToolPlan

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "days": {"type": "integer"}}, "required": ["city", "unit"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {
        "zone": {"type": "string"}}, "required": ["zone"]}}}
TOOLS = [WEATHER, TIME]
N = 7


def winners(values) -> set:
    counts = Counter(v for v in values if v is not None)
    top = max(counts.values())
    return {v for v, c in counts.items() if c == top}


def canonical(value):
    if isinstance(value, str):
        return Text().canonical(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Number().key_of(value)
    return value


def served(up: SimulatedServer, prompt: str) -> list:
    return [r for r in up.stats.replies if r.prompt == prompt]


@pytest.fixture(scope="module")
def upstream():
    with SimulatedServer(seed=7, tools=ToolPlan(accuracy=0.7), keep_replies=True,
                         structured=StructuredPlan({"city": "paris", "score": 7, "ok": True},
                                                   accuracy=0.7, missing_rate=0.2),
                         formats=FormatPlan(accuracy=0.7)) as up:
        yield up


@pytest.fixture(scope="module")
def client(upstream):
    cfg = parse_config({"port": 0, "models": {"agent": {
        "model": "openai/sim-expert", "api_base": upstream.base_url, "n": N,
        "temperature": 0.7}}})
    with VotingServer(cfg) as srv:
        yield openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)


def test_a_tool_call_is_voted_tool_then_argument_by_argument(client, upstream):
    for i in range(3):
        prompt = f"Step {i}: what do we look up?"
        r = client.chat.completions.create(model="agent", tools=TOOLS, tool_choice="auto",
                                           messages=[{"role": "user", "content": prompt}])
        msg, ens = r.choices[0].message, r.model_extra["ensemble"]
        assert r.choices[0].finish_reason == "tool_calls" and msg.content is None
        assert len(msg.tool_calls) == 1
        call = msg.tool_calls[0]
        args = json.loads(call.function.arguments)
        samples = [json.loads(cs[0]["function"]["arguments"]) | {"_": cs[0]["function"]["name"]}
                   for rep in served(upstream, prompt) for cs in rep.tool_calls]
        assert len(samples) == N
        assert call.function.name in winners(s["_"] for s in samples)
        assert ens["fields"]["kind"]["votes"] == {"tool_call": N}
        assert sum(ens["fields"]["tool"]["votes"].values()) == N
        chose = [s for s in samples if s["_"] == call.function.name]
        for name, value in args.items():
            assert canonical(value) in winners(canonical(s.get(name)) for s in chose), name
            assert f"arguments.{name}" in ens["fields"]
        tool = next(t for t in tools_of(TOOLS) if t.name == call.function.name)
        tool.arguments_kind().model.model_validate(args)  # valid against the tool's schema
        assert ens["decision"] == {"name": call.function.name, "arguments": args}
        # the tools and tool_choice reached the upstream as sent
        assert all(list(rep.tools) == TOOLS and rep.tool_choice == "auto"
                   for rep in served(upstream, prompt))


def test_a_tool_call_history_is_forwarded_unchanged(client, upstream):
    first = "Step 9: what do we look up?"
    r = client.chat.completions.create(model="agent", tools=TOOLS,
                                       messages=[{"role": "user", "content": first}])
    call = r.choices[0].message.tool_calls[0]
    history = [{"role": "user", "content": first},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": call.id, "type": "function",
                    "function": {"name": call.function.name,
                                 "arguments": call.function.arguments}}]},
               {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    r2 = client.chat.completions.create(model="agent", tools=TOOLS, messages=history)
    reps = served(upstream, "sunny, 21 C")
    assert reps and all(list(rep.messages) == history for rep in reps)
    ens = r2.model_extra["ensemble"]
    assert ens["fields"]["kind"]["decision"] == "text"  # after the result, a text reply
    assert r2.choices[0].message.content in {t for rep in reps for t in rep.texts}
    assert r2.choices[0].message.tool_calls is None


def test_a_streamed_tool_call_arrives_whole(client):
    chunks = list(client.chat.completions.create(
        model="agent", tools=TOOLS, stream=True,
        messages=[{"role": "user", "content": "Step 0: what do we look up?"}]))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and json.loads(calls[0].function.arguments) is not None
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_json_mode_is_voted_key_by_key_a_missing_key_abstaining(client, upstream):
    prompt = "Describe the city as JSON."
    r = client.chat.completions.create(model="agent", response_format={"type": "json_object"},
                                       messages=[{"role": "user", "content": prompt}])
    voted, ens = json.loads(r.choices[0].message.content), r.model_extra["ensemble"]
    docs = [json.loads(t[t.index("{"):]) for rep in served(upstream, prompt) for t in rep.texts]
    assert len(docs) == N and voted == ens["decision"]
    for key in ("city", "score", "ok"):
        given = [d[key] for d in docs if key in d]
        assert sum(ens["fields"][key]["votes"].values()) == len(given)  # the rest abstained
        assert canonical(voted[key]) in winners(canonical(v) for v in given)


def test_dspy_sections_are_voted_field_by_field(client, upstream):
    prompt = ("[[ ## question ## ]]\nWhich city?\n\nRespond with the corresponding output "
              "fields, starting with the field `[[ ## reasoning ## ]]`, then `[[ ## answer ## ]]`"
              ", and then ending with the marker for `[[ ## completed ## ]]`.")
    r = client.chat.completions.create(model="agent",
                                       messages=[{"role": "user", "content": prompt}])
    text, ens = r.choices[0].message.content, r.model_extra["ensemble"]
    assert text.endswith("[[ ## completed ## ]]")
    texts = [t for rep in served(upstream, prompt) for t in rep.texts]
    for field in ("reasoning", "answer"):
        values = [t.split(f"[[ ## {field} ## ]]\n")[1].split("\n\n")[0] for t in texts]
        got = text.split(f"[[ ## {field} ## ]]\n")[1].split("\n\n")[0]
        assert Text().canonical(got) in winners(Text().canonical(v) for v in values)
        assert sum(ens["fields"][field]["votes"].values()) == N


def test_inspect_answer_lines_are_voted(client, upstream):
    prompt = ("Answer the following multiple choice question. The entire content of your "
              "response should be of the following format: 'ANSWER: $LETTER' (without "
              "quotes) where LETTER is one of A,B,C.\n\nWhich?\n\nA) one\nB) two\nC) three")
    r = client.chat.completions.create(model="agent",
                                       messages=[{"role": "user", "content": prompt}])
    ens = r.model_extra["ensemble"]
    letters = [t.rsplit("ANSWER: ", 1)[1] for rep in served(upstream, prompt)
               for t in rep.texts]
    assert ens["decision"] in winners(letters)
    assert r.choices[0].message.content.rstrip().endswith(f"ANSWER: {ens['decision']}")


def test_free_text_is_voted_and_the_reply_says_so():
    """Issue 38 item 5: replies in no known format are voted as free text (they abstained,
    and the reply was the first sample's); the reply names how."""
    with SimulatedServer(seed=2, invalid_rate=1.0, keep_replies=True) as up:
        cfg = parse_config({"port": 0, "models": {"agent": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 3,
            "temperature": 0.7}}})
        with VotingServer(cfg) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
            r = client.chat.completions.create(
                model="agent", messages=[{"role": "user", "content": "Anything?"}])
            ens = r.model_extra["ensemble"]
            texts = [t for rep in up.stats.replies for t in rep.texts]
            assert ens["invalid"] == 0 and ens["votes"] == {
                "text: i cannot decide which box it is": 3}
            assert r.choices[0].message.content in texts
            assert ens["voted_as"].startswith("free text")


@pytest.mark.parametrize("extra, param", [
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice"),
    ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools"),
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "array"}}}]}, "tools"),
])
def test_bad_tools_are_a_400_naming_the_parameter(client, extra, param):
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model="agent", messages=[{"role": "user", "content": "x"}],
                                       **extra)
    assert ei.value.body["param"] == param and "\n" not in ei.value.body["message"]
