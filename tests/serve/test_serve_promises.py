"""What the endpoint promises in its docs and messages, held to it (issue 32, item 8): an
upstream that rejects `n` is probed once, not on every request; a structured request whose
replies all fail to validate is answered with the first sample's text; each field's decision
is typed; an unsupported schema keyword is named; a 504 says whether the samples were kept."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from ensemble.serve import VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer, StructuredPlan

QS = get_task("boxball").questions()
LR = {"model": "openai/sim-expert", "choices": ["L", "R"], "temperature": 1.0}


def test_an_upstream_that_rejects_n_is_probed_once_not_on_every_request():
    with SimulatedServer(seed=3, reject_n=True) as up:
        cfg = parse_config({"port": 0, "models": {"vote": {**LR, "api_base": up.base_url,
                                                           "n": 3}}})
        with VotingServer(cfg) as srv:
            c = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
            for q in QS[:4]:
                r = c.chat.completions.create(model="vote", messages=[
                    {"role": "user", "content": q.prompt}])
                assert r.model_extra["ensemble"]["samples"] == 3
        # one rejected probe in all, then one request per sample
        assert up.stats.statuses[400] == 1 and up.stats.statuses[200] == 4 * 3


def test_structured_replies_all_invalid_answer_the_first_samples_text():
    plan = StructuredPlan({"label": "no", "score": 7}, accuracy=0.7)
    with SimulatedServer(seed=4, structured=plan, invalid_rate=1.0, keep_replies=True) as up:
        cfg = parse_config({"port": 0, "models": {"judge": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 3}}})
        with VotingServer(cfg) as srv:
            c = openai.OpenAI(base_url=srv.base_url, api_key="unused", max_retries=0)
            prompt = "Review 9: give a label and a score."
            r = c.chat.completions.create(
                model="judge", messages=[{"role": "user", "content": prompt}],
                response_format={"type": "json_schema", "json_schema": {
                    "name": "Verdict", "schema": {
                        "type": "object", "required": ["label", "score"],
                        "properties": {"label": {"type": "string"},
                                       "score": {"type": "integer"}}}}})
        ens = r.model_extra["ensemble"]
        first = next(rep for rep in up.stats.replies if rep.prompt == prompt and
                     0 in rep.indices).texts[0]
        assert ens["decision"] is None and ens["invalid"] == 3
        assert r.choices[0].message.content == first and first  # never ""


@pytest.fixture(scope="module")
def schema_server():
    with SimulatedServer(seed=5) as up:
        cfg = parse_config({"port": 0, "request_timeout": 0.3, "models": {
            "vote": {**LR, "api_base": up.base_url, "n": 1}}})
        with VotingServer(cfg) as srv:
            yield srv


def _schema_request(srv, prop):
    return httpx.post(f"{srv.base_url}/chat/completions", timeout=30, json={
        "model": "vote", "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "A", "schema": {
            "type": "object", "properties": {"f": prop}}}}})


@pytest.mark.parametrize(("prop", "named"), [
    ({"$ref": "#/$defs/Missing"}, "$ref '#/$defs/Missing' does not resolve inside the schema"),
    ({"allOf": [{"type": "string"}]}, "allOf is not supported"),
    ({"type": "strnig"}, "not a valid JSON schema"),
])
def test_an_unsupported_schema_is_named_not_type_none(schema_server, prop, named):
    r = _schema_request(schema_server, prop)
    msg = r.json()["error"]["message"]
    assert r.status_code == 400 and named in msg and "None" not in msg


def test_const_and_oneof_with_null_are_read(schema_server):
    from ensemble.serve.schemas import model_from_schema

    model = model_from_schema("A", {"type": "object", "properties": {
        "kind": {"const": "point"}, "x": {"oneOf": [{"type": "integer"}, {"type": "null"}]}}})
    assert model(kind="point", x=None).model_dump() == {"kind": "point", "x": None}
    with pytest.raises(ValueError):
        model(kind="line", x=1)


def test_a_request_timeout_without_a_store_does_not_claim_to_keep_the_samples():
    with SimulatedServer(seed=6, latency=1.0) as up:
        cfg = parse_config({"port": 0, "request_timeout": 0.2, "models": {
            "vote": {**LR, "api_base": up.base_url, "n": 1}}})
        with VotingServer(cfg) as srv:
            r = httpx.post(f"{srv.base_url}/chat/completions", timeout=30, json={
                "model": "vote", "messages": [{"role": "user", "content": QS[0].prompt}]})
    err = r.json()["error"]
    assert r.status_code == 504 and err["code"] == "request_timeout"
    assert "kept in its store" not in err["message"] and "--store" in err["message"]
    assert json.dumps(err).count("\n") == 0
