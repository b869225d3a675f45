"""A client's JSON schema, voted by its parts and checked as the client will check it.

`JsonSchema(schema)`: the request carries the client's `response_format` unchanged (its
`strict`, `additionalProperties`, `pattern`, `format`, descriptions: what the client sent is
what the upstream gets). A reply is the JSON value in its text (code fences allowed); a reply
that fails the schema (`jsonschema`, Draft 2020-12, formats checked) is invalid and abstains.
The vote follows the schema, each part by the Ensemble's rule:

- an object: each property among the replies that gave the object; an optional property is
  kept when more replies give it than leave it out; `additionalProperties` with a schema (a
  `dict[str, T]`) key by key, a key kept when more replies give it than not;
- an array: element by element (`[len]`, the length by plurality, then each position among the
  replies that reach it), or, under `uniqueItems`, as a set: an element is kept when more than
  half of the replies that gave the array hold it;
- a union (`anyOf`, `oneOf`, a type list such as `["string", "null"]`): the branch first (each
  reply's value counts for the first branch it is valid for), then the branch's parts among
  the replies on it;
- a leaf with the kind its schema implies: `enum` / `const` / boolean a choice, integer and
  number by numeric value (an integer stays an integer), string as text (case, punctuation and
  whitespace aside, decided as most often written), anything without a type by what its
  values are.

Parts are named by their path (`city`, `address.zip`, `tags[0]`, `tags[len]`, `answer(branch)`).
The decision is the voted value, checked against the schema once more: a voted value that
fails it is no decision, and `why` quotes the failure. What cannot be voted is refused in one
line when the schema arrives, never repaired: a `$ref` that does not resolve inside the
schema, `allOf`, `if` / `then` / `else`, `patternProperties`, `dependentSchemas`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from .base import OpenKind
from .columns import Exact, vote_column
from .jsonmode import vote_objects
from .kinds import Choice, Text
from .number import Number

if TYPE_CHECKING:
    from ..aggregators import Vote

__all__ = ["MISSING", "JsonSchema", "Plan", "check_votable"]

REFUSED = ("allOf", "if", "then", "else", "patternProperties", "dependentSchemas")
MAX_DEPTH = 32  # nesting of the values voted (a recursive schema ends with its data)
# why the last vote in this context decided nothing (a voted value the schema rejects)
FAILURE: ContextVar[str | None] = ContextVar("ensemble_schema_failure", default=None)
Fields = dict[str, "Vote"]
Aggregate = Callable[[list[str | None]], "Vote"]


class Missing:
    """A part a reply does not give (it abstains on it)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = Missing()


def _ref(ref: Any, root: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """The schema a local `$ref` points to (`#`, `#/$defs/X`, `#/definitions/X`, any local
    JSON pointer); InputError for anything else."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise InputError(f"{where}: $ref {ref!r} is not a reference inside the schema; send "
                         "the schema with its definitions under $defs")
    node: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise InputError(f"{where}: $ref {ref!r} does not resolve inside the schema; add "
                             "its definition under $defs")
        node = node[part]
    if not isinstance(node, Mapping):
        raise InputError(f"{where}: $ref {ref!r} is not a schema object")
    return node


def check_votable(schema: Any, where: str = "schema") -> None:
    """Refuse, in one InputError line naming the place, a schema this voter cannot vote or
    that is not a valid JSON schema. A schema found fine is remembered (by its JSON): an
    agent sends the same tools with every request, and checking a schema against the
    metaschema costs milliseconds."""
    if not isinstance(schema, Mapping):
        raise InputError(f"{where} must be a JSON schema object")
    text = json.dumps(schema, sort_keys=True, default=str)
    if text in _CHECKED:
        return
    _check(schema, where)
    if len(_CHECKED) >= 4096:
        _CHECKED.clear()
    _CHECKED.add(text)


_CHECKED: set[str] = set()  # schemas (as JSON) already found votable


def _check(schema: Mapping[str, Any], where: str) -> None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        path = ".".join(str(p) for p in exc.absolute_path)
        raise InputError(f"{where}{'.' + path if path else ''}: not a valid JSON schema: "
                         f"{exc.message}") from None
    _walk(schema, schema, where, set())


def _walk(node: Any, root: Mapping[str, Any], where: str, seen: set[int]) -> None:
    if isinstance(node, list):
        for i, x in enumerate(node):
            _walk(x, root, f"{where}[{i}]", seen)
        return
    if not isinstance(node, Mapping) or id(node) in seen:
        return
    seen.add(id(node))
    if "$ref" in node:
        _walk(_ref(node["$ref"], root, where), root, where, seen)
    for key in REFUSED:
        if key in node:
            raise InputError(f"{where}: {key} is not supported: the parts of a value are voted "
                             "one by one, by the schema of each (objects, arrays, anyOf / "
                             "oneOf, enum, const and the JSON types are)")
    for key, sub in node.items():
        if key in ("enum", "const", "examples", "default"):
            continue
        _walk(sub, root, f"{where}.{key}", seen)


@dataclass
class Plan:
    """How a value of one schema is voted (see the module docstring), built lazily so that a
    recursive schema is voted as deep as its data goes."""

    schema: Mapping[str, Any]
    root: Mapping[str, Any]
    validator: Any  # jsonschema's validator for the root, evolved for this schema
    cache: dict[int, Plan] = field(default_factory=dict)

    def sub(self, schema: Mapping[str, Any]) -> Plan:
        while "$ref" in schema and len(schema) == 1:
            schema = _ref(schema["$ref"], self.root, "$ref")
        got = self.cache.get(id(schema))
        if got is None:
            got = self.cache[id(schema)] = Plan(schema, self.root,
                                                self.validator.evolve(schema=schema),
                                                self.cache)
        return got

    def valid(self, value: Any) -> bool:
        return bool(self.validator.is_valid(value))

    # -- what the schema says ---------------------------------------------------------------
    def branches(self) -> list[Mapping[str, Any]] | None:
        s = self.schema
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list):
                rest = {k: v for k, v in s.items() if k != key}
                return [{**rest, **b} if rest and isinstance(b, Mapping) else b
                        for b in s[key]]
        kind = s.get("type")
        if isinstance(kind, list) and len(kind) > 1:
            return [{**s, "type": k} for k in kind]
        return None

    def kind(self) -> str | None:
        kind = self.schema.get("type")
        if isinstance(kind, list):
            kind = kind[0] if kind else None
        if kind is None and "properties" in self.schema:
            return "object"
        if kind is None and ("items" in self.schema or "prefixItems" in self.schema):
            return "array"
        return kind if isinstance(kind, str) else None

    def leaf(self) -> Any:
        """The answer kind of a leaf's values."""
        s = self.schema
        if "const" in s:
            return Choice((str(Choice().key_of(s["const"])),))
        if isinstance(s.get("enum"), list):
            return Choice(tuple(str(Choice().key_of(v)) for v in s["enum"] if v is not None))
        return {"boolean": Choice(("true", "false")), "integer": Number(),
                "number": Number(), "string": Text()}.get(self.kind() or "", None)

    def key(self, value: Any) -> str | None:
        """A value's key as its vote compares it (a set's elements)."""
        kind = self.leaf()
        if kind is not None:
            key: str | None = kind.key_of(value)
            return key
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    # -- the vote ---------------------------------------------------------------------------
    def vote(self, column: Sequence[Any], aggregate: Aggregate, name: str, fields: Fields,
             depth: int = 0) -> Any:
        """The voted value of one part (MISSING when no reply gives one that wins)."""
        if depth > MAX_DEPTH or all(v is MISSING for v in column):
            return MISSING
        if "$ref" in self.schema and len(self.schema) == 1:
            return self.sub(self.schema).vote(column, aggregate, name, fields, depth)
        branches = self.branches()
        if branches is not None:
            return self._union(branches, column, aggregate, name, fields, depth)
        kind = self.kind()
        if kind == "object" and not self.leaf():
            return self._object(column, aggregate, name, fields, depth)
        if kind == "array":
            return self._array(column, aggregate, name, fields, depth)
        if kind == "null":
            return None if any(v is None for v in column) else MISSING
        leaf = self.leaf()
        if leaf is None:  # no type: by what the values are
            return _free(column, aggregate, name, fields)
        v = vote_column(leaf, [None if x is MISSING else x for x in column], aggregate)
        if kind == "integer" and isinstance(v.value, float) and v.value.is_integer():
            v = replace(v, value=int(v.value))  # an integer's decision is 8, not 8.0
        fields[name or "value"] = v
        return MISSING if v.decision is None else v.value

    def _union(self, branches: list[Mapping[str, Any]], column: Sequence[Any],
               aggregate: Aggregate, name: str, fields: Fields, depth: int) -> Any:
        plans = [self.sub(b) if isinstance(b, Mapping) else None for b in branches]
        picks: list[str | None] = []
        for x in column:
            hit = None if x is MISSING else next(
                (str(i) for i, p in enumerate(plans) if p is not None and p.valid(x)), None)
            picks.append(hit)
        v = vote_column(Choice(tuple(str(i) for i in range(len(plans)))), picks, aggregate)
        fields[f"{name}(branch)"] = v
        if v.value is None:
            return MISSING
        won = plans[int(v.value)]
        assert won is not None
        return won.vote([x if p == v.value else MISSING for x, p in zip(column, picks,
                                                                          strict=True)],
                        aggregate, name, fields, depth + 1)

    def _object(self, column: Sequence[Any], aggregate: Aggregate, name: str, fields: Fields,
                depth: int) -> Any:
        docs = [x if isinstance(x, dict) else MISSING for x in column]
        given = sum(d is not MISSING for d in docs)
        if not given:
            return MISSING
        props = self.schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        required = set(self.schema.get("required") or ())
        out: dict[str, Any] = {}
        prefix = f"{name}." if name else ""
        for key, sub in props.items():
            col = [d.get(key, MISSING) if d is not MISSING else MISSING for d in docs]
            if key not in required and 2 * sum(x is not MISSING for x in col) <= given:
                continue  # an optional property most replies leave out
            if not isinstance(sub, Mapping):
                continue
            value = self.sub(sub).vote(col, aggregate, prefix + key, fields, depth + 1)
            if value is not MISSING:
                out[key] = value
        extra = self.schema.get("additionalProperties")
        if extra is False:
            return out
        others: dict[str, None] = {}
        for d in docs:
            if d is not MISSING:
                others.update(dict.fromkeys(k for k in d if k not in props))
        for key in others:
            col = [d.get(key, MISSING) if d is not MISSING else MISSING for d in docs]
            if 2 * sum(x is not MISSING for x in col) <= given:
                continue  # a key most replies do not give
            if isinstance(extra, Mapping):
                value = self.sub(extra).vote(col, aggregate, prefix + key, fields, depth + 1)
            else:
                value = _free(col, aggregate, prefix + key, fields)
            if value is not MISSING:
                out[key] = value
        return out

    def _array(self, column: Sequence[Any], aggregate: Aggregate, name: str, fields: Fields,
               depth: int) -> Any:
        lists = [x if isinstance(x, list) else MISSING for x in column]
        given = [x for x in lists if x is not MISSING]
        if not given:
            return MISSING
        items = self.schema.get("items")
        item_plan = self.sub(items) if isinstance(items, Mapping) else None
        if self.schema.get("uniqueItems") is True:
            return self._set(given, item_plan, aggregate, name, fields)
        lengths = vote_column(Choice(tuple(sorted({str(len(x)) for x in given}, key=int))),
                              [None if x is MISSING else str(len(x)) for x in lists],
                              aggregate)
        fields[f"{name}[len]"] = lengths
        if lengths.value is None:
            return MISSING
        prefix_items = self.schema.get("prefixItems")
        out = []
        for i in range(int(lengths.value)):
            col = [x[i] if x is not MISSING and len(x) > i else MISSING for x in lists]
            sub = prefix_items[i] if isinstance(prefix_items, list) and i < len(prefix_items) \
                else items
            plan = self.sub(sub) if isinstance(sub, Mapping) else None
            value = plan.vote(col, aggregate, f"{name}[{i}]", fields, depth + 1) \
                if plan is not None else _free(col, aggregate, f"{name}[{i}]", fields)
            if value is MISSING:
                return MISSING  # a position without a winner: no array of the voted length
            out.append(value)
        return out

    def _set(self, given: list[list[Any]], plan: Plan | None, aggregate: Aggregate,
             name: str, fields: Fields) -> Any:
        def key(x: Any) -> str | None:
            return plan.key(x) if plan is not None else \
                json.dumps(x, sort_keys=True, separators=(",", ":"))

        held: Counter[str] = Counter()
        spelled: dict[str, Counter[str]] = {}
        order: dict[str, None] = {}
        flat: list[str | None] = []
        for lst in given:
            keys: dict[str, Any] = {}
            for x in lst:
                k = key(x)
                if k is not None:
                    keys.setdefault(k, x)
                    cnt = spelled.get(k)
                    if cnt is None:
                        cnt = spelled[k] = Counter()
                    cnt[json.dumps(x)] += 1
            held.update(keys.keys())
            order.update(dict.fromkeys(keys))
            flat += list(keys)
        fields[f"{name}[]"] = aggregate(flat)  # how many replies hold each element
        kept = [k for k in order if 2 * held[k] > len(given)]
        kept.sort(key=lambda k: -held[k])  # most held first; first seen among equals
        return [json.loads(spelled[k].most_common(1)[0][0]) for k in kept]


def _free(column: Sequence[Any], aggregate: Aggregate, name: str, fields: Fields) -> Any:
    """A part without a schema of its own, voted by what its values are (as JSON mode)."""
    present = [x for x in column if x is not MISSING and x is not None]
    if present and all(isinstance(x, dict) for x in present):
        values, sub = vote_objects([x if isinstance(x, dict) else None for x in column],
                                   aggregate, prefix=f"{name}." if name else "")
        fields.update(sub)
        return values if values else MISSING
    if present and all(isinstance(x, bool) for x in present):
        kind: Any = Choice(("true", "false"))
    elif present and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                         for x in present):
        kind = Number()
    elif present and all(isinstance(x, str) for x in present):
        kind = Text()
    else:
        kind = Exact()
    v = vote_column(kind, [None if x is MISSING else x for x in column], aggregate)
    if isinstance(kind, Number) and v.decision is not None and float(v.value).is_integer() \
            and all(isinstance(x, int) for x in present):
        v = replace(v, value=int(v.value))  # integers stay integers: 7, not 7.0
    fields[name or "value"] = v
    return MISSING if v.decision is None else v.value


def _value_in(text: str) -> Any:
    """The JSON value a reply's text holds: the whole text (code fences aside), else the span
    from its first `{` to its last `}`; MISSING when there is none."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        return json.loads(body)
    except ValueError:
        pass
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            return json.loads(text[start:end + 1])
        except ValueError:
            return MISSING
    return MISSING


class JsonSchema(OpenKind):
    """Replies valid for a client's JSON schema, voted by its parts (module docstring)."""

    name = "json_schema"
    reads = "a JSON value valid for the request's schema"

    def __init__(self, schema: Mapping[str, Any], *,
                 response_format: Mapping[str, Any] | None = None,
                 where: str = "response_format.json_schema.schema") -> None:
        from jsonschema import Draft202012Validator, FormatChecker

        check_votable(schema, where)
        self.schema = schema
        self._format: dict[str, Any] = dict(response_format) if response_format is not None \
            else {
            "type": "json_schema", "json_schema": {"name": "Answer", "schema": dict(schema)}}
        self._validator = Draft202012Validator(schema, format_checker=FormatChecker())
        self._plan = Plan(schema, schema, self._validator)
        self._digest = json.dumps(schema, sort_keys=True, separators=(",", ":"))

    def __repr__(self) -> str:
        spec = self._format.get("json_schema")
        name = spec.get("name") if isinstance(spec, Mapping) else None
        return f"JsonSchema({name or 'Answer'!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonSchema) and other._digest == self._digest

    def __hash__(self) -> int:
        return hash(("json_schema", self._digest))

    def extract(self, text: str) -> str | None:
        value = _value_in(text or "")
        return None if value is MISSING else json.dumps(value, sort_keys=True)

    def canonical(self, raw: str) -> str | None:
        return self._key(_value_in(raw))

    def parse(self, text: str) -> str | None:
        # extract then canonical, without writing the value out and reading it back
        return self._key(_value_in(text or ""))

    def _key(self, value: Any) -> str | None:
        if value is MISSING or not self._validator.is_valid(value):
            return None  # the client would reject it: it abstains
        return json.dumps(value, sort_keys=True, separators=(",", ":"))

    def value(self, key: str, spellings: Mapping[str, int]) -> Any:
        return json.loads(key)

    def response_format(self) -> dict[str, Any]:
        """The client's own response_format, as it sent it."""
        return self._format

    def vote_fields(self, keys: Sequence[str | None], aggregate: Aggregate
                    ) -> tuple[Any, dict[str, Vote]]:
        """(the voted value, or None when no reply was valid or the voted value fails the
        schema; each part's Vote)."""
        column = [MISSING if k is None else json.loads(k) for k in keys]
        fields: Fields = {}
        FAILURE.set(None)
        value = self._plan.vote(column, aggregate, "", fields)
        if value is MISSING:
            return None, fields
        error = self.failure(value)
        if error is not None:
            FAILURE.set(error)  # read back by explain(), in the same tally
            return None, fields
        return value, fields

    def failure(self, value: Any) -> str | None:
        """Why a value fails the schema (the most relevant error, with its place), or None."""
        from jsonschema.exceptions import best_match

        error = best_match(self._validator.iter_errors(value))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{'at ' + where + ': ' if where else ''}{error.message}"

    def explain(self, fields: Mapping[str, Vote]) -> str | None:
        """Why the vote just made decided nothing, when the schema said so (`decision.tally`
        asks right after `vote_fields`, in the same context)."""
        error = FAILURE.get()
        return None if error is None else (f"the voted value fails the request's schema "
                                           f"({error}); nothing is returned as valid")

    def render(self, decision: Any) -> str | None:
        return None if decision is None else json.dumps(decision)

    def answer_key(self, decision: Any) -> str | None:
        return None  # the voted value is no one sample's
