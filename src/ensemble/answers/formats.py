"""Answers in a client's own format: what `ensemble serve` votes when it is given neither
choices nor an answer kind.

`ClientFormat()` reads, in this order, the first of these a reply is written in:

- DSPy's ChatAdapter sections, `[[ ## field ## ]]` then the field's value, up to
  `[[ ## completed ## ]]`: each field is voted on its own (as text: case, punctuation and
  whitespace-insensitive; a reply without the field abstains on it); the reply to the client
  is the sections again, each field its own vote's winner as most often written;
- a JSON object (the whole reply, code fences allowed): voted key by key (`JsonObject`), the
  reply the voted object;
- `ANSWER: X` on a line of its own (inspect_ai's templates; the last such line), `\\boxed{X}`
  (the last), or `<answer>X</answer>` (the paper's; the last tag), else "the answer is X"
  (`ensemble.sampling.parsing`'s fallbacks, as before): one answer, voted
  (a number written several ways is one number; other text stripped of quotes, brackets and
  stray punctuation, compared exactly), the reply the text of a sample that gave it.

- free text, the whole reply, when it is in none of these (a chat answer, a summary):
  voted by its normalised text (case, punctuation and whitespace aside; `FREE_TEXT`), a tie
  going to the most central reply (the tied text most similar to all the replies, rapidfuzz's
  token_sort_ratio), the reply a sample that wrote it; `serve` says so in its reply.

An empty reply has no answer (it abstains); when no reply has one, the decision is None and
`Decision.why` says what was looked for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..sampling.parsing import extract_answer, normalise
from .base import OpenKind, braced
from .columns import vote_column
from .jsonmode import object_in, vote_objects
from .kinds import Choice, Text, normalise_text
from .number import number_key, parse_number

if TYPE_CHECKING:
    from ..aggregators import Vote

__all__ = ["FREE_TEXT", "ClientFormat", "central", "dspy_sections"]

_HEADER = re.compile(r"\[\[ ## (\w+) ## \]\]")
_ANSWER_LINE = re.compile(r"^\s*ANSWER\s*:\s*(.+?)\s*$", re.MULTILINE)
_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.IGNORECASE | re.DOTALL)
_BOXED = re.compile(r"\\boxed\s*\{")
_NUMERIC = re.compile(r"[\s$€£¥\\{},.\-+0-9eE%]+")
FORMATS = ("dspy", "json", "answer", "text")
TEXT_KEY = "text: "  # a free-text reply's key: this, then its normalised text
FREE_TEXT = ("free text: the plurality of the replies' normalised text (case, punctuation and "
             "whitespace aside); a tie goes to the most central reply")


def dspy_sections(text: str) -> dict[str, str] | None:
    """The `[[ ## field ## ]]` sections of a reply (field -> its value, `completed` left out),
    or None when it has none."""
    heads = list(_HEADER.finditer(text))
    if not heads:
        return None
    out: dict[str, str] = {}
    for h, nxt in zip(heads, [*heads[1:], None], strict=True):
        name = h.group(1)
        if name == "completed":
            continue
        end = nxt.start() if nxt is not None else len(text)
        out.setdefault(name, text[h.end():end].strip())
    return out or None


def _answer(text: str) -> str | None:
    lines = _ANSWER_LINE.findall(text)
    if lines:
        return lines[-1]
    boxes = list(_BOXED.finditer(text))
    if boxes:
        inner = braced(text, boxes[-1].end() - 1)
        if inner is not None and inner.strip():
            return inner.strip()
    tags = [t for t in _TAG.findall(text) if t.strip() and not t.lstrip().startswith("#")]
    if tags:
        return tags[-1]
    return extract_answer(text)  # the fallbacks before: "the answer is X", a bold letter


def _answer_key(raw: str) -> str | None:
    """An answer's canonical key: a number's (1,250 and 1250.0 are one), else the text's."""
    if _NUMERIC.fullmatch(raw) and any(c.isdigit() for c in raw):
        x = parse_number(raw)
        if x is not None:
            return number_key(x)
    return normalise(raw)  # stripped of quotes, brackets and stray punctuation


def _read_key(key: str) -> tuple[str, Any]:
    """(format, value) of a key: DSPy's sections or an object read back, or one answer."""
    for form in ("dspy", "json"):
        if key.startswith(form + " {"):
            return form, json.loads(key[len(form) + 1:])
    if key.startswith(TEXT_KEY):
        return "text", key
    return "answer", key


def central(v: Vote, keys: Sequence[str | None]) -> Vote:
    """A free-text vote with its tie broken by centrality: among the most voted texts, the
    one most similar to all the replies (with their multiplicity), never by order or chance."""
    if not v.counts:
        return v
    top = max(v.counts.values())
    tied = sorted(k for k, c in v.counts.items() if c == top)
    if len(tied) == 1:
        return replace(v, decision=tied[0], value=tied[0])
    from rapidfuzz import fuzz, process

    given = [k[len(TEXT_KEY):] for k in keys if k is not None]
    sims = process.cdist([k[len(TEXT_KEY):] for k in tied], given, scorer=fuzz.token_sort_ratio)
    best = tied[int(sims.sum(axis=1).argmax())]
    return replace(v, decision=best, value=best, tie=False,
                   notes=(*v.notes, f"a tie of {len(tied)} texts went to the most central"))


class ClientFormat(OpenKind):
    """An answer in whichever format the client asked for (see the module docstring)."""

    name = "format"
    reads = ("an answer in a known format ([[ ## field ## ]] sections, a JSON object, "
             "ANSWER: X, \\boxed{X} or <answer>X</answer>)")

    def _read(self, text: str | None) -> tuple[str, Any] | None:
        if not text:
            return None
        sections = dspy_sections(text)
        if sections is not None:
            return "dspy", sections
        stripped = text.strip()
        if stripped.startswith(("{", "```")):
            doc = object_in(stripped)
            if doc is not None:
                return "json", doc
        raw = _answer(text)
        if raw is not None:
            return "answer", raw
        words = normalise_text(text)
        return ("text", words) if words else None

    def extract(self, text: str) -> str | None:
        got = self._read(text)
        if got is None:
            return None
        return got[1] if got[0] == "answer" else json.dumps(got[1], sort_keys=True)

    def canonical(self, raw: str) -> str | None:
        return self.parse(raw)

    def parse(self, text: str) -> str | None:
        """The key, readable in `Decision.votes`: one answer's key itself (`B`, `1250`), or
        `dspy ` / `json ` and the compact JSON of DSPy's sections as written or of the
        object."""
        got = self._read(text)
        if got is None:
            return None
        form, value = got
        if form == "answer":
            value = _answer_key(value)
            if value is None:
                return None
        if form == "answer":
            return value
        if form == "text":
            return TEXT_KEY + value
        return f"{form} " + json.dumps(value, sort_keys=True, separators=(",", ":"))

    def value(self, key: str, spellings: Mapping[str, int]) -> Any:
        return _read_key(key)[1]

    def vote_fields(self, keys: Sequence[str | None],
                    aggregate: Callable[[list[str | None]], Vote]
                    ) -> tuple[Any, dict[str, Vote]]:
        """The format by plurality, then: DSPy's fields one by one, a JSON object key by key,
        or one answer. The decision: {"format": "dspy", "fields": {...}}, {"format": "json",
        "object": {...}}, or the answer's key (a number's shortest spelling, else the
        stripped text)."""
        docs = [None if k is None else _read_key(k) for k in keys]
        forms = [None if d is None else d[0] for d in docs]
        fields: dict[str, Vote] = {"format": vote_column(Choice(FORMATS), forms, aggregate)}
        won = fields["format"].value
        values = [d[1] if d is not None and d[0] == won else None for d in docs]
        if won == "answer":
            v = aggregate(values)
            fields["answer"] = v
            return v.decision, fields
        if won == "text":
            v = central(aggregate(values), values)
            fields["text"] = v
            return v.decision, fields
        if won == "json":
            obj, sub = vote_objects(values, aggregate)
            fields.update(sub)
            return ({"format": "json", "object": obj} if obj else None), fields
        if won == "dspy":
            names: dict[str, None] = {}
            for doc in values:
                if isinstance(doc, dict):
                    names.update(dict.fromkeys(doc))
            voted: dict[str, str] = {}
            for name in names:
                vote = vote_column(Text(), [d.get(name) if isinstance(d, dict) else None
                                            for d in values], aggregate)
                fields[name] = vote
                if vote.decision is not None:
                    voted[name] = vote.value
            missing = [n for n in names if n not in voted]
            return (None if missing or not voted else {"format": "dspy", "fields": voted}), fields
        return None, fields

    def render(self, decision: Any) -> str | None:
        """The reply's text: DSPy's sections of the voted fields, or the voted JSON object;
        None for one answer (a sample that gave it is the reply)."""
        if not isinstance(decision, Mapping):
            return None
        if decision.get("format") == "dspy":
            parts = [f"[[ ## {k} ## ]]\n{v}" for k, v in decision["fields"].items()]
            return "\n\n".join([*parts, "[[ ## completed ## ]]"])
        if decision.get("format") == "json":
            return json.dumps(decision["object"])
        return None

    def answer_key(self, decision: Any) -> str | None:
        """The key of the samples that gave a one-answer decision (None: not one answer)."""
        if not isinstance(decision, str):
            return None
        return decision

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientFormat)

    def __hash__(self) -> int:
        return hash("format")
