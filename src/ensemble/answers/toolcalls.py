"""Tool calls voted: the kind of reply, then the tool, then each argument.

`ToolCalls(tools, text=kind)`: the request carries `tools` (OpenAI's function tools, Chat
Completions' `{"type": "function", "function": {...}}` or the Responses API's flat `{"type":
"function", "name": ..., "parameters": ...}`); each sample is a text reply or a tool call (kept
as text by `ensemble.providers.toolcalls`). The vote, each step by the Ensemble's rule:

1. `kind`: "tool_call" or "text" (a text reply without an answer `text` can read abstains);
2. a text win is decided among the text replies by `text` (the Ensemble's answer kind);
3. a tool-call win: `tool`, the tool's name, among the samples that called one (a name that is
   not among the tools abstains);
4. each argument among the samples that called the winning tool, with the kind its JSON schema
   implies (`ensemble.answers.schema` and `Structured`: enums and booleans as choices, numbers
   by numeric equivalence, strings as text by their canonical form, objects field by field,
   arrays, dicts and unions by the parts of the tool's own schema, as `schemavote` votes a
   client's schema); an argument that is missing or of the wrong type abstains. A tool
   that declares no parameters has whatever keys its calls give voted key by key (as JSON
   mode's objects).

The decision is a `ToolCall(name, arguments)`, its arguments valid against the tool's schema
(None when the voted arguments fail it, or a required one has no valid vote). The upstream's
call ids differ on every sample and are not voted: a reply gives the call an id of its own.

Parallel tool calls are voted position by position: `calls`, the number of calls, by
plurality among the samples that called tools, then each position i as above among the samples
with a call at i (its parts named `calls[i].tool`, `calls[i].arguments.x`); the decision is then
a tuple of ToolCalls. With one call per sample (the usual case) the parts are `kind`, `tool`
and `arguments.x`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..providers.toolcalls import read_tool_calls
from .base import AnswerKind, OpenKind, votes_fields
from .columns import vote_column
from .jsonmode import vote_objects
from .kinds import Choice
from .schema import model_from_schema
from .schemavote import check_votable
from .structured import Structured

if TYPE_CHECKING:
    from ..aggregators import Vote

__all__ = ["Tool", "ToolCall", "ToolCalls", "tools_of"]

KINDS = ("tool_call", "text")
TEXT_PREFIX = "text: "  # a text reply's key: this, then the key its answer kind reads
_NAME = re.compile(r"[A-Za-z0-9_-]+")  # the characters of a tool's name (OpenAI's)


@dataclass(frozen=True)
class ToolCall:
    """A voted tool call: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    def to_openai(self) -> dict[str, Any]:
        """The call as a Chat Completions `tool_calls` entry (arguments as a JSON string)."""
        return {"id": self.id or f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                "function": {"name": self.name, "arguments": json.dumps(self.arguments)}}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "id": self.id}


@dataclass(frozen=True)
class Tool:
    """A function tool: its name and its parameters' JSON schema (an object)."""

    name: str
    parameters: Mapping[str, Any]

    def arguments_kind(self) -> Structured:
        """The arguments as a structured answer: one field per parameter."""
        model = model_from_schema(f"{_ident(self.name)}_arguments", self.parameters,
                                  where=f"tools[{self.name}].parameters", lenient=True)
        return Structured(model, schema=self.parameters)


def _ident(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out.isidentifier() else f"tool_{out}"


def tools_of(tools: Sequence[Any]) -> tuple[Tool, ...]:
    """The function tools of a request's `tools` (Chat Completions' or Responses' form);
    InputError naming the first that is not a function tool with a name."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence) or not tools:
        raise InputError("tools must be a non-empty list of function tools "
                         '({"type": "function", "function": {"name": ..., "parameters": '
                         "{...}}})")
    out: list[Tool] = []
    for i, t in enumerate(tools):
        if not isinstance(t, Mapping) or t.get("type", "function") != "function":
            kind = t.get("type") if isinstance(t, Mapping) else type(t).__name__
            raise InputError(f"tools[{i}]: only function tools are voted, got {kind!r}")
        fn: Mapping[str, Any] = t["function"] if isinstance(t.get("function"), Mapping) else t
        name, params = fn.get("name"), fn.get("parameters") or {"type": "object",
                                                                   "properties": {}}
        if not isinstance(name, str) or not name:
            raise InputError(f"tools[{i}]: a function tool needs a name")
        if not _NAME.fullmatch(name) or len(name) > 64:
            raise InputError(f"tools[{i}]: the function name {name!r} may hold only letters, "
                             "digits, _ and - (at most 64 characters); rename it")
        if not isinstance(params, Mapping):
            raise InputError(f"tools[{i}] ({name}): parameters must be a JSON schema object")
        check_votable(params, f"tools[{i}] ({name}).parameters")
        out.append(Tool(name, dict(params)))
    names = [t.name for t in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(f"tools: {dup!r} is named twice; tool names must be distinct")
    return tuple(out)


def choice_rule(choice: Any, tools: Sequence[Tool]) -> tuple[frozenset[str], bool, bool]:
    """What a request's `tool_choice` lets a reply do: (the tools it may call, whether it must
    call one, whether it may call any). `auto` / None: any tool or text; `none`: text only;
    `required`: a tool; `{"type": "function", "function": {"name": N}}`: tool N;
    `{"type": "allowed_tools", "allowed_tools": {"mode": "auto" | "required", "tools": [...]}}`:
    those tools (and text, in mode auto). The vote enforces it: a reply that breaks it
    abstains."""
    names = frozenset(t.name for t in tools)
    if choice in (None, "auto"):
        return names, False, True
    if choice == "none":
        return frozenset(), False, False
    if choice == "required":
        return names, True, True
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else choice.get("name")
        return frozenset({str(name)}) & names, True, True
    if isinstance(choice, Mapping) and choice.get("type") == "allowed_tools":
        spec = choice.get("allowed_tools")
        spec = spec if isinstance(spec, Mapping) else choice
        listed = spec.get("tools")
        allowed: set[str] = set()
        for t in listed if isinstance(listed, list) else []:
            fn = t.get("function") if isinstance(t, Mapping) else None
            name = fn.get("name") if isinstance(fn, Mapping) else (
                t.get("name") if isinstance(t, Mapping) else None)
            allowed.add(str(name))
        return frozenset(allowed) & names, spec.get("mode") == "required", True
    raise InputError("tool_choice must be auto, none, required, {\"type\": \"function\", "
                     "\"function\": {\"name\": NAME}} or {\"type\": \"allowed_tools\", "
                     "\"allowed_tools\": {\"mode\": \"auto\", \"tools\": [...]}}")


def _read_key(key: str) -> str | list[dict[str, Any]]:
    """A sample's key read back: the text reply's key, or its calls ({name, arguments})."""
    if key.startswith(TEXT_PREFIX):
        return key[len(TEXT_PREFIX):]
    calls = []
    for line in key.split("\n"):
        name, _, args = line.partition(" ")
        calls.append({"name": None if name == "?" else name, "arguments": json.loads(args)})
    return calls


class ToolCalls(OpenKind):
    """Replies that are a text or tool calls, voted kind, tool, then argument by argument."""

    name = "tool_call"

    def __init__(self, tools: Sequence[Any], text: AnswerKind | None = None, *,
                 choice: Any = None) -> None:
        self.tools = tuple(tools) if tools and all(isinstance(t, Tool) for t in tools) \
            else tools_of(tools)
        self.text: Any = text if text is not None else Choice()
        self._arguments = {t.name: t.arguments_kind() for t in self.tools}
        self.allowed, self.must_call, self.may_call = choice_rule(choice, self.tools)

    def __repr__(self) -> str:
        return f"ToolCalls({[t.name for t in self.tools]!r}, text={self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCalls) and other.tools == self.tools \
            and other.text == self.text

    def __hash__(self) -> int:
        return hash(("tool_call", tuple(t.name for t in self.tools)))

    # -- one sample ------------------------------------------------------------------------
    def extract(self, text: str) -> str | None:
        reply = read_tool_calls(text)
        return self.text.extract(text) if reply is None else text

    def canonical(self, raw: str) -> str | None:
        return self.parse(raw)

    def parse(self, text: str) -> str | None:
        """The sample's key, readable in `Decision.votes`: a tool call is its name, a space
        and its arguments as compact JSON (`get_weather {"city":"Paris"}`; `null` when they
        are not a JSON object; a name that is not a tool name's characters is `?`), parallel
        calls one per line; a text reply is `text: ` and the key `text` reads (None when its
        text has no answer)."""
        reply = read_tool_calls(text)
        if reply is None:
            if self.must_call:  # tool_choice required / a named tool: a text reply abstains
                return None
            key = self.text.parse(text) if text else None
            return None if key is None else TEXT_PREFIX + key
        if not self.may_call:  # tool_choice "none": a call anyway abstains
            return None
        calls = []
        for c in reply.tool_calls:
            fn = c.get("function") or {}
            if fn.get("name") not in self.allowed:  # outside tool_choice's tools: abstains
                return None
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (TypeError, ValueError):
                args = None
            name = fn.get("name")
            calls.append((name if isinstance(name, str) and _NAME.fullmatch(name) else "?")
                         + " " + json.dumps(args if isinstance(args, dict) else None,
                                            sort_keys=True, separators=(",", ":")))
        return "\n".join(calls) if calls else None

    def same(self, a: str, b: str) -> bool:
        return a == b

    def value(self, key: str, spellings: Mapping[str, int]) -> Any:
        doc = _read_key(key)
        if isinstance(doc, str):
            return self.text.value(doc, {})
        return tuple(ToolCall(c["name"], c["arguments"] or {}) for c in doc)

    def response_format(self) -> dict[str, Any] | None:
        return self.text.response_format()

    def render(self, decision: Any) -> str | None:
        """A text decision's text (the tool calls are the reply's `tool_calls`, not text)."""
        if decision is None or isinstance(decision, (ToolCall, tuple)):
            return None
        render = getattr(self.text, "render", None)
        return render(decision) if callable(render) else None

    def answer_key(self, decision: Any) -> str | None:
        """A text decision's key (`text: ` and its answer's key): its samples' text is the
        reply."""
        if decision is None or isinstance(decision, (ToolCall, tuple)):
            return None
        if votes_fields(self.text):
            key = self.text.answer_key(decision)
        else:
            key_of = getattr(self.text, "key_of", None)
            key = key_of(decision) if callable(key_of) else decision
        return None if key is None else TEXT_PREFIX + key

    # -- the vote --------------------------------------------------------------------------
    def vote_fields(self, keys: Sequence[str | None],
                    aggregate: Callable[[list[str | None]], Vote]
                    ) -> tuple[Any, dict[str, Vote]]:
        """(the decision, each part's Vote): see the module docstring."""
        docs = [None if k is None else _read_key(k) for k in keys]
        kinds = [None if d is None else ("text" if isinstance(d, str) else "tool_call")
                 for d in docs]
        fields: dict[str, Vote] = {"kind": vote_column(Choice(KINDS), kinds, aggregate)}
        won = fields["kind"].value
        if won == "text":
            texts = [d if k == "text" and isinstance(d, str) else None
                     for d, k in zip(docs, kinds, strict=True)]
            if votes_fields(self.text):  # a typed answer: voted by its parts
                decision, parts = self.text.vote_fields(texts, aggregate)
                fields.update({f"text.{name}": v for name, v in parts.items()})
                return decision, fields
            v = aggregate(texts)
            fields["text"] = v
            return (None if v.decision is None else self.text.value(v.decision, {})), fields

        if won != "tool_call":
            return None, fields
        calls = [d if k == "tool_call" and isinstance(d, list) else None
                 for d, k in zip(docs, kinds, strict=True)]
        if any(c is not None and len(c) > 1 for c in calls):
            v = vote_column(Choice(tuple(str(i) for i in range(1, 1 + max(
                len(c) for c in calls if c is not None)))),
                [None if c is None else str(len(c)) for c in calls], aggregate)
            fields["calls"] = v
            if v.value is None:
                return None, fields
            count = int(v.value)
        else:
            count = 1
        out: list[ToolCall] = []
        for i in range(count):
            prefix = "" if count == 1 and "calls" not in fields else f"calls[{i}]."
            at = [c[i] if c is not None and len(c) > i else None for c in calls]
            call = self._vote_call(at, aggregate, prefix, fields)
            if call is None:
                return None, fields
            out.append(call)
        return (out[0] if len(out) == 1 and "calls" not in fields else tuple(out)), fields

    def explain(self, fields: Mapping[str, Vote]) -> str | None:
        """Why a text reply's typed answer decided nothing, when its kind says (a voted
        object that fails the request's schema)."""
        kind = fields.get("kind")
        explain = getattr(self.text, "explain", None)
        if kind is None or kind.value != "text" or not callable(explain):
            return None
        said = explain(fields)
        return None if said is None else str(said)

    def _vote_call(self, at: Sequence[Mapping[str, Any] | None],
                   aggregate: Callable[[list[str | None]], Vote], prefix: str,
                   fields: dict[str, Vote]) -> ToolCall | None:
        names = tuple(t.name for t in self.tools)
        tool = vote_column(Choice(names), [None if c is None else c.get("name") for c in at],
                           aggregate)
        fields[prefix + "tool"] = tool
        name = tool.value
        if name is None:
            return None
        chose = [c is not None and c.get("name") == name for c in at]
        kind = self._arguments[name]
        arg_keys = [json.dumps(c.get("arguments")) if ok and c is not None
                    and isinstance(c.get("arguments"), dict) else None
                    for c, ok in zip(at, chose, strict=True)]
        if not kind.fields:  # no declared parameters: whatever keys the calls give, each voted
            args, arg_fields = vote_objects([None if k is None else json.loads(k)
                                             for k in arg_keys], aggregate,
                                            prefix=prefix + "arguments.")
            fields.update(arg_fields)
            return ToolCall(name, args)
        inst, arg_fields = kind.vote_fields(arg_keys, aggregate, prefix=prefix + "arguments.")
        fields.update(arg_fields)
        if inst is None:
            return None
        return ToolCall(name, inst.model_dump(mode="json", exclude_unset=True,
                                                  by_alias=True))
