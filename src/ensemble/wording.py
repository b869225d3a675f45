"""How messages count things: "1 question", "3 questions" (never "1 questions")."""

from __future__ import annotations

__all__ = ["counted", "ordinal"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for exactly one: `counted(1, "batch", "batches")` is
    "1 batch", `counted(0, "batch", "batches")` "0 batches". `plural` defaults to noun + "s"."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def ordinal(n: int) -> str:
    """`n` as an ordinal, for a position counted from 1 in a message: "1st", "2nd", "11th",
    "22nd" (a 0-based index in a message names the wrong item to a reader)."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
