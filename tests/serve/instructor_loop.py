"""instructor's agent loop against `ensemble serve`, run by tests/serve/test_instructor.py
with the Python of instructor's own venv (instructor pins jiter<0.15, which the openai SDK of
the [dev] extra cannot share; tests/serve/instructor-requirements.txt): it imports instructor,
openai and pydantic only, never `ensemble`.

    python instructor_loop.py BASE_URL KEY MODE=PROMPTS[,MODE=PROMPTS...]

Per prompt: the model calls the weather tool (instructor's client with `response_model=None`:
the raw completion), the loop runs the tool and sends its result back, and instructor asks for
the typed `Ticket` in MODE (`tools`: its default, a forced function call; `json_schema`: a
response_format). One JSON line per prompt on stdout: the question, the voted tool arguments,
the tool's report, the ticket, the vote as the completion carries it and the x-ensemble-*
headers of each reply."""

from __future__ import annotations

import json
import sys
from typing import Any, Literal

import instructor
import openai
from pydantic import BaseModel


class Ticket(BaseModel):
    """The agent's typed answer (as tests/serve/agent_helpers.py's)."""

    label: Literal["bug", "feature", "docs", "question"]
    city: str
    days: int


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather forecast for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "days", "unit"]}}}


def weather_report(city: str, days: int, unit: str, step: str) -> str:
    """The tool (as tests/serve/agent_helpers.py's)."""
    return f"Forecast for {city}, {days} days, in {unit}: sunny. (report {step})"


def main(base_url: str, key: str, runs: str) -> None:
    seen: list[dict[str, str]] = []

    def keep(response: Any) -> None:
        seen.append({k: v for k, v in response.headers.items() if k.startswith("x-ensemble-")})

    raw = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0,
                        http_client=openai.DefaultHttpxClient(event_hooks={"response": [keep]}))
    modes = {"tools": instructor.Mode.TOOLS, "json_schema": instructor.Mode.JSON_SCHEMA}
    for run in runs.split(","):
        mode, prompts = run.split("=")
        loop(instructor.from_openai(raw, mode=modes[mode]), mode, int(prompts), seen)


def loop(client: Any, mode: str, prompts: int, seen: list[dict[str, str]]) -> None:
    for i in range(prompts):
        question = f"Ticket {i} (instructor {mode}): the app crashes when it rains. Triage it."
        messages: list[Any] = [
            {"role": "system", "content": "Look up the weather, then triage the ticket."},
            {"role": "user", "content": question}]
        before = len(seen)
        first = client.chat.completions.create(model="agent", response_model=None,
                                               messages=messages, tools=[WEATHER])
        msg = first.choices[0].message
        (call,) = msg.tool_calls
        args = json.loads(call.function.arguments)
        report = weather_report(**args, step=f"instructor-{mode}-{i}")
        messages += [{"role": "assistant", "content": msg.content,
                      "tool_calls": [c.model_dump() for c in msg.tool_calls]},
                     {"role": "tool", "tool_call_id": call.id, "content": report}]
        ticket, completion = client.chat.completions.create_with_completion(
            model="agent", response_model=Ticket, messages=messages, max_retries=1)
        print(json.dumps({"mode": mode, "question": question, "tool_args": args, "report": report,
                          "ticket": ticket.model_dump(),
                          "ensemble": (completion.model_extra or {}).get("ensemble"),
                          "headers": seen[before:]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
