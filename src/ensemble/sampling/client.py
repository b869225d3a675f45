"""The default provider: litellm's `acompletion` (every provider), imported lazily; its errors
translated here, once, by exception type and status code.

litellm costs ~4 s to import, so nothing imports it until the first request. `translate_error`
is the only place that knows litellm's exceptions: it walks the exception's cause chain for the
transport's own types (connection refused, DNS, TLS, a dropped connection, a JSON decoding
error, a timeout) and otherwise maps the HTTP status (and, for 400 and 404, the reply's own
typed fields: `param`, `code`, the content type) to an `ensemble.errors` type that carries the
model, the endpoint, the status and the Retry-After, and says what to do next. Messages never
contain a key: they pass through `ensemble.secrets.redact`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import ssl
import time
import warnings
from collections.abc import Mapping, Sequence
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
from .options import ProviderOptions
from .types import Choice, Completion, SamplingParams, normalise_api_base, provider_of

__all__ = [
    "LiteLLMProvider",
    "NUnsupported",
    "env_key_name",
    "is_loopback",
    "litellm",
    "page_error",
    "pool_capacity",
    "resolve_key",
    "translate_error",
]

_litellm: Any = None
LOCAL_PLACEHOLDER_KEY = "sk-no-key-required"


def litellm() -> Any:
    """The litellm module, imported on first use with the local price table (no network)."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm as _ll

        _ll.suppress_debug_info = True
        import logging

        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
            logging.getLogger(name).setLevel(logging.ERROR)  # its warnings are not ours to show
        # litellm's success-logging worker is one process-wide asyncio queue bound to the first
        # event loop that used it; sync calls from several threads (each its own loop) make it
        # fail on every other loop with "LoggingWorker error" tracebacks. It only runs litellm's
        # own callbacks, which ensemble does not use (costs are read from the reply): drop
        # exactly those records, through the logging module's public filters.
        logging.getLogger("LiteLLM").addFilter(_drop_logging_worker_noise)
        logging.getLogger("asyncio").addFilter(_drop_logging_worker_noise)
        _ll.drop_params = False  # never drop a parameter (e.g. n) behind the user's back
        _litellm = _ll
        # litellm creates a coroutine in a worker thread and awaits it later; when our request
        # is cancelled (Ctrl-C, a run stopped, a timeout) the coroutine is never awaited and
        # Python warns at garbage collection. Nothing is lost: silence exactly that warning.
        warnings.filterwarnings("ignore", category=RuntimeWarning,
                                message=r"coroutine '[\w.]*acompletion' was never awaited")
    return _litellm


def _drop_logging_worker_noise(record: Any) -> bool:
    """False for the log records of litellm's LoggingWorker used across event loops."""
    text = str(record.msg)
    if "LoggingWorker" in text:
        return False
    if record.args or "Task exception was never retrieved" in text:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format is not ours to judge
            return True
        if "LoggingWorker" in text or "logging_worker" in text:
            return False
    ctx = getattr(record, "exc_info", None)
    return not (ctx and "logging_worker" in repr(ctx[1]))


HTTPX_DEFAULT_POOL = 100  # httpx's documented default: 100 connections per client


def pool_capacity() -> int | None:
    """Connections per host litellm's async transport may open (None: unknown).

    Read, never changed: litellm's pool is its own business (its aiohttp transport allows
    AIOHTTP_CONNECTOR_LIMIT / _PER_HOST connections, 1000 / 500 by default, set in the
    environment; with DISABLE_AIOHTTP_TRANSPORT=True it uses httpx's default pool). Only public
    names are read; a litellm that moved them gives None.
    """
    litellm()
    try:
        from litellm import constants
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        if not AsyncHTTPHandler.should_use_aiohttp_transport():
            return HTTPX_DEFAULT_POOL
        caps = [v for v in (getattr(constants, "AIOHTTP_CONNECTOR_LIMIT", None),
                            getattr(constants, "AIOHTTP_CONNECTOR_LIMIT_PER_HOST", None))
                if isinstance(v, int) and v > 0]
        return min(caps) if caps else HTTPX_DEFAULT_POOL
    except Exception:  # noqa: BLE001 - another litellm layout: unknown
        return None


def is_loopback(api_base: str | None) -> bool:
    if not api_base:
        return False
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


class NUnsupported(BadRequestError):
    """The provider rejected `n` > 1; the sampler falls back to separate requests."""


# -- error translation -----------------------------------------------------------------------
def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _has(chain: list[BaseException], *names: str) -> BaseException | None:
    """The first exception in the chain whose class (or a base class) has one of `names`."""
    for e in chain:
        for cls in type(e).__mro__:
            if cls.__name__ in names:
                return e
    return None


def _status(chain: list[BaseException]) -> int | None:
    """The HTTP status of a real reply, None for transport errors (for those litellm
    synthesises a 500 that no server sent)."""
    real = _has(chain, "HTTPStatusError", "ClientResponseError")
    if real is None:
        return None
    code = getattr(getattr(real, "response", None), "status_code", None)
    if code is None:
        code = getattr(real, "status_code", None) or getattr(real, "status", None)
    return int(code) if isinstance(code, int) else None


def _reply_body(chain: list[BaseException]) -> Any:
    """The error object the provider sent (a dict with message/type/param/code), if any."""
    for e in chain:
        body = getattr(e, "body", None)
        if isinstance(body, dict):
            return body.get("error", body) if isinstance(body.get("error"), dict) else body
        if isinstance(body, str):
            try:
                doc = json.loads(body)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc.get("error", doc) if isinstance(doc.get("error"), dict) else doc
    return None


def _content_type(chain: list[BaseException]) -> str:
    for e in chain:
        for headers in (getattr(e, "litellm_response_headers", None),
                        getattr(getattr(e, "response", None), "headers", None),
                        getattr(e, "headers", None)):
            try:
                ct = headers.get("content-type") if headers else None
            except Exception:  # noqa: BLE001 - headers of another shape
                ct = None
            if ct:
                return str(ct).lower()
    return ""


def _received_page(chain: list[BaseException]) -> str | None:
    """For a 200 reply litellm could not read, the body it quotes (litellm keeps no typed copy)."""
    for e in chain:
        msg = str(getattr(e, "message", "") or "")
        m = re.search(r"Received: '(.{0,200})", msg, re.DOTALL)
        if m:
            return m.group(1)
    return None


def _retry_after(chain: list[BaseException]) -> float | None:
    for e in chain:
        resp = getattr(e, "response", None)
        for headers in (getattr(e, "litellm_response_headers", None),
                        getattr(resp, "headers", None), getattr(e, "headers", None)):
            if not headers:
                continue
            try:
                value = headers.get("retry-after") or headers.get("Retry-After")
            except Exception:  # noqa: BLE001
                value = None
            if value is not None:
                try:
                    return max(0.0, float(value))
                except ValueError:
                    return None
    return None


def translate_error(exc: BaseException, *, model: str, api_base: str | None = None,
                    n: int = 1, timeout: float | None = None,
                    key_source: str | None = None) -> ProviderError:
    """Map any exception raised by a litellm call to an `ensemble.errors.ProviderError`.

    `key_source` says where the key came from, for the 401 message: "env:NAME", "explicit",
    or "placeholder" (none was set).
    """
    if isinstance(exc, ProviderError):
        return exc
    provider = provider_of(model)
    where = api_base or f"the {provider} API"
    chain = _chain(exc)
    status = _status(chain)  # None for transport errors
    retry_after = _retry_after(chain)
    body = _reply_body(chain)
    detail = " ".join(str((body or {}).get("message") or "").split())[:200] if isinstance(
        body, dict) else ""

    def err(cls: type[ProviderError], message: str, reason: str,
            attempts_cap: int | None = None) -> ProviderError:
        e = cls(message, model=model, provider=provider, status=status,
                retry_after=retry_after, api_base=api_base, reason=reason)
        if attempts_cap is not None:
            e.attempts_cap = attempts_cap
        return e

    # transport failures, by the transport's own exception types
    if _has(chain, "ConnectionRefusedError"):
        # nothing listens on a loopback port: no retry; a remote host gets a bounded few
        return err(EndpointUnreachable, f"cannot connect to {where}: connection refused; is the "
                   "server running, and is --api-base right?", "connection refused",
                   1 if is_loopback(api_base) else None)
    if _has(chain, "gaierror", "ClientConnectorDNSError"):
        host = urlparse(api_base or "").hostname or provider
        return err(EndpointUnreachable, f"cannot resolve the host {host!r} of {where} (DNS); "
                   "check --api-base and the network", "DNS failure")
    tls = _has(chain, "SSLError", "ClientConnectorSSLError", "ClientConnectorCertificateError")
    if tls is not None or isinstance(exc, ssl.SSLError):
        return err(EndpointUnreachable, f"TLS handshake with {where} failed; if the server "
                   "speaks plain HTTP use an http:// --api-base, otherwise check its "
                   "certificate", "TLS failure", 1)
    if _has(chain, "InvalidURL", "InvalidUrlClientError"):
        return err(EndpointUnreachable, f"{where} is not a valid URL; give the API's base URL, "
                   "e.g. http://127.0.0.1:8000/v1", "invalid URL", 1)
    if _has(chain, "Timeout", "APITimeoutError", "TimeoutException", "TimeoutError",
            "SocketTimeoutError", "ServerTimeoutError"):
        t = f" within {timeout:g} s (--timeout)" if timeout else ""
        return err(ProviderTimeoutError, f"no reply from {where}{t}", "timeout")
    if _has(chain, "ServerDisconnectedError", "RemoteProtocolError", "ReadError",
            "ClientOSError", "ConnectionResetError", "ClientPayloadError", "WriteError",
            "IncompleteRead") and status is None:
        return err(ProviderConnectionError, f"the connection to {where} dropped mid-request",
                   "connection dropped")
    if _has(chain, "JSONDecodeError"):
        return err(MalformedResponseError, f"the reply from {where} is not valid JSON",
                   "malformed reply")
    if _has(chain, "ConnectError", "ClientConnectorError", "APIConnectionError",
            "ConnectionError", "OSError") and status is None:
        return err(EndpointUnreachable, f"cannot connect to {where}; check --api-base and the "
                   "network", "connection failed")

    # replies, by status code and the reply's own typed fields
    if status is None:  # litellm's own exception without a response behind it
        sc = getattr(exc, "status_code", None)
        status = int(sc) if isinstance(sc, int) else None
    code = str((body or {}).get("code") or "") if isinstance(body, dict) else ""
    param = str((body or {}).get("param") or "") if isinstance(body, dict) else ""
    if status == 429 or _has(chain, "RateLimitError"):
        return err(RateLimitError, f"{model}: rate limited by {where} (429)", "429 rate limit")
    if status in (503, 529) and (retry_after is not None or status == 529):
        return err(OverloadedError, f"{model}: {where} is overloaded ({status})",
                   f"{status} overloaded")
    if status == 401 or (status is None and _has(chain, "AuthenticationError")):
        env = env_key_name(provider)
        if key_source == "placeholder" or key_source is None:
            return err(AuthenticationError, f"{where} requires an API key and none is set: set "
                       f"{env} or pass --api-key / api_key=", "401 unauthorized")
        source = (f"the key in {key_source[4:]}" if key_source.startswith("env:")
                  else "the key given with --api-key / api_key=")
        return err(AuthenticationError, f"{where} refused {source} (401): check that it is "
                   f"valid for this endpoint (set {env} or pass --api-key)", "401 unauthorized")
    if status == 403 or _has(chain, "PermissionDeniedError"):
        return err(AuthenticationError, f"{where} denies this key access to {model} (403): "
                   "check the key's permissions and the model name", "403 forbidden")
    if status == 404 or _has(chain, "NotFoundError"):
        if "json" in _content_type(chain) or code == "model_not_found" or param == "model":
            return err(ModelNotFoundError, f"{where} does not know the model {model!r} (404"
                       f"{': ' + detail if detail else ''}); check the model name",
                       "404 model not found")
        return err(EndpointNotFoundError, f"{where}/chat/completions does not exist (404 page, "
                   "not an API reply): --api-base should be the API's base URL, usually ending "
                   "in /v1", "404 route not found")
    if status in (400, 422) or _has(chain, "BadRequestError", "UnprocessableEntityError",
                                     "UnsupportedParamsError"):
        if _has(chain, "ContentPolicyViolationError") or code == "content_policy_violation":
            return err(ContentRefusedError, f"{model}: the provider refuses this prompt "
                       f"(content policy{': ' + detail if detail else ''})", "400 content policy")
        if _has(chain, "ContextWindowExceededError") or code == "context_length_exceeded":
            return err(BadRequestError, f"{model}: the prompt is longer than the model's "
                       "context window", "400 context length")
        if n > 1 and (param == "n" or (_has(chain, "UnsupportedParamsError")
                                       and re.search(r"\bn\b", str(exc)))):
            return err(NUnsupported, f"{model}: the provider rejects n = {n}", "400 n rejected")
        if param == "temperature":
            return err(BadRequestError, f"{model}: the provider rejects this temperature "
                       f"({detail}); some models accept only t = 1: choose a supported "
                       "temperature (ensemble never changes it silently)", "400 temperature")
        s = status or 400
        return err(BadRequestError, f"{model}: request rejected ({s}): {detail or 'no detail'};"
                   " check the model name and sampling parameters", f"{s} bad request")
    if status is not None and status >= 500:
        page = _received_page(chain) if status == 500 else None
        if page is not None:
            out = page_error(page, model=model, api_base=api_base, status=status)
            out.retry_after = retry_after
            return out
        return err(ServerError, f"{model}: {where} failed ({status}"
                   f"{': ' + detail if detail else ''})", f"{status} server error")
    if _has(chain, "BadRequestError"):
        return err(BadRequestError, f"{model}: request rejected: {detail or type(exc).__name__}",
                   "bad request")
    return err(ProviderConnectionError, f"{model}: request to {where} failed "
               f"({type(exc).__name__})", type(exc).__name__)


def resolve_key(provider: str, options: ProviderOptions) -> tuple[str | None, str | None]:
    """(key to send, where it came from: "explicit", "env:NAME", "placeholder" or None).

    Keys from the environment are used for any api_base, loopback included; with an api_base
    and no key at all a placeholder is sent (self-hosted servers often need none; the clients
    want one)."""
    if options.api_key is not None:
        return options.api_key, "explicit"
    env = env_key_name(provider)
    value = os.environ.get(env)
    if value:
        return value, f"env:{env}"
    if options.api_base:
        return LOCAL_PLACEHOLDER_KEY, "placeholder"
    return None, None


def page_error(page: str, *, model: str, api_base: str | None,
               status: int | None = None) -> ProviderError:
    """The error for a reply whose body is not a chat completion: an HTML page (a wrong
    --api-base) or anything else that does not parse."""
    provider = provider_of(model)
    where = api_base or f"the {provider} API"
    if page.lstrip().startswith("<"):
        return EndpointNotFoundError(
            f"{where} answered with an HTML page, not JSON: is --api-base the API's base URL "
            "(usually ending in /v1)?", model=model, provider=provider, status=status,
            api_base=api_base, reason="HTML instead of JSON")
    return MalformedResponseError(f"the reply from {where} is not a chat completion",
                                  model=model, provider=provider, status=status,
                                  api_base=api_base, reason="malformed reply")


# -- the provider ----------------------------------------------------------------------------
class LiteLLMProvider:
    """Every provider litellm knows, and any OpenAI-compatible server (`api_base`)."""

    name = "litellm"
    supports_n: bool | None = None

    def __init__(self, model: str, options: ProviderOptions | None = None, *,
                 target_model: str | None = None) -> None:
        from ..secrets import register_env_keys
        from .limiter import endpoint_key

        self.model = model
        self.options = options or ProviderOptions()
        self.target = target_model or model  # the string litellm is given
        self.api_base = self.options.api_base
        register_env_keys()
        self._key, self._key_source = self._resolve_key()
        self.endpoint = endpoint_key(provider_of(self.target), self.api_base, self._key)
        self.identity = normalise_api_base(self.api_base) if self.api_base else None
        self._checked = False

    def __repr__(self) -> str:
        return f"LiteLLMProvider(model={self.model!r}, api_base={self.api_base!r})"

    def _resolve_key(self) -> tuple[str | None, str | None]:
        return resolve_key(provider_of(self.target), self.options)

    async def start(self) -> None:
        """Check, before any request, that litellm knows the model and that its key is set."""
        if self._checked:
            return
        ll = litellm()
        provider = provider_of(self.target)
        try:
            ll.get_llm_provider(self.target, api_base=self.api_base)
        except Exception:  # noqa: BLE001 - litellm raises a plain BadRequestError here
            raise ModelNotFoundError(
                f"unknown model {self.model!r}: use a litellm model string such as "
                "openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest or ollama/llama3, or a "
                "local model (local:<path.gguf>)", model=self.model, provider=provider,
                reason="unknown model") from None
        if self._key is None and not self.api_base:
            try:
                missing = ll.validate_environment(self.target).get("missing_keys") or []
            except Exception:  # noqa: BLE001 - best effort: the provider will say it
                missing = []
            keys = [k for k in missing if k.endswith(("_API_KEY", "_TOKEN", "_KEY"))]
            if keys:
                raise AuthenticationError(
                    f"no API key for {self.model}: set {' or '.join(keys)} or pass --api-key / "
                    "api_key=", model=self.model, provider=provider, reason="no API key")
        self._checked = True

    async def aclose(self) -> None:
        return None

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        ll = litellm()
        kwargs: dict[str, Any] = dict(params.as_dict())
        extra_body = kwargs.pop("extra_body", None)
        if extra_body:
            kwargs["extra_body"] = extra_body
        if n > 1:
            kwargs["n"] = n
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._key is not None:
            kwargs["api_key"] = self._key
        if headers:
            kwargs["extra_headers"] = dict(headers)
        price = self.options.price_per_1k
        t0 = time.perf_counter()
        try:
            # litellm enforces `timeout` on the HTTP client; the outer bound catches a client
            # that does not (a connection that never sends a byte must still end)
            resp = await asyncio.wait_for(
                ll.acompletion(model=self.target, messages=list(messages), timeout=timeout,
                               num_retries=0, max_retries=0, **kwargs),
                timeout * 1.5 + 1.0)
        except asyncio.TimeoutError:
            raise ProviderTimeoutError(
                f"no reply from {self.api_base or self.target} within {timeout:g} s (--timeout)",
                model=self.model, provider=provider_of(self.target), api_base=self.api_base,
                reason="timeout") from None
        except Exception as exc:  # noqa: BLE001 - translated in one place
            raise translate_error(exc, model=self.model, api_base=self.api_base, n=n,
                                  timeout=timeout, key_source=self._key_source) from None
        latency = time.perf_counter() - t0
        return _completion(ll, resp, model=self.model, target=self.target,
                           api_base=self.api_base, latency=latency, price=price)


def _completion(ll: Any, resp: Any, *, model: str, target: str, api_base: str | None,
                latency: float, price: tuple[float, float] | None = None) -> Completion:
    provider = provider_of(target)
    try:
        choices = tuple(
            Choice(text=c.message.content, finish_reason=getattr(c, "finish_reason", None),
                   logprobs=_plain(getattr(c, "logprobs", None)))
            for c in sorted(resp.choices, key=lambda c: getattr(c, "index", 0) or 0))
    except Exception as exc:  # noqa: BLE001
        raise MalformedResponseError(f"{model}: malformed reply ({type(exc).__name__})",
                                     model=model, provider=provider, api_base=api_base,
                                     reason="malformed reply") from None
    if not choices:
        raise MalformedResponseError(f"{model}: reply without choices", model=model,
                                     provider=provider, api_base=api_base,
                                     reason="reply without choices")
    usage = getattr(resp, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", None)
    completion_tokens = getattr(usage, "completion_tokens", None)
    cost: float | None
    if price is not None:  # the user's price per 1k tokens
        cost = ((prompt_tokens or 0) * price[0] + (completion_tokens or 0) * price[1]) / 1000.0
    elif not _has_price(ll, target):
        cost = None  # unknown, not zero
    else:
        try:  # litellm's public pricing of a reply, from its local price table
            cost = float(ll.completion_cost(completion_response=resp, model=target))
        except Exception:  # noqa: BLE001 - unknown price: unknown, not zero
            cost = None
    return Completion(choices=choices, prompt_tokens=prompt_tokens,
                      completion_tokens=completion_tokens, cost_usd=cost, latency_s=latency)


_price_cache: dict[str, bool] = {}


def _has_price(ll: Any, model: str) -> bool:
    known = _price_cache.get(model)
    if known is None:
        try:
            info = ll.get_model_info(model)
            known = bool(info.get("input_cost_per_token") or info.get("output_cost_per_token"))
        except Exception:  # noqa: BLE001
            known = False
        _price_cache[model] = known
    return known


def _plain(obj: Any) -> Any:
    if obj is None:
        return None
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    if isinstance(obj, dict):
        return obj
    try:
        return dict(obj)
    except Exception:  # noqa: BLE001
        return str(obj)
