"""The planted expert's tool calls, JSON objects and replies in a client's own format.

Tool calls (`ToolPlan`): a request with `tools` is answered with a tool call. Per prompt (the
last message's text) a tool and its arguments are planted: `calls[prompt]` = (name, arguments)
when given, else drawn from the request's tools by hash(seed, prompt) (the tool, then each
parameter from its JSON schema: an enum member, an integer in 0..99, a number with one
decimal, a boolean, a word). Each sample then calls the planted tool with probability
`accuracy` (else another tool, or a text reply with probability `text_rate`), and writes each
planted argument with probability `accuracy` (else a wrong one of the same type, as
`StructuredPlan` does); planted strings are respelled in case and punctuation and numbers
written as integers or floats, so a client comparing raw JSON splits one answer several ways.
With `splits=True` the arguments are close splits instead (`StructuredPlan.split_rows` over
the tool's parameters: each argument right in 3 of 5 samples, the most common whole set of
arguments wrong on the last one), the tool always the planted one. A request whose
`tool_choice` names a function (`{"type": "function", "function": {"name": ...}}`, what
instructor and `with_structured_output` send) gets a call to that function from every sample,
as OpenAI's forced calls do, its history ending in a tool result or not. Any other history
that ends with a tool result (`role: "tool"`) is answered in text: "ANSWER: " and the
result's text. A request whose `role: "tool"` message does not answer an earlier assistant
tool call (by `tool_call_id`) is a 400, as OpenAI answers it.

JSON objects (`StructuredPlan.values` with `response_format: {"type": "json_object"}`): each
planted key is right with probability `accuracy`, missing with probability `missing_rate`.

A client's own format (`FormatPlan`), recognised in the request's last user message:
DSPy's ChatAdapter ("Respond with the corresponding output fields, starting with the field
`[[ ## answer ## ]]` ...") gets each output field in a `[[ ## field ## ]]` section and the
`[[ ## completed ## ]]` marker; inspect_ai's templates ("ANSWER: $LETTER", "ANSWER: $ANSWER")
get a reasoning line and "ANSWER: X". Each field's value is planted (`values[field]`, else
drawn per prompt) and right with probability `accuracy`, else a wrong one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .openexpert import WORDS, StructuredPlan, wrong_value
from .seeds import seeded_rng

__all__ = ["FormatPlan", "ToolPlan", "bad_tool_history", "dspy_fields", "forced_tool",
           "tool_call_of"]

_DSPY_RESPOND = re.compile(r"Respond with the corresponding output fields(.*)", re.DOTALL)
_DSPY_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]")
_INSPECT = re.compile(r"ANSWER: \$(\w+)")
_LETTERS = re.compile(r"^\s*([A-Z])\)", re.MULTILINE)


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    fn = tool.get("function")
    return fn if isinstance(fn, Mapping) else tool


def _draw(prop: Mapping[str, Any], rng: np.random.Generator) -> Any:
    """A planted value for one parameter's schema."""
    if "enum" in prop and prop["enum"]:
        return prop["enum"][int(rng.integers(len(prop["enum"])))]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return int(rng.integers(100))
    if kind == "number":
        return round(float(rng.integers(1000)) / 10, 1)
    if kind == "boolean":
        return bool(rng.random() < 0.5)
    if kind == "object":
        return {k: _draw(p, rng) for k, p in (prop.get("properties") or {}).items()}
    if kind == "array":
        return [_draw(prop.get("items") or {}, rng)]
    return WORDS[int(rng.integers(len(WORDS)))]


def _noisy(prop: Mapping[str, Any], value: Any, right: bool, rng: np.random.Generator) -> Any:
    """A sample's spelling of a planted value: respelled when right, else a wrong value."""
    if isinstance(value, dict):
        props = prop.get("properties") or {}
        return {k: _noisy(props.get(k, {}), v, right, rng) for k, v in value.items()}
    if not right:
        if "enum" in prop or isinstance(value, (bool, int, float)):
            return wrong_value(prop, value, rng)
        if isinstance(value, str):  # another word, not "not paris": a plausible wrong value
            others = [w for w in WORDS if w != value.lower()]
            return others[int(rng.integers(len(others)))]
        return value
    if "enum" in prop:
        return value
    if isinstance(value, str) and rng.random() < 0.5:
        return [value.upper(), value.capitalize() + ".", f" {value}! "][int(rng.integers(3))]
    if isinstance(value, int) and not isinstance(value, bool) and rng.random() < 0.5:
        return float(value)  # 7 and 7.0: one number
    return value


@dataclass(frozen=True)
class ToolPlan:
    """Tool-call mode: planted calls per prompt, how often a sample gets each part right, how
    often it replies in text instead, how many calls a reply makes (`parallel`), and whether
    the arguments are planted close splits (`splits`, module docstring)."""

    calls: Mapping[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)
    accuracy: float = 0.8
    text_rate: float = 0.0
    parallel: int = 1
    splits: bool = False

    def planted(self, prompt: str, tools: Sequence[Mapping[str, Any]], seed: int
                ) -> tuple[str, dict[str, Any]]:
        """(tool name, arguments) planted for a prompt."""
        if prompt in self.calls:
            name, args = self.calls[prompt]
            return name, dict(args)
        rng = seeded_rng(seed, "tool", prompt)
        fn = _function(tools[int(rng.integers(len(tools)))])
        props = (fn.get("parameters") or {}).get("properties") or {}
        return str(fn.get("name")), {k: _draw(p, rng) for k, p in props.items()}

    def reply(self, prompt: str, tools: Sequence[Mapping[str, Any]], rng: np.random.Generator,
              seed: int, index: int, *, forced: str | None = None
              ) -> tuple[str | None, list[dict[str, Any]]]:
        """(text content, tool calls) of one sample; `forced`: the function the request's
        tool_choice names, which every sample calls."""
        by_name = {str(_function(t).get("name")): _function(t) for t in tools}
        if (forced is not None and forced in by_name) or self.splits:
            name = forced if forced in by_name else self.planted(prompt, tools, seed)[0]
            return None, [self._split_call(prompt, by_name[str(name)], rng, seed, index)]
        if self.text_rate > 0 and rng.random() < self.text_rate:
            return "I can answer without a tool.\nANSWER: direct", []
        calls = []
        for j in range(self.parallel):
            name, args = self.planted(prompt if j == 0 else f"{prompt}#{j}", tools, seed)
            if len(by_name) > 1 and rng.random() >= self.accuracy:
                name = sorted(n for n in by_name if n != name)[int(rng.integers(len(by_name)
                                                                                 - 1))]
                props = (by_name[name].get("parameters") or {}).get("properties") or {}
                args = {k: _draw(p, seeded_rng(seed, "tool", prompt, name))
                        for k, p in props.items()}
            props = (by_name.get(name, {}).get("parameters") or {}).get("properties") or {}
            written = {k: _noisy(props.get(k, {}), v, rng.random() < self.accuracy, rng)
                       for k, v in args.items()}
            calls.append({"id": f"call_sim_{index}_{j}", "type": "function",
                          "function": {"name": name, "arguments": json.dumps(written)}})
        return None, calls

    def _split_call(self, prompt: str, fn: Mapping[str, Any], rng: np.random.Generator,
                    seed: int, index: int) -> dict[str, Any]:
        """A call to `fn` whose arguments are the planted close splits (`splits`) or, when the
        call is only forced, the planted arguments each right with probability `accuracy`."""
        params = fn.get("parameters") or {}
        if self.splits:
            args = StructuredPlan(splits=True).split_rows(params, prompt, seed)[index % 5]
        else:
            _, planted = self.planted(prompt, [{"function": fn}], seed)
            props = params.get("properties") or {}
            args = {k: _noisy(props.get(k, {}), v, rng.random() < self.accuracy, rng)
                    for k, v in planted.items()}
        return {"id": f"call_sim_{index}_0", "type": "function",
                "function": {"name": str(fn.get("name")), "arguments": json.dumps(args)}}


def forced_tool(tool_choice: Any) -> str | None:
    """The function a chat request's tool_choice forces (None: it forces none by name)."""
    if isinstance(tool_choice, Mapping) and tool_choice.get("type") == "function":
        fn = tool_choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else tool_choice.get("name")
        return str(name) if name else None
    return None


def bad_tool_history(messages: Sequence[Any]) -> str | None:
    """Why a message list's tool results do not follow its tool calls (None: they do)."""
    asked: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            continue
        for c in m.get("tool_calls") or ():
            if isinstance(c, Mapping) and c.get("id"):
                asked.add(str(c["id"]))
        if m.get("role") == "tool" and str(m.get("tool_call_id")) not in asked:
            return (f"Invalid parameter: messages[{i}] with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'.")
    return None


def tool_call_of(messages: Sequence[Any]) -> str | None:
    """The text of the tool result a history ends with (None: it does not end with one)."""
    if messages and isinstance(messages[-1], Mapping) and messages[-1].get("role") == "tool":
        return str(messages[-1].get("content") or "")
    return None


def dspy_fields(prompt: str) -> list[str]:
    """The output fields DSPy's ChatAdapter asks for in a user message ([] when it does not)."""
    m = _DSPY_RESPOND.search(prompt)
    if m is None:
        return []
    return [f for f in _DSPY_FIELD.findall(m.group(1)) if f != "completed"]


@dataclass(frozen=True)
class FormatPlan:
    """A client's own format: planted field values (DSPy output fields; "answer" for
    inspect_ai's ANSWER:), and the chance a sample writes each right."""

    values: Mapping[str, Any] = field(default_factory=dict)
    accuracy: float = 0.7

    def planted(self, prompt: str, name: str, seed: int, options: Sequence[str] = ()) -> str:
        if name in self.values:
            return str(self.values[name])
        rng = seeded_rng(seed, "format", prompt, name)
        pool = list(options) or list(WORDS)
        return pool[int(rng.integers(len(pool)))]

    def _value(self, prompt: str, name: str, seed: int, rng: np.random.Generator,
               options: Sequence[str] = ()) -> str:
        right = self.planted(prompt, name, seed, options)
        if rng.random() < self.accuracy:
            return right if options else str(_noisy({}, right, True, rng)).strip()
        pool = [w for w in (options or WORDS) if w != right]
        return pool[int(rng.integers(len(pool)))]

    def reply(self, prompt: str, rng: np.random.Generator, seed: int) -> str | None:
        """The reply in the format the prompt asks for, or None when it asks for none."""
        fields = dspy_fields(prompt)
        if fields:
            parts = [f"[[ ## {f} ## ]]\n{self._value(prompt, f, seed, rng)}" for f in fields]
            return "\n\n".join([*parts, "[[ ## completed ## ]]"])
        m = _INSPECT.search(prompt)
        if m is None:
            return None
        letters = _LETTERS.findall(prompt) if m.group(1) == "LETTER" else []
        value = self._value(prompt, "answer", seed, rng, letters)
        return f"Let me think it through.\n\nANSWER: {value}"
