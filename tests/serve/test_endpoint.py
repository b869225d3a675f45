"""`ensemble serve` through real HTTP, driven by clients nobody here wrote (the official openai
package, sync, async and streaming, and litellm), with the simulated server as the upstream.

Each response is checked against what the upstream actually sent for that request
(`SimulatedServer(keep_replies=True)`): the decision is the plurality of those samples, the
content one of them that voted for it, the usage their sum."""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter

import httpx
import openai
import pytest

from ensemble.sampling.parsing import choice_parser
from ensemble.serve import RequestLog, VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer, answer_key_from_questions

SERVE_KEY = "serve-key-for-clients-0123"
UPSTREAM_KEY = "sk-upstream-secret-abcdef0123456789"
WRONG_UPSTREAM_KEY = "sk-wrong-upstream-key-9876543210fedc"
CHOICES = list("ABCDE")
PARSE = choice_parser(CHOICES)


@pytest.fixture(scope="module")
def questions(mathqa_path):
    return get_task("mathqa", data=mathqa_path, limit=40, seed=3).questions()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def env(questions):
    """One upstream (needs UPSTREAM_KEY) and one endpoint serving four names."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SIM_UPSTREAM_KEY", UPSTREAM_KEY)
    mp.setenv("SIM_WRONG_KEY", WRONG_UPSTREAM_KEY)
    lines: list[str] = []
    with SimulatedServer(answer_key=answer_key_from_questions(questions), seed=7,
                         keep_replies=True, require_api_key=UPSTREAM_KEY) as up:
        base = {"api_base": up.base_url, "api_key_env": "SIM_UPSTREAM_KEY",
                "choices": CHOICES, "max_concurrency": 4}
        cfg = parse_config({"port": 0, "models": {
            "vote": {**base, "model": "openai/sim-expert", "n": 5, "temperature": 1.0,
                     "max_request_n": 7},
            "mixed": {"choices": CHOICES, "members": [
                {"model": "openai/sim-expert", "n": 2, "temperature": 0.3,
                 "api_base": up.base_url, "api_key_env": "SIM_UPSTREAM_KEY"},
                {"model": "openai/sim-expert", "n": 3, "temperature": 1.5,
                 "api_base": up.base_url, "api_key_env": "SIM_UPSTREAM_KEY"}]},
            "badkey": {**base, "api_key_env": "SIM_WRONG_KEY", "model": "openai/sim-expert",
                       "n": 3},
            # nothing listens there: a refused loopback port is not retried (default options)
            "down": {"model": "openai/sim-expert", "n": 3, "choices": CHOICES,
                     "api_base": f"http://127.0.0.1:{_free_port()}/v1"},
        }})
        with VotingServer(cfg, api_key=SERVE_KEY, log=RequestLog(sink=lines.append)) as srv:
            yield {"up": up, "srv": srv, "lines": lines}
    mp.undo()


def _served(up, prompt: str, temperature: float | None = None):
    """What the upstream sent for a prompt: texts and usage, over every request for it."""
    reps = [r for r in up.stats.replies if r.prompt == prompt
            and (temperature is None or r.temperature == temperature)]
    texts = [t for r in reps for t in r.texts]
    return texts, sum(r.prompt_tokens for r in reps), sum(r.completion_tokens for r in reps)


def _check_against_upstream(env, resp, prompt: str, n: int) -> dict:
    ens = resp.model_extra["ensemble"]
    texts, ptoks, ctoks = _served(env["up"], prompt)
    assert len(texts) == n == ens["samples"]
    votes = Counter(a for a in map(PARSE, texts) if a is not None)
    top = max(votes.values())
    assert ens["votes"] == dict(votes)
    assert votes[ens["decision"]] == top  # the plurality (a tie is broken among the top)
    content = resp.choices[0].message.content
    assert content in texts and PARSE(content) == ens["decision"]
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (ptoks, ctoks)
    assert resp.usage.total_tokens == ptoks + ctoks
    return ens


def test_openai_sync_client_gets_the_plurality_of_the_upstreams_samples(env, questions):
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    for q in questions[:3]:
        r = c.chat.completions.create(model="vote", messages=[{"role": "user",
                                                                "content": q.prompt}])
        assert r.model == "vote" and r.object == "chat.completion"
        ens = _check_against_upstream(env, r, q.prompt, 5)
        assert ens["margin"] == sorted(ens["votes"].values())[-1] - (
            sorted(ens["votes"].values())[-2] if len(ens["votes"]) > 1 else 0)


def test_openai_async_client_concurrent_requests(env, questions):
    async def main():
        c = openai.AsyncOpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
        qs = questions[3:9]
        rs = await asyncio.gather(*(c.chat.completions.create(
            model="vote", messages=[{"role": "user", "content": q.prompt}]) for q in qs))
        stream = await c.chat.completions.create(
            model="vote", stream=True, messages=[{"role": "user",
                                                   "content": questions[17].prompt}])
        text = "".join([ch.choices[0].delta.content or "" async for ch in stream])
        await c.close()
        return qs, rs, text

    qs, rs, text = asyncio.run(main())
    for q, r in zip(qs, rs, strict=True):
        _check_against_upstream(env, r, q.prompt, 5)
    texts, _, _ = _served(env["up"], questions[17].prompt)
    votes = Counter(a for a in map(PARSE, texts) if a is not None)
    assert text in texts and votes[PARSE(text)] == max(votes.values())


def test_openai_streaming_ends_with_a_final_chunk_and_done(env, questions):
    q = questions[9]
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    chunks = list(c.chat.completions.create(
        model="vote", messages=[{"role": "user", "content": q.prompt}], stream=True,
        stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "stop"
    ens = finals[0].model_extra["ensemble"]
    texts, ptoks, ctoks = _served(env["up"], q.prompt)
    assert text in texts and PARSE(text) == ens["decision"]
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == ptoks
    assert chunks[-1].usage.completion_tokens == ctoks
    # on the wire: server-sent events ending with data: [DONE]
    raw = httpx.post(f"{env['srv'].base_url}/chat/completions",
                     headers={"Authorization": f"Bearer {SERVE_KEY}"}, timeout=30,
                     json={"model": "vote", "stream": True,
                           "messages": [{"role": "user", "content": q.prompt}]})
    events = [ln for ln in raw.text.split("\n\n") if ln]
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert events[-1] == "data: [DONE]"
    assert json.loads(events[-2].removeprefix("data: "))["choices"][0]["finish_reason"] == "stop"


def test_litellm_client_with_api_base(env, questions):
    from ensemble.providers.litellm import litellm

    q = questions[10]
    r = litellm().completion(model="openai/vote", api_base=env["srv"].base_url,
                             api_key=SERVE_KEY, messages=[{"role": "user", "content": q.prompt}])
    texts, ptoks, ctoks = _served(env["up"], q.prompt)
    votes = Counter(a for a in map(PARSE, texts) if a is not None)
    content = r.choices[0].message.content
    assert content in texts and votes[PARSE(content)] == max(votes.values())
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (ptoks, ctoks)
    assert r.ensemble["votes"] == dict(votes) and r.ensemble["decision"] == PARSE(content)
    # litellm streaming too: the same reply (same prompt, same samples), in chunks
    chunks = litellm().completion(model="openai/vote", api_base=env["srv"].base_url,
                                  api_key=SERVE_KEY, stream=True,
                                  messages=[{"role": "user", "content": q.prompt}])
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == content


def test_mixed_ensemble_reports_votes_per_member(env, questions):
    q = questions[11]
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    r = c.chat.completions.create(model="mixed", messages=[{"role": "user", "content": q.prompt}])
    ens = r.model_extra["ensemble"]
    per_member = []
    for t in (0.3, 1.5):
        texts, _, _ = _served(env["up"], q.prompt, temperature=t)
        per_member.append(dict(Counter(a for a in map(PARSE, texts) if a is not None)))
    assert [m["votes"] for m in ens["member_votes"]] == per_member
    assert [m["temperature"] for m in ens["member_votes"]] == [0.3, 1.5]
    pooled = Counter(per_member[0]) + Counter(per_member[1])
    assert ens["samples"] == 5 and pooled[ens["decision"]] == max(pooled.values())
    texts, ptoks, ctoks = _served(env["up"], q.prompt)
    assert r.choices[0].message.content in texts
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (ptoks, ctoks)


def test_client_n_gets_one_choice_per_answer_by_votes(env, questions):
    q = questions[12]
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    r = c.chat.completions.create(model="vote", n=3,
                                  messages=[{"role": "user", "content": q.prompt}])
    ens = _check_against_upstream(env, r, q.prompt, 5)  # still one vote of 5 samples
    answers = [PARSE(ch.message.content) for ch in r.choices]
    ranked = sorted(ens["votes"], key=lambda a: (a != ens["decision"], -ens["votes"][a], a))
    assert answers == ranked[:3]


def test_per_request_overrides_within_bounds(env, questions):
    q = questions[13]
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    r = c.chat.completions.create(model="vote", messages=[{"role": "user", "content": q.prompt}],
                                  extra_body={"ensemble": {"n": 7}})
    _check_against_upstream(env, r, q.prompt, 7)
    with pytest.raises(openai.BadRequestError) as ei:
        c.chat.completions.create(model="vote", messages=[{"role": "user", "content": q.prompt}],
                                  extra_body={"ensemble": {"n": 8}})
    assert "1 to 7" in ei.value.body["message"] and ei.value.body["param"] == "ensemble"
    with pytest.raises(openai.BadRequestError) as ei:
        c.chat.completions.create(model="vote", messages=[{"role": "user", "content": q.prompt}],
                                  extra_body={"ensemble": {"temperature": 2}})
    assert "unknown ensemble override 'temperature'" in ei.value.body["message"]


def test_adaptive_stopping_per_request(env, questions):
    q = questions[15]
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    r = c.chat.completions.create(model="vote", messages=[{"role": "user", "content": q.prompt}],
                                  extra_body={"ensemble": {"stop": "beta", "max_n": 7}})
    ens = r.model_extra["ensemble"]
    assert ens["stop"] == "beta" and 1 <= ens["samples"] <= 7
    _check_against_upstream(env, r, q.prompt, ens["samples"])


def test_wrong_key_is_a_401_error_object_without_the_key(env):
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key="not-the-key-12345")
    with pytest.raises(openai.AuthenticationError) as ei:
        c.chat.completions.create(model="vote", messages=[{"role": "user", "content": "hi"}])
    assert ei.value.status_code == 401 and ei.value.body["code"] == "invalid_api_key"
    assert "not-the-key-12345" not in json.dumps(ei.value.body)
    r = httpx.get(f"{env['srv'].base_url}/models")  # no key at all
    assert r.status_code == 401 and r.json()["error"]["type"] == "invalid_request_error"


def test_malformed_body_is_a_400_error_object(env):
    url = f"{env['srv'].base_url}/chat/completions"
    auth = {"Authorization": f"Bearer {SERVE_KEY}"}
    r = httpx.post(url, headers=auth, content=b'{"model": "vote", "messages": [')
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = httpx.post(url, headers=auth, json={"model": "vote", "messages": "hi"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    r = httpx.post(url, headers=auth, json={"model": "vote", "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {"$ref": "#/$defs/Nowhere"}}}}},
        "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "response_format"
    assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    r = httpx.post(url, headers=auth, json={"model": "vote", "messages": [
        {"role": "user", "content": "x" * 2_000_000}]})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    r = httpx.get(url.replace("/chat/completions", "/nowhere"), headers=auth)
    assert r.status_code == 404 and "POST /v1/chat/completions" in r.json()["error"]["message"]


def test_unknown_model_is_a_404_listing_the_served_names(env):
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    with pytest.raises(openai.NotFoundError) as ei:
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    body = ei.value.body
    assert body["code"] == "model_not_found" and body["type"] == "invalid_request_error"
    assert all(name in body["message"] for name in ("vote", "mixed", "badkey", "down"))


def test_upstream_down_is_a_502_naming_the_upstream(env, questions):
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as ei:
        c.chat.completions.create(model="down", messages=[{"role": "user",
                                                            "content": questions[0].prompt}])
    assert ei.value.status_code == 502
    served = env["srv"].config.models["down"]
    assert "openai/sim-expert" in ei.value.body["message"]
    assert served.api_base.removesuffix("/v1") in ei.value.body["message"]
    assert ei.value.body["code"] == "upstream_error"


def test_upstream_keys_never_reach_a_response_or_the_log(env, questions):
    """Its own traffic of every kind (answers, a stream, the client's errors, the upstream's
    401 echoing its key, a refused upstream, /models, /health), so it holds run alone."""
    lines_before, up = len(env["lines"]), env["up"].stats
    ok_before, denied_before = up.statuses[200], up.statuses[401]
    base, auth = env["srv"].base_url, {"Authorization": f"Bearer {SERVE_KEY}"}
    url = f"{base}/chat/completions"

    def msgs(i: int) -> list[dict]:
        return [{"role": "user", "content": questions[i].prompt}]

    bodies = []
    c = openai.OpenAI(base_url=base, api_key=SERVE_KEY, max_retries=0)
    for name, i in (("vote", 18), ("mixed", 19)):
        bodies.append(c.chat.completions.create(model=name, messages=msgs(i)).model_dump_json())
    bodies.append(c.chat.completions.create(model="vote", n=3, messages=msgs(20),
                                            extra_body={"ensemble": {"n": 6}}).model_dump_json())
    bodies.append(httpx.post(url, headers=auth, timeout=30, json={
        "model": "vote", "stream": True, "messages": msgs(21)}).text)
    for model, i, status in (("badkey", 23, 502), ("down", 24, 502), ("gpt-4o", 25, 404)):
        with pytest.raises(openai.APIStatusError) as ei:  # badkey: the upstream echoes the key
            c.chat.completions.create(model=model, messages=msgs(i))
        assert ei.value.status_code == status
        bodies.append(ei.value.response.text)
    bodies.append(httpx.post(url, headers=auth, json={"model": "vote", "messages": "hi"}).text)
    bodies.append(httpx.post(url, headers={"Authorization": f"Bearer {UPSTREAM_KEY}"},
                             json={"model": "vote", "messages": msgs(22)}).text)
    bodies.append(httpx.get(f"{base}/models", headers=auth).text)
    bodies.append(httpx.get(base.removesuffix("/v1") + "/health").text)
    lines = env["lines"][lines_before:]
    assert len(bodies) == 11 and len(lines) >= 9  # one line per chat request
    everything = "\n".join(bodies + lines)
    for secret in (UPSTREAM_KEY, WRONG_UPSTREAM_KEY, SERVE_KEY):
        assert secret not in everything
    # the upstream saw its key on every request it served, and no client's key
    assert up.statuses[401] - denied_before >= 1
    assert up.statuses[200] - ok_before >= 4


def test_models_and_health(env):
    r = httpx.get(f"{env['srv'].base_url}/models",
                  headers={"Authorization": f"Bearer {SERVE_KEY}"}).json()
    assert [m["id"] for m in r["data"]] == ["vote", "mixed", "badkey", "down"]
    assert r["data"][1]["ensemble"]["members"][1] == {"model": "openai/sim-expert", "n": 3,
                                                      "temperature": 1.5}
    h = httpx.get(env["srv"].base_url.removesuffix("/v1") + "/health")
    assert h.status_code == 200 and h.json()["status"] == "ok"


def test_one_log_line_per_request(env, questions):
    before = len(env["lines"])
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    c.chat.completions.create(model="vote", messages=[{"role": "user",
                                                       "content": questions[14].prompt}])
    new = env["lines"][before:]
    assert len(new) == 1
    assert new[0].startswith("POST /v1/chat/completions 200 model=vote samples=5 decision=")
    assert " margin=" in new[0] and new[0].endswith("ms")


def test_a_requests_temperature_is_ignored_and_said_so(env, questions):
    q = questions[16]
    c = openai.OpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY)
    r = c.chat.completions.create(model="vote", temperature=0.0, max_tokens=5,
                                  messages=[{"role": "user", "content": q.prompt}])
    ens = _check_against_upstream(env, r, q.prompt, 5)
    assert ens["ignored"] == ["temperature", "max_tokens"] and ens["temperatures"] == [1.0]
    assert {rep.temperature for rep in env["up"].stats.replies if rep.prompt == q.prompt} == {1.0}
    assert env["lines"][-1].endswith("ignored temperature,max_tokens")
