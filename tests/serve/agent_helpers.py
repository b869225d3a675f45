"""What the agent-loop client tests share (tests/serve/test_agent_clients.py,
test_instructor.py): the upstream's planted close splits and the checks of a vote against what
the upstream served.

The upstream plants close splits in every step of an agent's loop: the tool call's arguments
(`ToolPlan(splits=True)`) and the typed answer after the tool's result (`StructuredPlan(
splits=True)`): of the 5 samples of a step each field is right in 3, and the most common whole
object (2 of the 5, identical) is wrong on the last field. A step voted by whole objects
answers that object; a step voted field by field the planted one. `wrong_fields` counts the
fields of a voted object that are not their field's plurality among the samples served for
that step (found by the step's prompt: the last message's text), and checks the trap was
planted."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import BaseModel

from ensemble.serve import RequestLog, VotingServer, parse_config
from ensemble.testing import SimulatedServer, StructuredPlan, ToolPlan

SERVE_KEY = "serve-key-for-agents-4567"
LABELS = ("bug", "feature", "docs", "question")


class Ticket(BaseModel):
    """The agent's typed answer."""

    label: Literal["bug", "feature", "docs", "question"]
    city: str
    days: int


def weather_report(city: str, days: int, unit: str, step: str) -> str:
    """The agent's tool: a text unique to the step, so each typed step has its own prompt."""
    return f"Forecast for {city}, {days} days, in {unit}: sunny. (report {step})"


def canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


@contextmanager
def agent_endpoint(seed: int) -> Iterator[tuple[SimulatedServer, VotingServer]]:
    """A simulated upstream planting close splits in tool calls and typed answers, and
    `ensemble serve` (n = 5, no --choices) in front of it as the served name `agent`."""
    with SimulatedServer(seed=seed, keep_replies=True, tools=ToolPlan(splits=True),
                         structured=StructuredPlan(splits=True)) as up:
        cfg = parse_config({"port": 0, "models": {"agent": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 5}}})
        with VotingServer(cfg, api_key=SERVE_KEY, log=RequestLog(sink=lambda _: None)) as srv:
            yield up, srv


def served_objects(up: SimulatedServer, prompt: str) -> list[dict[str, Any]]:
    """The 5 objects the upstream served for a step: tool-call arguments, else JSON texts."""
    reps = [r for r in up.stats.replies if r.prompt == prompt]
    out: list[dict[str, Any]] = []
    for r in reps:
        for text, calls in zip(r.texts, r.tool_calls or ((),) * len(r.texts), strict=True):
            if calls:
                out.append(json.loads(calls[0]["function"]["arguments"]))
            elif text:
                out.append(json.loads(text[text.index("{"):text.rindex("}") + 1]))
    assert len(out) == 5, (prompt, reps)
    return out


def wrong_fields(up: SimulatedServer, prompt: str, voted: Mapping[str, Any]) -> int:
    """How many fields of `voted` are not their field's plurality among the 5 objects served
    for `prompt` (with the trap checked: the most common whole object, 2 of 5, is not the
    voted one, and each field's plurality is 3 of 5)."""
    docs = served_objects(up, prompt)
    whole = Counter(canon(d) for d in docs).most_common(1)[0]
    assert whole[1] == 2 and canon(dict(voted)) != whole[0], (docs, voted)
    wrong = 0
    for name in docs[0]:
        top = Counter(canon(d[name]) for d in docs).most_common(1)[0]
        assert top[1] == 3, (name, docs)
        wrong += canon(voted.get(name)) != top[0]
    return wrong


def vote_headers(*, sync: bool = False) -> tuple[list[dict[str, str]], Callable[..., Any]]:
    """Where a client's openai HTTP client keeps each reply's x-ensemble-* headers, and the
    event hook that keeps them (the recipe docs/serve.md gives; `sync`: for a sync client)."""
    seen: list[dict[str, str]] = []

    def keep_sync(response: Any) -> None:
        seen.append({k: v for k, v in response.headers.items() if k.startswith("x-ensemble-")})

    async def keep(response: Any) -> None:
        keep_sync(response)

    return seen, keep_sync if sync else keep
