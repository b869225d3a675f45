"""`ensemble serve --answer number`: open answers through the endpoint (issues 23 and 24).

The upstream (the simulated server's open-answer mode) writes the right number in varied
equivalent spellings (`1250`, `1,250`, `$1,250`, `\\boxed{1250}`, ...): the endpoint's decision is
the number, the votes count the spellings as one answer, and the content is a sample whose
answer is that number. Driven by the official openai client through real HTTP."""

from __future__ import annotations

import openai

from ensemble.answers import Number
from ensemble.serve import VotingServer, parse_config
from ensemble.testing import OpenAnswers, SimulatedServer

QUESTIONS = {f"What is {a} times {b}?": float(a * b) for a, b in
             [(125, 10), (37, 41), (1200, 3), (9, 99)]}


def prompt(q: str) -> str:
    return f"### Question:\n{q}\n\nAnswer with a number in <answer></answer>."


def test_numbers_written_several_ways_are_one_answer_at_the_endpoint():
    plan = OpenAnswers(QUESTIONS, accuracy=0.9, wrong=2)
    with SimulatedServer(seed=5, open_answers=plan, keep_replies=True) as up:
        cfg = parse_config({"port": 0, "models": {"num": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 7,
            "temperature": 0.7, "answer": "number"}}})
        with VotingServer(cfg) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
            spelled: set[str] = set()
            num = Number()
            for q, right in QUESTIONS.items():
                r = client.chat.completions.create(
                    model="num", messages=[{"role": "user", "content": prompt(q)}])
                ens = r.model_extra["ensemble"]
                assert ens["decision"] == right  # a number, not one raw spelling
                assert sum(ens["votes"].values()) + ens["invalid"] == 7
                key = num.parse(r.choices[0].message.content or "")
                assert key is not None and float(key) == right  # a sample that voted for it
                spelled |= {num.extract(t) or "" for t in _texts(up, prompt(q))}
            # the upstream wrote the numbers several ways, and they still voted together
            assert len(spelled) >= 4 and up.stats.requests > 0


def _texts(up, p: str) -> list[str]:
    return [t for r in up.stats.replies if r.prompt == p for t in r.texts]
