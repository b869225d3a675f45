"""A JSON schema as a pydantic model, so its objects are voted field by field
(`ensemble.answers.Structured`: each field with the kind its annotation implies).

Used for a client's `response_format` JSON schema (`ensemble serve`) and for a tool's
`parameters` (`ensemble.answers.toolcalls`). What is read: `type` string / number / integer /
boolean / array / object (a nested object becomes a nested model), `enum` (a `Literal`, voted as
a choice), `const` (a one-value `Literal`), `required`, `description`, `$ref` to `$defs` /
`definitions`, and a `["T", "null"]` or an `anyOf` / `oneOf` with null (an optional field).
Anything else is an InputError naming the field (or, `lenient`, a field voted as its exact
JSON), never a silently looser model.
"""

from __future__ import annotations

from collections.abc import Mapping
from keyword import iskeyword
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field, create_model

from ..errors import InputError

__all__ = ["model_from_schema"]

_SCALARS: dict[str, Any] = {"string": str, "number": float, "integer": int, "boolean": bool}
_MAX_DEPTH = 8
# keywords that would change what a field may hold: refused by name, never ignored
_UNSUPPORTED = ("allOf", "not", "if", "then", "else", "patternProperties", "dependentSchemas")


def model_from_schema(name: str, schema: Mapping[str, Any], *,
                      where: str = "response_format.json_schema.schema",
                      lenient: bool = False) -> type[BaseModel]:
    """A pydantic model for an object schema (see the module docstring for what is read).

    `where` names the schema in errors. `lenient` (tool parameters): a property of a kind not
    read here is `Any` (voted as its exact JSON) instead of an error, `required` is what the
    schema lists (JSON Schema's default: none), a nested object without properties is a free
    dict (its exact JSON), and a top-level one a model without fields."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _model(name, schema, defs, where, 0, lenient)


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
    if target not in defs:
        raise InputError(f"{where}: $ref {ref!r} is not in the schema's $defs")
    found: Mapping[str, Any] = defs[target]
    return found


def _model(name: str, schema: Mapping[str, Any], defs: Mapping[str, Any], where: str,
           depth: int, lenient: bool) -> type[BaseModel]:
    schema = _resolve(schema, defs, where)
    if depth > _MAX_DEPTH:
        raise InputError(f"{where}: nested deeper than {_MAX_DEPTH} objects")
    props = schema.get("properties")
    if lenient and schema.get("type", "object") == "object" and not props:
        props = {}
    elif schema.get("type") != "object" or not isinstance(props, Mapping) or not props:
        raise InputError(f"{where} must be an object schema with properties (its fields "
                         "are voted one by one)")
    required = set(schema.get("required") or (() if lenient else props))
    fields: dict[str, Any] = {}
    for i, (field, sub) in enumerate(props.items()):
        if not isinstance(field, str) or not field:
            raise InputError(f"{where}: a property needs a name, got {field!r}")
        # a name Python or pydantic cannot take ("file-path", "_id", "json") is the alias of
        # a field named for its place; the objects voted and sent keep the schema's names
        attr = field if field.isidentifier() and not field.startswith("_") \
            and not iskeyword(field) and not hasattr(BaseModel, field) else f"field_{i}"
        fwhere = f"{where}.properties.{field}"
        try:
            typ, optional = _field_type(f"{name}_{field}", sub, defs, fwhere, depth, lenient)
        except InputError:
            if not lenient:
                raise
            typ, optional = Any, False
        desc = sub.get("description") if isinstance(sub, Mapping) else None
        alias = field if attr != field else None
        if field in required and not optional:
            fields[attr] = (typ, Field(..., description=desc, alias=alias))
        else:
            fields[attr] = (Optional[typ], Field(None, description=desc,  # noqa: UP045
                                                 alias=alias))
    model: type[BaseModel] = create_model(name, **fields)
    return model


def _field_type(name: str, sub: Any, defs: Mapping[str, Any], where: str,
                depth: int, lenient: bool) -> tuple[Any, bool]:
    """(annotation, nullable) of one property."""
    if not isinstance(sub, Mapping):
        raise InputError(f"{where} must be a schema object")
    sub = _resolve(sub, defs, where)
    for union in ("anyOf", "oneOf"):
        options = sub.get(union)
        if isinstance(options, list):
            rest = [o for o in options
                    if not (isinstance(o, Mapping) and o.get("type") == "null")]
            if len(rest) == 1 and len(rest) < len(options):
                typ, _ = _field_type(name, rest[0], defs, where, depth, lenient)
                return typ, True
            raise InputError(f"{where}: {union} is supported only as 'T or null' (one field "
                             "is voted with one kind)")
    if "const" in sub:
        value = sub["const"]
        if not isinstance(value, (str, int, bool)):
            raise InputError(f"{where}: const must be a string, integer or boolean")
        return Literal[value], False
    for keyword in _UNSUPPORTED:
        if keyword in sub:
            raise InputError(f"{where}: {keyword} is not supported (string, number, integer, "
                             "boolean, array, object, enum, const, and anyOf / oneOf as 'T or "
                             "null')")
    if "enum" in sub:
        values = sub["enum"]
        if not isinstance(values, list) or not values or not all(
                isinstance(v, (str, int, bool)) for v in values):
            raise InputError(f"{where}: enum must list strings or integers")
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
        if lenient and not sub.get("properties"):  # a free-form object: its exact JSON
            return dict[str, Any], nullable
        return _model(name, sub, defs, where, depth + 1, lenient), nullable
    if kind == "array":
        items = sub.get("items")
        inner: Any = Any
        if isinstance(items, Mapping) and items:
            inner, _ = _field_type(f"{name}_item", items, defs, f"{where}.items", depth + 1,
                                   lenient)
        return list[inner], nullable
    what = (f"type {sub.get('type')!r} is not supported" if sub.get("type") is not None
            else "a schema without a type is not supported")
    raise InputError(f"{where}: {what} (string, number, integer, boolean, array, object, enum, "
                     "const)")
