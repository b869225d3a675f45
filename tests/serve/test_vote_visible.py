"""The vote visible from every client (issue 38 item 3): compact response headers
(`x-ensemble-decision`, `-votes`, `-agreement`, `-samples`, ...) that every HTTP client keeps,
and the Responses API's `metadata` with the vote's keys added beside the client's (never over
them, within OpenAI's 16 keys of 512 characters). Read with the official SDK and LangChain."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from ensemble.serve import VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

QS = get_task("boxball").questions()


@pytest.fixture(scope="module")
def srv():
    with SimulatedServer(seed=9, lam1=1.0) as up:
        cfg = parse_config({"port": 0, "models": {"box": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 5,
            "choices": ["L", "R"]}}})
        with VotingServer(cfg) as s:
            yield s


def _client(srv):
    return openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)


def test_chat_headers_carry_the_vote(srv):
    raw = _client(srv).chat.completions.with_raw_response.create(
        model="box", messages=[{"role": "user", "content": QS[7].prompt}])
    ens = raw.parse().model_extra["ensemble"]
    h = raw.headers
    assert h["x-ensemble-decision"] == ens["decision"]
    assert json.loads(h["x-ensemble-votes"]) == ens["votes"]
    assert float(h["x-ensemble-agreement"]) == pytest.approx(
        max(ens["votes"].values()) / sum(ens["votes"].values()), abs=1e-4)
    assert h["x-ensemble-samples"] == "5" and h["x-ensemble-margin"] == str(ens["margin"])
    # streamed: the headers come before the first chunk (the vote is made first)
    with httpx.stream("POST", f"{srv.base_url}/chat/completions", timeout=30, json={
            "model": "box", "stream": True,
            "messages": [{"role": "user", "content": QS[8].prompt}]}) as r:
        assert r.headers["x-ensemble-samples"] == "5" and r.headers["x-ensemble-decision"]


def test_langchain_reads_the_vote_from_the_headers(srv):
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="box", base_url=srv.base_url, api_key="unused", max_retries=0,
                      include_response_headers=True)
    msg = chat.invoke(QS[9].prompt)
    headers = msg.response_metadata["headers"]
    assert headers["x-ensemble-decision"] in ("L", "R")
    assert sum(json.loads(headers["x-ensemble-votes"]).values()) == 5


def test_responses_metadata_adds_the_vote_beside_the_clients_keys(srv):
    client = _client(srv)
    r = client.responses.create(model="box", input=QS[10].prompt,
                                metadata={"run": "7", "ensemble_decision": "mine"})
    ens = r.model_extra["ensemble"]
    assert r.metadata["run"] == "7" and r.metadata["ensemble_decision"] == "mine"  # kept
    assert json.loads(r.metadata["ensemble_votes"]) == ens["votes"]
    assert r.metadata["ensemble_samples"] == "5"
    full = {f"k{i}": "v" for i in range(15)}
    r = client.responses.create(model="box", input=QS[11].prompt, metadata=full)
    assert len(r.metadata) == 16 and all(r.metadata[k] == "v" for k in full)
    assert all(len(v) <= 512 for v in r.metadata.values())


def test_bad_metadata_is_a_400(srv):
    with pytest.raises(openai.BadRequestError) as ei:
        _client(srv).responses.create(model="box", input="x",
                                      metadata={f"k{i}": "v" for i in range(17)})
    assert ei.value.body["param"] == "metadata"


def test_litellm_reads_the_vote_from_the_body_and_the_headers(srv, monkeypatch):
    import litellm

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    r = litellm.completion(model="openai/box", api_base=srv.base_url, api_key="unused",
                           messages=[{"role": "user", "content": QS[12].prompt}])
    assert sum(r.ensemble["votes"].values()) == 5
    headers = r._hidden_params["additional_headers"]  # litellm's documented place for them
    assert headers["llm_provider-x-ensemble-decision"] == r.ensemble["decision"]
    assert json.loads(headers["llm_provider-x-ensemble-votes"]) == r.ensemble["votes"]


def test_a_split_answer_reports_its_agreement():
    """An answer read without choices (`<answer>X</answer>`, no --choices) voted 3 to 2: the
    answer part's decision is the answer and the agreement 0.6, not the format's 1."""
    with SimulatedServer(seed=9, lam1=0.3) as up:
        cfg = parse_config({"port": 0, "models": {"open": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 5}}})
        with VotingServer(cfg) as s:
            client = _client(s)
            for q in QS[20:60]:
                raw = client.chat.completions.with_raw_response.create(
                    model="open", messages=[{"role": "user", "content": q.prompt}])
                ens = raw.parse().model_extra["ensemble"]
                if sorted(ens["votes"].values()) == [2, 3]:
                    break
            else:
                pytest.fail("no 3-2 split in 40 prompts")
    assert ens["fields"]["answer"]["decision"] == ens["decision"]
    assert raw.headers["x-ensemble-agreement"] == "0.6"
