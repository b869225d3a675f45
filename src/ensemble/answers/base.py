"""The answer-kind protocol, and where a reply's answer is written.

A kind turns a reply's text into a canonical key (a string, or None: invalid), says when two
keys are the same answer, and turns the winning key back into a typed decision. Keys are
strings so every aggregation rule, the store's read path and the stopping rules handle every
kind alike; the store keeps the raw text, and parsing happens when samples are read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable

__all__ = ["AnswerKind", "FieldVoter", "OpenKind", "answer_span", "votes_fields"]

_TAG = re.compile(r"<answer>\s*(.*?)\s*(?:</answer>|$)", re.IGNORECASE | re.DOTALL)
_PHRASE = re.compile(r"(?:final\s+answer|the\s+answer|answer)\s*(?:is|:|=)\s*(.+)",
                     re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\s*\{")


@runtime_checkable
class AnswerKind(Protocol):
    """What an answer is: how to read it from a reply, when two are the same, what it means.

    name:      "choice", "number", "math", "text" or "structured".
    is_open:   True when the possible answers are not known in advance (rules that need a
               fixed set of options refuse such kinds).
    extract:   the answer as written in a reply (its raw spelling), or None.
    canonical: a raw spelling's canonical key, or None (invalid).
    parse:     canonical(extract(text)): the sampler's parser.
    same:      whether two canonical keys are the same answer (e.g. numbers within tolerance).
    value:     the typed decision of a winning key, given the spellings that voted for it.
    response_format: what to send as the request's `response_format` (structured outputs),
               or None.
    """

    name: str
    is_open: bool

    def extract(self, text: str) -> str | None: ...

    def canonical(self, raw: str) -> str | None: ...

    def parse(self, text: str) -> str | None: ...

    def same(self, a: str, b: str) -> bool: ...

    def value(self, key: str, spellings: Mapping[str, int]) -> Any: ...

    def response_format(self) -> dict[str, Any] | None: ...


@runtime_checkable
class FieldVoter(Protocol):
    """An answer kind whose decision is voted part by part (structured outputs' fields, JSON
    objects' keys, a tool call's name and arguments), not as one key.

    vote_fields: (the decision or None, each part's Vote by name) from the samples' keys, each
                 part aggregated with `aggregate` (the Ensemble's rule).
    render:      the text of a reply carrying the decision (the voted object as JSON, a
                 client's own format), or None when the decision has no text of its own.
    answer_key:  the key of the samples that voted for a decision that is one sample's answer
                 (their text is then the reply), or None.
    """

    def vote_fields(self, keys: Sequence[str | None],
                    aggregate: Callable[[list[str | None]], Any]
                    ) -> tuple[Any, dict[str, Any]]: ...

    def render(self, decision: Any) -> str | None: ...

    def answer_key(self, decision: Any) -> str | None: ...


_FIELD_VOTERS: dict[type, bool] = {}


def votes_fields(kind: object) -> TypeGuard[FieldVoter]:
    """`isinstance(kind, FieldVoter)`, remembered per class: a runtime protocol check reads
    each of the protocol's members every time (8 to 16 us), and a served request asks it of
    its kind several times (the tally, the reply); kinds get their methods from their class."""
    cls = type(kind)
    known = _FIELD_VOTERS.get(cls)
    if known is None:
        known = _FIELD_VOTERS[cls] = isinstance(kind, FieldVoter)
    return known


def answer_span(text: str | None) -> str | None:
    """Where the answer is written in a reply: the last `<answer>` tag's content, else the
    last `\\boxed{...}`, else the rest of the line after "answer is" / "answer:", else the
    whole (stripped) reply; None when there is none (an empty `<answer></answer>` is no
    answer: the whole reply would read as "answer answer")."""
    if not text or not text.strip():
        return None
    written = _TAG.findall(text)
    tags = [t for t in written if t.strip() and not t.lstrip().startswith("#")]
    if tags:
        return tags[-1].strip()
    boxes = list(_BOXED.finditer(text))
    if boxes:
        inner = braced(text, boxes[-1].end() - 1)
        if inner is not None:
            return inner.strip()
    phrases = list(_PHRASE.finditer(text))
    if phrases:
        return phrases[-1].group(1).strip()
    return None if written else text.strip()


def braced(text: str, open_at: int) -> str | None:
    """The text inside the brace group opening at `open_at` (nested braces kept), or None."""
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1:i]
    return None


class OpenKind:
    """Shared defaults of the open kinds: the answer span, exact equality of keys, the key as
    the decision, no response_format."""

    name = "open"
    is_open = True

    def extract(self, text: str) -> str | None:
        return answer_span(text)

    def canonical(self, raw: str) -> str | None:  # pragma: no cover - every kind overrides
        raise NotImplementedError

    def parse(self, text: str) -> str | None:
        raw = self.extract(text)
        return None if raw is None else self.canonical(raw)

    def same(self, a: str, b: str) -> bool:
        return a == b

    def value(self, key: str, spellings: Mapping[str, int]) -> Any:
        return key

    def response_format(self) -> dict[str, Any] | None:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
