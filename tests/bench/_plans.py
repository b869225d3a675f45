"""Benchmarks' run plans for answers drawn in the benchmark itself (planted experts, synthetic
replies): the questions written as the `jsonl` task's data file, so the plan is the one
`evals.plan.resolve` gives a run of them, and the scoring steps (`evals.grid.analyse`, ...)
take it as they take a real run's."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ensemble.evals.plan import RunPlan, resolve
from ensemble.evals.spec import one_model
from ensemble.tasks import Question


def jsonl_plan(questions: Sequence[Question], temperatures: Sequence[float],
               ns: Sequence[int], **fields: Any) -> RunPlan:
    """The plan of one model at `temperatures` over multiple-choice `questions` (each with its
    right answer), scored alone at each n; `fields`: the spec's others (samples, bootstrap,
    seed, adaptive, ...)."""
    data = Path(tempfile.mkdtemp(prefix="bench-plan-")) / "questions.jsonl"
    data.write_text("".join(json.dumps({"id": q.id, "question": q.prompt or q.id,
                                        "choices": list(q.choices), "answer": q.correct}) + "\n"
                            for q in questions), encoding="utf-8")
    return resolve(one_model("jsonl", "bench", temperatures, ns, data=str(data), **fields))
