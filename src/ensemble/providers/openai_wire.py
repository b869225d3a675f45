"""OpenAI's wire format, written once for every provider that speaks it: a chat completion's
request body from `SamplingParams`, its reply as a `Completion`, and the Batch API's JSONL
lines around them (a request line by its `custom_id`; an output or error file's line as its
completion or its error, through the one translation table).

The openai provider POSTs these bodies and reads these replies online; its Batch API and
litellm's (which takes OpenAI's format for every provider it batches, translating the file
itself where a provider has another) write and read these lines. The sampling engine asks its
provider's `BatchAPI` for them (`request_lines`, `read_line`) and knows no wire format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import MalformedResponseError, ProviderError
from .base import Choice, Completion
from .batch import LineResult, LineWriter, not_run
from .params import SamplingParams
from .toolcalls import reply_text
from .translate import Where, classify, failure_of_line

__all__ = ["BATCH_ENDPOINT", "OpenAILines", "chat_body", "completion_of", "line_writer",
           "read_line", "response_format"]

BATCH_ENDPOINT = "/v1/chat/completions"

# json.dumps(obj, ensure_ascii=False, separators=(",", ":")), its encoder made once
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

def _dumps(obj: Any) -> bytes:
    return _encode(obj).encode()


def chat_body(model: str, messages: Sequence[Mapping[str, Any]], params: SamplingParams,
              n: int = 1, *, max_tokens_name: str = "max_tokens") -> dict[str, Any]:
    """A chat completion's request body: the parameters as given (`extra_body` merged in as
    the SDK does, a pydantic `response_format` as its JSON schema), `max_tokens` under the
    endpoint's name for it (OpenAI's own API takes `max_completion_tokens`), `n` when > 1."""
    body: dict[str, Any] = {"model": model, "messages": list(messages)}
    for k, v in params.as_dict().items():
        if k == "extra_body":
            body.update(v or {})
        elif k == "max_tokens":
            body[max_tokens_name] = v
        elif k == "response_format":
            body[k] = response_format(v)
        else:
            body[k] = v
    if n > 1:
        body["n"] = n
    return body


def response_format(value: Any) -> Any:
    """A pydantic model class becomes the JSON-schema response format; dicts pass as given."""
    schema = getattr(value, "model_json_schema", None)
    if isinstance(value, type) and callable(schema):
        return {"type": "json_schema",
                "json_schema": {"name": value.__name__, "schema": schema()}}
    return value


def completion_of(doc: Any, *, latency: float = 0.0,
                  price: Callable[[Any, Any], float | None] | None = None) -> Completion:
    """A chat completion document as a `Completion` (its choices in index order, its usage as
    reported, its cost `price(prompt_tokens, completion_tokens)`, none without `price`).
    ValueError for a document that is not a chat completion (no list of choices, a choice
    without a message); a list of no choices is returned as it is, for the caller to judge."""
    # dicts, not Mappings: a JSON document's objects are dicts, and the abstract check costs
    # a tenth of reading a reply of five choices
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
        raise ValueError("not a chat completion: no list of choices")
    items = doc["choices"]
    if not all(isinstance(c, dict) and isinstance(c.get("message"), dict) for c in items):
        raise ValueError("not a chat completion: a choice without a message")
    choices = tuple(Choice(text=reply_text(c["message"].get("content"),
                                           c["message"].get("tool_calls")),
                           finish_reason=c.get("finish_reason"), logprobs=c.get("logprobs"))
                    for c in sorted(items, key=lambda c: c.get("index") or 0))
    usage = doc.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return Completion(choices=choices, prompt_tokens=pt, completion_tokens=ct,
                      cost_usd=None if price is None else price(pt, ct), latency_s=latency)


_METHOD_URL = b',"method":"POST","url":' + _dumps(BATCH_ENDPOINT) + b',"body":'


def line_writer(body: Mapping[str, Any]) -> LineWriter:
    """The Batch API's request lines of one prompt: `write(custom_id, count)` is the JSONL line
    (newline included) of a request for `count` samples, the bytes of `json.dumps({"custom_id",
    "method", "url", "body"})` with `n` set in the body when count > 1; the body is encoded once
    per count (a paper-sized run writes 15,000-300,000 lines of a few thousand prompts)."""
    encoded: dict[int, bytes] = {}

    def write(custom_id: str, count: int) -> bytes:
        data = encoded.get(count)
        if data is None:
            line_body = dict(body)
            if count > 1:
                line_body["n"] = count
            data = encoded[count] = _dumps(line_body) + b"}\n"
        return b'{"custom_id":' + _dumps(custom_id) + _METHOD_URL + data

    return write


def read_line(raw: bytes | str, *, model: str, api_base: str | None,
              batch_status: str = "") -> LineResult | None:
    """One JSONL line of a batch's output or error file, or None for one that cannot be read
    (blank, not JSON, no custom_id): it counts as not returned. A reply of 200 is its
    completion (a body that is not a chat completion: a retryable `MalformedResponseError`);
    any other status its error by the one translation table (`ensemble.providers.translate`);
    a line without a reply (the batch expired, was cancelled or failed before running it) a
    retryable `ServerError` saying so (`batch_status`: what the batch did)."""
    if not raw.strip():
        return None
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(row, dict) or row.get("custom_id") is None:
        return None
    cid = str(row["custom_id"])
    resp = row.get("response") or None
    if not isinstance(resp, Mapping):
        return LineResult(cid, None, error=_not_run(row.get("error"), model=model,
                                                    api_base=api_base,
                                                    batch_status=batch_status))
    status = int(resp.get("status_code") or 0) or None
    body = resp.get("body")
    if status == 200 and isinstance(body, Mapping):
        try:
            return LineResult(cid, status, completion=completion_of(body))
        except ValueError as exc:
            return LineResult(cid, status, error=MalformedResponseError(
                f"{model}: a batch line's reply is {exc}", model=model, status=200,
                api_base=api_base, reason="malformed reply"))
    return LineResult(cid, status, error=classify(
        failure_of_line(status, body),
        Where(model=model, api_base=api_base, key_source="explicit")))


def _not_run(error: Any, *, model: str, api_base: str | None,
             batch_status: str) -> ProviderError:
    err = error if isinstance(error, Mapping) else {}
    if isinstance(err.get("error"), Mapping):
        err = err["error"]
    what = {"batch_expired": "expired", "batch_cancelled": "cancelled"}.get(
        str(err.get("code") or ""), batch_status or "not run")
    return not_run(what, model=model, api_base=api_base)


class OpenAILines:
    """A Batch API client's wire format when it is OpenAI's (`BatchAPI.request_lines`,
    `BatchAPI.read_line`): the openai SDK's and litellm's, which takes OpenAI's lines for
    every provider it batches. Reads the client's `model` (the name a line's body carries),
    `max_tokens_name`, `target` and `api_base`."""

    model: str
    target: str
    api_base: str | None
    max_tokens_name = "max_tokens"

    def request_lines(self, messages: Sequence[Mapping[str, Any]], params: SamplingParams
                      ) -> LineWriter:
        return line_writer(chat_body(self.model, messages, params,
                                     max_tokens_name=self.max_tokens_name))

    def read_line(self, raw: bytes, *, batch_status: str = "") -> LineResult | None:
        return read_line(raw, model=self.target, api_base=self.api_base,
                         batch_status=batch_status)
