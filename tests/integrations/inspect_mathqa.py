"""An inspect_ai task over the real MathQA test split (the first questions of a seeded subset),
used by test_inspect.py through inspect's Python API and its own CLI. The data path comes from
ENSEMBLE_TEST_MATHQA and the question count from ENSEMBLE_TEST_LIMIT."""

import os

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate

from ensemble.tasks import get_task


@task
def mathqa_vote() -> Task:
    questions = get_task("mathqa", data=os.environ["ENSEMBLE_TEST_MATHQA"],
                         limit=int(os.environ.get("ENSEMBLE_TEST_LIMIT", "4")), seed=3).questions()
    return Task(dataset=[Sample(input=q.prompt, target=q.correct or "", id=q.id)
                         for q in questions],
                solver=generate(), scorer=match(location="any"))
