"""Choice, text and math answers.

- `Choice(choices)`: one of a fixed list (today's behaviour: the paper's `<answer>X</answer>`
  format with fallbacks, normalised to the spelling in `choices`). `Choice()` without choices
  is the stripped `<answer>` text, compared exactly (the behaviour before answer kinds).
- `Text()`: free text, equal when equal after case folding, dropping punctuation and
  collapsing whitespace. `Text(similarity=0.9)` also counts two answers as the same when their
  rapidfuzz `token_sort_ratio` is at least 90 %, and decides with the minimum-Bayes-risk
  spelling (the one most similar to the others that voted with it).
- `Math()`: expressions (LaTeX or plain), equal when `math_verify.verify` says so; each
  spelling is parsed once (cached), each pair of keys compared once.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ..sampling.parsing import extract_answer
from .base import OpenKind

__all__ = ["Choice", "Math", "Text", "clear_math_cache", "mbr_choice", "normalise_text"]


@dataclass(frozen=True)
class Choice:
    """One of `choices` (exactly as spelled there); without choices, the raw `<answer>` text."""

    choices: tuple[str, ...] | None = None
    name = "choice"
    is_open = False

    def extract(self, text: str) -> str | None:
        return extract_answer(text, self.choices)

    def canonical(self, raw: str) -> str | None:
        return raw

    def parse(self, text: str) -> str | None:
        return extract_answer(text, self.choices)

    def same(self, a: str, b: str) -> bool:
        return a == b

    def value(self, key: str, spellings: Mapping[str, int]) -> Any:
        return key

    def response_format(self) -> dict[str, Any] | None:
        return None

    def key_of(self, value: object) -> str | None:
        """The key of a typed value (a structured output's Literal, Enum or bool field)."""
        v = getattr(value, "value", value)
        if isinstance(v, bool):
            return "true" if v else "false"
        return None if v is None else str(v)


_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)


_WRAP = re.compile(r"\\(?:boxed|text|textbf|textit|textrm|mathrm|mathbf|mbox)\s*\{([^{}]*)\}")


def unwrap_latex(s: str) -> str:
    """`\\boxed{1250}` -> `1250`, `\\text{Paris}` -> `Paris` (nested ones too): the wrapper
    is markup, not part of the answer."""
    while True:
        out = _WRAP.sub(r"\1", s)
        if out == s:
            return s.strip()
        s = out


def normalise_text(s: str) -> str:
    """Case-folded, accents kept, punctuation dropped, whitespace collapsed."""
    s = unicodedata.normalize("NFKC", s).casefold()
    return " ".join(_PUNCT.sub(" ", s).split())


def mbr_choice(texts: Sequence[str]) -> str:
    """The minimum-Bayes-risk text: the one with the highest total similarity to the others
    (rapidfuzz `token_sort_ratio`; ties: the first)."""
    from rapidfuzz import fuzz, process

    if not texts:
        raise InputError("mbr_choice needs at least one text")
    if len(texts) == 1:
        return texts[0]
    sims = process.cdist(texts, texts, scorer=fuzz.token_sort_ratio)
    totals = sims.sum(axis=1)
    return texts[int(totals.argmax())]


@dataclass(frozen=True)
class Text(OpenKind):
    """Free text; `similarity` in (0, 1] merges near-identical answers (None: exact after
    normalisation)."""

    similarity: float | None = None
    name = "text"

    def __post_init__(self) -> None:
        s = self.similarity
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float))
                              or not 0 < s <= 1):
            raise InputError(f"Text(similarity=...) must lie in (0, 1], got {s!r}")

    def canonical(self, raw: str) -> str | None:
        return normalise_text(unwrap_latex(raw)) or None

    def same(self, a: str, b: str) -> bool:
        if a == b:
            return True
        if self.similarity is None:
            return False
        from rapidfuzz import fuzz

        return fuzz.token_sort_ratio(a, b) >= 100.0 * self.similarity

    def value(self, key: str, spellings: Mapping[str, int]) -> str:
        """The decision as written: the most frequent spelling (the MBR one with similarity)."""
        if not spellings:
            return key
        if self.similarity is not None:
            expanded = [s for s, c in spellings.items() for _ in range(c)]
            return unwrap_latex(mbr_choice(expanded))
        return unwrap_latex(max(spellings.items(), key=lambda kv: (kv[1], -len(kv[0])))[0])

    def key_of(self, value: object) -> str | None:
        return self.canonical(value) if isinstance(value, str) else None

    def __repr__(self) -> str:
        return "Text()" if self.similarity is None else f"Text(similarity={self.similarity:g})"


def _timeout() -> int | None:
    # math-verify times out through signal.alarm, which works only in the main thread
    return 5 if threading.current_thread() is threading.main_thread() else None


def _math_parse_uncached(raw: str) -> tuple[Any, ...]:
    import math_verify

    wrapped = any(t in raw for t in ("$", "\\(", "\\[", "\\boxed"))
    first, second = (raw, None) if wrapped else (f"${raw}$", raw)
    got = math_verify.parse(first, parsing_timeout=_timeout())
    if not got and second is not None:
        got = math_verify.parse(second, parsing_timeout=_timeout())
    return tuple(got)


_math_parse = functools.lru_cache(maxsize=65536)(_math_parse_uncached)


@functools.lru_cache(maxsize=65536)
def _math_canonical(raw: str) -> str | None:
    parsed = _math_parse(raw)
    return _math_key(parsed) if parsed else None


def _math_key(parsed: tuple[Any, ...]) -> str | None:
    import sympy

    try:
        return str(sympy.latex(parsed[0])).strip() or None
    except Exception:  # sympy objects without a LaTeX form: math-verify's own string
        return str(parsed[-1]).strip() or None


def _math_same_uncached(a: str, b: str, parse: Any) -> bool:
    import math_verify

    pa, pb = parse(f"${a}$"), parse(f"${b}$")
    if not pa or not pb:
        return False
    return bool(math_verify.verify(list(pa), list(pb), timeout_seconds=_timeout()))


@functools.lru_cache(maxsize=65536)
def _math_same(a: str, b: str) -> bool:
    return _math_same_uncached(a, b, _math_parse)


def clear_math_cache() -> None:
    """Forget the parsed expressions and equivalences cached by `Math` (e.g. to measure)."""
    _math_parse.cache_clear()
    _math_canonical.cache_clear()
    _math_same.cache_clear()


@dataclass(frozen=True)
class Math(OpenKind):
    """A mathematical expression (LaTeX or plain). The key is math-verify's canonical string
    of the parsed expression; two keys are the same answer when `math_verify.verify` holds
    (symbolic equivalence, numbers to 6 decimals). `cache=False` parses every time (for
    measuring the cache's effect)."""

    cache: bool = True
    name = "math"

    def canonical(self, raw: str) -> str | None:
        if self.cache:
            return _math_canonical(raw.strip())
        parsed = _math_parse_uncached(raw)
        return _math_key(parsed) if parsed else None

    def same(self, a: str, b: str) -> bool:
        if a == b:
            return True
        a, b = min(a, b), max(a, b)
        if self.cache:
            return _math_same(a, b)
        return _math_same_uncached(a, b, _math_parse_uncached)

    def __repr__(self) -> str:
        return "Math()"
