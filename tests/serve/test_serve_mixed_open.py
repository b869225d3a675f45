"""`ensemble serve` with members of different price and open answers (issue 40 item 5): the
endpoint decides with the rules the Python API uses. Two replayed members (a cheap one, right
about half the time, and a dear one, right mostly; numbers written several ways) serve
`answer: number` under the cost rule (`stop: cost`, a `cost:` config) and under bayes over the
pooled members; each served reply's decision and the votes it drew from each member are those
of `Ensemble(members=..., answer="number", stop=...)` deciding the same prompts in the same
order on the same recordings. Driven by the official openai client through real HTTP."""

from __future__ import annotations

import json
import random

import openai
import pytest

from ensemble import Ensemble, Member
from ensemble.serve import VotingServer, parse_config

PROMPTS = [f"What is {a} times {b}? Answer with a number in <answer></answer>."
           for a, b in [(125, 10), (37, 41), (1200, 3), (9, 99), (16, 16), (250, 4),
                        (11, 13), (75, 20), (31, 7), (64, 8)]]
RIGHT = [1250, 1517, 3600, 891, 256, 1000, 143, 1500, 217, 512]
PRICES = {"cheap": [0.0, 0.0002], "dear": [0.0, 0.01]}  # USD per 1k prompt, completion tokens


def _spell(x: int, rng: random.Random) -> str:
    return rng.choice([f"{x}", f"{x:,}", f"${x:,}", f"{x}.0", f"\\boxed{{{x}}}"])


def _recordings(tmp_path):
    """cheap: 8 samples of 40 tokens a question, right with probability 0.5, else one of two
    wrong numbers; dear: 3 samples of 120 tokens, right with probability 0.9."""
    rng = random.Random(7)
    paths = {}
    for name, p_right, k, tokens in (("cheap", 0.5, 8, 40), ("dear", 0.9, 3, 120)):
        path = tmp_path / f"{name}.jsonl"
        with path.open("w") as f:
            for prompt, right in zip(PROMPTS, RIGHT, strict=True):
                texts = [_spell(right if rng.random() < p_right else right + rng.choice((1, 10)),
                                rng) for _ in range(k)]
                f.write(json.dumps({"prompt": prompt, "samples": [
                    {"text": f"Work... <answer>{t}</answer>", "tokens": tokens}
                    for t in texts]}) + "\n")
        paths[name] = str(path)
    return paths


@pytest.mark.parametrize("stop", ["cost", "bayes"])
def test_served_mixed_prices_on_open_numbers_decide_as_the_api(tmp_path, stop):
    paths = _recordings(tmp_path)
    ns = {"cheap": 4, "dear": 2}
    members = [{"model": f"replay/{paths[m]}", "n": ns[m], "temperature": 1.0,
                "lam": lam, "price_per_1k": PRICES[m]}
               for m, lam in (("cheap", 0.5), ("dear", 3.0))]
    served = {"answer": "number", "stop": stop, "members": members}
    if stop == "cost":
        # a pilot of two cheap votes; then the rule buys what is worth its price (a vote's
        # price: its recorded tokens at the member's price_per_1k); the default prior throughout
        served["cost"] = {"value_usd": 0.03, "pilot": [2, 0], "prices": [8e-6, 1.2e-3],
                          "pilot_questions": 100}
    cfg = parse_config({"port": 0, "store": str(tmp_path / "serve.sqlite"),
                        "models": {"mix": served}})
    with VotingServer(cfg) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
        docs = [client.chat.completions.create(
            model="mix", messages=[{"role": "user", "content": p}]).model_extra["ensemble"]
            for p in PROMPTS]
    api_members = [Member(m["model"], n=m["n"], temperature=1.0, lam=m["lam"],
                          price_per_1k=m["price_per_1k"]) for m in members]
    plan = cfg.models["mix"].cost.spec() if stop == "cost" else stop
    with Ensemble(members=api_members, answer="number", stop=plan,
                  store=str(tmp_path / "api.sqlite")) as ens:
        decisions = [ens.decide(p) for p in PROMPTS]
    right = 0
    for doc, d, truth in zip(docs, decisions, RIGHT, strict=True):
        drew = [sum(m["votes"].values()) + m.get("invalid", 0) for m in doc["member_votes"]]
        by_member = [sum(1 for s in d.samples if s.completion_tokens == t) for t in (40, 120)]
        assert doc["stop"] == stop
        assert doc["decision"] == d.decision  # a number, however it was spelled
        assert isinstance(doc["decision"], float)
        assert drew == by_member, (doc, d)
        assert all(x <= n for x, n in zip(drew, ns.values(), strict=True))
        if stop == "cost":
            assert doc["cost_rule"]["drawn"] == drew
            assert doc["cost_rule"]["win"] == pytest.approx(d.cost_rule.win)
        right += doc["decision"] == truth
    # the rule drew differently on different questions (it stopped, it was not a fixed n)
    assert len({tuple(sum(m["votes"].values()) for m in doc["member_votes"])
                for doc in docs}) > 1
    assert right >= 7
