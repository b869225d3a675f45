"""Open questions in an eval: each question's options are the answers its samples gave.

A question without choices (`Question.choices == ()`, a task whose `answer_kind` is open) is
scored by its kind's equivalence: the canonical keys its samples gave, at every temperature,
are merged by `kind.same` together with the right answer (the group holding the right answer
is named by it), and the question's options become (right answer, other answers by count).
From there the vote estimators, intervals, records, view and compare treat it like a
multiple-choice question.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ensemble.answers import merge_same, spellings

__all__ = ["is_open", "open_options", "open_questions"]


def is_open(question: Any) -> bool:
    """Whether a question (a `Question` or a run's `QuestionRecord`) is open."""
    return bool(question.meta.get("open")) or not question.choices


def open_options(kind: Any, answers: Sequence[str | None], correct: str | None
                 ) -> tuple[list[str | None], tuple[str, ...]]:
    """(the answers renamed to their group's key, the options: right answer first)."""
    tail = [correct] if correct is not None else []
    merged = merge_same(kind, [*answers, *tail])
    if correct is not None:
        rep = merged[-1]
        merged = [correct if a is not None and a == rep else a for a in merged[:-1]]
    counts = Counter(a for a in merged if a is not None)
    others = [a for a, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
              if a != correct]
    return merged, (*tail, *others)


def open_questions(kind: Any, questions: Sequence[Any], got: dict[tuple[int, int], list[Any]],
                   n_temps: int, raws: dict[tuple[int, int], list[Any]] | None = None
                   ) -> list[Any]:
    """The questions with their options set from the answers in `got` ((t index, question
    index) -> keys, renamed in place to their group's key). With `raws` (the same layout: each
    answer as written), `meta["spellings"]` records {answer: {spelling: count}} per question."""
    out = list(questions)
    for qi, q in enumerate(questions):
        if not is_open(q):
            continue
        rows = [got[ti, qi] for ti in range(n_temps) if (ti, qi) in got]
        flat = [a for row in rows for a in row]
        merged, options = open_options(kind, flat, q.correct)
        at = 0
        for ti in range(n_temps):
            if (ti, qi) in got:
                k = len(got[ti, qi])
                got[ti, qi] = merged[at:at + k]
                at += k
        meta = {**q.meta, "open": True}
        if raws is not None:
            written = [a for ti in range(n_temps) for a in raws.get((ti, qi), [])]
            meta["spellings"] = spellings(merged, written)
        out[qi] = replace(q, choices=options, meta=meta)
    return out
