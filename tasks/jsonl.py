"""Users' own questions from a JSONL or CSV file.

Fields (one object per line, or CSV columns):
- `question` (required): the prompt text shown to the model;
- `choices` (required): a list, or a string "A|B|C"; answers are normalised to these;
- `answer` (optional): the correct choice, for scoring;
- `id` (optional): defaults to the row number;
- `posterior` (optional, binary tasks): P(first choice is right), for calibration.
The prompt asks for the answer in <answer></answer> tags.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from ensemble.errors import DataError, InputError
from ensemble.sampling.parsing import extract_answer

from .base import Question, register_task

__all__ = ["JsonlTask"]

SUFFIX = ("\n\nChoices: {choices}.\nGive your reasoning in <reason></reason> and your final "
          "answer, exactly one of the choices, in <answer></answer>.")


@register_task("jsonl")
class JsonlTask:
    name = "jsonl"

    def __init__(self, *, data: str | Path | None = None, limit: int | None = None,
                 seed: int = 0, skip_invalid: bool = False) -> None:
        if data is None:
            raise InputError("the jsonl task needs --data PATH (a .jsonl or .csv file)")
        self.path = Path(data)
        self.limit, self.seed, self.skip_invalid = limit, seed, skip_invalid
        self.skipped: list[tuple[int, str]] = []
        self._qs: list[Question] | None = None

    def _rows(self) -> list[tuple[int, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DataError("file not found", path=str(self.path)) from None
        if self.path.suffix.lower() == ".csv":
            return list(enumerate(csv.DictReader(text.splitlines()), start=2))
        rows = []
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append((i, json.loads(line)))
            except json.JSONDecodeError as exc:
                err = DataError(f"not valid JSON ({exc.msg})", path=str(self.path), row=i)
                if not self.skip_invalid:
                    raise err from None
                self.skipped.append((i, str(err)))
        return rows

    def questions(self) -> list[Question]:
        if self._qs is None:
            out = []
            for row, rec in self._rows():
                try:
                    out.append(self._question(row, rec))
                except DataError as exc:
                    if not self.skip_invalid:
                        raise
                    self.skipped.append((row, str(exc)))
            if self.limit is not None and self.limit < len(out):
                import random

                idx = sorted(random.Random(self.seed).sample(range(len(out)), self.limit))
                out = [out[i] for i in idx]
            self._qs = out
        return self._qs

    def _question(self, row: int, rec: Any) -> Question:
        where = {"path": str(self.path), "row": row}
        if not isinstance(rec, dict):
            raise DataError("expected an object", **where)
        q = rec.get("question")
        if not isinstance(q, str) or not q.strip():
            raise DataError("missing or empty", field="question", **where)
        ch = rec.get("choices")
        if isinstance(ch, str):
            ch = [c.strip() for c in ch.split("|") if c.strip()]
        if not isinstance(ch, list) or len(ch) < 2 or not all(isinstance(c, str) for c in ch):
            raise DataError("needs at least two choices (a list or 'A|B')", field="choices",
                            **where)
        ans = rec.get("answer")
        if ans in ("", None):
            ans = None
        elif str(ans) not in ch:
            raise DataError(f"answer {ans!r} is not one of the choices", field="answer", **where)
        post = rec.get("posterior")
        if post not in (None, ""):
            try:
                post = float(post)
            except (TypeError, ValueError):
                raise DataError("must be a number in [0, 1]", field="posterior", **where) from None
            if not 0 <= post <= 1:
                raise DataError("must be a number in [0, 1]", field="posterior", **where)
        else:
            post = None
        return Question(id=str(rec.get("id") or f"row-{row}"),
                        prompt=q.strip() + SUFFIX.format(choices=", ".join(ch)),
                        choices=tuple(ch), correct=None if ans is None else str(ans),
                        posterior=post, meta={"row": row})

    def parse(self, text: str) -> str | None:
        # the union of all questions' choices (questions may offer different ones)
        if not hasattr(self, "_all_choices"):
            seen: dict[str, None] = {}
            for q in self.questions():
                seen.update(dict.fromkeys(q.choices))
            self._all_choices = tuple(seen)
        return extract_answer(text, self._all_choices)
