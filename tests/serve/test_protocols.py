"""The endpoint's other doors, driven by the official openai SDK over real HTTP with the
simulated server as the upstream: the Responses API (plain, streamed, json_schema, logprobs,
its stateless refusals), `GET /v1/models/{id}`, the legacy Completions API, and logprobs on chat.

Each voted result is checked against what the upstream served for that prompt
(`SimulatedServer(keep_replies=True)`): the decision is the plurality of those samples, the text
the first sample that voted for it, the logprobs exactly that sample's, the usage their sum."""

from __future__ import annotations

import json
from collections import Counter
from typing import Literal

import openai
import pytest
from pydantic import BaseModel

from ensemble.sampling.parsing import choice_parser
from ensemble.serve import RequestLog, VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer, StructuredPlan, ToolPlan

PARSE = choice_parser(["L", "R"])
QS = get_task("boxball").questions()


class Verdict(BaseModel):
    label: Literal["yes", "no", "maybe"]
    score: int


@pytest.fixture(scope="module")
def env():
    lines: list[str] = []
    with SimulatedServer(lam1=1.0, seed=21, keep_replies=True) as up, \
            SimulatedServer(seed=22, structured=StructuredPlan({"label": "no", "score": 7},
                                                               accuracy=0.7),
                            keep_replies=True) as judge_up:
        cfg = parse_config({"port": 0, "models": {
            "vote": {"model": "openai/sim-expert", "api_base": up.base_url, "n": 5,
                     "temperature": 1.0, "choices": ["L", "R"]},
            "judge": {"model": "openai/sim-expert", "api_base": judge_up.base_url, "n": 5,
                      "temperature": 0.7}}})
        with VotingServer(cfg, log=RequestLog(sink=lines.append)) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
            yield {"up": up, "judge": judge_up, "client": client, "lines": lines}


def _served(up, prompt):
    """Per sample in index order: (text, logprobs) the upstream served for a prompt, and the
    prompt and completion tokens it reported."""
    reps = sorted((r for r in up.stats.replies if r.prompt == prompt), key=lambda r: r.indices)
    samples = [(t, r.logprobs[j] if r.logprobs else None)
               for r in reps for j, t in enumerate(r.texts)]
    return samples, sum(r.prompt_tokens for r in reps), sum(r.completion_tokens for r in reps)


def _chosen(up, prompt, ens):
    """The sample the reply must carry: the first one drawn that voted for the plurality."""
    samples, _, _ = _served(up, prompt)
    votes = Counter(a for a in (PARSE(t) for t, _ in samples) if a is not None)
    assert ens["votes"] == dict(votes) and ens["samples"] == len(samples) == 5
    assert votes[ens["decision"]] == max(votes.values())
    return next(s for s in samples if PARSE(s[0]) == ens["decision"])


def test_responses_create_answers_with_the_plurality_of_the_served_samples(env):
    prompt = QS[0].prompt
    r = env["client"].responses.create(model="vote", input=prompt)
    assert r.object == "response" and r.status == "completed" and r.model == "vote"
    ens = r.model_extra["ensemble"]
    text, _ = _chosen(env["up"], prompt, ens)
    assert r.output_text == text and PARSE(r.output_text) == ens["decision"]
    _, ptoks, ctoks = _served(env["up"], prompt)
    assert (r.usage.input_tokens, r.usage.output_tokens) == (ptoks, ctoks)
    assert r.store is False  # stateless: nothing was kept


def test_responses_instructions_and_message_list_reach_the_upstream(env):
    prompt, system = QS[1].prompt, "Answer with one letter after thinking it through."
    r = env["client"].responses.create(
        model="vote", instructions=system, temperature=0.2,
        input=[{"role": "user", "content": [{"type": "input_text", "text": prompt}]}])
    ens = r.model_extra["ensemble"]
    text, _ = _chosen(env["up"], prompt, ens)
    assert r.output_text == text and r.instructions == system
    # the upstream counted the instructions' words in every request's prompt
    reps = [x for x in env["up"].stats.replies if x.prompt == prompt]
    assert all(x.prompt_tokens == len(system.split()) + len(prompt.split()) for x in reps)
    assert ens["ignored"] == ["temperature"]


def test_responses_stream_is_the_standard_event_sequence(env):
    prompt = QS[2].prompt
    events = list(env["client"].responses.create(model="vote", input=prompt, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    done = events[-1].response
    ens = done.model_extra["ensemble"]
    text, _ = _chosen(env["up"], prompt, ens)
    assert deltas == done.output_text == text
    # the SDK's own stream helper accumulates the same response
    with env["client"].responses.stream(model="vote", input=prompt) as stream:
        final = stream.get_final_response()
    assert final.output_text == text


def test_responses_json_schema_is_voted_field_by_field(env):
    prompt = "Review 1: is it good? Give a label and a score."
    r = env["client"].responses.parse(model="judge", input=prompt, text_format=Verdict)
    ens = r.model_extra["ensemble"]
    served = [json.loads(t) for t, _ in _served(env["judge"], prompt)[0]]
    assert len(served) == 5
    for name in ("label", "score"):
        counts = Counter(doc[name] for doc in served)
        assert counts[ens["fields"][name]["decision"]] == max(counts.values())
    assert isinstance(ens["fields"]["score"]["decision"], int)  # 7, not "7"
    assert r.output_parsed == Verdict(**ens["decision"])


def test_responses_logprobs_are_the_chosen_samples_own(env):
    prompt = QS[3].prompt
    r = env["client"].responses.create(model="vote", input=prompt, top_logprobs=2,
                                       include=["message.output_text.logprobs"])
    text, served_lp = _chosen(env["up"], prompt, r.model_extra["ensemble"])
    got = r.output[0].content[0].logprobs
    assert r.output_text == text
    assert [(x.token, x.logprob) for x in got] == [(t["token"], t["logprob"])
                                                   for t in served_lp["content"]]


def test_responses_refuses_state_and_tools_in_one_line(env):
    c = env["client"]
    with pytest.raises(openai.BadRequestError) as ei:
        c.responses.create(model="vote", input="hi", previous_response_id="resp_123")
    body = ei.value.body
    assert body["param"] == "previous_response_id" and "stateless" in body["message"]
    assert "\n" not in body["message"]
    with pytest.raises(openai.BadRequestError) as ei:
        c.responses.create(model="vote", input=[{"type": "item_reference", "id": "x"}])
    assert ei.value.body["param"] == "input[0]"
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="nope", input="hi")


def test_models_retrieve(env):
    m = env["client"].models.retrieve("vote")
    assert m.id == "vote" and m.object == "model"
    assert m.model_extra["ensemble"]["members"] == [{"model": "openai/sim-expert", "n": 5,
                                                     "temperature": 1.0}]
    with pytest.raises(openai.NotFoundError) as ei:
        env["client"].models.retrieve("gpt-4o")
    assert ei.value.body["code"] == "model_not_found" and "vote" in ei.value.body["message"]


def test_completions_create_plain_streamed_and_with_logprobs(env):
    c, prompt = env["client"], QS[4].prompt
    r = c.completions.create(model="vote", prompt=prompt, logprobs=2)
    assert r.object == "text_completion"
    ens = r.model_extra["ensemble"]
    text, served_lp = _chosen(env["up"], prompt, ens)
    assert r.choices[0].text == text
    assert r.choices[0].logprobs.tokens == [t["token"] for t in served_lp["content"]]
    assert r.choices[0].logprobs.token_logprobs == [t["logprob"] for t in served_lp["content"]]
    _, ptoks, ctoks = _served(env["up"], prompt)
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (ptoks, ctoks)
    chunks = list(c.completions.create(model="vote", prompt=QS[5].prompt, stream=True))
    ens = chunks[-1].model_extra["ensemble"]
    assert "".join(ch.choices[0].text for ch in chunks) == _chosen(env["up"], QS[5].prompt,
                                                                   ens)[0]
    echoed = c.completions.create(model="vote", prompt=prompt, echo=True, logprobs=2)
    assert echoed.choices[0].text == prompt + text  # the same samples, the prompt before


def test_chat_logprobs_are_the_chosen_samples_own(env):
    c, prompt = env["client"], QS[6].prompt
    raw = c.chat.completions.with_raw_response.create(
        model="vote", logprobs=True, top_logprobs=2,
        messages=[{"role": "user", "content": prompt}])
    r = raw.parse()
    ens = r.model_extra["ensemble"]
    text, served_lp = _chosen(env["up"], prompt, ens)
    assert r.choices[0].message.content == text
    assert raw.http_response.json()["choices"][0]["logprobs"] == served_lp  # exactly
    assert r.choices[0].logprobs.content[1].logprob == served_lp["content"][1]["logprob"]
    assert "ignored" not in ens
    # streamed: the same logprobs ride on the first content chunk
    chunks = list(c.chat.completions.create(model="vote", logprobs=True, top_logprobs=2,
                                            stream=True,
                                            messages=[{"role": "user", "content": prompt}]))
    carried = [ch.choices[0].logprobs for ch in chunks if ch.choices and ch.choices[0].logprobs]
    assert len(carried) == 1 and carried[0].content == r.choices[0].logprobs.content


WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
               "required": ["city", "unit"]}}
TIME = {"type": "function", "name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}


@pytest.fixture(scope="module")
def agent():
    with SimulatedServer(seed=8, tools=ToolPlan(accuracy=0.7), keep_replies=True) as up:
        cfg = parse_config({"port": 0, "models": {"agent": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 7,
            "temperature": 0.7}}})
        with VotingServer(cfg) as srv:
            yield up, openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)


def _winners(values):
    counts = Counter(values)
    return {v for v, c in counts.items() if c == max(counts.values())}


def test_responses_tools_are_voted_tool_then_argument_by_argument(agent):
    up, c = agent
    prompt = "Step 1: what do we look up?"
    r = c.responses.create(model="agent", input=prompt, tools=[WEATHER, TIME])
    calls = [o for o in r.output if o.type == "function_call"]
    assert len(calls) == 1 and not [o for o in r.output if o.type == "message"]
    call, ens = calls[0], r.model_extra["ensemble"]
    samples = [(cs[0]["function"]["name"], json.loads(cs[0]["function"]["arguments"]))
               for rep in up.stats.replies if rep.prompt == prompt for cs in rep.tool_calls]
    assert len(samples) == 7 and ens["samples"] == 7
    assert call.name in _winners(name for name, _ in samples)
    args = json.loads(call.arguments)
    chose = [a for name, a in samples if name == call.name]
    for key, value in args.items():  # each argument the plurality among those that chose it
        assert str(value).lower() in _winners(str(a.get(key)).lower() for a in chose), key
    assert ens["decision"] == {"name": call.name, "arguments": args}
    # the tools reached the upstream in chat's form
    sent = [rep.tools for rep in up.stats.replies if rep.prompt == prompt]
    assert all([t["function"]["name"] for t in tools] == ["get_weather", "get_time"]
               for tools in sent)


def test_responses_tool_history_and_a_streamed_call(agent):
    up, c = agent
    first = "Step 2: what do we look up?"
    r = c.responses.create(model="agent", input=first, tools=[WEATHER, TIME])
    call = next(o for o in r.output if o.type == "function_call")
    history = [{"role": "user", "content": first},
               {"type": "function_call", "call_id": call.call_id, "name": call.name,
                "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id,
                "output": "sunny, 21 C"}]
    r2 = c.responses.create(model="agent", input=history, tools=[WEATHER, TIME])
    reps = [rep for rep in up.stats.replies if rep.prompt == "sunny, 21 C"]
    assert reps and all(list(rep.messages) == [
        {"role": "user", "content": first},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.call_id, "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "sunny, 21 C"}]
        for rep in reps)
    assert r2.output_text in {t for rep in reps for t in rep.texts}  # a text reply after it
    events = list(c.responses.create(model="agent", input=first, tools=[WEATHER, TIME],
                                     stream=True))
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.done" in kinds
    assert kinds[-1] == "response.completed"
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    voted = events[-1].response.model_extra["ensemble"]["decision"]
    assert {"name": done.name, "arguments": json.loads(done.arguments)} == voted
