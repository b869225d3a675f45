"""The one door to providers: litellm's `acompletion`, imported lazily, errors translated here.

litellm costs ~4 s to import, so nothing imports it until the first request. Its exceptions are
translated in `translate_error`, the only place that knows them, into `ensemble.errors` types that
carry model, provider, status and retry-after, and never the API key.
"""

from __future__ import annotations

import ipaddress
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..errors import (
    AuthenticationError,
    BadRequestError,
    MalformedResponseError,
    ModelNotFoundError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
)
from .types import SamplingParams

__all__ = [
    "Choice",
    "Completion",
    "NUnsupported",
    "complete",
    "is_loopback",
    "litellm",
    "pool_capacity",
    "size_http_pool",
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
        _ll.drop_params = False  # never drop a parameter (e.g. n) behind the user's back
        _litellm = _ll
    return _litellm


_pool_size = 0


def size_http_pool(max_connections: int) -> None:
    """Make litellm's HTTP connection pool hold at least `max_connections` connections per host.

    A pool smaller than the sampler's concurrency silently caps it (a trap seen in a peer).
    litellm talks to providers through an httpx client; by default with its aiohttp transport
    (a TCPConnector capped by AIOHTTP_CONNECTOR_LIMIT=1000 and AIOHTTP_CONNECTOR_LIMIT_PER_HOST=500,
    read at import), and with httpx's own transport when DISABLE_AIOHTTP_TRANSPORT is set, whose
    default pool is 100 connections with 20 kept alive. Both are raised here, before litellm
    creates the clients it caches; a client created earlier with a smaller pool keeps it until
    litellm's client cache expires it. Best effort: a litellm without these hooks is left as is.
    """
    global _pool_size
    if max_connections <= _pool_size:
        return
    litellm()
    try:
        from litellm.llms.custom_httpx import http_handler as hh
    except ImportError:  # pragma: no cover - another litellm layout
        return
    _pool_size = int(max_connections)
    for name in ("AIOHTTP_CONNECTOR_LIMIT", "AIOHTTP_CONNECTOR_LIMIT_PER_HOST"):
        cur = getattr(hh, name, None)
        if isinstance(cur, int) and 0 < cur < _pool_size:
            setattr(hh, name, _pool_size)
    handler = getattr(hh, "AsyncHTTPHandler", None)
    original = getattr(handler, "_create_httpx_transport", None)
    if handler is None or original is None or getattr(original, "_ensemble_sized", False):
        return

    def sized_httpx_transport() -> Any:
        import httpx

        ll = litellm()
        size = max(_pool_size, 100)
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        kw: dict[str, Any] = {"limits": limits}
        if getattr(ll, "force_ipv4", False):
            kw["local_address"] = "0.0.0.0"
        try:
            from litellm.llms.custom_httpx.http_handler import http2_enabled

            kw["http2"] = bool(http2_enabled())
        except ImportError:  # pragma: no cover
            pass
        return httpx.AsyncHTTPTransport(**kw)

    sized_httpx_transport._ensemble_sized = True  # type: ignore[attr-defined]
    handler._create_httpx_transport = staticmethod(sized_httpx_transport)


def pool_capacity() -> int | None:
    """Connections per host litellm's async transport may open now (None: unknown)."""
    litellm()
    try:
        from litellm.llms.custom_httpx import http_handler as hh

        if hh.AsyncHTTPHandler.should_use_aiohttp_transport():
            caps = [v for v in (hh.AIOHTTP_CONNECTOR_LIMIT, hh.AIOHTTP_CONNECTOR_LIMIT_PER_HOST)
                    if isinstance(v, int) and v > 0]
            return min(caps) if caps else 100  # aiohttp's own default limit
        sized = getattr(hh.AsyncHTTPHandler._create_httpx_transport, "_ensemble_sized", False)
        return max(_pool_size, 100) if sized else 100
    except Exception:  # noqa: BLE001 - another litellm layout
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


@dataclass(frozen=True)
class Choice:
    text: str | None
    finish_reason: str | None
    logprobs: Any = None


@dataclass(frozen=True)
class Completion:
    choices: tuple[Choice, ...]
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float


class NUnsupported(BadRequestError):
    """The provider rejected `n` > 1; the sampler falls back to separate requests."""


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


def _redact(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    return re.sub(r"(sk-|key-|Bearer\s+)[A-Za-z0-9_\-]{6,}", r"\1***", text)


def translate_error(exc: BaseException, *, model: str, api_key: str | None = None,
                    n: int = 1) -> ProviderError:
    """Map any exception raised by a litellm call to an `ensemble.errors.ProviderError`."""
    if isinstance(exc, ProviderError):
        return exc
    provider = provider_of(model)
    status = getattr(exc, "status_code", None)
    raw = _redact(" ".join(str(getattr(exc, "message", None) or exc).split()), api_key)
    detail = raw[:300]
    retry_after = _retry_after(exc)
    name = type(exc).__name__
    kw = dict(model=model, provider=provider, status=status, retry_after=retry_after)
    low = raw.lower()
    if name in ("RateLimitError",) or status == 429:
        return RateLimitError(f"{model}: rate limited (429); retrying", **kw)
    if name in ("Timeout", "APITimeoutError") or "timed out" in low or "timeout" in name.lower():
        return ProviderTimeoutError(f"{model}: request timed out", **kw)
    if name == "AuthenticationError" or status in (401, 403) or "api_key" in low \
            or "api key" in low:
        env = f"{provider.upper()}_API_KEY"
        return AuthenticationError(
            f"{model}: the provider refused the credentials or no API key was found; set {env} "
            "or pass --api-key / api_key=", **kw)
    if name == "NotFoundError" or status == 404:
        return ModelNotFoundError(f"{model}: model not found by the provider ({detail})", **kw)
    if "llm provider not provided" in low or "provider list" in low:
        return ModelNotFoundError(
            f"unknown model {model!r}: use a litellm model string such as openai/gpt-4o-mini, "
            "anthropic/claude-3-5-haiku-latest or ollama/llama3", **kw)
    if "expecting value" in low or "unterminated" in low or "jsondecode" in low:
        return MalformedResponseError(f"{model}: malformed reply from provider", **kw)
    if "connection error" in low or "disconnected" in low or "connection reset" in low:
        return ProviderConnectionError(f"{model}: connection dropped", **kw)
    if status is not None and status >= 500 or name in ("InternalServerError",
                                                       "ServiceUnavailableError"):
        return ServerError(f"{model}: provider error {status or ''} ({detail})".replace("  ", " "),
                           **kw)
    if name in ("APIConnectionError",) or "connect" in low or "disconnected" in low \
            or "connection" in low:
        if "json" in low or "decode" in low or "expecting" in low:
            return MalformedResponseError(f"{model}: malformed reply from provider", **kw)
        return ProviderConnectionError(f"{model}: connection failed ({detail})", **kw)
    if "json" in low or "decode" in low or "expecting" in low or "unterminated" in low:
        return MalformedResponseError(f"{model}: malformed reply from provider", **kw)
    if status == 400 or name in ("BadRequestError", "UnsupportedParamsError",
                                 "UnprocessableEntityError"):
        if n > 1 and re.search(r"\bn\b", low):
            return NUnsupported(f"{model}: the provider rejects n = {n}", **kw)
        if "temperature" in low:
            return BadRequestError(
                f"{model}: the provider rejects this temperature ({detail}); some models accept "
                "only t = 1: choose a supported temperature (ensemble never changes it silently)",
                **kw)
        return BadRequestError(f"{model}: request rejected (400): {detail}; check the model "
                               "name and sampling parameters", **kw)
    return ProviderConnectionError(f"{model}: request failed ({name}: {detail})", **kw)


def _retry_after(exc: BaseException) -> float | None:
    resp = getattr(exc, "response", None)
    for headers in (getattr(exc, "litellm_response_headers", None),
                    getattr(resp, "headers", None), getattr(exc, "headers", None)):
        if not headers:
            continue
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except Exception:
            value = None
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                return None
    return None


async def complete(model: str, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                   n: int = 1, api_base: str | None = None, api_key: str | None = None,
                   timeout: float = 60.0, extra_headers: Mapping[str, str] | None = None
                   ) -> Completion:
    """One chat-completion request; raises a translated ProviderError on failure."""
    ll = litellm()
    kwargs: dict[str, Any] = dict(params.as_dict())
    if n > 1:
        kwargs["n"] = n
    if api_base:
        kwargs["api_base"] = api_base
    key = api_key
    if key is None and is_loopback(api_base):
        key = LOCAL_PLACEHOLDER_KEY
    if key is not None:
        kwargs["api_key"] = key
    if extra_headers:
        kwargs["extra_headers"] = dict(extra_headers)
    t0 = time.perf_counter()
    try:
        resp = await ll.acompletion(model=model, messages=list(messages), timeout=timeout,
                                    num_retries=0, max_retries=0, **kwargs)
    except Exception as exc:  # noqa: BLE001 - translated in one place
        raise translate_error(exc, model=model, api_key=api_key, n=n) from None
    latency = time.perf_counter() - t0
    try:
        choices = tuple(
            Choice(text=c.message.content, finish_reason=getattr(c, "finish_reason", None),
                   logprobs=_plain(getattr(c, "logprobs", None)))
            for c in sorted(resp.choices, key=lambda c: getattr(c, "index", 0) or 0))
    except Exception as exc:  # noqa: BLE001
        raise MalformedResponseError(f"{model}: malformed reply ({type(exc).__name__})",
                                     model=model, provider=provider_of(model)) from None
    if not choices:
        raise MalformedResponseError(f"{model}: reply without choices",
                                     model=model, provider=provider_of(model))
    usage = getattr(resp, "usage", None)
    cost: float | None
    try:
        cost = float(ll.completion_cost(completion_response=resp))
        if cost == 0.0 and not _has_price(ll, model):
            cost = None
    except Exception:  # noqa: BLE001 - unknown price: unknown, not zero
        cost = None
    return Completion(choices=choices,
                      prompt_tokens=getattr(usage, "prompt_tokens", None),
                      completion_tokens=getattr(usage, "completion_tokens", None),
                      cost_usd=cost, latency_s=latency)


def _has_price(ll: Any, model: str) -> bool:
    try:
        info = ll.get_model_info(model)
        return bool(info.get("input_cost_per_token") or info.get("output_cost_per_token"))
    except Exception:  # noqa: BLE001
        return False


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
