"""The endpoint's small print (issue 41 items 17, 21, 22, 23), through real HTTP: client
garbage is a 400 and one log line, never a 500 with a traceback; a slow client is timed out
and logged for what happened; tools are checked and tool_choice is enforced on the vote; a
request's fields the endpoint does not act on are listed under ensemble.ignored."""

from __future__ import annotations

import json
import logging
import socket
import time

import httpx
import pytest

from ensemble.serve import RequestLog, VotingServer, parse_config
from ensemble.testing import SimulatedServer, ToolPlan

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}


@pytest.fixture(scope="module")
def env():
    lines: list[str] = []
    with SimulatedServer(seed=8, keep_replies=True, tools=ToolPlan(accuracy=0.6,
                                                                    text_rate=0.3)) as up:
        cfg = parse_config({"port": 0, "body_timeout": 0.5, "models": {"agent": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 5}}})
        with VotingServer(cfg, log=RequestLog(sink=lines.append)) as srv:
            yield up, srv, lines


def _post(srv, **kw):
    return httpx.post(f"{srv.base_url}/chat/completions", timeout=30, **kw)


@pytest.mark.parametrize("content, headers, says", [
    (b"not gzip at all", {"Content-Encoding": "gzip"}, "could not be read"),
    (b'{"model": "agent", "n": ' + b"9" * 5001 + b"}", {}, "not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, {}, "not valid JSON"),
])
def test_client_garbage_is_a_400_and_one_log_line(env, content, headers, says):
    _, srv, lines = env
    before = len(lines)
    r = _post(srv, content=content, headers={"Content-Type": "application/json", **headers})
    assert r.status_code == 400 and says in r.json()["error"]["message"]
    assert "\n" not in r.json()["error"]["message"]
    new = lines[before:]
    assert len(new) == 1 and " 400 " in new[0] and "Traceback" not in new[0]


def _raw_request(srv, body: bytes, encoding: str) -> bytes:
    """`body` sent with `Content-Encoding: encoding` on a connection of its own, read until
    the server closes it (after its reply and whatever it logs about the request)."""
    port = int(srv.base_url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Encoding: " + encoding.encode() +
                  b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        s.settimeout(20)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


@pytest.mark.parametrize("body, encoding, ours", [
    (b"not gzip at all" * 100, "gzip", 1),  # serve reads the body: its 400 and its line
    (b"\x1f\x8b\x08\x00" + b"x" * 1500, "gzip", 1),  # a gzip header, then garbage
    (b"not brotli", "br", 1),  # serve decodes (aiohttp's own 400 was plain text): its 415
])
def test_an_unreadable_body_logs_no_traceback(env, caplog, body, encoding, ours):
    """41.17: aiohttp's own logger printed a traceback ("Unhandled exception") when it
    drained an undecodable body after serve's 400, and for an encoding it cannot decode."""
    _, srv, lines = env
    before = len(lines)
    with caplog.at_level(logging.INFO):
        reply = _raw_request(srv, body, encoding)
    assert reply.split(b"\r\n", 1)[0].split()[1] == (b"415" if encoding == "br" else b"400")
    assert len(lines) - before == ours
    assert [r for r in caplog.records if r.exc_info or r.exc_text] == []


def test_a_client_that_sends_half_a_body_is_timed_out_and_logged_as_such(env):
    _, srv, lines = env
    port = int(srv.base_url.rsplit(":", 1)[1].split("/")[0])
    before = len(lines)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: 100\r\n\r\n{\"model\": ")
        s.settimeout(10)
        t0 = time.monotonic()
        reply = s.recv(4096)
        assert time.monotonic() - t0 < 5
    assert b" 408 " in reply.split(b"\r\n", 1)[0]
    new = lines[before:]
    assert len(new) == 1 and "did not arrive within 0.5 s" in new[0] and "499" not in new[0]


def test_a_header_drip_is_closed(env):
    _, srv, _ = env
    port = int(srv.base_url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        s.settimeout(10)
        t0 = time.monotonic()
        for _ in range(40):  # a header line every 0.1 s: never a whole request
            try:
                s.sendall(b"X-Drip: 1\r\n")
            except OSError:
                break
            time.sleep(0.1)
            if time.monotonic() - t0 > 4:
                break
        try:
            got = s.recv(4096)
        except OSError:
            got = b""
    assert time.monotonic() - t0 < 4.5 and got in (b"",) or got.startswith(b"HTTP/1.1 4")


@pytest.mark.parametrize("tools, says", [
    ([{"type": "function", "function": {"name": "get weather!"}}], "may hold only letters"),
    ([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/Gone"}}}}}],
     "does not resolve inside the schema"),
])
def test_bad_tools_are_refused_in_one_line(env, tools, says):
    _, srv, _ = env
    r = _post(srv, json={"model": "agent", "tools": tools,
                         "messages": [{"role": "user", "content": "Step 1: look up?"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"
    assert says in r.json()["error"]["message"]


@pytest.mark.parametrize("choice, kind", [
    ("none", "text"), ("required", "tool_call"),
    ({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "get_time"}}]}}, "tool_call"),
])
def test_tool_choice_is_enforced_on_the_vote(env, choice, kind):
    up, srv, _ = env
    prompt = f"Step {json.dumps(choice)}: what do we look up?"
    r = _post(srv, json={"model": "agent", "tools": [WEATHER, TIME], "tool_choice": choice,
                         "messages": [{"role": "user", "content": prompt}]})
    assert r.status_code == 200, r.text
    ens = r.json()["ensemble"]
    assert ens["fields"]["kind"]["decision"] == kind
    reps = [rep for rep in up.stats.replies if rep.prompt == prompt]
    assert reps and all(rep.tool_choice == choice for rep in reps)  # forwarded as sent
    calls = [c[0]["function"]["name"] for rep in reps for c in rep.tool_calls if c]
    texts = sum(1 for rep in reps for c in rep.tool_calls if not c)
    if choice == "none":  # every call the upstream made anyway abstained
        assert ens["invalid"] == len(calls) and r.json()["choices"][0]["message"].get(
            "tool_calls") is None
    elif kind == "tool_call" and isinstance(choice, dict):
        assert ens["decision"]["name"] == "get_time"
        assert ens["invalid"] == texts + calls.count("get_weather")


def test_fields_it_does_not_act_on_are_listed_as_ignored(env):
    _, srv, _ = env
    r = _post(srv, json={"model": "agent", "temperature": 0.2, "user": "u1",
                         "service_tier": "flex", "messages": [
                             {"role": "user", "content": "Step 2: look up?"}],
                         "tools": [WEATHER]})
    assert r.json()["ensemble"]["ignored"] == ["temperature", "user", "service_tier"]
    r = httpx.post(f"{srv.base_url}/responses", timeout=30, json={
        "model": "agent", "input": "Step 3: look up?", "tools": [
            {"type": "function", "name": "get_weather", "parameters": WEATHER["function"][
                "parameters"]}],
        "reasoning": {"effort": "low"}, "service_tier": "auto", "truncation": "auto",
        "store": True})
    ens = r.json()["ensemble"]
    assert set(ens["ignored"]) == {"reasoning", "service_tier", "truncation", "store"}
    assert r.json()["truncation"] == "disabled" and r.json()["store"] is False
