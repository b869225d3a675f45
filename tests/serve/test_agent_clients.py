"""Agents through `ensemble serve` (issue 38 item 9): each client runs its own agent loop, as
its users write it, against the endpoint over loopback: the model calls a tool, the client runs
it and sends its result back, and the loop ends with a typed answer (a json_schema
response_format, or the Responses API's text.format). The upstream plants close splits in both
steps (tests/serve/agent_helpers.py): every voted tool call and typed answer is checked field
by field against the plurality of what the upstream served for that step, and against the
most common whole object, which is wrong. The vote is read as each client's users can read
it: response headers kept by an event hook on the client's own openai HTTP client, or (for
pydantic-ai) the reply's unmapped `ensemble` field.

Clients: the OpenAI Agents SDK (its default Responses model, and its chat-completions model),
pydantic-ai (`NativeOutput`, over chat completions), LangChain (`bind_tools(...,
response_format=Ticket)`, what its `ProviderStrategy` binds) and the official SDK's Responses
API (`responses.parse(text_format=...)` with function tools) and chat completions
(`chat.completions.parse(tools=..., response_format=Ticket)`); instructor is
test_instructor.py."""

from __future__ import annotations

import asyncio
import itertools
import json
from importlib.util import find_spec
from typing import Any

import pytest
from agent_helpers import (
    SERVE_KEY,
    Ticket,
    agent_endpoint,
    vote_headers,
    weather_report,
    wrong_fields,
)

if find_spec("agents") is None or find_spec("pydantic_ai") is None:
    pytest.skip("pip install -e '.[dev]' (openai-agents, pydantic-ai-slim)",
                allow_module_level=True)

PROMPTS = 12  # per client: each a tool step and a typed step, both voted and checked
INSTRUCTIONS = "Look up the weather with the tool, then triage the ticket."
WEATHER_ARGS = {"type": "object", "additionalProperties": False, "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "days", "unit"]}


@pytest.fixture(scope="module")
def env():
    with agent_endpoint(seed=38) as (up, srv):
        yield up, srv


def _client(srv, hook):
    import openai

    return openai.AsyncOpenAI(base_url=srv.base_url, api_key=SERVE_KEY, max_retries=0,
                              http_client=openai.DefaultAsyncHttpxClient(
                                  event_hooks={"response": [hook]}))


def _check_vote_headers(seen: list[dict[str, str]], steps: int) -> None:
    """Every reply carried the vote in its headers: 5 samples, a decision, its votes."""
    assert len(seen) == steps
    for h in seen:
        assert h["x-ensemble-samples"] == "5" and h["x-ensemble-decision"]
        assert sum(json.loads(h["x-ensemble-votes"]).values()) == 5
        assert 0 < float(h["x-ensemble-agreement"]) <= 1


def _tool_step(up, prompt: str, call_args: dict[str, Any]) -> int:
    """The voted tool call's arguments against the planted splits of the step."""
    return wrong_fields(up, prompt, call_args)


# -- the OpenAI Agents SDK --------------------------------------------------------------------
@pytest.mark.parametrize("api", ["responses", "chat"])
def test_agents_sdk_tool_then_typed_output(env, api):
    import agents

    agents.set_tracing_disabled(True)  # no trace export to OpenAI from a test
    up, srv = env
    seen, hook = vote_headers()
    client = _client(srv, hook)
    model = (agents.OpenAIResponsesModel("agent", client) if api == "responses"
             else agents.OpenAIChatCompletionsModel("agent", client))
    steps = itertools.count()
    calls: list[dict[str, Any]] = []

    @agents.function_tool
    def get_weather(city: str, days: int, unit: str) -> str:
        """The weather forecast for a city."""
        calls.append({"city": city, "days": days, "unit": unit})
        return weather_report(city, days, unit, f"agents-{api}-{next(steps)}")

    agent = agents.Agent(name="triage", instructions=INSTRUCTIONS, model=model,
                         tools=[get_weather], output_type=Ticket)
    prompts = PROMPTS if api == "responses" else 3

    async def run_all() -> int:
        wrong = 0
        for i in range(prompts):
            question = f"Ticket {i} ({api}): the app crashes when it rains. Triage it."
            result = await agents.Runner.run(agent, question, max_turns=4)
            ticket = result.final_output
            assert isinstance(ticket, Ticket)
            assert len(calls) == i + 1  # one tool call, run by the SDK, then the answer
            wrong += _tool_step(up, question, calls[-1])
            report = weather_report(**calls[-1], step=f"agents-{api}-{i}")
            wrong += wrong_fields(up, report, ticket.model_dump())
        return wrong

    assert asyncio.run(run_all()) == 0
    _check_vote_headers(seen, 2 * prompts)


# -- pydantic-ai ----------------------------------------------------------------------------
def test_pydantic_ai_tool_then_native_output(env):
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
    from pydantic_ai.providers.openai import OpenAIProvider

    up, srv = env
    seen, hook = vote_headers()
    model = OpenAIChatModel("agent", provider=OpenAIProvider(openai_client=_client(srv, hook)))
    settings = OpenAIChatModelSettings(openai_include_unmapped_response_data=True)
    agent = Agent(model, output_type=NativeOutput(Ticket), instructions=INSTRUCTIONS,
                  model_settings=settings)
    steps = itertools.count()
    calls: list[dict[str, Any]] = []

    @agent.tool_plain
    def get_weather(city: str, days: int, unit: str) -> str:
        """The weather forecast for a city."""
        calls.append({"city": city, "days": days, "unit": unit})
        return weather_report(city, days, unit, f"pydantic-ai-{next(steps)}")

    async def run_all() -> int:
        wrong = 0
        for i in range(PROMPTS):
            question = f"Ticket {i} (pydantic-ai): the app crashes when it rains. Triage it."
            result = await agent.run(question)
            assert isinstance(result.output, Ticket) and len(calls) == i + 1
            wrong += _tool_step(up, question, calls[-1])
            report = weather_report(**calls[-1], step=f"pydantic-ai-{i}")
            wrong += wrong_fields(up, report, result.output.model_dump())
            # the vote, as pydantic-ai keeps it: the reply's unmapped `ensemble` field
            ens = result.response.provider_details["unmapped"]["response"]["ensemble"]
            assert ens["decision"] == result.output.model_dump() and ens["samples"] == 5
        return wrong

    assert asyncio.run(run_all()) == 0
    _check_vote_headers(seen, 2 * PROMPTS)


# -- LangChain ------------------------------------------------------------------------------
def test_langchain_bind_tools_with_a_response_format(env):
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    up, srv = env
    chat = ChatOpenAI(model="agent", base_url=srv.base_url, api_key=SERVE_KEY, max_retries=0,
                      include_response_headers=True)
    steps = itertools.count()

    @tool
    def get_weather(city: str, days: int, unit: str) -> str:
        """The weather forecast for a city."""
        return weather_report(city, days, unit, f"langchain-{next(steps)}")

    bound = chat.bind_tools([get_weather], response_format=Ticket, strict=True)
    wrong = 0
    for i in range(PROMPTS):
        question = f"Ticket {i} (langchain): the app crashes when it rains. Triage it."
        history: list[Any] = [SystemMessage(INSTRUCTIONS), HumanMessage(question)]
        first = bound.invoke(history)
        (call,) = first.tool_calls
        wrong += _tool_step(up, question, call["args"])
        result = get_weather.invoke(call)  # the ToolMessage LangChain's agents send back
        history += [first, result]
        final = bound.invoke(history)
        ticket = final.additional_kwargs["parsed"]
        assert isinstance(ticket, Ticket) and not final.tool_calls
        wrong += wrong_fields(up, result.content, ticket.model_dump())
        headers = final.response_metadata["headers"]
        assert json.loads(headers["x-ensemble-decision"]) == ticket.model_dump()
    assert wrong == 0


# -- the official SDK's Responses API ---------------------------------------------------------
def test_openai_responses_function_tools_then_text_format(env):
    import openai

    up, srv = env
    client = openai.OpenAI(base_url=srv.base_url, api_key=SERVE_KEY, max_retries=0)
    tool = {"type": "function", "name": "get_weather", "strict": True,
            "parameters": WEATHER_ARGS}
    wrong = 0
    for i in range(PROMPTS):
        question = f"Ticket {i} (openai responses): the app crashes when it rains. Triage it."
        items: list[Any] = [{"role": "user", "content": question}]
        first = client.responses.parse(model="agent", instructions=INSTRUCTIONS, input=items,
                                       tools=[tool], text_format=Ticket)
        (call,) = [o for o in first.output if o.type == "function_call"]
        args = json.loads(call.arguments)
        wrong += _tool_step(up, question, args)
        report = weather_report(**args, step=f"openai-responses-{i}")
        items += [{"type": "function_call", "call_id": call.call_id, "name": call.name,
                   "arguments": call.arguments},
                  {"type": "function_call_output", "call_id": call.call_id, "output": report}]
        final = client.responses.parse(model="agent", instructions=INSTRUCTIONS, input=items,
                                       tools=[tool], text_format=Ticket)
        ticket = final.output_parsed
        assert isinstance(ticket, Ticket)
        wrong += wrong_fields(up, report, ticket.model_dump())
        assert json.loads(final.metadata["ensemble_decision"]) == ticket.model_dump()
    assert wrong == 0


# -- the official SDK's chat completions ------------------------------------------------------
def test_openai_chat_tools_then_parse(env):
    """The loop an openai SDK user writes by hand: `chat.completions.parse` with a strict
    function tool and `response_format=Ticket`; the tool's call, its result, the typed answer."""
    import openai

    up, srv = env
    seen, hook = vote_headers(sync=True)
    client = openai.OpenAI(base_url=srv.base_url, api_key=SERVE_KEY, max_retries=0,
                           http_client=openai.DefaultHttpxClient(
                               event_hooks={"response": [hook]}))
    tool = {"type": "function", "function": {"name": "get_weather", "strict": True,
                                             "parameters": WEATHER_ARGS}}
    wrong = 0
    for i in range(PROMPTS):
        question = f"Ticket {i} (openai chat): the app crashes when it rains. Triage it."
        messages: list[Any] = [{"role": "system", "content": INSTRUCTIONS},
                               {"role": "user", "content": question}]
        first = client.chat.completions.parse(model="agent", messages=messages, tools=[tool],
                                              response_format=Ticket)
        (call,) = first.choices[0].message.tool_calls
        args = json.loads(call.function.arguments)
        wrong += _tool_step(up, question, args)
        report = weather_report(**args, step=f"openai-chat-{i}")
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": report}]
        final = client.chat.completions.parse(model="agent", messages=messages, tools=[tool],
                                              response_format=Ticket)
        ticket = final.choices[0].message.parsed
        assert isinstance(ticket, Ticket) and not final.choices[0].message.tool_calls
        wrong += wrong_fields(up, report, ticket.model_dump())
        assert final.model_extra["ensemble"]["decision"] == ticket.model_dump()
    assert wrong == 0
    _check_vote_headers(seen, 2 * PROMPTS)

