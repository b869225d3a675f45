"""A client's `response_format` JSON schema as a pydantic model, so the ensemble can vote on
structured outputs field by field (`ensemble.answers`: each field with the kind its annotation
implies).

The schemas clients send for structured outputs are objects of named fields; what is read is
`ensemble.answers.schema`'s (types, enums, `required`, `$ref`s, optional fields); anything else
is a RequestRejected naming the field, never a silently looser model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ..answers.schema import model_from_schema as answers_model
from ..answers.schemavote import JsonSchema
from ..errors import InputError
from .wire import RequestRejected

__all__ = ["json_schema_of", "model_from_schema", "schema_key", "schema_kind"]


def json_schema_of(response_format: Any) -> tuple[str, dict[str, Any]] | None:
    """(name, schema) of a `{"type": "json_schema", "json_schema": {...}}` response_format;
    None for `{"type": "text"}` or no response_format."""
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise RequestRejected("response_format must be an object", param="response_format")
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind != "json_schema":
        raise RequestRejected(f"response_format type {kind!r} is not supported; use "
                              "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., "
                              "\"schema\": {...}}} or {\"type\": \"text\"}",
                              param="response_format")
    spec = response_format.get("json_schema")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
        raise RequestRejected("response_format.json_schema must be an object with a schema",
                              param="response_format.json_schema")
    name = spec.get("name") or "Answer"
    if not isinstance(name, str) or not name.isidentifier():
        name = "Answer"
    return name, dict(spec["schema"])


def schema_key(name: str, schema: Mapping[str, Any]) -> str:
    """A short digest of a schema, to keep one model (and one Ensemble) per schema."""
    text = json.dumps([name, schema], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def schema_kind(response_format: Mapping[str, Any]) -> JsonSchema:
    """The answer kind of a json_schema response_format: the client's schema voted by its
    parts and checked as the client checks it, the response_format sent upstream as the
    client sent it (`ensemble.answers.schemavote`); a schema it cannot vote is a
    RequestRejected naming the place."""
    spec = response_format.get("json_schema")
    assert isinstance(spec, Mapping)
    try:
        return JsonSchema(spec["schema"], response_format=response_format)
    except InputError as exc:
        raise RequestRejected(str(exc), param="response_format") from None


def model_from_schema(name: str, schema: Mapping[str, Any]) -> type[BaseModel]:
    """A pydantic model for a response_format's object schema (`ensemble.answers.schema`);
    what it cannot read is a RequestRejected naming the field."""
    try:
        return answers_model(name, schema)
    except InputError as exc:
        raise RequestRejected(str(exc), param="response_format") from None
