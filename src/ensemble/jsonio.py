"""JSON for everything `ensemble` writes: plain values, and infinities that keep their sign.

JSON has no infinity. The design's contract writes an infinite λ as `null`; on its own that
would make a perfectly wrong model (λ = −∞) read like a perfectly rational one (λ = +∞). So a
non-finite number under key `k` is written as `null` *and* a sibling `k_inf` says which it was:

    {"lam": inf}            ->  {"lam": null, "lam_inf": "+"}
    {"lam": -inf}           ->  {"lam": null, "lam_inf": "-"}
    {"ci": [2.5, inf]}      ->  {"ci": [2.5, null], "ci_inf": [null, "+"]}
    {"x": nan}              ->  {"x": null, "x_inf": "nan"}

(`k_inf` holds "nan" for a NaN, which is neither.) A `null` without a `k_inf` is a missing value.
`from_jsonable` reverses the encoding, so ±∞ round-trip distinctly through every file and every
`--json` document. Numpy values, dataclasses, pydantic models and tuples become plain JSON.

Every document `ensemble` writes carries its format under one name, `schema_version` (an
integer; a document written before formats were numbered has none and is format 1), and is read
through `upgrade`: an older format migrated forward one step at a time, a newer one refused in
one line (inspect_ai's `EvalLog.version` is the model; the sample store keeps its own in
SQLite's `user_version`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["VERSION_KEY", "dumps", "emit_json", "from_jsonable", "loads", "to_jsonable",
           "upgrade", "write_atomic"]

VERSION_KEY = "schema_version"

_MARK = {math.inf: "+", -math.inf: "-"}


def _mark(x: float) -> str:
    return "nan" if math.isnan(x) else _MARK[x]


def _plain(obj: Any) -> Any:
    """numpy / dataclass / pydantic / tuple -> dicts, lists and Python scalars (floats kept)."""
    if obj is None or isinstance(obj, (bool, str, int, float)):
        return obj
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    model_dump = getattr(obj, "model_dump", None)  # pydantic models
    if callable(model_dump):
        return _plain(model_dump())
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return _plain(tolist())
    raise TypeError(f"cannot convert {type(obj).__name__} to JSON")


def _encode(value: Any) -> tuple[Any, Any]:
    """(JSON value, its `_inf` marker or None)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None, _mark(value)
    if isinstance(value, dict):
        return _encode_dict(value), None
    if isinstance(value, list):
        pairs = [_encode(v) for v in value]
        marks = [m for _, m in pairs]
        return [v for v, _ in pairs], (marks if any(isinstance(m, str) for m in marks) else None)
    return value, None


def _encode_dict(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        enc, mark = _encode(v)
        out[k] = enc
        if mark is not None:
            out[f"{k}_inf"] = mark
    return out


def to_jsonable(obj: Any) -> Any:
    """Plain JSON values, with ±∞ and NaN encoded as `null` plus a `k_inf` sibling."""
    enc, mark = _encode(_plain(obj))
    if mark is not None and not isinstance(enc, dict):
        # a bare non-finite number (or list) has no key to hang the marker on
        return {"value": enc, "value_inf": mark}
    return enc


def _decode_value(v: Any, mark: Any) -> Any:
    if isinstance(mark, str):
        return {"+": math.inf, "-": -math.inf, "nan": math.nan}[mark]
    if isinstance(mark, list) and isinstance(v, list):
        return [_decode_value(x, m) for x, m in zip(v, mark, strict=False)]
    return from_jsonable(v)


def from_jsonable(obj: Any) -> Any:
    """Undo `to_jsonable`'s encoding of non-finite numbers (the `_inf` keys are consumed)."""
    if isinstance(obj, list):
        return [from_jsonable(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k.endswith("_inf") and k[:-4] in obj:
            continue
        out[k] = _decode_value(v, obj.get(f"{k}_inf"))
    return out


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """`to_jsonable` then strict JSON text (no NaN or Infinity tokens)."""
    return json.dumps(to_jsonable(obj), indent=indent, allow_nan=False)


def loads(text: str) -> Any:
    """Parse JSON text written by `dumps`, restoring ±∞."""
    return from_jsonable(json.loads(text))


def emit_json(obj: Any) -> None:
    """Print exactly one JSON document on stdout (the `--json` contract)."""
    sys.stdout.write(dumps(obj) + "\n")
    sys.stdout.flush()


def write_atomic(path: os.PathLike[str] | str, text: str) -> None:
    """Write a text file whole or not at all: into a temporary file of its own beside it (a
    unique name, so two processes writing one file never share it), then renamed over it."""
    import tempfile
    from pathlib import Path

    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


Migration = Callable[[dict[str, Any]], dict[str, Any]]


def upgrade(doc: Any, *, current: int, migrations: Mapping[int, Migration] | None = None,
            where: str, fix: str) -> Any:
    """A document as read (JSON values, before `from_jsonable`) brought to format `current`.

    Its `schema_version` (absent: 1) is checked: a newer format is refused, an older one is
    migrated by `migrations[v]` (format v to v + 1) step by step, and the result says
    `current`. A step raises `ValueError(why)` for a document it cannot bring forward. Every
    refusal is one `InputError` line: `where` (the file) first, then why, then `fix` (what
    rewrites an old document; a newer one asks for a newer ensemble). Anything but a JSON
    object is returned as it is, for its model to refuse."""
    from .errors import InputError

    if not isinstance(doc, dict):
        return doc
    v = doc.get(VERSION_KEY, 1)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"{where}: {VERSION_KEY} {json.dumps(v)} is not a format number (an "
                         f"integer >= 1); {fix}")
    if v > current:
        raise InputError(f"{where} was written by a newer ensemble ({VERSION_KEY} {v}, this "
                         f"one reads {current} and older); upgrade ensemble-qr to read it")
    while v < current:
        step = (migrations or {}).get(v)
        try:
            if step is None:
                raise ValueError(f"format {v} is no longer read")
            doc = step(dict(doc))
        except ValueError as exc:
            raise InputError(f"{where}: {exc}; {fix}") from None
        v += 1
    if doc.get(VERSION_KEY) != current:
        doc = {VERSION_KEY: current, **{k: x for k, x in doc.items() if k != VERSION_KEY}}
    return doc
