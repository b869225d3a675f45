"""How messages count things: "1 question", "3 questions" (never "1 questions")."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for exactly one: `counted(1, "batch", "batches")` is
    "1 batch", `counted(0, "batch", "batches")` "0 batches". `plural` defaults to noun + "s"."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
