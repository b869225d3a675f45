"""One part of a structured answer voted: the kind of its values, their keys merged, the
rule's vote, the typed winner (`vote_column`), and `Exact`, the kind of a value compared as its
exact JSON. Shared by the pydantic-model voter (`structured`), the JSON-schema voter
(`schemavote`) and the tool-call voter (`toolcalls`)."""

from __future__ import annotations

import json
import typing
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .base import OpenKind
from .kinds import Choice
from .tally import merge_same

if typing.TYPE_CHECKING:
    from ..aggregators import Vote

__all__ = ["Exact", "vote_column"]


class Exact(OpenKind):
    """A value compared as its exact JSON (lists, dicts, anything without a kind of its own)."""

    name = "exact"

    def canonical(self, raw: str) -> str | None:
        return raw

    def key_of(self, value: object) -> str | None:
        return None if value is None else json.dumps(value, sort_keys=True,
                                                      separators=(",", ":"))

    def value(self, key: str, spellings: Mapping[str, int]) -> Any:
        return json.loads(key)


def vote_column(kind: Any, column: Sequence[Any],
                aggregate: Callable[[list[str | None]], Vote]) -> Vote:
    """One field's Vote: keys of the typed values, merged, aggregated; `value` the typed
    winner (the most common original value for choices, the kind's value otherwise)."""
    keys = [kind.key_of(x) for x in column]
    if isinstance(kind, Choice) and kind.choices is not None:  # a value outside the enum
        keys = [k if k in kind.choices else None for k in keys]
    keys = merge_same(kind, keys)
    originals: dict[str, Counter[str]] = {}
    strings: dict[str, str] = {}  # an original's JSON -> the original, where it is a string
    for k, x in zip(keys, column, strict=True):
        if k is not None:
            text = json.dumps(x)
            if isinstance(x, str):
                strings[text] = x
            cnt = originals.get(k)
            if cnt is None:  # (setdefault would build a Counter per value)
                cnt = originals[k] = Counter()
            cnt[text] += 1
    v = aggregate(keys)
    # each spelling as itself where it is a string, as its JSON otherwise
    spell = {k: {strings.get(s, s): c for s, c in cnt.items()} for k, cnt in originals.items()}
    typed: Any = None
    if v.decision is not None:
        if isinstance(kind, Choice):
            typed = json.loads(originals[v.decision].most_common(1)[0][0])
        else:
            typed = kind.value(v.decision, spell.get(v.decision, {}))
    return replace(v, spellings=spell, value=typed)
