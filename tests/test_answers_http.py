"""Open answers and structured outputs end to end: Ensemble -> litellm -> real HTTP -> the
simulated server's open-answer and structured modes."""

import json
from collections import Counter
from typing import Literal

import pytest
from pydantic import BaseModel

from ensemble import Ensemble, Member, vote
from ensemble.answers import Number
from ensemble.errors import InputError
from ensemble.testing import OpenAnswers, SimulatedServer, StructuredPlan

QUESTIONS = {f"What is {a} times {b}?": float(a * b) for a, b in
             [(25, 50), (12, 104), (3, 7), (40, 31), (125, 10)]}


class Verdict(BaseModel):
    label: Literal["yes", "no", "maybe"]
    score: int


PLANTED = {"label": "no", "score": 7}


def prompt(q: str) -> str:
    return f"### Question:\n{q}\n\nAnswer with a number in <answer></answer>."


@pytest.fixture(scope="module")
def server():
    plan = OpenAnswers(QUESTIONS, accuracy=0.9, wrong=2)
    with SimulatedServer(seed=3, open_answers=plan,
                         structured=StructuredPlan(PLANTED, accuracy=0.7)) as srv:
        yield srv


def test_number_answers_vote_as_one_across_spellings(server):
    ens = Ensemble("openai/sim-expert", api_base=server.base_url, temperature=0.7, n=5,
                   answer="number")
    ds = ens.decide_many([prompt(q) for q in QUESTIONS])
    for d, right in zip(ds, QUESTIONS.values(), strict=True):
        assert d.answer == "number" and isinstance(d.decision, float)
        assert d.decision == right
        # the votes are keyed by the canonical number and keep the raw spellings
        assert sum(d.votes.values()) + d.n_invalid == 5
        assert sum(sum(s.values()) for s in d.spellings.values()) == sum(d.votes.values())
    spelled = Counter(sp for d in ds for sp in d.spellings.get(next(iter(d.votes)), {}))
    # several distinct spellings of the right numbers were written and still voted together
    assert len(spelled) >= 4
    raw_split = [len({s.text.split("<answer>")[1] for s in d.samples}) for d in ds]
    assert max(raw_split) >= 3  # raw strings alone would have split the vote


def test_number_default_would_split_the_vote(server):
    """Without answer= the raw <answer> text is compared as strings: the forms split."""
    ens = Ensemble("openai/sim-expert", api_base=server.base_url, temperature=0.7, n=5)
    d = ens.decide(prompt(next(iter(QUESTIONS))))
    assert d.answer == "choice" and len(d.votes) > 1


def test_structured_verdict_field_by_field(server):
    ens = Ensemble("openai/sim-expert", api_base=server.base_url, temperature=0.7, n=5,
                   answer=Verdict)
    assert ens.params.as_dict()["response_format"]["json_schema"]["schema"] == \
        Verdict.model_json_schema()
    for q in ("Is the claim supported?", "Is the second claim supported?"):
        d = ens.decide(q)
        assert isinstance(d.decision, Verdict)
        replies = [Verdict.model_validate_json(s.text) for s in d.samples]
        for name in ("label", "score"):
            counts = Counter(getattr(r, name) for r in replies)
            top = max(counts.values())
            winners = {v for v, c in counts.items() if c == top}
            assert getattr(d.decision, name) in winners
        assert sum(d.fields["label"].votes.values()) == 5
        assert d.fields["label"].votes == dict(Counter(r.label for r in replies))
        assert d.fields["score"].value == d.decision.score
        assert json.loads(d.to_json())["decision"] == d.decision.model_dump()


def test_structured_invalid_json_is_an_invalid_sample():
    with SimulatedServer(seed=5, structured=StructuredPlan(PLANTED, accuracy=1.0,
                                                           invalid_rate=0.5)) as srv:
        d = Ensemble("openai/sim-expert", api_base=srv.base_url, temperature=0.7, n=8,
                     answer=Verdict).decide("Is it?")
    bad = [s for s in d.samples if not s.valid]
    assert bad and d.n_invalid == len(bad)
    assert d.decision == Verdict(**PLANTED)
    assert d.fields["score"].votes == {"7": 8 - len(bad)}


def test_vote_decorator_and_members_take_answer(server):
    @vote(model="openai/sim-expert", api_base=server.base_url, temperature=0.7, n=5,
          answer=Number(rel_tol=1e-6))
    def product(q: str) -> str:
        return prompt(q)

    q, right = next(iter(QUESTIONS.items()))
    assert product(q).decision == right
    mixed = Ensemble(members=[Member("openai/sim-expert", n=3, temperature=0.5,
                                     api_base=server.base_url),
                              Member("openai/sim-expert", n=2, temperature=1.0,
                                     api_base=server.base_url)], answer="number")
    d = mixed.decide(prompt(q))
    assert d.decision == right and len(d.member_votes) == 2


def test_open_answers_refuse_two_option_rules(server):
    with pytest.raises(InputError, match="open"):
        Ensemble("openai/sim-expert", api_base=server.base_url, n=5, answer="number",
                 aggregator="robust", lam=2.0)
    with pytest.raises(InputError, match="choices= are for choice answers"):
        Ensemble("openai/sim-expert", n=5, answer="number", choices=["A", "B"])
    d = Ensemble("openai/sim-expert", api_base=server.base_url, temperature=0.7, n=5,
                 answer="number", aggregator="majority").decide(prompt("What is 3 times 7?"))
    assert d.decision == 21.0


def test_adaptive_stopping_on_open_answers(server):
    ens = Ensemble("openai/sim-expert", api_base=server.base_url, temperature=0.7, n=12,
                   answer="number", stop="beta")
    ds = ens.decide_many([prompt(q) for q in QUESTIONS])
    assert all(d.decision == right for d, right in zip(ds, QUESTIONS.values(), strict=True))
    assert sum(d.n_samples for d in ds) < 12 * len(ds)


def test_docs_structured_example_runs_against_the_simulator():
    """docs/answers.md's structured-output example, run as written but against the simulated
    server (the model string swapped for the simulator's, its api_base added)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "answers.md").read_text()
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "class Verdict" in b]
    with SimulatedServer(seed=6, structured=StructuredPlan(
            {"label": "supported", "confidence": 8}, accuracy=0.9)) as srv:
        code = code.replace('"openai/gpt-4o-mini",',
                            f'"openai/sim-expert", api_base="{srv.base_url}",')
        ns: dict = {}
        exec(compile(code, "docs/answers.md", "exec"), ns)
    d = ns["d"]
    assert type(d.decision).__name__ == "Verdict" and d.decision.label == "supported"
    assert sum(d.fields["label"].votes.values()) + d.fields["label"].invalid == 5
