"""How messages word things: counts ("1 question", "3 questions", never "1 questions"),
positions ("the 2nd sample"), and the user text they may show (`unprintable`: a name, a label,
a model string holding a control character is refused where it is given, once for all)."""

from __future__ import annotations

__all__ = ["control_character", "counted", "escaped", "ordinal", "unprintable"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and the noun, singular for exactly one: `counted(1, "batch", "batches")` is
    "1 batch", `counted(0, "batch", "batches")` "0 batches". `plural` defaults to noun + "s"."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def ordinal(n: int) -> str:
    """`n` as an ordinal, for a position counted from 1 in a message: "1st", "2nd", "11th",
    "22nd" (a 0-based index in a message names the wrong item to a reader)."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _acts(ch: str) -> bool:
    import unicodedata

    return (unicodedata.category(ch) in ("Cc", "Zl", "Zp")
            or "\u202a" <= ch <= "\u202e" or "\u2066" <= ch <= "\u2069")


def control_character(text: str) -> str | None:
    """The first character of `text` that acts on a terminal instead of printing (C0 and C1
    controls, DEL, line and paragraph separators, bidirectional overrides and isolates), as
    U+XXXX with its position; None when there is none."""
    for i, ch in enumerate(text, 1):
        if _acts(ch):
            return f"U+{ord(ch):04X} (character {i})"
    return None


def escaped(text: str) -> str:
    """`text` with each character that would act on a terminal written as its escape (\\x1b,
    \\u202e): for text that cannot be refused where it is shown (a client's request, a
    model's reply, in a log line); everything printable is kept as it is."""
    if text.isprintable():  # the common case, and no printable character acts
        return text
    return "".join((f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
                   if _acts(ch) else ch for ch in text)


def unprintable(text: str, what: str) -> str | None:
    """The one-line problem of user text that is shown in tables, reports, logs or a run
    folder's name (`what`: how the user gave it, e.g. "--model") when it holds a control
    character, the text escaped (repr) so the line shows what it holds; None when it is fine."""
    bad = control_character(text)
    if bad is None:
        return None
    return (f"{what} {text!r} holds the control character {bad}, which would act on the "
            "terminal that shows it (tables, logs, reports): write it without")
