"""Users' own multiple-choice or binary questions from a JSONL or CSV file.

Fields (one JSON object per line in a `.jsonl`/`.json` file, or the columns of a `.csv` file
with a header row):

- `question` (required): the question text shown to the model;
- `choices`: the allowed answers, at least two, distinct: a JSON list
  (`["yes", "no"]`) or a string `"A|B|C"` (the only form a CSV cell can hold, besides a JSON list
  written in the cell). A row without `choices` (missing or empty) is an open question: its
  answer is read and compared with the task's answer kind (`answer="number"`, `"math"` or
  `"text"`, the default; `ensemble eval jsonl --answer ...`);
- `answer` (optional, needed to score): the correct choice (matched case-insensitively and
  stored as spelled in `choices`); for an open question the right answer, stored as its
  canonical key (e.g. "1,250" as 1250);
- `id` (optional): a unique id; defaults to `row-<N>`;
- `posterior` (optional, binary questions only): P(the first choice is right) in [0, 1], used
  by calibration to fit λ (answering the first choice is the report X = 1).

Other fields are kept in `Question.meta["extra"]`. Rows are numbered as in the file: the line
number for JSONL, the line where the record starts for CSV (the header is line 1). The prompt is
the question, the choices, and the paper's answer format (<answer></answer>).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ensemble.answers import resolve_answer
from ensemble.errors import DataError, InputError
from ensemble.sampling.parsing import extract_answer

from .base import (
    Question,
    TaskLayout,
    read_questions,
    record_choices,
    register_task,
    seeded_subset,
)
from .records import data_records

__all__ = ["FIELDS", "OPEN_SUFFIX", "PROMPT_SUFFIX", "JsonlTask"]

FIELDS = ("id", "question", "choices", "answer", "posterior")

PROMPT_SUFFIX = ("\n\nChoices: {choices}\n\nGive your reasoning in <reason></reason>, then your "
                 "final answer, exactly one of the choices as written above, in "
                 "<answer></answer>.")
OPEN_SUFFIX = ("\n\nGive your reasoning in <reason></reason>, then your final answer in "
               "<answer></answer>.")


@register_task("jsonl")
class JsonlTask:
    """Questions from a user's JSONL or CSV file (see the module docstring for the fields).

    `limit` picks a random subset with `seed` (kept in file order); `skip_invalid=True` skips
    malformed rows and lists them in `skipped` as (row, reason) instead of raising DataError.
    """

    name = "jsonl"
    layout = TaskLayout(takes_data=True, per_question_choices=True, calibrates=True)
    max_tokens: int | None = 1024  # room for a reasoned answer; --max-tokens overrides

    def __init__(self, *, data: str | Path | None = None, limit: int | None = None,
                 seed: int = 0, skip_invalid: bool = False, answer: str | None = None) -> None:
        if data is None:
            raise InputError("the jsonl task needs --data PATH (a .jsonl or .csv file with "
                             "fields question, choices, answer)")
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise InputError(f"limit must be an integer >= 1, got {limit!r}")
        self.path = Path(data)
        if answer not in (None, "number", "math", "text"):
            raise InputError(f"--answer for open questions is number, math or text, got "
                             f"{answer!r}")
        # the kind of the open questions (rows without choices); choice rows stay choices
        self.open_kind: Any = resolve_answer(answer or "text")
        self.limit, self.seed, self.skip_invalid = limit, seed, skip_invalid
        self.skipped: list[tuple[int, str]] = []
        self.issues: dict[str, list[int]] = {}
        self._total = 0
        self._qs: list[Question] | None = None
        self._all_choices: tuple[str, ...] | None = None
        self._open_rows = False

    @property
    def answer_kind(self) -> Any:
        """The open kind when some question has no choices, else a choice."""
        from ensemble.answers import Choice

        return self.open_kind if any(not q.choices for q in self.questions()) else Choice()

    # -- questions ---------------------------------------------------------------------------
    def questions(self) -> list[Question]:
        """The questions (all, or the seeded subset of `limit`), in file order."""
        if self._qs is not None:
            return self._qs
        out = read_questions(data_records(self.path, columns=("question", "choices")),
                             self._question, path=str(self.path), id_field="id",
                             skip_invalid=self.skip_invalid, skipped=self.skipped,
                             empty="no questions in the file")
        self._total = len(out)
        self._qs = seeded_subset(out, self.limit, self.seed)
        return self._qs

    def _question(self, row: int, rec: Any) -> Question:
        where: dict[str, Any] = {"path": str(self.path), "row": row}
        if not isinstance(rec, Mapping):
            raise DataError("expected a JSON object", **where)
        q = rec.get("question")
        if not isinstance(q, str) or not q.strip():
            raise DataError("missing or empty (the question text)", field="question", **where)
        if rec.get("choices") in (None, "", []):
            return self._open_question(row, rec, q.strip())
        choices = record_choices(rec.get("choices"))
        if choices is None:
            raise DataError("needs at least two distinct non-empty choices, as a list or "
                            "'A|B|C'", field="choices", **where)
        ans = rec.get("answer")
        correct = None
        if ans not in (None, ""):
            by_key = {c.casefold(): c for c in choices}
            correct = by_key.get(str(ans).strip().casefold())
            if correct is None:
                raise DataError(f"{ans!r} is not one of the choices {list(choices)}",
                                field="answer", **where)
        post = rec.get("posterior")
        posterior = None
        if post not in (None, ""):
            if len(choices) != 2:
                raise DataError("a posterior needs exactly two choices (P(first is right))",
                                field="posterior", **where)
            try:
                posterior = float(post)
            except (TypeError, ValueError):
                posterior = float("nan")
            if not 0.0 <= posterior <= 1.0:  # also rejects nan
                raise DataError(f"must be a number in [0, 1], got {post!r}", field="posterior",
                                **where)
        qid = rec.get("id")
        qid = f"row-{row}" if qid in (None, "") else str(qid)
        extra = {k: v for k, v in rec.items() if k not in FIELDS}
        return Question(id=qid, prompt=q.strip() + PROMPT_SUFFIX.format(choices=", ".join(choices)),
                        choices=choices, correct=correct, posterior=posterior,
                        meta={"row": row, "extra": extra})

    def _open_question(self, row: int, rec: Mapping[str, Any], text: str) -> Question:
        where: dict[str, Any] = {"path": str(self.path), "row": row}
        ans = rec.get("answer")
        correct = None
        if ans not in (None, ""):
            correct = self.open_kind.canonical(str(ans))
            if correct is None:
                raise DataError(f"{ans!r} is not a valid {self.open_kind.name} answer",
                                field="answer", **where)
        if rec.get("posterior") not in (None, ""):
            raise DataError("a posterior needs exactly two choices (P(first is right))",
                            field="posterior", **where)
        qid = rec.get("id")
        qid = f"row-{row}" if qid in (None, "") else str(qid)
        extra = {k: v for k, v in rec.items() if k not in FIELDS}
        return Question(id=qid, prompt=text + OPEN_SUFFIX, choices=(), correct=correct,
                        meta={"row": row, "extra": extra, "answer": str(ans)})

    def population(self) -> int:
        """The usable questions of the file, before `limit`."""
        self.questions()
        return self._total

    def data_notes(self) -> dict[str, Any]:
        """Nothing beyond `skipped` and `issues`."""
        return {}

    # -- answers -----------------------------------------------------------------------------
    def parse(self, text: str) -> str | None:
        """The answer in a completion, normalised against the union of all questions' choices.

        Questions may offer different choices; `parse_for` checks one question's own choices.
        A reply naming none of them is read by the open kind when some question is open (rows
        without choices): this is what the sampler stores and its bar counts as invalid,
        which said "invalid 1196" of 1200 on an open run whose result said 0.0%.
        """
        if self._all_choices is None:
            seen: dict[str, None] = {}
            for q in self.questions():
                seen.update(dict.fromkeys(q.choices))
            self._all_choices = tuple(seen)
            self._open_rows = any(not q.choices for q in self.questions())
        got = extract_answer(text, self._all_choices) if self._all_choices else None
        return self.open_kind.parse(text) if got is None and self._open_rows and text else got

    def parse_for(self, question: Question, text: str | None) -> str | None:
        """The answer in a completion, one of `question.choices` (an open question: its
        canonical key under the task's answer kind), or None."""
        if not question.choices:
            return self.open_kind.parse(text) if text else None
        return extract_answer(text, question.choices)
