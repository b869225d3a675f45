"""OpenAI's wire format belongs to the providers that speak it (issue 36.9): a request's body is
built once for the online POST and the Batch API's lines, and a batch's output lines are read
by the provider's Batch API into the same `Completion` and the same errors as online replies.
The sampling engine only asks (`BatchAPI.request_lines`, `BatchAPI.read_line`)."""

from __future__ import annotations

import json

import pydantic

from ensemble.errors import (
    ContentRefusedError,
    MalformedResponseError,
    RateLimitError,
    ServerError,
)
from ensemble.providers.base import Choice
from ensemble.providers.openai import OpenAIProvider
from ensemble.providers.openai_wire import BATCH_ENDPOINT, chat_body, completion_of
from ensemble.providers.options import ProviderOptions
from ensemble.providers.params import SamplingParams

MESSAGES = [{"role": "user", "content": "Is 3 odd? é"}]


class Verdict(pydantic.BaseModel):
    odd: bool


def _batch_api(api_base=None):
    return OpenAIProvider("openai/gpt-4o-mini",
                          ProviderOptions(api_base=api_base, api_key="sk-x")).batch_api()


def test_a_batch_line_carries_the_body_the_online_request_sends():
    """OpenAI's own API takes max_completion_tokens (its reasoning models refuse max_tokens):
    the batch lines said max_tokens while the online POST said max_completion_tokens."""
    params = SamplingParams.make(0.7, max_tokens=5, extra={"extra_body": {"seed_x": 1},
                                                          "response_format": Verdict})
    write = _batch_api().request_lines(MESSAGES, params)
    line = write("k:0:3", 3)
    assert line.endswith(b"\n")
    doc = json.loads(line)
    assert doc == {"custom_id": "k:0:3", "method": "POST", "url": BATCH_ENDPOINT,
                   "body": chat_body("gpt-4o-mini", MESSAGES, params, 3,
                                     max_tokens_name="max_completion_tokens")}
    body = doc["body"]
    assert body["max_completion_tokens"] == 5 and "max_tokens" not in body
    assert body["n"] == 3 and body["seed_x"] == 1 and body["temperature"] == 0.7
    assert body["response_format"]["json_schema"]["name"] == "Verdict"
    assert "n" not in json.loads(write("k:3:1", 1))["body"]
    other = _batch_api("http://127.0.0.1:8000/v1").request_lines(MESSAGES, params)
    assert json.loads(other("k:0:1", 1))["body"]["max_tokens"] == 5  # other servers


def _line(cid, status=None, body=None, error=None):
    row = {"id": "batch_req_1", "custom_id": cid,
           "response": None if status is None else {"status_code": status, "body": body},
           "error": error}
    return json.dumps(row).encode()


def test_output_lines_are_read_as_online_replies_are():
    api = _batch_api()
    reply = {"choices": [{"index": 1, "message": {"content": "B"}, "finish_reason": "stop"},
                         {"index": 0, "message": {"content": "A"}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 7, "completion_tokens": 2}}
    got = api.read_line(_line("k:0:2", 200, reply))
    assert got is not None and got.custom_id == "k:0:2" and got.error is None
    assert got.completion == completion_of(reply)
    assert got.completion.choices == (Choice("A", "stop"), Choice("B", "stop"))
    assert (got.completion.prompt_tokens, got.completion.completion_tokens) == (7, 2)


def test_failed_lines_are_the_errors_online_replies_give():
    api = _batch_api()
    refused = api.read_line(_line("a", 400, {"error": {
        "message": "rejected by our safety system", "code": "content_policy_violation"}}))
    assert isinstance(refused.error, ContentRefusedError)
    limited = api.read_line(_line("b", 429, {"error": {"message": "slow down"}}))
    assert isinstance(limited.error, RateLimitError) and limited.error.backpressure
    expired = api.read_line(_line("c", error={"code": "batch_expired", "message": "x"}))
    assert isinstance(expired.error, ServerError) and expired.error.retryable
    assert "the batch expired before this request ran" in str(expired.error)
    failed = api.read_line(_line("d", error={"code": "other"}), batch_status="failed")
    assert "the batch failed before" in str(failed.error)
    odd = api.read_line(_line("e", 200, {"choices": [{"index": 0}]}))
    assert isinstance(odd.error, MalformedResponseError) and odd.error.retryable


def test_unreadable_lines_are_none():
    api = _batch_api()
    assert api.read_line(b"") is None and api.read_line(b"{not json") is None
    assert api.read_line(b"[1, 2]") is None and api.read_line(b'{"response": {}}') is None
