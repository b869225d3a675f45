"""The simulated server's Files and Batch API, spoken to with the official `openai` client
(as a user's own batch code would), and its SSE streaming."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from ensemble.sampling.batch_options import custom_id
from ensemble.tasks import get_task
from ensemble.testing import INDEX_HEADER, BatchPlan, SimulatedServer

QS = get_task("boxball").questions()


def client(srv, key="sk-test"):
    return openai.OpenAI(base_url=srv.base_url, api_key=key, max_retries=0)


def line(cid, prompt, *, n=1, t=1.0, model="sim"):
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": model, "messages": [{"role": "user", "content": prompt}],
                     "temperature": t, "n": n}}


def jsonl(rows):
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def wait(c, bid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        b = c.batches.retrieve(bid)
        if b.status in ("completed", "failed", "expired", "cancelled") \
                or time.monotonic() > deadline:
            return b
        time.sleep(0.05)


def test_a_batch_runs_through_the_official_client_with_the_online_draws():
    with SimulatedServer(lam1=0.5, seed=2, batch=BatchPlan(delay=0.2)) as srv:
        c = client(srv)
        rows = [line(custom_id("k", 3, 2), QS[0].prompt, n=2),
                line(custom_id("k2", 0, 1), QS[1].prompt)]
        f = c.files.create(file=("in.jsonl", jsonl(rows)), purpose="batch")
        assert c.files.retrieve(f.id).bytes == len(jsonl(rows))
        b = c.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                             completion_window="24h", metadata={"who": "test"})
        assert b.status == "validating" and b.metadata == {"who": "test"}
        assert c.batches.list(limit=5).data[0].id == b.id
        b = wait(c, b.id)
        assert b.status == "completed"
        assert b.request_counts.total == 2 and b.request_counts.completed == 2
        out = [json.loads(x) for x in c.files.content(b.output_file_id).read().splitlines()]
        assert srv.stats.requests == 0 and srv.stats.batch_lines == 2
        got = {r["custom_id"]: [ch["message"]["content"] for ch in
                                r["response"]["body"]["choices"]] for r in out}
        # the same texts as the chat route for the same sample indices (3 and 4)
        online = c.chat.completions.create(
            model="sim", messages=[{"role": "user", "content": QS[0].prompt}], n=2,
            temperature=1.0, extra_headers={INDEX_HEADER: "3"})
        assert got[custom_id("k", 3, 2)] == [ch.message.content for ch in online.choices]


def test_failing_lines_go_to_the_error_file_and_only_the_first_time_when_asked():
    plan = BatchPlan(delay=0.05, fail_first=1.0)
    with SimulatedServer(lam1=3.0, batch=plan) as srv:
        c = client(srv)
        f = c.files.create(file=("in.jsonl", jsonl([line("a:0:1", QS[0].prompt)])),
                           purpose="batch")
        b = wait(c, c.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                     completion_window="24h").id)
        assert b.request_counts.failed == 1 and b.output_file_id is None
        err = json.loads(c.files.content(b.error_file_id).read())
        assert err["custom_id"] == "a:0:1" and err["response"]["status_code"] == 500
        b = wait(c, c.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                     completion_window="24h").id)
        assert b.request_counts.completed == 1 and b.error_file_id is None


def test_cancel_expire_and_validation_follow_openais_batch_lifecycle():
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=5.0, max_lines=3)) as srv:
        c = client(srv)
        f = c.files.create(file=("in.jsonl", jsonl([line(f"c{i}:0:1", QS[i].prompt)
                                                    for i in range(3)])), purpose="batch")
        b = c.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                             completion_window="24h")
        assert c.batches.cancel(b.id).status == "cancelling"
        b = wait(c, b.id)
        assert b.status == "cancelled"
        errs = [json.loads(x) for x in c.files.content(b.error_file_id).read().splitlines()]
        assert {e["error"]["code"] for e in errs} == {"batch_cancelled"}
        with pytest.raises(openai.BadRequestError):
            c.batches.cancel(b.id)  # a finished batch cannot be cancelled
        big = c.files.create(file=("big.jsonl", jsonl([line(f"b{i}:0:1", QS[i].prompt)
                                                       for i in range(4)])), purpose="batch")
        b = c.batches.create(input_file_id=big.id, endpoint="/v1/chat/completions",
                             completion_window="24h")
        assert b.status == "failed" and "more than the limit" in b.errors.data[0].message
        dup = c.files.create(file=("dup.jsonl", jsonl([line("x", "hi"), line("x", "hi")])),
                             purpose="batch")
        b = c.batches.create(input_file_id=dup.id, endpoint="/v1/chat/completions",
                             completion_window="24h")
        assert b.status == "failed" and b.errors.data[0].code == "duplicate_custom_id"
        with pytest.raises(openai.NotFoundError):
            c.batches.retrieve("batch_nope")
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.05, expire_first=1)) as srv:
        c = client(srv)
        f = c.files.create(file=("in.jsonl", jsonl([line(f"e{i}:0:1", QS[i].prompt)
                                                    for i in range(4)])), purpose="batch")
        b = wait(c, c.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                     completion_window="24h").id)
        assert b.status == "expired" and b.request_counts.completed == 2
        errs = [json.loads(x) for x in c.files.content(b.error_file_id).read().splitlines()]
        assert [e["error"]["code"] for e in errs] == ["batch_expired"] * 2


def test_the_batch_api_asks_for_the_key_like_the_chat_route():
    with SimulatedServer(lam1=3.0, require_api_key="sk-right-key-123456") as srv:
        with pytest.raises(openai.AuthenticationError):
            client(srv, key="sk-wrong-key-123456").batches.list()
        assert client(srv, key="sk-right-key-123456").batches.list().data == []


def test_streaming_through_the_official_client_matches_the_plain_reply():
    with SimulatedServer(lam1=0.5, seed=1) as srv:
        c = client(srv)
        msgs = [{"role": "user", "content": QS[0].prompt}]
        stream = c.chat.completions.create(model="sim", messages=msgs, n=3, temperature=1.0,
                                           stream=True, stream_options={"include_usage": True},
                                           extra_headers={INDEX_HEADER: "5"})
        chunks = list(stream)
        texts: dict[int, str] = {}
        finish = {}
        for ch in chunks[:-1]:
            assert ch.object == "chat.completion.chunk" and ch.usage is None
            for choice in ch.choices:
                texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
                if choice.finish_reason:
                    finish[choice.index] = choice.finish_reason
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        plain = c.chat.completions.create(model="sim", messages=msgs, n=3, temperature=1.0,
                                          extra_headers={INDEX_HEADER: "5"})
        assert texts == {i: ch.message.content for i, ch in enumerate(plain.choices)}
        assert finish == {0: "stop", 1: "stop", 2: "stop"}
        assert chunks[-1].usage.total_tokens == plain.usage.total_tokens
        # without include_usage: no usage chunk, and still every choice
        chunks = list(c.chat.completions.create(model="sim", messages=msgs, stream=True,
                                                temperature=1.0))
        assert chunks and all(ch.usage is None for ch in chunks) and chunks[-1].choices
        assert srv.stats.streamed == 2


def test_streaming_mistakes_get_a_clear_400():
    with SimulatedServer(lam1=3.0) as srv:
        c = client(srv)
        msgs = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.BadRequestError, match="only allowed when 'stream'"):
            c.chat.completions.create(model="sim", messages=msgs,
                                      stream_options={"include_usage": True})
        r = httpx.post(srv.base_url + "/chat/completions",
                       json={"model": "sim", "messages": msgs, "stream": "yes"})
        assert r.status_code == 400 and r.json()["error"]["param"] == "stream"


async def test_litellm_streams_from_the_simulator():
    from ensemble.providers.litellm import litellm

    ll = litellm()
    with SimulatedServer(lam1=3.0) as srv:
        resp = await ll.acompletion(model="openai/sim", api_base=srv.base_url, api_key="sk-x",
                                    messages=[{"role": "user", "content": QS[0].prompt}],
                                    stream=True, stream_options={"include_usage": True})
        text = ""
        usage = None
        async for chunk in resp:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            usage = getattr(chunk, "usage", None) or usage
    assert "<answer>" in text and usage is not None and usage.completion_tokens > 0
