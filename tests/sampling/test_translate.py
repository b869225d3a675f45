"""Error translation, directly: every way a provider fails, through litellm and real HTTP on
127.0.0.1, becomes its own error type with one line that names the URL and the next step."""

import asyncio
import socket

import pytest

from ensemble.errors import (
    AuthenticationError,
    BadRequestError,
    ContentRefusedError,
    EndpointNotFoundError,
    EndpointUnreachable,
    MalformedResponseError,
    ModelNotFoundError,
    OverloadedError,
    ProviderConnectionError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
)
from ensemble.providers.options import ProviderOptions
from ensemble.providers.params import SamplingParams
from ensemble.providers.registry import provider_for
from ensemble.providers.translate import NUnsupported

SECRET = "zz-9a8b7c6d5e4f3a2b1c0d"  # no well-known prefix
pytestmark = pytest.mark.usefixtures("each_provider")


def _error(status, message, *, param=None, code=None, headers=None):
    from aiohttp import web

    return web.json_response({"error": {"message": message, "type": "x", "param": param,
                                        "code": code}}, status=status, headers=headers)


async def _handler(request):
    from aiohttp import web

    mode = request.match_info["mode"]
    await request.read()
    replies = {
        "html404": lambda: web.Response(status=404, text="<html>Not Found</html>",
                                        content_type="text/html"),
        "html200": lambda: web.Response(status=200, text="<html><body>Hi</body></html>",
                                        content_type="text/html"),
        "model404": lambda: _error(404, "The model `x` does not exist", param="model",
                                   code="model_not_found"),
        "policy": lambda: _error(400, "rejected by the safety system",
                                 code="content_policy_violation"),
        "nparam": lambda: _error(400, "only n = 1 is supported", param="n"),
        "temp": lambda: _error(400, "temperature must be 1", param="temperature"),
        "s422": lambda: _error(422, "unprocessable"),
        "r429": lambda: _error(429, "slow down", headers={"Retry-After": "1.5"}),
        "s503ra": lambda: _error(503, "overloaded", headers={"Retry-After": "2"}),
        "s503": lambda: _error(503, "unavailable"),
        "s529": lambda: _error(529, "overloaded"),
        "s500": lambda: _error(500, "boom"),
        "s401": lambda: _error(401, f"Incorrect API key provided: {SECRET}"),
        "s403": lambda: _error(403, "forbidden"),
        "malformed": lambda: web.Response(text='{"choices": [', content_type="application/json"),
        "nochoices": lambda: web.json_response({"id": "x", "object": "chat.completion",
                                                "created": 1, "model": "x", "choices": []}),
        # a proxy's error in a 200 reply: the upstream's message, not "not a chat completion"
        "error200": lambda: web.json_response({"error": {"message": "upstream quota spent",
                                                         "code": "quota"}}),
        "error200code": lambda: web.json_response({"error": {"message": "slow down",
                                                             "code": 429}}),
    }
    if mode == "hang":
        await asyncio.sleep(30)
    if mode == "drop":
        request.transport.abort()
        return web.Response()
    return replies[mode]()


CASES = [
    ("html404", EndpointNotFoundError, "should be the API's base URL"),
    ("html200", EndpointNotFoundError, "HTML page, not JSON"),
    ("model404", ModelNotFoundError, "does not know the model"),
    ("policy", ContentRefusedError, "content policy"),
    ("nparam", NUnsupported, "rejects n = 2"),
    ("temp", BadRequestError, "never changes it silently"),
    ("s422", BadRequestError, "rejected (422)"),
    ("r429", RateLimitError, "rate limited"),
    ("s503ra", OverloadedError, "overloaded (503)"),
    ("s503", ServerError, "(503"),
    ("s529", OverloadedError, "overloaded (529)"),
    ("s500", ServerError, "(500"),
    ("s401", AuthenticationError, "refused the key given"),
    ("s403", AuthenticationError, "(403)"),
    ("hang", ProviderTimeoutError, "within 1 s (--timeout)"),
    ("drop", ProviderConnectionError, "dropped mid-request"),
    ("malformed", MalformedResponseError, "not valid JSON"),
    ("nochoices", MalformedResponseError, "without choices"),
    ("error200code", RateLimitError, "rate limited"),
]


def test_an_error_in_a_200_reply_is_quoted_not_called_malformed(hostile, each_provider):
    """Issue 41 item 29: a proxy's `{"error": ...}` in a 200 reply said "not a chat
    completion" (the openai path) or "failed (APIError)" (litellm), hiding its message."""
    from ensemble.errors import ProviderError

    with pytest.raises(ProviderError) as info:
        complete(f"http://127.0.0.1:{hostile}/error200/v1")
    msg = str(info.value)
    assert "upstream quota spent" in msg and "not a chat completion" not in msg, msg
    assert info.value.retryable and "\n" not in msg


@pytest.fixture(scope="module")
def hostile(serve_app):
    """An aiohttp server on 127.0.0.1 whose route /MODE/v1 misbehaves in the way MODE says."""
    from aiohttp import web

    app = web.Application()
    app.router.add_post("/{mode}/v1/chat/completions", _handler)
    yield serve_app(app, shutdown_timeout=0.1)


def complete(api_base, *, n=1, key=SECRET, timeout=1.0):
    p = provider_for("openai/x", ProviderOptions(api_base=api_base, api_key=key,
                                                  timeout=timeout))

    async def go():
        await p.start()
        return await p.complete([{"role": "user", "content": "hi"}], SamplingParams(1.0), n=n,
                                timeout=timeout)

    return asyncio.run(go())


@pytest.mark.parametrize("mode,kind,words", CASES, ids=[c[0] for c in CASES])
def test_each_failure_has_its_type_and_a_one_line_message(hostile, mode, kind, words):
    base = f"http://127.0.0.1:{hostile}/{mode}/v1"
    with pytest.raises(kind) as info:
        complete(base, n=2 if mode == "nparam" else 1)
    err = info.value
    msg = str(err)
    assert type(err) is kind and words in msg and "\n" not in msg
    assert SECRET not in msg  # the key the server echoed back is redacted
    if kind in (EndpointNotFoundError, ProviderTimeoutError, ProviderConnectionError,
                MalformedResponseError) and mode != "nochoices":
        assert base in msg  # names the URL
    assert err.retryable == (kind in (RateLimitError, OverloadedError, ServerError,
                                      ProviderTimeoutError, ProviderConnectionError,
                                      MalformedResponseError))
    assert err.backpressure == (kind in (RateLimitError, OverloadedError))
    if mode in ("r429", "s503ra"):
        assert err.retry_after == {"r429": 1.5, "s503ra": 2.0}[mode]


def test_unreachable_endpoints_name_the_url_and_stop_the_run(hostile):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    closed = sock.getsockname()[1]
    sock.close()
    # attempts: none more against a refused loopback port or a TLS failure (it would fail the
    # same way); a bounded few against a remote host (a network blip)
    cases = [(f"http://127.0.0.1:{closed}/v1", "connection refused", 1),
             ("http://no-such-host.invalid/v1", "DNS", 3),
             (f"https://127.0.0.1:{hostile}/s500/v1", "TLS handshake", 1)]
    for base, words, attempts in cases:
        with pytest.raises(EndpointUnreachable) as info:
            complete(base)
        assert words in str(info.value) and info.value.systemic
        assert info.value.attempts_cap == attempts and base in str(info.value)


def test_missing_key_and_unknown_model_fail_before_any_request(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    p = provider_for("openai/gpt-4o-mini", ProviderOptions())
    with pytest.raises(AuthenticationError, match="set OPENAI_API_KEY"):
        asyncio.run(p.start())
    with pytest.raises(ModelNotFoundError, match="unknown model 'nonsense'"):
        asyncio.run(provider_for("nonsense", ProviderOptions()).start())
