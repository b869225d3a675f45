"""MathQA (Amini et al., NAACL 2019) in its original JSON format, with the paper's prompt.

Records are the original release's (a JSON list of objects with `Problem`, `Rationale`,
`options`, `correct`, `annotated_formula`, `linear_formula`, `category`). `options` is one
string, e.g. "a ) 38 , b ) 27.675 , c ) 30 , d ) data inadequate , e ) none of these"; it is
parsed into the five options a-e. Commas and parentheses inside values ("$ 1,250",
"( 40,0 )", "sqrt ( 2.88 / pi )") are kept. Messy records seen in the test split, repaired and
counted in `MathQATask.issues`:

- "list_syntax": options written as a Python list, "['a ) 1 cm', 'b ) 3 cm', ...]";
- "doubled_label": a label written twice, "a ) a ) 2 , b ) b ) 5 ..." or only "d ) d ) 12";
- "label_echo": the value repeats its own label another way, "a ) a . 0.6", "a ) a : 45";
- "duplicate_correct_value" (kept, not repaired): the correct option's text also appears under
  another letter, so an answer naming that other letter is scored wrong although it is the same
  value (including two records whose five options are all identical, e.g. "m" five times).

A record whose options cannot be parsed into exactly five non-empty values, or whose `correct` is
not one of a-e, raises DataError naming the file, row and field; with `skip_invalid=True` it is
skipped and listed in `MathQATask.skipped` as (row, reason).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ensemble.answers import Choice, Number, number_key
from ensemble.errors import DataError, InputError
from ensemble.sampling.parsing import extract_answer

from .base import Question, TaskLayout, register_task, seeded_subset

__all__ = ["HUB_DATASET", "ISSUE_KINDS", "OPEN_PROMPT_TEMPLATE", "PROMPT_TEMPLATE", "MathQATask",
           "parse_options", "plain_number"]

LETTERS = ("A", "B", "C", "D", "E")
HUB_DATASET = "allenai/math_qa"
ISSUE_KINDS = ("list_syntax", "doubled_label", "label_echo", "duplicate_correct_value")

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

# The open variant (`--open`): the question without its options, the answer a number.
OPEN_PROMPT_TEMPLATE = """### Scenario:
Please solve the following math question carefully:

### Question:
{question}

### Instructions:
1. Provide your step-by-step calculations enclosed within <reason></reason> tags.
2. Give your final answer as a single number (no units) within <answer></answer> tags.

Example response:
<reason># Your reasoning and calculations go here</reason>
<answer># A number</answer>"""

# a plain number: digits with an optional sign, decimal point and thousands commas ("1,250")
_PLAIN_NUMBER = re.compile(r"-?\s*(?:\d{1,3}(?:,\d{3})+|\d+)(?:\s*\.\s*\d+)?")


def plain_number(value: str) -> float | None:
    """The number an option holds when it is only a number ("27.675", "1,250", "- 4"), else
    None ("30 %", "rs . 500", "1 / 4", "data inadequate")."""
    v = value.strip()
    if not _PLAIN_NUMBER.fullmatch(v):
        return None
    return float(re.sub(r"[\s,]", "", v))


# A label "x )" starts the string or follows a separator (comma, space, bracket or quote), so a
# ")" closing a value such as "( 40,0 )" or "sqrt ( pi )" is never taken for a label.
_LABEL = {c: re.compile(rf"(?:^|[,\s\[\"'])\s*{c}\s*\)") for c in "abcdef"}


def parse_options(text: str) -> tuple[list[str], tuple[str, ...]]:
    """The five options a-e of a MathQA `options` string, and the repairs it needed.

    Repairs are a subset of ("list_syntax", "doubled_label", "label_echo"). Raises ValueError
    (with the reason) when the string does not hold exactly five non-empty options.
    """
    s = text.strip()
    repairs: list[str] = []
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
        repairs.append("list_syntax")
    pos = []
    start = 0
    for letter in "abcde":
        m = _LABEL[letter].search(s, start)
        if m is None:
            raise ValueError(f"option {letter}) not found (fewer than five options)")
        pos.append((m.start(), m.end()))
        start = m.end()
    if _LABEL["f"].search(s, start):
        raise ValueError("more than five options (found an option f))")
    out = []
    for i, (_, end) in enumerate(pos):
        letter = "abcde"[i]
        stop = pos[i + 1][0] if i < 4 else len(s)
        value = s[end:stop].strip().strip(",").strip().strip("'\"").strip()
        dup = re.match(rf"^{letter}\s*\)\s*", value)
        if dup:
            value = value[dup.end():].strip()
            repairs.append("doubled_label")
        # "a . 0.6" / "a : 45": the value begins with its own label; a lone letter followed by
        # "." or ":" and then more text is never a math value in this data set.
        echo = re.match(rf"^{letter}\s*[.:]\s+(?=\S)", value)
        if echo:
            value = value[echo.end():].strip()
            repairs.append("label_echo")
        if not value:
            raise ValueError(f"option {letter}) is empty")
        out.append(value)
    return out, tuple(dict.fromkeys(repairs))


@register_task("mathqa")
class MathQATask:
    """MathQA multiple-choice questions with the paper's prompt.

    `open_answers=True` (`ensemble eval mathqa --open`): the question without its options, the
    answer a number scored by numeric equivalence with the right option's value
    (`answer_kind` is then `Number()`); questions whose right option is not a plain number are
    skipped and counted in `not_numeric` (before `limit` picks its subset).

    `data` is a path to the original JSON (e.g. the test split's test.json); without it the
    test split is loaded from the Hugging Face hub (`allenai/math_qa`) when the `datasets`
    package is installed and the hub is reachable. `limit` picks a random subset of that many
    questions with `seed` (kept in file order), so `limit=500, seed=0` is reproducible.
    """

    name = "mathqa"
    layout = TaskLayout(takes_data=True, chance=0.2)
    max_tokens: int | None = 1024  # room for a worked solution and the answer
    choices = LETTERS

    def __init__(self, *, data: str | Path | None = None, limit: int | None = None,
                 seed: int = 0, skip_invalid: bool = False, split: str = "test",
                 open_answers: bool = False) -> None:
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise InputError(f"limit must be an integer >= 1, got {limit!r}")
        self.path = Path(data) if data is not None else None
        self.limit = limit
        self.seed = seed
        self.skip_invalid = skip_invalid
        self.split = split
        self.open_answers = bool(open_answers)
        self.answer_kind: Any = Number() if self.open_answers else Choice(LETTERS)
        self.not_numeric: list[int] = []  # rows skipped by the open variant
        self.skipped: list[tuple[int, str]] = []
        self.issues: dict[str, list[int]] = {k: [] for k in ISSUE_KINDS}
        self._questions: list[Question] | None = None
        self._total = 0

    @property
    def source(self) -> str:
        return str(self.path) if self.path is not None else f"hf:{HUB_DATASET}/{self.split}"

    @property
    def repaired(self) -> int:
        """Number of records whose options string needed a repair."""
        rows: set[int] = set()
        for kind in ("list_syntax", "doubled_label", "label_echo"):
            rows.update(self.issues[kind])
        return len(rows)

    def _load(self) -> list[Any]:
        if self.path is None:
            return _load_from_hub(self.split)
        try:
            with open(self.path, encoding="utf-8") as fh:
                records = json.load(fh)
        except FileNotFoundError:
            raise DataError("file not found (pass --data PATH to MathQA's test.json)",
                            path=str(self.path)) from None
        except IsADirectoryError:
            raise DataError("is a directory, expected MathQA's JSON file",
                            path=str(self.path)) from None
        except json.JSONDecodeError as exc:
            raise DataError(f"not valid JSON ({exc.msg} at line {exc.lineno})",
                            path=str(self.path)) from None
        except UnicodeDecodeError:
            raise DataError("not UTF-8 text", path=str(self.path)) from None
        except OSError as exc:
            raise DataError(f"cannot read ({exc.strerror})", path=str(self.path)) from None
        if not isinstance(records, list):
            raise DataError("expected a JSON list of MathQA records", path=str(self.path))
        return records

    def questions(self) -> list[Question]:
        """The questions (all, or the seeded subset of `limit`), in file order."""
        if self._questions is not None:
            return self._questions
        out = []
        self.not_numeric = []
        for row, rec in enumerate(self._load()):
            try:
                q = self._question(row, rec)
                if self.open_answers:
                    opened = self._open(q)
                    if opened is None:
                        self.not_numeric.append(row)
                        continue
                    q = opened
                out.append(q)
            except DataError as exc:
                if not self.skip_invalid:
                    raise
                self.skipped.append((row, str(exc)))
        if not out:
            raise DataError("no usable MathQA records", path=self.source)
        self._total = len(out)
        out = seeded_subset(out, self.limit, self.seed)
        self._questions = out
        return out

    def _question(self, row: int, rec: Any) -> Question:
        where: dict[str, Any] = {"path": self.source, "row": row}
        if not isinstance(rec, Mapping):
            raise DataError("expected a JSON object", **where)
        for fld in ("Problem", "options", "correct"):
            if not isinstance(rec.get(fld), str) or not rec[fld].strip():
                raise DataError("missing, empty or not a string", field=fld, **where)
        try:
            options, repairs = parse_options(rec["options"])
        except ValueError as exc:
            raise DataError(str(exc), field="options", **where) from None
        correct = rec["correct"].strip().lower()
        if len(correct) != 1 or correct not in "abcde":
            raise DataError(f"must be one of a-e, got {rec['correct']!r}", field="correct",
                            **where)
        for kind in repairs:
            self.issues[kind].append(row)
        value = options["abcde".index(correct)]
        ambiguous = options.count(value) > 1
        if ambiguous:
            self.issues["duplicate_correct_value"].append(row)
        opts = "\n".join(f"{L}) {v}" for L, v in zip(LETTERS, options, strict=False))
        return Question(
            id=f"mathqa-{row}",
            prompt=PROMPT_TEMPLATE.format(question=rec["Problem"].strip(), options=opts),
            choices=LETTERS, correct=correct.upper(),
            meta={"row": row, "category": rec.get("category"), "options": options,
                  "repairs": repairs, "ambiguous": ambiguous})

    def _open(self, q: Question) -> Question | None:
        """The open variant of a question, or None when its right option is not a number."""
        value = plain_number(q.meta["options"]["ABCDE".index(str(q.correct))])
        if value is None:
            return None
        problem = q.prompt.split("### Question:\n", 1)[1].split("\n\n### Options:", 1)[0]
        return Question(id=q.id, prompt=OPEN_PROMPT_TEMPLATE.format(question=problem),
                        choices=(), correct=number_key(value),
                        meta={**q.meta, "letter": q.correct})

    def parse(self, text: str) -> str | None:
        """The option letter A-E in a completion (the open variant: the number's canonical
        key), or None."""
        if self.open_answers:
            return self.answer_kind.parse(text)
        return extract_answer(text, LETTERS)

    def parse_for(self, question: Question, text: str | None) -> str | None:
        return None if text is None else self.parse(text)

    def population(self) -> int:
        """The usable questions of the data, before `limit`."""
        self.questions()
        return self._total

    def data_notes(self) -> dict[str, Any]:
        """With --open: how many questions were skipped because their right option is not a
        plain number."""
        self.questions()
        return {"not_numeric": len(self.not_numeric)} if self.not_numeric else {}


def _load_from_hub(split: str) -> list[Any]:
    """The split from the Hugging Face hub through `datasets`; InputError when unavailable."""
    hint = "pass --data PATH to MathQA's test.json (the original release)"
    try:
        import datasets
    except ImportError:
        raise InputError(f"mathqa needs its data: {hint}, or install the 'datasets' package "
                         f"to load {HUB_DATASET} from the Hugging Face hub") from None
    try:
        ds = datasets.load_dataset(HUB_DATASET, split=split)
    except Exception as exc:  # noqa: BLE001 - offline, gated, renamed: all mean the same here
        first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise InputError(f"could not load {HUB_DATASET} from the Hugging Face hub ({first}); "
                         f"{hint}") from None
    return [dict(r) for r in ds]
