"""`ensemble serve` with `stop: cost`: the reply is the cost rule's decision, not the served
aggregator's, and the `ensemble` object says why (`cost_rule`: the rule's posterior `win`, the
votes drawn per member, the aggregator's decision alongside). The upstreams are two simulated
experts (a cheap member whose votes agree on a distractor on some questions, a dear member
that reads every question right: tests/test_cost_decision.py's)."""

from __future__ import annotations

import openai

from ensemble.serve import VotingServer, parse_config
from ensemble.testing import SimulatedServer
from ensemble.testing.expert import MCModel, SimulatedExpert

PROMPTS = [f"Question {i}: which colour? Answer with one of: red, green, blue"
           for i in range(8)]


def test_a_served_cost_ensemble_answers_with_the_rules_decision():
    cheap = SimulatedExpert(lam1=50.0, mc_model=MCModel(0.02, 0.02), seed=1, difficulty_seed=3)
    dear = SimulatedExpert(lam1=50.0, mc_model=MCModel(50.0, 0.01), seed=2, difficulty_seed=3)
    with SimulatedServer(expert=cheap) as s1, SimulatedServer(expert=dear) as s2:
        cfg = parse_config({"port": 0, "models": {"mix": {
            "choices": ["red", "green", "blue"], "aggregator": "plurality", "stop": "cost",
            "cost": {"value_usd": 0.05, "pilot_questions": len(PROMPTS), "pilot": [3, 1]},
            "members": [
                {"model": "openai/cheap", "api_base": s1.base_url, "n": 3, "temperature": 1.0,
                 "lam": 1.5, "price_per_1k": [0.0, 0.15e-3]},
                {"model": "openai/dear", "api_base": s2.base_url, "n": 1, "temperature": 1.0,
                 "lam": 6.0, "price_per_1k": [0.0, 2.5e-3]}]}}})
        with VotingServer(cfg) as srv:
            c = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
            docs = [c.chat.completions.create(model="mix", messages=[
                {"role": "user", "content": p}]).model_extra["ensemble"] for p in PROMPTS]
    outvoted = 0
    for doc in docs:
        cheap_votes, dear_votes = (m["votes"] for m in doc["member_votes"])
        rule = doc["cost_rule"]
        assert doc["stop"] == "cost" and doc["aggregator"] == "cost"
        assert rule["aggregator"] == "plurality" and rule["drawn"] == [
            sum(cheap_votes.values()), sum(dear_votes.values())]
        assert isinstance(rule["win"], float) and rule["win"] > 0.5
        assert rule["drawn"] == [3, 1]  # every question a pilot of the configured votes
        # every pilot asked the dear member, whose vote the rule follows
        assert list(dear_votes) == [doc["decision"]]
        if cheap_votes.get(doc["decision"], 0) == 0 and sum(cheap_votes.values()) >= 2:
            outvoted += 1  # several cheap votes against it: plurality would follow them
            assert rule["aggregator_decision"] != doc["decision"]
            assert rule["aggregator_decision"] in cheap_votes
    assert outvoted >= 2
