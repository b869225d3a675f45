"""The planted expert's open answers and structured outputs.

Open answers (`OpenAnswers`): for a prompt whose question (the text after "### Question:", up
to the next "###" or the end, whitespace-normalised) or whole-prompt `prompt_hash` is in
`answers`, each sample is right with probability ρ (`accuracy`, or per question ρ_q ~ Beta(a, b)
drawn from hash(seed, question) when `accuracy` is None), and otherwise one of `wrong` planted
wrong numbers, each equally likely. Every number is written in a form drawn at random from
`FORMS` (`1250`, `1,250`, `1250.0`, `$1,250`, `\\boxed{1250}`, ...), inside `<answer>` tags, so
a client that compares raw strings splits one answer several ways. At t = 0 one frozen draw
per question is repeated by every sample. `OpenAnswers.truth(question)` gives (right, ρ, the
wrong numbers): the exact plurality accuracy of n samples follows by enumeration.

Structured outputs (`StructuredPlan`): a request with `response_format` = {"type":
"json_schema", "json_schema": {"schema": ...}} gets a JSON object with every property of the
schema: the planted value (`values[name]`) with probability `accuracy`, else a wrong one of the
same type (another enum member, the number + 1 or − 1, a different string, the other boolean);
planted strings are written in varied case and punctuation; nested objects recursively;
`invalid_rate` of the replies are not valid JSON. JSON mode (`response_format: {"type":
"json_object"}`) gets an object of the planted keys the same way, each key left out with
probability `missing_rate`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .seeds import seeded_rng

__all__ = ["FORMS", "WORDS", "OpenAnswers", "StructuredPlan", "open_question_text", "prompt_hash",
           "write_number", "wrong_value"]

_OPEN_Q = re.compile(r"### Question:\s*(.*?)\s*(?:\n\s*\n|###|$)", re.DOTALL)

FORMS = ("plain", "thousands", "decimal", "dollar", "boxed", "sentence")
# the words planted for strings (the tool plan's arguments, the splits' values)
WORDS = ("paris", "london", "berlin", "madrid", "rome", "vienna", "oslo", "lisbon")


def open_question_text(prompt: str) -> str | None:
    """The question of an open prompt ("### Question:" up to the next "###"), normalised."""
    m = _OPEN_Q.search(prompt)
    return " ".join(m.group(1).split()) if m else None


def prompt_hash(prompt: str) -> str:
    """The answer-key entry of a prompt that is not in the MathQA format: "sha256:<hex>"."""
    import hashlib

    return "sha256:" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def write_number(x: float, form: str) -> str:
    """`x` written in one of `FORMS`: 1250, 1,250, 1250.0, $1,250, \\boxed{1250}, "... is 1250"."""
    plain = str(int(x)) if float(x).is_integer() else f"{x:g}"
    if form == "thousands":
        return f"{int(x):,}" if float(x).is_integer() else f"{x:,}"
    if form == "decimal":
        return f"{x:.1f}" if float(x).is_integer() else f"{x}0"
    if form == "dollar":
        return f"${int(x):,}" if float(x).is_integer() else f"${x:,}"
    if form == "boxed":
        return f"\\boxed{{{plain}}}"
    if form == "sentence":
        return f"The answer is {plain}"
    return plain


@dataclass(frozen=True)
class OpenAnswers:
    """Open-answer mode: `answers` maps a question (or "sha256:" + prompt hash) to its number."""

    answers: Mapping[str, float]
    accuracy: float | None = None
    a: float = 3.0
    b: float = 2.0
    wrong: int = 2
    forms: tuple[str, ...] = FORMS

    def __post_init__(self) -> None:
        from ..errors import InputError

        if self.accuracy is not None and not 0.0 <= self.accuracy <= 1.0:
            raise InputError(f"open-answer accuracy must lie in [0, 1], got {self.accuracy}")
        if self.wrong < 1:
            raise InputError(f"open answers need at least one wrong number, got {self.wrong}")
        bad = [f for f in self.forms if f not in FORMS]
        if bad or not self.forms:
            raise InputError(f"unknown number forms {bad}; use some of {', '.join(FORMS)}")

    def key_of(self, prompt: str) -> str | None:
        q = open_question_text(prompt)
        if q is not None and q in self.answers:
            return q
        h = prompt_hash(prompt)
        return h if h in self.answers else None

    def truth(self, question: str, seed: int = 0) -> tuple[float, float, tuple[float, ...]]:
        """(the right number, ρ the chance a sample gives it, the planted wrong numbers)."""
        right = float(self.answers[question])
        rho = self.accuracy
        if rho is None:
            rho = float(seeded_rng(seed, "open", question).beta(self.a, self.b))
        step = max(1.0, round(abs(right) * 0.1, 2))
        wrongs = tuple(round(right + (j + 1) * step * (1 if j % 2 == 0 else -1), 2)
                       for j in range(self.wrong))
        return right, rho, wrongs

    def reply(self, question: str, temperature: float, rng: np.random.Generator,
              seed: int) -> str:
        right, rho, wrongs = self.truth(question, seed)
        draw = seeded_rng(seed, "open-frozen", question) if temperature <= 0 else rng
        if draw.random() < rho:
            x = right
        else:
            x = wrongs[int(draw.integers(len(wrongs)))]
        form = self.forms[int(rng.integers(len(self.forms)))]
        return f"<reason>simulated: open answer</reason>\n<answer>{write_number(x, form)}</answer>"


@dataclass(frozen=True)
class StructuredPlan:
    """Structured mode: planted field values, the chance each field is right, invalid JSON.

    `splits=True` plants close splits instead of independent errors: of every 5 samples of a
    prompt each top-level field is right in 3 (its plurality), and the most common whole object
    (2 of the 5, identical) is wrong on the last field, so a vote of whole objects answers
    that wrong object and a vote field by field the planted one (`split_rows`)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    accuracy: float = 0.8
    invalid_rate: float = 0.0
    missing_rate: float = 0.0
    splits: bool = False

    def reply(self, schema: Mapping[str, Any], rng: np.random.Generator, *,
              prompt: str = "", index: int = 0, seed: int = 0) -> str:
        if self.invalid_rate > 0 and rng.random() < self.invalid_rate:
            return '{"truncated": '
        if self.splits:
            return json.dumps(self.split_rows(schema, prompt, seed)[index % 5])
        doc = self._object(schema, schema, self.values, rng)
        return json.dumps(doc)

    def split_rows(self, schema: Mapping[str, Any], prompt: str, seed: int
                   ) -> list[dict[str, Any]]:
        """The 5 objects a prompt's samples cycle through (sample i is row i mod 5, the rows
        shifted by the prompt), and so the planted split: see the class docstring."""
        rng = seeded_rng(seed, "split", prompt)
        props = {k: _deref(p, schema) for k, p in (schema.get("properties") or {}).items()}
        names = list(props)
        wins = {k: self.values[k] if k in self.values else _draw(props[k], rng) for k in names}
        losers = {k: _losers(props[k], wins[k], rng) for k in names}
        last = len(names) - 1
        rows: list[dict[str, Any]] = [{} for _ in range(5)]
        for j, k in enumerate(names):
            if j == last and last > 0:  # rows 0, 1: the whole-object plurality, wrong here
                column = [losers[k][0], losers[k][0], wins[k], wins[k], wins[k]]
            elif last == 0:
                column = [wins[k]] * 3 + losers[k]
            else:  # right in rows 0, 1 and one of rows 2-4
                column = [wins[k], wins[k]]
                other = iter(losers[k])
                column += [wins[k] if r == 2 + j % 3 else next(other) for r in (2, 3, 4)]
            for r in range(5):
                rows[r][k] = column[r]
        shift = int(rng.integers(5))
        return rows[shift:] + rows[:shift]

    def reply_object(self, rng: np.random.Generator, *, prompt: str = "", index: int = 0,
                     seed: int = 0) -> str:
        """A JSON-mode reply: the planted keys, each maybe missing, right or wrong."""
        if self.invalid_rate > 0 and rng.random() < self.invalid_rate:
            return '{"truncated": '
        schema: dict[str, Any] = {"properties": {k: {} for k in self.values}}
        if self.splits:
            return "Here is the object:\n" + json.dumps(
                self.split_rows(schema, prompt, seed)[index % 5])
        doc = self._object(schema, schema, self.values, rng)
        if self.missing_rate > 0:
            doc = {k: v for k, v in doc.items() if rng.random() >= self.missing_rate}
        return "Here is the object:\n" + json.dumps(doc)

    def _object(self, schema: Mapping[str, Any], root: Mapping[str, Any],
                planted: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, prop in (schema.get("properties") or {}).items():
            prop = _deref(prop, root)
            want = planted.get(name) if isinstance(planted, Mapping) else None
            if prop.get("type") == "object" or "properties" in prop:
                out[name] = self._object(prop, root, want or {}, rng)
                continue
            if want is None:
                want = _default(prop)
            right = rng.random() < self.accuracy
            if not right:
                out[name] = wrong_value(prop, want, rng)
            else:
                out[name] = want if "enum" in prop else _respell(want, rng)
        return out


def _deref(prop: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return root.get("$defs", {}).get(ref.rsplit("/", 1)[1], {})
    any_of = prop.get("anyOf")
    if isinstance(any_of, list):
        for p in any_of:
            if p.get("type") != "null":
                return _deref(p, root)
    return prop


def _draw(prop: Mapping[str, Any], rng: np.random.Generator) -> Any:
    """A planted value for a property's schema."""
    if "enum" in prop and prop["enum"]:
        return prop["enum"][int(rng.integers(len(prop["enum"])))]
    if "const" in prop:
        return prop["const"]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return int(rng.integers(100))
    if kind == "number":
        return round(float(rng.integers(1000)) / 10, 1)
    if kind == "boolean":
        return bool(rng.random() < 0.5)
    if kind == "array":  # two distinct items (uniqueItems holds)
        items = prop.get("items") or {"type": "string"}
        first = _draw(items, rng)
        second = next((x for x in (_draw(items, rng) for _ in range(20)) if x != first),
                      first)
        return [first, second] if second != first else [first]
    extra = prop.get("additionalProperties")
    if (kind == "object" or "properties" in prop) and not prop.get("properties") \
            and isinstance(extra, Mapping):  # a dict: two keys of its value's kind
        return {WORDS[int(rng.integers(len(WORDS)))] + str(i): _draw(extra, rng)
                for i in range(2)}
    if kind == "object" or "properties" in prop:
        return {k: _draw(p, rng) for k, p in (prop.get("properties") or {}).items()}
    return WORDS[int(rng.integers(len(WORDS)))]


def _losers(prop: Mapping[str, Any], win: Any, rng: np.random.Generator) -> list[Any]:
    """Two wrong values of a property (distinct where its kind has them)."""
    if "enum" in prop:
        others = [v for v in prop["enum"] if v != win] or [win]
        return [others[0], others[1 % len(others)]]
    if isinstance(win, bool):
        return [not win, not win]
    if isinstance(win, (int, float)):
        return [win + 1, win + 2]
    if isinstance(win, str):
        others = [w for w in WORDS if w != win.lower()]
        return [others[0], others[1]]
    if isinstance(win, list):
        return [win[:1], [*win, *win[:1]]]
    if isinstance(win, dict):
        out = []
        for shift in (1, 2):
            out.append({k: (v + shift if isinstance(v, (int, float)) and not isinstance(v, bool)
                            else f"{v}-{shift}" if isinstance(v, str) else v)
                        for k, v in win.items()})
        return out
    return [None, None]


def _default(prop: Mapping[str, Any]) -> Any:
    if "enum" in prop:
        return prop["enum"][0]
    return {"integer": 0, "number": 0.0, "boolean": False}.get(str(prop.get("type")), "text")


def _respell(value: Any, rng: np.random.Generator) -> Any:
    if isinstance(value, str) and value and rng.random() < 0.5:
        return [value.upper(), value.lower() + ".", f"  {value}! "][int(rng.integers(3))]
    return value


def wrong_value(prop: Mapping[str, Any], value: Any, rng: np.random.Generator) -> Any:
    """A wrong value of a field's kind: another enum member, the other boolean, the number
    one off, else "not" the value."""
    if "enum" in prop:
        others = [v for v in prop["enum"] if v != value]
        return others[int(rng.integers(len(others)))] if others else value
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + (1 if rng.random() < 0.5 else -1)
    return f"not {value}"
