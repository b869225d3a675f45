"""Output helpers shared by the subcommands.

`emit_json` prints exactly one JSON document on stdout, with non-finite floats as null
(DESIGN.md section 6: an infinite λ is JSON null) and numpy scalars/arrays converted.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """Convert numpy values, dataclasses, tuples and non-finite floats to plain JSON values."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return to_jsonable(tolist())
    model_dump = getattr(obj, "model_dump", None)  # pydantic models
    if callable(model_dump):
        return to_jsonable(model_dump())
    raise TypeError(f"cannot convert {type(obj).__name__} to JSON")


def emit_json(obj: Any) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(to_jsonable(obj), allow_nan=False) + "\n")
    sys.stdout.flush()


def console(stderr: bool = False):  # type: ignore[no-untyped-def]
    """A rich Console (imported lazily)."""
    from rich.console import Console

    return Console(stderr=stderr)


def fmt_lam(lam: float | None) -> str:
    """λ for people: '∞' for an infinite value."""
    if lam is None or (isinstance(lam, float) and math.isinf(lam)):
        return "−∞" if lam is not None and lam < 0 else "∞"
    return f"{lam:.4g}"
