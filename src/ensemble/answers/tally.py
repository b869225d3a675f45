"""From parsed keys to votes: merge keys that are the same answer, keep the spellings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .base import AnswerKind

__all__ = ["member_keys", "merge_same", "spellings", "vote_keys"]


def merge_same(kind: AnswerKind, keys: Sequence[str | None]) -> list[str | None]:
    """Each key replaced by its group's representative: keys that `kind.same` calls equal
    vote together. Representatives are taken most frequent first (ties: the smaller key), so
    the result does not depend on the order of the samples."""
    counts = Counter(k for k in keys if k is not None)
    if len(counts) <= 1:
        return list(keys)
    reps: list[str] = []
    rep_of: dict[str, str] = {}
    for key, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        for r in reps:
            if kind.same(r, key):
                rep_of[key] = r
                break
        else:
            reps.append(key)
            rep_of[key] = key
    return [None if k is None else rep_of[k] for k in keys]


def vote_keys(kind: AnswerKind, keys: Sequence[str | None]) -> list[str | None]:
    """The keys a vote counts over one prompt's pooled answers: open kinds merge the keys
    that are the same answer (`merge_same`), fixed choices are kept as parsed."""
    return merge_same(kind, keys) if kind.is_open else list(keys)


def member_keys(kind: AnswerKind, rows: Sequence[Sequence[str | None]]
                ) -> list[list[str | None]]:
    """`vote_keys` over every member's answers pooled (rows[g]: member g's), split back per
    member: what a decision over these rows counts, e.g. the cost rule's state while it is
    still drawing, merged exactly as the Decision will be."""
    flat = vote_keys(kind, [x for row in rows for x in row])
    out, i = [], 0
    for row in rows:
        out.append(flat[i:i + len(row)])
        i += len(row)
    return out


def spellings(merged: Sequence[str | None], raws: Sequence[str | None]
              ) -> dict[str, dict[str, int]]:
    """Per representative key, how often each raw spelling voted for it."""
    out: dict[str, dict[str, int]] = {}
    for key, raw in zip(merged, raws, strict=True):
        if key is not None:
            spelled = out.get(key)
            if spelled is None:
                spelled = out[key] = {}
            raw = raw if raw is not None else key
            spelled[raw] = spelled.get(raw, 0) + 1
    return out
