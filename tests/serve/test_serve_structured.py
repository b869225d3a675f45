"""Structured outputs at the endpoint (issues 23 and 24): a client's `response_format` JSON
schema is voted field by field, each field the plurality of the replies the upstream served for
that request, and the reply's content is the voted object as JSON. The official openai client,
the simulator's structured mode as the upstream, real HTTP."""

from __future__ import annotations

import json
from collections import Counter
from typing import Literal

import openai
from pydantic import BaseModel

from ensemble.serve import VotingServer, parse_config
from ensemble.testing import SimulatedServer, StructuredPlan

PLANTED = {"label": "no", "score": 7}


class Verdict(BaseModel):
    label: Literal["yes", "no", "maybe"]
    score: int


FORMAT = {"type": "json_schema",
          "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema()}}


def test_a_json_schema_is_voted_field_by_field_through_the_endpoint():
    plan = StructuredPlan(PLANTED, accuracy=0.7)
    with SimulatedServer(seed=11, structured=plan, keep_replies=True) as up:
        cfg = parse_config({"port": 0, "models": {"judge": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 7,
            "temperature": 0.7}}})
        with VotingServer(cfg) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
            for i in range(3):
                prompt = f"Review {i}: is it good? Give a label and a score."
                r = client.chat.completions.create(
                    model="judge", messages=[{"role": "user", "content": prompt}],
                    response_format=FORMAT)
                ens = r.model_extra["ensemble"]
                served = [json.loads(t) for rep in up.stats.replies if rep.prompt == prompt
                          for t in rep.texts]
                assert len(served) == 7
                for name in ("label", "score"):
                    counts = Counter(doc[name] for doc in served)
                    top = max(counts.values())
                    winners = {v for v, c in counts.items() if c == top}
                    assert ens["decision"][name] in winners  # the field's plurality
                    assert sum(ens["fields"][name]["votes"].values()) == 7
                # the content is the voted object, valid for the client's schema
                voted = Verdict.model_validate_json(r.choices[0].message.content or "")
                assert voted.model_dump() == ens["decision"]
            # the schema reached the upstream as the request's response_format
            assert all(rep.prompt.startswith("Review") for rep in up.stats.replies)
