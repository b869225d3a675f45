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
from typing import TYPE_CHECKING, Any

from ensemble.answers import merge_same, spellings

if TYPE_CHECKING:
    from ensemble.tasks import Task

__all__ = ["build_task", "is_open", "join_options", "open_options", "open_questions", "score_open"]


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


def build_task(name: str, opts: dict[str, Any], *, open_answers: bool, answer: str | None
               ) -> Any:
    """`get_task(name, **opts)` with the open-answer options that were asked for (`--open`:
    open_answers=True; `--answer`); a task without such an option refuses it in one line."""
    from ensemble.errors import InputError
    from ensemble.tasks import get_task

    flags = {"open_answers": ("--open", open_answers), "answer": ("--answer", answer)}
    try:
        return get_task(name, **opts, **{k: v for k, (_, v) in flags.items() if v})
    except TypeError as exc:  # the task has no such option: say which flag it refuses
        bad = next((f for k, (f, v) in flags.items() if v and repr(k) in str(exc)), None)
        if bad is None:
            raise
        if bad == "--answer" and open_answers:  # the task's --open sets its kind itself
            kind = build_task(name, opts, open_answers=True, answer=None).answer_kind
            raise InputError(f"task {name!r} takes no --answer: with --open its answers are "
                             f"of kind {kind.name!r} already (--answer sets the kind of jsonl "
                             "rows without choices); drop --answer") from None
        raise InputError(f"task {name!r} takes no {bad} (open answers: mathqa --open, or "
                         "jsonl rows without choices with --answer)") from None


def score_open(task: Task, questions: Sequence[Any], rows: Sequence[Sequence[Any]],
               got: dict[tuple[int, int], list[Any]], n_temps: int) -> list[Any]:
    """The questions of a run as scored: unchanged unless the task's answer kind is open, then
    with each open question's options and spellings from the replies in `rows` (one row per
    (t, question), t-major) and their keys in `got` (renamed in place)."""
    kind = task.answer_kind
    if kind is None or not kind.is_open:
        return list(questions)
    nq = len(questions)
    raws = {divmod(i, nq): [kind.extract(s.text or "") if s is not None else None
                            for s in row] for i, row in enumerate(rows)}
    return open_questions(kind, questions, got, n_temps, raws)


def join_options(shared: Sequence[Any], other: dict[str, Any]) -> list[Any]:
    """Two runs' question records for compare: an open question's options are the answers
    either run gave (its right answer first)."""
    return [q.model_copy(update={"choices": list(dict.fromkeys(
        [*q.choices, *other[q.id].choices]))}) if is_open(q) else q for q in shared]


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
