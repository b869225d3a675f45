"""Issue 41 item 14 (the live bar's invalid count): the sampler reads each reply with the task's
`parse` (what it stores and its bar counts as invalid); on an open-answer jsonl run that said
"invalid 1196" of 1200 while the result said 0.0%, since `parse` read replies against the union
of the questions' choices, which open rows do not have. Drawn through the sampler from the
simulated server (in-process transport); the eval scores with `parse_for` per question."""

from __future__ import annotations

import asyncio
import json

from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest
from ensemble.tasks.jsonl import JsonlTask
from ensemble.testing import OpenAnswers, SimulatedServer, prompt_hash


def _draw(task: JsonlTask, srv: SimulatedServer, tmp_path) -> tuple[list, int]:
    async def go():
        async with Sampler("openai/sim-expert", api_base=srv.base_url,
                           transport=srv.transport(), store=tmp_path / "s.sqlite") as s:
            rows = await s.sample([SampleRequest.of(q.prompt, temperature=1.0, k=4)
                                   for q in task.questions()], parser=task.parse)
            return rows, s.stats.invalid
    return asyncio.run(go())


def test_the_samplers_invalid_count_on_open_rows_is_the_scores(tmp_path):
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)}
            for i in range(1, 7)]
    rows.append({"id": "c", "question": "Pick one.", "choices": ["red", "blue"],
                 "answer": "red"})
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = JsonlTask(data=data, answer="number")
    plan = OpenAnswers({prompt_hash(q.prompt): 2 * i
                        for i, q in enumerate(task.questions()[:6], 1)}, accuracy=0.7)
    with SimulatedServer(seed=4, open_answers=plan, invalid_rate=0.2) as srv:
        got, invalid = _draw(task, srv, tmp_path)
    scored = [task.parse_for(q, s.text) for q, row in zip(task.questions(), got, strict=True)
              for s in row]
    assert invalid == sum(a is None for a in scored) < len(scored) // 2
    assert [s.answer for row in got for s in row] == scored
