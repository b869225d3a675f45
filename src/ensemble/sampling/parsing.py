"""Answer extraction: from a completion's text to a normalised answer, or None (invalid).

The paper's format is `<reason>…</reason><answer>X</answer>`. Fallbacks, in order: the last
`<answer>` tag (closing tag optional), "answer: X" / "answer is X", a bold or boxed letter, and
finally a lone choice token. Normalisation keeps single letters: "A", "a", "(a)", "a)" all give
"A" when the choices are letters; it never turns a letter into an empty string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = ["check_choices", "choice_parser", "extract_answer", "normalise"]

_TAG = re.compile(r"<answer>\s*(.*?)\s*(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_PHRASE = re.compile(
    r"(?:final\s+answer|answer)\s*(?:is|:|=)?\s*[:\-]?\s*\**\(?([A-Za-z0-9][^\s\)\*\.,;]*)",
    re.IGNORECASE,
)
_BOXED = re.compile(r"\\boxed\{\s*([^}]*)\}|\*\*\(?([A-Za-z])\)?\*\*")
_STRIP = " \t\r\n\"'`*.()[]{}:;,#"


def normalise(raw: str, choices: Sequence[str] | None = None) -> str | None:
    """Normalise a raw answer against the allowed choices (case-insensitive).

    With choices, returns the matching choice exactly as spelled in `choices`, or None.
    A raw answer like "B) 27.5" or "(b)" matches the choice "B". Without choices, returns the
    stripped text (None if nothing is left).
    """
    text = raw.strip().strip(_STRIP).strip()
    if not text:
        return None
    if choices is None:
        return text
    by_lower = {c.lower(): c for c in choices}
    hit = by_lower.get(text.lower())
    if hit is not None:
        return hit
    # Leading option label: "B) 27", "b. foo", "(c) 12", "L - left box"
    m = re.match(r"^\(?([A-Za-z0-9]+)\s*[\)\.:\-]", raw.strip().lstrip("*#`'\" "))
    if m and m.group(1).lower() in by_lower:
        return by_lower[m.group(1).lower()]
    first = re.split(r"[\s\)\.:,;]", text, maxsplit=1)[0].strip(_STRIP)
    if first.lower() in by_lower:
        return by_lower[first.lower()]
    return None


def extract_answer(text: str | None, choices: Sequence[str] | None = None) -> str | None:
    """The answer in a completion, normalised against `choices`; None when there is none."""
    if not text:
        return None
    tags = _TAG.findall(text)
    for raw in reversed(tags):
        if raw.lstrip().startswith("#"):
            continue  # the prompt's placeholder echoed back ("# A single uppercase letter")
        got = normalise(raw, choices)
        if got is not None:
            return got
    if tags and choices is None:
        return None
    for m in reversed(list(_PHRASE.finditer(text))):
        got = normalise(m.group(1), choices)
        if got is not None:
            return got
    for m in reversed(list(_BOXED.finditer(text))):
        got = normalise(m.group(1) or m.group(2) or "", choices)
        if got is not None:
            return got
    if choices is not None:
        # A reply that is just a choice, e.g. "B" or "b)".
        got = normalise(text, choices)
        if got is not None and len(text.strip()) <= 8:
            return got
        # Word choices ("yes"/"no", "positive"/"negative"): exactly one of them named in the
        # reply. Never for single letters, which occur in ordinary words and sentences.
        words = [c for c in choices if len(c) > 1]
        if words and len(words) == len(choices):
            named = [c for c in words
                     if re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", text, re.IGNORECASE)]
            if len(named) == 1:
                return named[0]
    return None


def check_choices(choices: Sequence[str], *, what: str = "choices") -> None:
    """InputError when a choice is not valid text (a lone surrogate: bytes that were not
    UTF-8 on a command line), or two differ only in case or surrounding spaces: replies are
    matched without either, so one of them could never be chosen."""
    from .types import check_text

    seen: dict[str, str] = {}
    from ..wording import unprintable

    for c in choices:
        check_text(c, what=f"{what} {c!r}")
        problem = unprintable(c, what)
        if problem is not None:
            from ..errors import InputError

            raise InputError(problem)
        other = seen.setdefault(c.strip().casefold(), c)
        if other != c:
            from ..errors import InputError

            raise InputError(f"{what} lists {other!r} and {c!r}, which differ only in case or "
                             "surrounding spaces: replies are matched without either, so "
                             f"{c!r} could never win; give each answer once")


def choice_parser(choices: Sequence[str]) -> Callable[[str], str | None]:
    """A parser (text -> answer or None) restricted to `choices` (no two equal but for case)."""
    frozen = tuple(choices)
    check_choices(frozen)

    def parse(text: str) -> str | None:
        return extract_answer(text, frozen)

    parse.choices = frozen  # type: ignore[attr-defined]
    return parse
