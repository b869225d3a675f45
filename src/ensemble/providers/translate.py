"""One error translation, table-driven: what a failed request says, mapped to an
`ensemble.errors` type that carries the model, the endpoint, the status and the Retry-After,
and says what to do next. Used for online replies (from litellm's exceptions) and for failed
Batch API lines (from the line's status and error object) alike.

Two tables: `TRANSPORT`, the transport's own exception types (connection refused, DNS, TLS, a
dropped connection, a JSON decoding error, a timeout), and `REPLIES`, the HTTP status and the
reply's typed fields (`code`, `param`, the content type). Messages never contain a key: they
pass through `ensemble.secrets.redact` when the error is made.
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from ..errors import (
    AuthenticationError,
    BadRequestError,
    ContentRefusedError,
    EndpointNotFoundError,
    EndpointUnreachable,
    MalformedResponseError,
    ModelNotFoundError,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
)
from .base import provider_of

__all__ = ["REPLIES", "TRANSPORT", "NUnsupported", "Failure", "Where", "classify",
           "env_key_name", "exception_chain", "failure_of_exception", "failure_of_line",
           "error_in_reply", "is_loopback", "page_error", "reply_body", "translate_error"]


class NUnsupported(BadRequestError):
    """The provider rejected `n` > 1; the sampler falls back to separate requests."""


def is_loopback(api_base: str | None) -> bool:
    if not api_base:
        return False
    import ipaddress

    host = urlparse(api_base).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def env_key_name(provider: str) -> str:
    """The environment variable litellm reads the provider's key from (OPENAI_API_KEY, ...)."""
    return f"{provider.upper().replace('-', '_')}_API_KEY"


@dataclass(frozen=True)
class Where:
    """Who failed: the model, its provider and endpoint, and the request's context."""

    model: str
    api_base: str | None = None
    n: int = 1
    timeout: float | None = None
    key_source: str | None = None  # "env:NAME", "explicit", "placeholder" or None

    @property
    def provider(self) -> str:
        return provider_of(self.model)

    @property
    def name(self) -> str:
        return self.api_base or f"the {self.provider} API"


@dataclass(frozen=True)
class Failure:
    """What a failed request says, whichever way it came: the HTTP status (None: no reply),
    the error object's typed fields, and the client's exception classes (`kinds`)."""

    status: int | None
    code: str = ""
    param: str = ""
    detail: str = ""
    retry_after: float | None = None
    kinds: frozenset[str] = field(default_factory=frozenset)
    json_reply: bool = False  # a 404 with a JSON body: the API's reply, not a missing page
    page: str | None = None  # a 200 body the client could not read, as it quoted it
    text: str = ""  # the exception's own text (for a rejected `n` named only there)

    def has(self, *names: str) -> bool:
        return any(n in self.kinds for n in names)


Rule = tuple[Callable[[Failure, Where], bool],
             Callable[[Failure, Where], tuple[type[ProviderError], str, str]]]


def _detail(f: Failure) -> str:
    return f": {f.detail}" if f.detail else ""


def _unauthorized(f: Failure, w: Where) -> tuple[type[ProviderError], str, str]:
    env = env_key_name(w.provider)
    src = w.key_source
    if src in ("placeholder", None):
        return (AuthenticationError, f"{w.name} requires an API key and none is set: set {env} "
                "or pass --api-key / api_key=", "401 unauthorized")
    source = (f"the key in {src[4:]}" if src.startswith("env:")
              else "the key given with --api-key / api_key=")
    return (AuthenticationError, f"{w.name} refused {source} (401): check that it is valid for "
            f"this endpoint (set {env} or pass --api-key)", "401 unauthorized")


def _server(f: Failure, w: Where) -> tuple[type[ProviderError], str, str]:
    if f.status == 500 and f.page is not None and f.page.lstrip().startswith("<"):
        return (EndpointNotFoundError, f"{w.name} answered with an HTML page, not JSON: is "
                "--api-base the API's base URL (usually ending in /v1)?", "HTML instead of JSON")
    if f.status == 500 and f.page is not None:
        return (MalformedResponseError, f"the reply from {w.name} is not a chat completion",
                "malformed reply")
    return (ServerError, f"{w.model}: {w.name} failed ({f.status}{_detail(f)})",
            f"{f.status} server error")


def _bad_request(f: Failure) -> bool:
    return f.status in (400, 422) or f.has("BadRequestError", "UnprocessableEntityError",
                                           "UnsupportedParamsError")


# (when, what): the first rule whose `when` holds makes the error
REPLIES: tuple[Rule, ...] = (
    (lambda f, w: f.status == 429 or f.has("RateLimitError"),
     lambda f, w: (RateLimitError, f"{w.model}: rate limited by {w.name} (429)",
                   "429 rate limit")),
    (lambda f, w: f.status in (503, 529) and (f.retry_after is not None or f.status == 529),
     lambda f, w: (OverloadedError, f"{w.model}: {w.name} is overloaded ({f.status})",
                   f"{f.status} overloaded")),
    (lambda f, w: f.status == 401 or (f.status is None and f.has("AuthenticationError")),
     _unauthorized),
    (lambda f, w: f.status == 403 or f.has("PermissionDeniedError"),
     lambda f, w: (AuthenticationError, f"{w.name} denies this key access to {w.model} (403): "
                   "check the key's permissions and the model name", "403 forbidden")),
    (lambda f, w: (f.status == 404 or f.has("NotFoundError"))
     and (f.json_reply or f.code == "model_not_found" or f.param == "model"),
     lambda f, w: (ModelNotFoundError, f"{w.name} does not know the model {w.model!r} (404"
                   f"{_detail(f)}); check the model name", "404 model not found")),
    (lambda f, w: f.status == 404 or f.has("NotFoundError"),
     lambda f, w: (EndpointNotFoundError, f"{w.name}/chat/completions does not exist (404 "
                   "page, not an API reply): --api-base should be the API's base URL, usually "
                   "ending in /v1", "404 route not found")),
    (lambda f, w: _bad_request(f) and (f.has("ContentPolicyViolationError")
                                       or f.code == "content_policy_violation"),
     lambda f, w: (ContentRefusedError, f"{w.model}: the provider refuses this prompt (content "
                   f"policy{_detail(f)})", "400 content policy")),
    (lambda f, w: _bad_request(f) and (f.has("ContextWindowExceededError")
                                       or f.code == "context_length_exceeded"),
     lambda f, w: (BadRequestError, f"{w.model}: the prompt is longer than the model's context "
                   "window", "400 context length")),
    (lambda f, w: _bad_request(f) and w.n > 1 and (
        f.param == "n" or (f.has("UnsupportedParamsError") and re.search(r"\bn\b", f.text)
                           is not None)),
     lambda f, w: (NUnsupported, f"{w.model}: the provider rejects n = {w.n}", "400 n rejected")),
    (lambda f, w: _bad_request(f) and f.param == "temperature",
     lambda f, w: (BadRequestError, f"{w.model}: the provider rejects this temperature "
                   f"({f.detail}); some models accept only t = 1: choose a supported "
                   "temperature (ensemble never changes it silently)", "400 temperature")),
    (lambda f, w: _bad_request(f),
     lambda f, w: (BadRequestError, f"{w.model}: request rejected ({f.status or 400}): "
                   f"{f.detail or 'no detail'}; check the model name and sampling parameters",
                   f"{f.status or 400} bad request")),
    (lambda f, w: f.status is not None and f.status >= 500, _server),
)

# (exception class names, error, message, reason, attempts cap, only without an HTTP status)
TRANSPORT: tuple[tuple[tuple[str, ...], type[ProviderError], Callable[[Where], str], str,
                       Callable[[Where], int | None], bool], ...] = (
    (("ConnectionRefusedError",), EndpointUnreachable,
     lambda w: f"cannot connect to {w.name}: connection refused; is the server running, and is "
     "--api-base right?", "connection refused",
     lambda w: 1 if is_loopback(w.api_base) else None, False),
    (("gaierror", "ClientConnectorDNSError"), EndpointUnreachable,
     lambda w: (f"cannot resolve the host {urlparse(w.api_base).hostname!r} of {w.name} "
                "(DNS); check --api-base and the network" if w.api_base else
                f"cannot resolve the host of {w.name} (its default endpoint; DNS): check the "
                "network, or give --api-base"), "DNS failure",
     lambda w: None, False),
    (("SSLError", "ClientConnectorSSLError", "ClientConnectorCertificateError"),
     EndpointUnreachable,
     lambda w: f"TLS handshake with {w.name} failed; if the server speaks plain HTTP use an "
     "http:// --api-base, otherwise check its certificate", "TLS failure", lambda w: 1, False),
    (("InvalidURL", "InvalidUrlClientError"), EndpointUnreachable,
     lambda w: f"{w.name} is not a valid URL; give the API's base URL, e.g. "
     "http://127.0.0.1:8000/v1", "invalid URL", lambda w: 1, False),
    (("Timeout", "APITimeoutError", "TimeoutException", "TimeoutError", "SocketTimeoutError",
      "ServerTimeoutError"), ProviderTimeoutError,
     lambda w: f"no reply from {w.name}"
     + (f" within {w.timeout:g} s (--timeout)" if w.timeout else ""), "timeout",
     lambda w: None, False),
    (("ServerDisconnectedError", "RemoteProtocolError", "ReadError", "ClientOSError",
      "ConnectionResetError", "ClientPayloadError", "WriteError", "IncompleteRead"),
     ProviderConnectionError, lambda w: f"the connection to {w.name} dropped mid-request",
     "connection dropped", lambda w: None, True),
    (("JSONDecodeError",), MalformedResponseError,
     lambda w: f"the reply from {w.name} is not valid JSON", "malformed reply",
     lambda w: None, False),
    (("ConnectError", "ClientConnectorError", "APIConnectionError", "ConnectionError",
      "OSError"), EndpointUnreachable,
     lambda w: f"cannot connect to {w.name}; check --api-base and the network",
     "connection failed", lambda w: None, True),
)


def _make(cls: type[ProviderError], message: str, reason: str, f: Failure, w: Where,
          cap: int | None = None) -> ProviderError:
    err = cls(message, model=w.model, provider=w.provider, status=f.status,
              retry_after=f.retry_after, api_base=w.api_base, reason=reason)
    if cap is not None:
        err.attempts_cap = cap
    return err


def classify(f: Failure, w: Where) -> ProviderError:
    """The error of a failed reply, by the first rule of `REPLIES` that holds."""
    for when, what in REPLIES:
        if when(f, w):
            cls, message, reason = what(f, w)
            return _make(cls, message, reason, f, w)
    if f.has("BadRequestError"):
        return _make(BadRequestError, f"{w.model}: request rejected: "
                     f"{f.detail or 'bad request'}", "bad request", f, w)
    return _make(ProviderConnectionError, f"{w.model}: request to {w.name} failed",
                 "request failed", f, w)


# -- online: a client's exception --------------------------------------------------------------
def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes and contexts, outermost first."""
    out: list[BaseException] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _kinds(chain: list[BaseException]) -> frozenset[str]:
    return frozenset(cls.__name__ for e in chain for cls in type(e).__mro__)


def _status(chain: list[BaseException]) -> int | None:
    """The HTTP status of a real reply, None for transport errors (for those litellm
    synthesises a 500 that no server sent)."""
    for e in chain:
        if any(c.__name__ in ("HTTPStatusError", "ClientResponseError")
               for c in type(e).__mro__):
            code = getattr(getattr(e, "response", None), "status_code", None)
            if code is None:
                code = getattr(e, "status_code", None) or getattr(e, "status", None)
            return int(code) if isinstance(code, int) else None
    return None


def reply_body(chain: list[BaseException]) -> Any:
    """The error object the provider sent (a dict with message/type/param/code), if any."""
    for e in chain:
        body = getattr(e, "body", None)
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                continue
        if isinstance(body, dict):
            return body.get("error", body) if isinstance(body.get("error"), dict) else body
    return None


def _headers(chain: list[BaseException], name: str) -> str | None:
    for e in chain:
        for headers in (getattr(e, "litellm_response_headers", None),
                        getattr(getattr(e, "response", None), "headers", None),
                        getattr(e, "headers", None)):
            if not headers:
                continue
            try:
                value = headers.get(name) or headers.get(name.title())
            except Exception:  # noqa: BLE001 - headers of another shape
                value = None
            if value:
                return str(value)
    return None


def _retry_after(value: str | None) -> float | None:
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def _received_page(chain: list[BaseException]) -> str | None:
    """For a 200 reply litellm could not read, the body it quotes (litellm keeps no typed copy)."""
    for e in chain:
        m = re.search(r"Received: '(.{0,200})", str(getattr(e, "message", "") or ""), re.DOTALL)
        if m:
            return m.group(1)
    return None


def _fields(body: Any) -> tuple[str, str, str]:
    """(code, param, detail) of an error object."""
    err = body if isinstance(body, Mapping) else {}
    if isinstance(err.get("error"), Mapping):
        err = err["error"]
    return (str(err.get("code") or ""), str(err.get("param") or ""),
            " ".join(str(err.get("message") or "").split())[:200])


def failure_of_exception(exc: BaseException) -> Failure:
    """What a client's exception says (its chain's types, status, body and headers)."""
    chain = exception_chain(exc)
    status = _status(chain)
    if status is None:  # the client's own exception without a response behind it
        sc = getattr(exc, "status_code", None)
        status = int(sc) if isinstance(sc, int) else None
    code, param, detail = _fields(reply_body(chain))
    return Failure(status=status, code=code, param=param, detail=detail,
                   retry_after=_retry_after(_headers(chain, "retry-after")),
                   kinds=_kinds(chain),
                   json_reply="json" in (_headers(chain, "content-type") or "").lower(),
                   page=_received_page(chain), text=str(exc))


def translate_error(exc: BaseException, *, model: str, api_base: str | None = None,
                    n: int = 1, timeout: float | None = None,
                    key_source: str | None = None) -> ProviderError:
    """Map any exception raised by a client call to an `ensemble.errors.ProviderError`: the
    transport's exception types first (`TRANSPORT`), then the reply (`REPLIES`)."""
    if isinstance(exc, ProviderError):
        return exc
    w = Where(model=model, api_base=api_base, n=n, timeout=timeout, key_source=key_source)
    chain = exception_chain(exc)
    kinds = _kinds(chain)
    status = _status(chain)
    f = Failure(status=status, retry_after=_retry_after(_headers(chain, "retry-after")),
                kinds=kinds)
    for names, cls, message, reason, cap, no_status in TRANSPORT:
        hit = any(n_ in kinds for n_ in names) or (cls is EndpointUnreachable and names[0] ==
                                                    "SSLError" and isinstance(exc, ssl.SSLError))
        if hit and not (no_status and status is not None):
            return _make(cls, message(w), reason, f, w, cap(w))
    err = classify(failure_of_exception(exc), w)
    if type(err) is ProviderConnectionError and err.reason == "request failed":
        # the client's innermost words (litellm's error for a 200 reply with an "error"
        # body carries the upstream's message only there)
        said = next((" ".join(str(e).split())[:200] for e in reversed(chain) if str(e).strip()),
                    "")
        return _make(ProviderConnectionError, f"{model}: request to {w.name} failed "
                     f"({type(exc).__name__}{': ' + said if said else ''})",
                     type(exc).__name__, f, w)
    if type(err) is BadRequestError and err.reason == "bad request":
        detail = failure_of_exception(exc).detail
        return _make(BadRequestError, f"{model}: request rejected: "
                     f"{detail or type(exc).__name__}", "bad request", f, w)
    return err


def error_in_reply(doc: Any, *, model: str, api_base: str | None) -> ProviderError | None:
    """The error a 200 reply carries instead of a completion (`{"error": {...}}`, as some
    proxies answer), or None for a body without one: the upstream's own message, classified
    by the status its `code` gives (`{"code": 429}`), else a retryable
    `MalformedResponseError` quoting it (never a bare "not a chat completion")."""
    if not isinstance(doc, Mapping) or "choices" in doc or not doc.get("error"):
        return None
    w = Where(model=model, api_base=api_base)
    code, param, detail = _fields(doc)
    if isinstance(doc["error"], str):
        detail = " ".join(doc["error"].split())[:200]
    status = int(code) if code.isdigit() and 400 <= int(code) < 600 else None
    if status is not None:
        return classify(Failure(status=status, code=code, param=param, detail=detail,
                                json_reply=True), w)
    said = detail or code or "no message"
    return _make(MalformedResponseError, f"{w.name} answered with an error instead of a chat "
                 f"completion: {said}", "error in a 200 reply", Failure(status=200), w)


def page_error(page: str, *, model: str, api_base: str | None,
               status: int | None = None) -> ProviderError:
    """The error of a reply whose body is not a chat completion (`page`: its first bytes): an
    HTML page (a wrong --api-base) or anything else that does not parse. The same rule as a
    page litellm quotes (`REPLIES`)."""
    w = Where(model=model, api_base=api_base)
    cls, message, reason = _server(Failure(status=500, page=page), w)
    return _make(cls, message, reason, Failure(status=status), w)


# -- batch: a failed line ----------------------------------------------------------------------
def failure_of_line(status: int | None, error: Any) -> Failure:
    """What a failed Batch API line says: its status code and its error object."""
    code, param, detail = _fields(error)
    return Failure(status=status, code=code, param=param, detail=detail, json_reply=True)
