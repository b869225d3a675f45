"""A client's `response_format` JSON schema as a pydantic model, so the ensemble can vote on
structured outputs field by field (`ensemble.answers`: each field with the kind its annotation
implies).

The schemas clients send for structured outputs are objects of named fields; what is read
here: `type` string / number / integer / boolean / array / object (a nested object becomes a
nested model), `enum` (a `Literal`, voted as a choice), `required`, `description`, `$ref` to
`$defs` / `definitions`, and a `["T", "null"]` or `anyOf` with null (an optional field).
Anything else is a RequestRejected naming the field, never a silently looser model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field, create_model

from .wire import RequestRejected

__all__ = ["json_schema_of", "model_from_schema", "schema_key"]

_SCALARS: dict[str, Any] = {"string": str, "number": float, "integer": int, "boolean": bool}
_MAX_DEPTH = 8


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


def model_from_schema(name: str, schema: Mapping[str, Any]) -> type[BaseModel]:
    """A pydantic model for an object schema (see the module docstring for what is read)."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _model(name, schema, defs, "response_format.json_schema.schema", 0)


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
    if target not in defs:
        raise RequestRejected(f"{where}: $ref {ref!r} is not in the schema's $defs",
                              param="response_format")
    found: Mapping[str, Any] = defs[target]
    return found


def _model(name: str, schema: Mapping[str, Any], defs: Mapping[str, Any], where: str,
           depth: int) -> type[BaseModel]:
    schema = _resolve(schema, defs, where)
    if depth > _MAX_DEPTH:
        raise RequestRejected(f"{where}: nested deeper than {_MAX_DEPTH} objects",
                              param="response_format")
    props = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(props, Mapping) or not props:
        raise RequestRejected(f"{where} must be an object schema with properties (its fields "
                              "are voted one by one)", param="response_format")
    required = set(schema.get("required") or props)
    fields: dict[str, Any] = {}
    for field, sub in props.items():
        if not isinstance(field, str) or not field.isidentifier():
            raise RequestRejected(f"{where}: field name {field!r} is not supported (letters, "
                                  "digits and _ only)", param="response_format")
        fwhere = f"{where}.properties.{field}"
        typ, optional = _field_type(f"{name}_{field}", sub, defs, fwhere, depth)
        desc = sub.get("description") if isinstance(sub, Mapping) else None
        if field in required and not optional:
            fields[field] = (typ, Field(..., description=desc))
        else:
            fields[field] = (Optional[typ], Field(None, description=desc))  # noqa: UP045
    model: type[BaseModel] = create_model(name, **fields)
    return model


def _field_type(name: str, sub: Any, defs: Mapping[str, Any], where: str,
                depth: int) -> tuple[Any, bool]:
    """(annotation, nullable) of one property."""
    if not isinstance(sub, Mapping):
        raise RequestRejected(f"{where} must be a schema object", param="response_format")
    sub = _resolve(sub, defs, where)
    options = sub.get("anyOf")
    if isinstance(options, list):
        rest = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
        if len(rest) == 1 and len(rest) < len(options):
            typ, _ = _field_type(name, rest[0], defs, where, depth)
            return typ, True
        raise RequestRejected(f"{where}: anyOf is supported only as 'T or null'",
                              param="response_format")
    if "enum" in sub:
        values = sub["enum"]
        if not isinstance(values, list) or not values or not all(
                isinstance(v, (str, int, bool)) for v in values):
            raise RequestRejected(f"{where}: enum must list strings or integers",
                                  param="response_format")
        return Literal[tuple(values)], False
    kind = sub.get("type")
    nullable = False
    if isinstance(kind, list):
        nonnull = [k for k in kind if k != "null"]
        nullable = len(nonnull) < len(kind)
        kind = nonnull[0] if len(nonnull) == 1 else None
    if kind in _SCALARS:
        return _SCALARS[kind], nullable
    if kind == "object":
        return _model(name, sub, defs, where, depth + 1), nullable
    if kind == "array":
        items = sub.get("items")
        inner: Any = Any
        if isinstance(items, Mapping) and items:
            inner, _ = _field_type(f"{name}_item", items, defs, f"{where}.items", depth + 1)
        return list[inner], nullable
    raise RequestRejected(f"{where}: type {sub.get('type')!r} is not supported (string, number, "
                          "integer, boolean, array, object, enum)", param="response_format")
