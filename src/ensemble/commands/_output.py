"""Output helpers shared by the subcommands: JSON on stdout (see `ensemble.jsonio`) and λ for
people."""

from __future__ import annotations

import math

from ..jsonio import emit_json, to_jsonable

__all__ = ["emit_json", "fmt_lam", "to_jsonable"]


def fmt_lam(lam: float | None) -> str:
    """λ for people: '∞' or '−∞' for an infinite value."""
    if lam is None or (isinstance(lam, float) and math.isinf(lam)):
        return "−∞" if lam is not None and lam < 0 else "∞"
    return f"{lam:.4g}"
