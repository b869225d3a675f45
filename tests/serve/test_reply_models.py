"""The served path is typed (issue 36 item 10): every reply is built as its model
(`ensemble.serve.replies`), and what a client receives reads back as that model exactly,
optional keys left out rather than null."""

from __future__ import annotations

import json

import httpx
import pytest

from ensemble.serve import VotingServer, parse_config
from ensemble.serve.replies import ChatCompletion, ResponseDoc, TextCompletion
from ensemble.testing import SimulatedServer

PROMPT = ("Left Box contains 30 red balls and 70 blue balls. Right Box contains 60 red balls "
          "and 40 blue balls. The probability of selecting the Left Box is 50%. If the ball "
          "drawn is red, which box has been selected? Answer L or R in <answer></answer>.")


@pytest.fixture(scope="module")
def base_url():
    with SimulatedServer(seed=3, lam1=2.0) as up:
        cfg = parse_config({"port": 0, "models": {"box": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 3,
            "choices": ["L", "R"]}}})
        with VotingServer(cfg) as srv:
            yield srv.base_url


@pytest.mark.parametrize("route, body, model", [
    ("chat/completions", {"messages": [{"role": "user", "content": PROMPT}]}, ChatCompletion),
    ("responses", {"input": PROMPT, "metadata": {"run": "7"}}, ResponseDoc),
    ("completions", {"prompt": PROMPT}, TextCompletion),
])
def test_each_route_answers_with_its_model(base_url, route, body, model):
    r = httpx.post(f"{base_url}/{route}", json={"model": "box", **body}, timeout=30)
    assert r.status_code == 200, r.text
    doc = model.model_validate_json(r.content)  # extra="forbid": every key declared
    assert json.loads(doc.model_dump_json()) == r.json()
    ens = r.json()["ensemble"]
    # one model: no member_votes; nothing ignored, nothing undecided: keys left out
    assert not {"member_votes", "ignored", "why", "cost_rule", "fields"} & set(ens)
    assert ens["samples"] == 3 and sum(ens["votes"].values()) == 3
    if route == "chat/completions":
        assert "tool_calls" not in r.json()["choices"][0]["message"]
