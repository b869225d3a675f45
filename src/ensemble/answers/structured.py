"""Structured outputs: a pydantic model's JSON schema sent, each reply validated, voted field
by field.

`Structured(Model)`: the request carries `response_format = {"type": "json_schema",
"json_schema": {"name": ..., "schema": Model.model_json_schema()}}`; a reply is the JSON object
in its text (code fences allowed), validated by `Model` (invalid JSON or a failed validation is
an invalid sample). Each field is voted on its own with the kind its annotation implies:
Literal, Enum and bool are choices, int and float numbers, str text, a nested model is voted
field by field again (its fields named "outer.inner"), and anything else (lists, dicts, unions,
`Any`) by the parts of its JSON schema, as `ensemble serve` votes a client's schema
(`ensemble.answers.schemavote`: an array element by element, `tags[len]` then `tags[0]`, ...,
or as a set under uniqueItems; a dict key by key; a union by its branch, then the branch's
parts). The schema is the model's (`model_json_schema()`), or the JSON schema the model was
built from when one is given (a tool's parameters). The decision is `Model(**winners)`; it is
None when a required field has no valid vote or the winners together fail the model's
validation.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import InputError
from .base import OpenKind
from .columns import Exact, vote_column
from .kinds import Choice, Text
from .number import Number
from .schemavote import MISSING, Plan

if typing.TYPE_CHECKING:
    from ..aggregators import Vote

__all__ = ["Exact", "Structured", "is_model_class"]  # Exact: ensemble.answers.columns


def is_model_class(obj: object) -> bool:
    """Whether `obj` is a pydantic model class (without importing pydantic for other values)."""
    if not isinstance(obj, type):
        return False
    from pydantic import BaseModel

    return issubclass(obj, BaseModel)


def _unwrap_optional(ann: Any) -> Any:
    origin = typing.get_origin(ann)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return ann


def kind_for(annotation: Any, within: tuple[type[Any], ...] = ()) -> Any:
    """The answer kind a field's annotation implies (`within`: the models whose fields are
    being read, to refuse a model that contains itself)."""
    ann = _unwrap_optional(annotation)
    if typing.get_origin(ann) is typing.Literal:
        return Choice(tuple(str(Choice().key_of(v)) for v in typing.get_args(ann)))
    if isinstance(ann, type):
        if issubclass(ann, enum.Enum):
            return Choice(tuple(str(Choice().key_of(m)) for m in ann))
        if ann is bool:
            return Choice(("true", "false"))
        if ann in (int, float):
            return Number()
        if ann is str:
            return Text()
        if is_model_class(ann):
            return Structured(ann, within)
    return Exact()


class Structured(OpenKind):
    """Answers that are instances of a pydantic model, voted field by field."""

    name = "structured"

    def __init__(self, model: type[Any], within: tuple[type[Any], ...] = (), *,
                 schema: Mapping[str, Any] | None = None) -> None:
        if not is_model_class(model):
            raise InputError(f"answer= takes a pydantic model class for structured outputs, "
                             f"got {model!r}")
        if model in within:
            path = " → ".join(m.__name__ for m in (*within, model))
            raise InputError(f"answer={within[0].__name__}: the model contains itself ({path}); "
                             "a recursive model has no fixed set of fields to vote on: give "
                             "a model whose nesting ends")
        self.model = model
        # keyed by the names the objects use (a field's alias, when it has one)
        self.fields: dict[str, Any] = {f.alias or name: kind_for(f.annotation, (*within, model))
                                       for name, f in model.model_fields.items()}
        self._annotations = {f.alias or name: f.annotation
                             for name, f in model.model_fields.items()}
        self._schema = schema  # what the parts of its Exact fields are voted by (None: the
        self._plans: dict[str, Plan | None] = {}  # model's own JSON schema, built when needed)

    def __repr__(self) -> str:
        return f"Structured({self.model.__name__})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Structured) and other.model is self.model

    def __hash__(self) -> int:
        return hash(("structured", self.model))

    def extract(self, text: str) -> str | None:
        if not text:
            return None
        start, end = text.find("{"), text.rfind("}")
        return text[start:end + 1] if 0 <= start < end else None

    def canonical(self, raw: str) -> str | None:
        from pydantic import ValidationError

        try:
            inst = self.model.model_validate_json(raw)
        except (ValidationError, ValueError):
            return None
        return json.dumps(inst.model_dump(mode="json", by_alias=True), sort_keys=True,
                          separators=(",", ":"))

    def value(self, key: str, spellings: Mapping[str, int]) -> Any:
        return self.model.model_validate_json(key)

    def key_of(self, value: object) -> str | None:
        return None if value is None else json.dumps(value, sort_keys=True,
                                                      separators=(",", ":"))

    def response_format(self) -> dict[str, Any]:
        return {"type": "json_schema",
                "json_schema": {"name": self.model.__name__,
                                "schema": self.model.model_json_schema()}}

    def vote_fields(self, keys: Sequence[str | None],
                    aggregate: Callable[[list[str | None]], Vote], *, prefix: str = ""
                    ) -> tuple[Any, dict[str, Vote]]:
        """(the decided instance or None, each field's Vote) from the samples' keys (the JSON
        of their objects; fields named `prefix` + name)."""
        docs = [None if k is None else json.loads(k) for k in keys]
        values, fields = self._vote_docs(docs, aggregate, prefix=prefix)
        return self._build(values), fields

    def answer_key(self, decision: Any) -> str | None:
        return None  # the voted object is no one sample's

    def render(self, decision: Any) -> str | None:
        """The reply's text for a decided instance: its JSON."""
        dump = getattr(decision, "model_dump", None)
        return json.dumps(dump(mode="json", by_alias=True)) if callable(dump) else None

    def _build(self, values: dict[str, Any] | None) -> Any:
        from pydantic import ValidationError

        if values is None:
            return None
        try:
            return self.model.model_validate(values)
        except ValidationError:
            return None

    def _vote_docs(self, docs: Sequence[Any], aggregate: Callable[[list[str | None]], Vote],
                   *, prefix: str) -> tuple[dict[str, Any] | None, dict[str, Vote]]:
        values: dict[str, Any] = {}
        fields: dict[str, Vote] = {}
        for name, kind in self.fields.items():
            column = [d.get(name) if isinstance(d, dict) else None for d in docs]
            if isinstance(kind, Structured):
                sub, sub_fields = kind._vote_docs(column, aggregate, prefix=f"{prefix}{name}.")
                fields.update(sub_fields)
                if sub is not None:
                    values[name] = kind._build(sub)
                continue
            if isinstance(kind, Exact) and (plan := self._plan(name)) is not None:
                parts = [d.get(name, MISSING) if isinstance(d, dict) else MISSING
                         for d in docs]
                value = plan.vote(parts, aggregate, prefix + name, fields)
                if value is not MISSING:
                    values[name] = value
                continue
            v = vote_column(kind, column, aggregate)
            if isinstance(v.value, float) and v.value.is_integer() and _unwrap_optional(
                    self._annotations[name]) is int:
                v = replace(v, value=int(v.value))  # an int field's decision is 8, not 8.0
            fields[prefix + name] = v
            if v.decision is not None:
                values[name] = v.value
        if all(d is None for d in docs):
            return None, fields
        return values, fields

    def _plan(self, name: str) -> Plan | None:
        """How field `name`'s parts are voted: by its JSON schema (None: the schema does not
        describe it; it is voted as its exact JSON)."""
        if name not in self._plans:
            from jsonschema import Draft202012Validator

            root = self._schema if self._schema is not None else \
                self.model.model_json_schema()
            props = root.get("properties")
            prop = props.get(name) if isinstance(props, Mapping) else None
            self._plans[name] = None if not isinstance(prop, Mapping) else Plan(
                prop, root, Draft202012Validator(root).evolve(schema=prop))
        return self._plans[name]
