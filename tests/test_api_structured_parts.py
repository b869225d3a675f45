"""The Python API votes a model's lists, dicts and unions by their parts, end to end (issue 38,
item 4's Python half): `Ensemble(answer=Model)` against the simulated server (in-process,
through its transport) planting close splits (each field right in 3 of 5 samples, the most
common whole object, 2 of 5, wrong on the last field). The decision is each field's plurality
among what the upstream served, the list and dict fields voted by their parts (`tags[len]`,
`tags[0]`, `counts.<key>`), as `ensemble serve` votes a client's schema."""

from __future__ import annotations

import json
from collections import Counter

from pydantic import BaseModel

from ensemble import Ensemble
from ensemble.testing import SimulatedServer, StructuredPlan


class Triage(BaseModel):
    label: str
    tags: list[str]
    counts: dict[str, int]
    days: int


def canon(v) -> str:
    return json.dumps(v, sort_keys=True)


def test_lists_and_dicts_are_voted_by_their_parts_through_the_api():
    srv = SimulatedServer(seed=38, keep_replies=True, structured=StructuredPlan(
        {"label": "bug", "tags": ["ui", "crash"], "counts": {"a": 1, "b": 2}, "days": 3},
        splits=True))
    with Ensemble("openai/sim-expert", api_base=srv.base_url, transport=srv.transport(),
                  n=5, temperature=1.0, answer=Triage) as ens:
        wrong = 0
        for i in range(12):
            prompt = f"Ticket {i}: triage it."
            d = ens.decide(prompt)
            docs = [json.loads(t) for r in srv.stats.replies if r.prompt == prompt
                    for t in r.texts]
            assert len(docs) == 5 and isinstance(d.decision, Triage)
            voted = d.decision.model_dump()
            whole = Counter(canon(x) for x in docs).most_common(1)[0]
            assert whole[1] == 2 and canon(voted) != whole[0]  # the trap was planted
            for name in Triage.model_fields:
                top = Counter(canon(x[name]) for x in docs).most_common(1)[0]
                assert top[1] == 3
                wrong += canon(voted[name]) != top[0]
            # the list and the dict were voted by their parts, not as whole JSON values
            assert {"tags[len]", "tags[0]", "tags[1]", "counts.a", "counts.b"} <= set(d.fields)
        assert wrong == 0
