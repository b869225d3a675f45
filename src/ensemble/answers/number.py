"""Numbers: `1250`, `1,250`, `1250.0`, `$1,250`, `\\boxed{1250}` and `1.25e3` are one answer.

Canonicalising reads the answer span (`answer_span`), unwraps `\\boxed{}`, drops currency signs
($, €, £, ¥, `\\$`), LaTeX spacing, thousands separators (`1,250`, `1{,}250`, `1\\,250`) and a
trailing percent sign (`50%` is the number 50), reads scientific notation (`1.2e3`,
`1.2 \\times 10^{3}`), simple fractions (`3/4`, `\\frac{3}{4}`) and a sign written apart
(`- 49`), and takes the last number written. A mixed number (`1 1/2`, `1\\frac{1}{2}`) is
not read (None): read as 1/2 it would be a wrong value, worse than none. The key is the
shortest exact spelling of the value (`1250`, `0.75`, `-49`); two keys are the same answer
when they are equal within `rel_tol` / `abs_tol` (`math.isclose`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InputError
from .base import OpenKind, braced

__all__ = ["Number", "number_key", "parse_number"]

_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*)\}\s*\{\s*([^{}]*)\}")
_TIMES10 = re.compile(r"\s*(?:\\times|\\cdot|×|\*|x)\s*10\s*\^\s*\{?\s*([-+−]?\d+)\s*\}?")
_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3})((?:,\d{3})+)(?![\d])")
_DROP = re.compile(r"\\[,!;: ]|\\\$|\\%|[$€£¥\u00a0\u2009\u202f]|\{,\}|\\left|\\right"
                   r"|\\text\{[^}]*\}")
_NUM = re.compile(
    r"(?P<sign>[-−+]?)\s*(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"(?:\s*/\s*(?P<den>\d+(?:\.\d+)?))?")


_MIXED = re.compile(r"\d\s*$")  # an integer right before a fraction: `1 1/2`
# a number joined to the one before it: a range (`2-3`, `2 - 3`, `2–3`, `2 to 3`), a decimal
# comma or list without spaces (`1,25`), a time or ratio (`12:30`)
_JOINED = re.compile(r"\d(?:\s*[-−–—]|\s+(?:to|or)\s|[,:])\s*[-−+]?\s*$", re.IGNORECASE)
_SPACED = re.compile(r"(?<![\d.,])\d{1,3}(?: \d{3})+(?![\d.,/])")  # `1 000 000`
_CARET = re.compile(r"\^\s*\{?\s*$")  # `^` or `^{` right before a number: its exponent
_UNIT = re.compile(r"\s*[^\W\d_]+\s*$")  # a unit before its exponent: ` m` of `5 m^2`
_PLAIN = re.compile(r"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*")
_SPECIAL = frozenset("\\{$€£¥,^\u00a0\u2009\u202f")


def parse_number(raw: str) -> float | None:
    """The number written in `raw` (the last one, if several), or None."""
    plain = _PLAIN.fullmatch(raw)
    if plain is not None:  # the common case: a bare number
        x = float(plain.group(1))
        return x if math.isfinite(x) else None
    s = raw
    if _SPECIAL.isdisjoint(s):
        return _last_number(s)
    at = s.find("\\boxed")
    if at >= 0:
        brace = s.find("{", at)
        inner = braced(s, brace) if brace >= 0 else None
        if inner is not None:
            s = inner
    if "\\" in s or "{" in s:
        s = _FRAC.sub(r" (\1)/(\2)", s)  # apart: `1\frac{1}{2}` stays a mixed number
    s = _DROP.sub("", s)
    if "10" in s and "^" in s:
        s = _TIMES10.sub(r"e\1", s)
    if "," in s:
        s = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), s)
    return _last_number(s.replace("(", "").replace(")", ""))


def _last_number(s: str) -> float | None:
    if " " in s:  # `1 000 000`: digits grouped by spaces are one number, not its last group
        s = _SPACED.sub(lambda m: m.group(0).replace(" ", ""), s)
    matches = list(_NUM.finditer(s))
    if not matches:
        return None
    last = matches[-1]
    if last.group("den") is not None and not last.group("sign") \
            and _MIXED.search(s, 0, last.start()):
        return None  # a mixed number (`1 1/2`): not read, rather than read as 1/2
    before = s[:last.start()]
    if _JOINED.search(s, 0, last.start("num")):
        # `2-3`, `2 to 3`, `2–3`, `1,25`, `12:30`: a range, a list or a time, not one number;
        # its last piece would be a wrong value, worse than none
        return None
    caret = _CARET.search(before)
    if caret is not None:  # the number is an exponent
        base = before[:caret.start()]
        if base.rstrip() != base or not base or not (base[-1].isdigit() or base[-1] == "."):
            # of a unit (`5 m^2`): the number is the one before the unit
            unit = _UNIT.search(base)
            return _value(matches[-2]) if unit and len(matches) > 1 \
                and matches[-2].end() == unit.start() else None
        power = _value(last)
        x = _last_number(base)
        if x is None or power is None:
            return None
        try:
            y = math.pow(x, power)  # `10^3`, `2^10`
        except (OverflowError, ValueError):
            return None
        return y if math.isfinite(y) else None
    return _value(last)


def _value(last: re.Match[str]) -> float | None:
    """The value of one `_NUM` match (None: not a finite number)."""
    try:
        x = float(last.group("num"))
        den = last.group("den")
        if den is not None:
            d = float(den)
            if d == 0:
                return None
            x /= d
    except ValueError:
        return None
    if last.group("sign") in ("-", "−"):
        x = -x
    return x if math.isfinite(x) else None


def number_key(x: float) -> str:
    """The canonical key of a number: `1250`, `0.75`, `-49`, `1.23456789012e+20`."""
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return format(x, ".12g")


@dataclass(frozen=True)
class Number(OpenKind):
    """A numeric answer; the decision is a float. Equal within `rel_tol` / `abs_tol`."""

    rel_tol: float = 1e-6
    abs_tol: float = 0.0
    name = "number"

    def __post_init__(self) -> None:
        for label, v in (("rel_tol", self.rel_tol), ("abs_tol", self.abs_tol)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise InputError(f"Number({label}=...) must be a number >= 0, got {v!r}")

    def canonical(self, raw: str) -> str | None:
        x = parse_number(raw)
        return None if x is None else number_key(x)

    def same(self, a: str, b: str) -> bool:
        return a == b or math.isclose(float(a), float(b), rel_tol=self.rel_tol,
                                      abs_tol=self.abs_tol)

    def value(self, key: str, spellings: Mapping[str, int]) -> float:
        return float(key)

    def key_of(self, value: object) -> str | None:
        """The key of a typed value (a structured output's int or float field)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return number_key(float(value)) if math.isfinite(value) else None

    def __repr__(self) -> str:
        return f"Number(rel_tol={self.rel_tol:g}, abs_tol={self.abs_tol:g})"
