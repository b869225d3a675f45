"""Answer kinds: what an answer is, how it is read from a reply, when two are the same.

    Ensemble(model, answer="number")        # 1250, 1,250, $1,250, \\boxed{1250}: one answer
    Ensemble(model, answer="math")          # symbolic equivalence (math-verify)
    Ensemble(model, answer="text")          # case, whitespace and punctuation-insensitive
    Ensemble(model, answer=Verdict)         # a pydantic model: structured outputs, per field
    Ensemble(model, answer="json")          # JSON mode: each key of the objects voted
    Ensemble(model, answer="format")        # DSPy sections, JSON, ANSWER: X, \\boxed{}, <answer>
    Ensemble(model, tools=[...])            # tool calls: kind, tool, then each argument
    Ensemble(model, choices=["A", "B"])     # "choice", the default with choices=

`resolve_answer(answer, choices)` turns what a user gives into an `AnswerKind`. See
docs/answers.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from .base import AnswerKind, FieldVoter, OpenKind, answer_span, votes_fields
from .columns import Exact
from .formats import ClientFormat, dspy_sections
from .jsonmode import JsonObject, object_in
from .kinds import Choice, Math, Text, clear_math_cache, mbr_choice, normalise_text
from .number import Number, number_key, parse_number
from .schemavote import JsonSchema, check_votable
from .structured import Structured, is_model_class
from .tally import member_keys, merge_same, spellings, vote_keys
from .toolcalls import Tool, ToolCall, ToolCalls, tools_of

__all__ = [
    "ANSWER_NAMES",
    "AnswerKind",
    "Choice",
    "ClientFormat",
    "Exact",
    "FieldVoter",
    "JsonObject",
    "JsonSchema",
    "Math",
    "Number",
    "OpenKind",
    "Structured",
    "Text",
    "Tool",
    "ToolCall",
    "ToolCalls",
    "answer_span",
    "check_votable",
    "dspy_sections",
    "clear_math_cache",
    "mbr_choice",
    "member_keys",
    "merge_same",
    "normalise_text",
    "number_key",
    "object_in",
    "parse_number",
    "resolve_answer",
    "spellings",
    "tools_of",
    "votes_fields",
    "vote_keys",
]

ANSWER_NAMES = ("choice", "number", "math", "text", "json", "format")


def resolve_answer(answer: Any = None, choices: Sequence[str] | None = None) -> Any:
    """The AnswerKind for `answer=` ("choice", "number", "math", "text", "json" (JSON mode,
    voted key by key), "format" (the client's own format), an AnswerKind, a
    pydantic model class, or None: a choice among `choices`, or the raw `<answer>` text)."""
    if answer is None or answer == "choice":
        if answer == "choice" and not choices:
            raise InputError("answer='choice' needs choices=[...]; for open answers use "
                             "answer='number', 'math' or 'text'")
        return Choice(tuple(choices) if choices else None)
    if isinstance(answer, str):
        kinds = {"number": Number, "math": Math, "text": Text, "json": JsonObject,
                 "format": ClientFormat}
        if answer not in kinds:
            raise InputError(f"unknown answer kind {answer!r}; use one of "
                             f"{', '.join(ANSWER_NAMES)}, an AnswerKind or a pydantic model")
        kind: Any = kinds[answer]()
    elif is_model_class(answer):
        kind = Structured(answer)
    elif isinstance(answer, AnswerKind):
        kind = answer
    else:
        raise InputError(f"answer= takes 'choice', 'number', 'math', 'text', an AnswerKind or a "
                         f"pydantic model class, got {answer!r}")
    if choices and kind.is_open:
        raise InputError(f"choices= are for choice answers; answer={kind!r} is open (drop "
                         "choices=, or use answer='choice')")
    return kind
