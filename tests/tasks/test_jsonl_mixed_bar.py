"""A jsonl file mixing choice and open rows (defects3 item 2): the sampler read every reply with
one parser (the task's `parse`: any choice of any row, else the open kind), so a number in reply
to a choice question counted as a valid answer on the live bar and in the store, while the
scoring (`parse_for`, per question) counted it invalid. The draw now reads each request's
replies with its own question's parser: the bar's count is the scoring's. Through the eval's
draw (`evals.draw.draw`) against the simulated server: the bar's count is the sampler's
`stats.invalid`, the scoring's the draw's answers."""

from __future__ import annotations

import asyncio
import hashlib
import json

from ensemble.evals.draw import DrawMember, DrawPolicy, draw
from ensemble.providers.options import ProviderOptions
from ensemble.tasks.jsonl import JsonlTask
from ensemble.testing import OpenAnswers, SimulatedServer


def _hash(prompt: str) -> str:
    return "sha256:" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def test_the_bars_invalid_count_is_the_scorings_on_a_mixed_file(tmp_path):
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)}
            for i in range(1, 5)]
    rows += [{"id": f"c{i}", "question": f"Pick a colour ({i}).", "choices": ["red", "blue"],
              "answer": "red"} for i in range(1, 4)]
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = JsonlTask(data=data, answer="number")
    qs = list(task.questions())
    # the simulated model answers a number to every question, the choice ones too
    plan = OpenAnswers({_hash(q.prompt): 2 * i for i, q in enumerate(qs, 1)}, accuracy=1.0)
    with SimulatedServer(seed=4, open_answers=plan) as srv:
        member = DrawMember("openai/sim-expert", 1.0, 2,
                            ProviderOptions(api_base=srv.base_url))
        drawn = asyncio.run(draw(task, qs, [member], out=tmp_path, policy=DrawPolicy()))
    scored_invalid = sum(a is None for a in drawn.answers[0].ravel())
    assert scored_invalid == 2 * 3  # a number is no answer to a choice question
    assert drawn.stats[0].invalid == scored_invalid  # what the live bar counted
    stored = [s.answer for row in drawn.rows for s in row]  # what the store's reader gave
    assert sum(a is None for a in stored) == scored_invalid
