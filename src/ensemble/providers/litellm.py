"""The default provider: litellm's `acompletion` (every provider litellm knows, and any
OpenAI-compatible `api_base`), imported lazily; its errors translated by
`ensemble.providers.translate`, its Batch API in `ensemble.providers.litellm_batch`.

litellm costs ~4 s to import, so nothing imports it until the first request (`litellm()`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._sync import within
from ..errors import (
    AuthenticationError,
    MalformedResponseError,
    ModelNotFoundError,
    ProviderTimeoutError,
)
from .base import INDEX_HEADER, Capabilities, Choice, Completion, provider_of
from .endpoints import normalise_api_base
from .litellm_lib import LOCAL_PLACEHOLDER_KEY, litellm, pool_capacity
from .options import ProviderOptions, per_1k_cost
from .toolcalls import reply_text
from .translate import env_key_name, translate_error

if TYPE_CHECKING:
    from .params import SamplingParams

__all__ = ["LITELLM_COUNTER", "LOCAL_PLACEHOLDER_KEY", "OPENAI_TOP_LOGPROBS", "LiteLLMProvider",
           "litellm",
           "litellm_batch_api", "litellm_completion", "litellm_logprobs", "litellm_price",
           "litellm_request", "litellm_token_count", "pool_capacity", "resolve_key"]

def resolve_key(provider: str, options: ProviderOptions) -> tuple[str | None, str | None]:
    """(key to send, where it came from: "explicit", "env:NAME", "placeholder" or None).

    Keys from the environment are used for any api_base, loopback included; with an api_base
    and no key at all a placeholder is sent (self-hosted servers often need none; the clients
    want one)."""
    if options.endpoint.api_key is not None:
        return options.endpoint.api_key, "explicit"
    env = env_key_name(provider)
    value = os.environ.get(env)
    if value:
        return value, f"env:{env}"
    if options.endpoint.api_base:
        return LOCAL_PLACEHOLDER_KEY, "placeholder"
    return None, None


# the most alternatives per token OpenAI's API returns (top_logprobs), which litellm passes on
OPENAI_TOP_LOGPROBS = 20


def litellm_logprobs(model: str, provider: str) -> tuple[bool | None, int | None, str]:
    """Whether litellm passes token logprobs (and how many alternatives per token) for a model
    of a provider, from litellm's public `get_supported_openai_params`: (logprobs,
    top_logprobs, where that is from). (None, None, ...) when litellm does not say."""
    source = f"litellm's supported parameters for {provider}"
    try:
        params = litellm().get_supported_openai_params(model=model,
                                                       custom_llm_provider=provider)
    except Exception:  # noqa: BLE001 - a provider litellm lists no parameters for
        params = None
    if not params:
        return None, None, source
    if "logprobs" not in params:
        return False, 0, source
    return True, OPENAI_TOP_LOGPROBS if "top_logprobs" in params else 0, source


def litellm_batch_api(target: str, options: ProviderOptions, key: str | None) -> Any:
    """litellm's Files and Batch API for a model string, its endpoint and the resolved key."""
    from .litellm_batch import LiteLLMBatchAPI

    return LiteLLMBatchAPI(target, api_base=options.endpoint.api_base, api_key=key,
                           timeout=options.retry.timeout, max_attempts=options.retry.max_attempts)


LITELLM_COUNTER = "litellm's token counter"  # a dry run says which counter counted


def litellm_token_count(target: str, messages: Sequence[Mapping[str, str]]) -> int | None:
    """Prompt tokens by litellm's counter (None: a model it cannot tokenise)."""
    try:
        return int(litellm().token_counter(model=target, messages=list(messages)))
    except Exception:  # noqa: BLE001 - a model litellm cannot tokenise
        return None


class LiteLLMProvider:
    """Every provider litellm knows, and any OpenAI-compatible server (`api_base`).

    Declares: no concurrency limit of its own, `n` to be found out, litellm's Batch API
    (`ensemble.providers.litellm_batch`) for the providers litellm covers."""

    name = "litellm"

    def __init__(self, model: str, options: ProviderOptions | None = None, *,
                 target_model: str | None = None) -> None:
        from ..secrets import register_env_keys
        from .endpoints import endpoint_key

        self.model = model
        self.options = options or ProviderOptions()
        self.target = target_model or model  # the string litellm is given
        self.api_base = self.options.endpoint.api_base
        register_env_keys()
        self._key, self._key_source = self._resolve_key()
        self.endpoint = endpoint_key(provider_of(self.target), self.api_base, self._key)
        self.identity = normalise_api_base(self.api_base) if self.api_base else None
        self._checked = False
        self._client: Any = None  # the SDK client handed to litellm with a transport
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self.capabilities = Capabilities(max_concurrency=None, supports_n=None,
                                         batch_api=self.batch_api,
                                         tokenizer=LITELLM_COUNTER)

    def batch_api(self) -> Any:
        """litellm's Files and Batch API for this model, endpoint and key (what
        `capabilities.batch_api` makes; a subclass may serve another)."""
        # the key this provider resolved (explicit, the environment's, or the placeholder)
        return litellm_batch_api(self.target, self.options, self._key)

    def price(self, prompt_tokens: int, completion_tokens: int, *,
              batch: bool = False) -> float | None:
        """USD at `price_per_1k` if given (batch lines too: `CostPolicy.cost`), else
        litellm's price table (its batch rates with `batch`; None where it has none:
        litellm's own fallback, half the online price, is a guess, not a price)."""
        given = self.options.cost.cost(prompt_tokens, completion_tokens)
        if given is not None:
            return given
        return litellm_price(self.target, prompt_tokens, completion_tokens, batch=batch)

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        return litellm_token_count(self.target, messages)

    def __repr__(self) -> str:
        return f"LiteLLMProvider(model={self.model!r}, api_base={self.api_base!r})"

    def _resolve_key(self) -> tuple[str | None, str | None]:
        return resolve_key(provider_of(self.target), self.options)

    async def start(self) -> None:
        """Check, before any request, that litellm knows the model and that its key is set."""
        if self._checked:
            return
        ll = litellm()
        pool = pool_capacity()  # read, never changed: litellm's pool is litellm's business
        if pool is not None:
            self.capabilities = replace(
                self.capabilities, max_concurrency=pool,
                limit_reason=f"litellm's HTTP pool holds {pool} connections per host (litellm's "
                "pool is set by its environment: AIOHTTP_CONNECTOR_LIMIT, "
                "DISABLE_AIOHTTP_TRANSPORT)")
        provider = provider_of(self.target)
        try:
            name, prov, _, _ = ll.get_llm_provider(self.target, api_base=self.api_base)
        except Exception:  # noqa: BLE001 - litellm raises a plain BadRequestError here
            raise ModelNotFoundError(
                f"unknown model {self.model!r}: use a litellm model string such as "
                "openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest or ollama/llama3, or a "
                "local model (local:<path.gguf>)", model=self.model, provider=provider,
                reason="unknown model") from None
        lp, top, source = litellm_logprobs(str(name), str(prov))
        self.capabilities = replace(self.capabilities, logprobs=lp, top_logprobs=top,
                                    logprobs_source=source)
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
        client, loop = self._client, self._client_loop
        self._client = self._client_loop = None
        if client is not None and loop is asyncio.get_running_loop():
            await client.close()

    def sdk_client(self) -> Any:
        """With `options.endpoint.transport`: the `AsyncOpenAI` client on that transport's
        httpx side that litellm is handed (`client=`, litellm's public parameter for
        OpenAI-compatible calls), one per event loop; litellm's own request code runs on it.
        None without a transport: litellm's own HTTP client. Not litellm's `shared_session=`
        (an aiohttp session on the transport's connector): litellm leaves it out of its
        client cache's key, so a second endpoint at the same URL and key would get the first
        one's session."""
        if self.options.endpoint.transport is None:
            return None
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            from .http import new_client

            self._client = new_client(self.api_base or "https://api.openai.com/v1", self._key,
                                      self.options.limits.max_concurrency,
                                      self.options.endpoint.transport)
            self._client_loop = loop
        return self._client

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, first_index: int = 0,
                       headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        kwargs: dict[str, Any] = {"num_retries": 0, "max_retries": 0}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._key is not None:
            kwargs["api_key"] = self._key
        client = self.sdk_client()
        if client is not None:
            kwargs["client"] = client
        price = self.options.cost.price_per_1k
        return await litellm_request(
            litellm().acompletion, model=self.model, target=self.target,
            where=self.api_base, messages=messages, params=params, n=n,
            first_index=first_index, headers=headers, timeout=timeout,
            key_source=self._key_source, price=price, **kwargs)


async def litellm_request(call: Any, *, model: str, target: str, where: str | None,
                          messages: Sequence[Mapping[str, str]], params: SamplingParams,
                          n: int, first_index: int, headers: Mapping[str, str] | None,
                          timeout: float, key_source: str | None = None,
                          price: tuple[float, float] | None = None,
                          priced_as: str | None = None, **kwargs: Any) -> Completion:
    """One chat-completion request through a litellm call (`litellm.acompletion`, or a
    Router's): the parameters, the sample index header, the timeout, the error translation
    and the reply, written once for every litellm-backed provider. `target` is the model
    string the call is given (`priced_as`: the model whose price applies, if another);
    `where` names the endpoint in errors; `kwargs` go to the call as they are."""
    body: dict[str, Any] = dict(params.as_dict())
    if not body.get("extra_body"):
        body.pop("extra_body", None)
    if n > 1:
        body["n"] = n
    body["extra_headers"] = {**(headers or {}), INDEX_HEADER: str(first_index)}
    t0 = time.perf_counter()
    try:
        # litellm enforces `timeout` on the HTTP client; the outer bound catches a client
        # that does not (a connection that never sends a byte must still end)
        resp = await within(
            call(model=target, messages=list(messages), timeout=timeout, **body, **kwargs),
            timeout * 1.5 + 1.0)
    except asyncio.TimeoutError:
        raise ProviderTimeoutError(
            f"no reply from {where or target} within {timeout:g} s (--timeout)",
            model=model, provider=provider_of(target), api_base=where,
            reason="timeout") from None
    except Exception as exc:  # noqa: BLE001 - translated in one place
        raise translate_error(exc, model=model, api_base=where, n=n, timeout=timeout,
                              key_source=key_source) from None
    return litellm_completion(resp, model=model, target=priced_as or target, api_base=where,
                              latency=time.perf_counter() - t0, price=price)


def litellm_price(target: str, prompt_tokens: int, completion_tokens: int, *,
                  batch: bool = False) -> float | None:
    """USD for these tokens at litellm's price-table rates for `target` (its batch rates
    with `batch`); None where it has none."""
    rates = _rates(litellm(), target, batch=batch)
    if rates is None:
        return None
    return prompt_tokens * rates[0] + completion_tokens * rates[1]


def _rates(ll: Any, target: str, *, batch: bool) -> tuple[float, float] | None:
    """(prompt, completion) USD per token from litellm's price table; None: unknown."""
    suffix = "_batches" if batch else ""
    try:
        info = ll.get_model_info(target)
    except Exception:  # noqa: BLE001 - not in the price map
        return None
    pin, pout = (info.get(f"input_cost_per_token{suffix}"),
                 info.get(f"output_cost_per_token{suffix}"))
    if pin is None or pout is None or (not batch and not (pin or pout)):
        return None
    return float(pin), float(pout)


def litellm_completion(resp: Any, *, model: str, target: str, api_base: str | None,
                       latency: float, price: tuple[float, float] | None = None
                       ) -> Completion:
    """A litellm reply as a `Completion`, priced by litellm (None: unknown price)."""
    ll = litellm()
    provider = provider_of(target)
    try:
        choices = tuple(
            Choice(text=reply_text(c.message.content, getattr(c.message, "tool_calls", None)),
                   finish_reason=getattr(c, "finish_reason", None),
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
        cost = per_1k_cost(price, prompt_tokens or 0, completion_tokens or 0)
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
