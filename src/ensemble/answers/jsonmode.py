"""JSON objects voted key by key: JSON mode (`response_format: {"type": "json_object"}`) and
replies that are a JSON object in a client's own format.

`JsonObject()`: a reply is the JSON object in its text (code fences and words around it
allowed); each key any reply has is voted on its own among the replies, a reply without the
key abstaining on it. A key's kind follows the values the replies give it: booleans are a
choice, numbers are numbers (7 and 7.0 one answer), strings text (case, punctuation and
whitespace-insensitive, decided as most often written), objects key by key again ("outer.inner"),
anything else (lists, mixed types) its exact JSON. The decision is the object of the keys that
have a winner (keys sorted).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .base import OpenKind
from .columns import Exact, vote_column
from .kinds import Choice, Text
from .number import Number

if TYPE_CHECKING:
    from ..aggregators import Vote

__all__ = ["JsonObject", "object_in", "vote_objects"]


def object_in(text: str | None) -> dict[str, Any] | None:
    """The JSON object a reply's text holds (the span from its first `{` to its last `}`),
    or None."""
    if not text:
        return None
    start, end = text.find("{"), text.rfind("}")
    if not 0 <= start < end:
        return None
    try:
        doc = json.loads(text[start:end + 1])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _kind_of(values: Sequence[Any]) -> Any:
    """The answer kind the values given to one key imply."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return Choice(("true", "false"))
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       for v in present):
        return Number()
    if present and all(isinstance(v, str) for v in present):
        return Text()
    return Exact()


def vote_objects(docs: Sequence[Any], aggregate: Callable[[list[str | None]], Vote], *,
                 prefix: str = "") -> tuple[dict[str, Any], dict[str, Vote]]:
    """(the voted object, each key's Vote) of some objects (None: a reply without one)."""
    keys: dict[str, None] = {}
    for d in docs:
        if isinstance(d, dict):
            keys.update(dict.fromkeys(k for k in d if isinstance(k, str)))
    values: dict[str, Any] = {}
    fields: dict[str, Vote] = {}
    for name in keys:
        column = [d.get(name) if isinstance(d, dict) else None for d in docs]
        if any(isinstance(v, dict) for v in column) and all(
                v is None or isinstance(v, dict) for v in column):
            sub, sub_fields = vote_objects(column, aggregate, prefix=f"{prefix}{name}.")
            fields.update(sub_fields)
            if sub:
                values[name] = sub
            continue
        kind = _kind_of(column)
        v = vote_column(kind, column, aggregate)
        fields[prefix + name] = v
        if v.decision is not None:
            value = v.value
            if isinstance(kind, Number) and float(value).is_integer() and all(
                    isinstance(x, int) for x in column if x is not None):
                value = int(value)  # integers stay integers: 7, not 7.0
            values[name] = value
    return values, fields


class JsonObject(OpenKind):
    """Replies that are JSON objects, voted key by key (JSON mode)."""

    name = "json"
    reads = "a JSON object"

    def extract(self, text: str) -> str | None:
        doc = object_in(text)
        return None if doc is None else json.dumps(doc, sort_keys=True)

    def canonical(self, raw: str) -> str | None:
        doc = object_in(raw)
        return None if doc is None else json.dumps(doc, sort_keys=True, separators=(",", ":"))

    def value(self, key: str, spellings: Any) -> Any:
        return json.loads(key)

    def response_format(self) -> dict[str, Any]:
        return {"type": "json_object"}

    def vote_fields(self, keys: Sequence[str | None],
                    aggregate: Callable[[list[str | None]], Vote]
                    ) -> tuple[Any, dict[str, Vote]]:
        """(the voted object, or None when no reply held one; each key's Vote)."""
        docs = [None if k is None else json.loads(k) for k in keys]
        if all(d is None for d in docs):
            return None, {}
        values, fields = vote_objects(docs, aggregate)
        return (values or None), fields

    def answer_key(self, decision: Any) -> str | None:
        return None  # the voted object is no one sample's

    def render(self, decision: Any) -> str | None:
        return None if decision is None else json.dumps(decision)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonObject)

    def __hash__(self) -> int:
        return hash("json")
