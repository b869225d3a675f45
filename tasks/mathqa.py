"""MathQA (Amini et al., NAACL 2019) in its original JSON format, with the paper's prompt.

The `options` field is one string, e.g. "a ) 38 , b ) 27.675 , c ) 30 , d ) data inadequate ,
e ) none of these"; it is parsed into five options a-e. Messy records seen in the test split:
labels written twice ("a ) a ) 2 , b ) b ) 5 ..."), single labels doubled ("d ) d ) 12"), and
options given as a Python-style list ("['a ) 1 cm', 'b ) 3 cm', ...]"); commas inside values
("$ 1,250") are kept. A record whose options cannot be parsed, or whose `correct` is not a-e,
raises DataError naming the file, row and field, or is skipped and counted with skip_invalid.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from ensemble.errors import DataError, InputError
from ensemble.sampling.parsing import extract_answer

from .base import Question, register_task

__all__ = ["MathQATask", "parse_options", "PROMPT_TEMPLATE"]

LETTERS = ("A", "B", "C", "D", "E")

# The paper's user prompt (appendix "Prompts for LLMs", multiple-choice study).
PROMPT_TEMPLATE = """### Scenario:
Please review the following math question carefully:

### Question:
{question}

### Options:
{options}

### Instructions:
1. Provide your step-by-step calculations using your math knowledge, enclosed within <reason></reason> tags.
2. Select the best answer from the options provided, and place the uppercase letter of your final answer within <answer></answer> tags.

Please ensure your reasoning clearly supports the selected answer and that your final answer is one of the provided options. If none of the options are precisely correct, choose the closest one.

Example response:
<reason># Your reasoning and calculations go here</reason>
<answer># A single uppercase letter: the option you choose</answer>"""


def parse_options(text: str) -> tuple[list[str], bool]:
    """The five options a-e of a MathQA `options` string, and whether it needed repair."""
    s = text.strip()
    repaired = False
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
        repaired = True
    pos = []
    start = 0
    for letter in "abcde":
        m = re.compile(rf"(?:^|[,\s\[\"'])\s*{letter}\s*\)").search(s, start)
        if m is None:
            raise ValueError(f"option {letter}) not found")
        pos.append((m.start(), m.end()))
        start = m.end()
    out = []
    for i, (_, end) in enumerate(pos):
        stop = pos[i + 1][0] if i < 4 else len(s)
        value = s[end:stop].strip().strip(",").strip().strip("'\"").strip()
        dup = re.match(rf"^{'abcde'[i]}\s*\)\s*", value)
        if dup:
            value = value[dup.end():].strip()
            repaired = True
        if not value:
            raise ValueError(f"option {'abcde'[i]}) is empty")
        out.append(value)
    return out, repaired


@register_task("mathqa")
class MathQATask:
    """MathQA multiple-choice questions; `limit` picks a seeded random subset."""

    name = "mathqa"
    choices = LETTERS

    def __init__(self, *, data: str | Path | None = None, limit: int | None = None,
                 seed: int = 0, skip_invalid: bool = False) -> None:
        if data is None:
            raise InputError("mathqa needs its data file: pass --data PATH to MathQA's test.json "
                             "(the original release, or allenai/math_qa from the hub)")
        if limit is not None and limit < 1:
            raise InputError(f"limit must be >= 1, got {limit}")
        self.path = Path(data)
        self.limit = limit
        self.seed = seed
        self.skip_invalid = skip_invalid
        self.skipped: list[tuple[int, str]] = []
        self.repaired = 0
        self._questions: list[Question] | None = None

    def _load(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8") as fh:
                records = json.load(fh)
        except FileNotFoundError:
            raise DataError("file not found", path=str(self.path)) from None
        except json.JSONDecodeError as exc:
            raise DataError(f"not valid JSON ({exc.msg} at line {exc.lineno})",
                            path=str(self.path)) from None
        except OSError as exc:
            raise DataError(f"cannot read ({exc.strerror})", path=str(self.path)) from None
        if not isinstance(records, list):
            raise DataError("expected a JSON list of MathQA records", path=str(self.path))
        return records

    def questions(self) -> list[Question]:
        if self._questions is not None:
            return self._questions
        out = []
        for row, rec in enumerate(self._load()):
            try:
                out.append(self._question(row, rec))
            except DataError as exc:
                if not self.skip_invalid:
                    raise
                self.skipped.append((row, str(exc)))
        if self.limit is not None and self.limit < len(out):
            picked = sorted(random.Random(self.seed).sample(range(len(out)), self.limit))
            out = [out[i] for i in picked]
        self._questions = out
        return out

    def _question(self, row: int, rec: Any) -> Question:
        where = {"path": str(self.path), "row": row}
        if not isinstance(rec, dict):
            raise DataError("expected a JSON object", **where)
        for fld in ("Problem", "options", "correct"):
            if not isinstance(rec.get(fld), str):
                raise DataError("missing or not a string", field=fld, **where)
        try:
            options, repaired = parse_options(rec["options"])
        except ValueError as exc:
            raise DataError(str(exc), field="options", **where) from None
        self.repaired += repaired
        correct = rec["correct"].strip().lower()
        if correct not in "abcde" or len(correct) != 1:
            raise DataError(f"correct must be one of a-e, got {rec['correct']!r}",
                            field="correct", **where)
        opts = "\n".join(f"{L}) {v}" for L, v in zip(LETTERS, options))
        return Question(id=f"mathqa-{row}", prompt=PROMPT_TEMPLATE.format(
            question=rec["Problem"].strip(), options=opts), choices=LETTERS,
            correct=correct.upper(), meta={"row": row, "category": rec.get("category"),
                                           "options": options})

    def parse(self, text: str) -> str | None:
        return extract_answer(text, LETTERS)
