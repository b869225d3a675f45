"""The fast path for OpenAI-compatible endpoints: aiohttp for chat completions, the official
`openai` SDK for the Batch API.

`openai/...` model strings (OpenAI itself, or any OpenAI-compatible `api_base`: vLLM, llama.cpp,
SGLang, Ollama's /v1) go here instead of litellm, which spends 3-4 ms of CPU on every request
on top of the SDK it wraps. Everything else stays on litellm
(`ensemble.providers.litellm`); `ENSEMBLE_PROVIDER=litellm` sends `openai/...` there too.
Registered for the `openai` prefix in `ensemble.providers.registry`.

- Chat completions are POSTed with aiohttp's client: each provider owns one `ClientSession`,
  made on first use with a connector of `max_concurrency` connections (a pool smaller than the
  limiter silently caps concurrency). Its connections live as long as the provider: an
  `Ensemble` keeps its providers and runs its sync calls on one event loop, so they outlive a
  call. A session is bound to the event loop it was made in: each loop that uses the provider
  (a loop per `asyncio.run`, an `Ensemble`'s sync-call thread) has its own, closed in that
  loop (`ensemble._sync.PerLoop`) by `aclose()`, when the loop shuts down, or when the
  provider is collected while the loop runs on: none is left for aiohttp to warn about
  ("Unclosed client session", "Unclosed connector"). The connector and the proxy come from
  the endpoint's transport (`ensemble.providers.http`: the network by default, read once per
  provider; `ensemble.testing.InProcessTransport` in tests), and nothing else does: the POST,
  its timeout, its errors and the reading of the reply are this module's, whichever transport
  carries them. The body goes as JSON
  and the reply is read as JSON here: parameters pass through as given (`response_format`,
  `extra_body`, logprobs), and a reply that is not a chat completion is named for what it is.
  Why not the SDK's own `post`: its HTTP stack (httpx, URL parsing per request) spent about
  1.5 ms of CPU per request on top, a third of `ensemble serve`'s whole cost per request
  against a zero-latency upstream (profiled with py-spy; tests/bench/bench_serve.py).
- The SDK's `AsyncOpenAI` client (its retries off: retries, limits and backpressure are the
  sampler's) serves the Files and Batch API, through the same transport, made on first use in
  the same way.
- Errors are aiohttp's (a reply that is not 2xx: `ClientResponseError` with its status,
  headers and body; connection errors and timeouts as aiohttp raises them) and, in batch mode,
  the SDK's typed exceptions, turned into `ensemble.errors` types by the same
  `translate_error` table the litellm path uses.
- Cost from usage: `price_per_1k` when given (online replies and batch lines alike), else
  litellm's price table read as a file (`ensemble.providers.prices`), never by importing
  litellm; batch lines at the table's Batch API rates.
- Batch mode goes through the SDK's own Files and Batch API on this client
  (`ensemble.providers.openai_batch`, `capabilities.batch_api`): litellm is not imported
  (it would hold ~130 MB of a paper-sized batch run's memory).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._sync import PerLoop
from ..errors import AuthenticationError, MalformedResponseError, ProviderTimeoutError
from .base import INDEX_HEADER, Capabilities, Completion
from .endpoints import normalise_api_base
from .http import new_client, new_session, transport_of
from .litellm import OPENAI_TOP_LOGPROBS, resolve_key
from .openai_wire import chat_body, completion_of
from .options import ProviderOptions
from .prices import token_price
from .tokens import TIKTOKEN, tiktoken_count
from .translate import error_in_reply, page_error, translate_error

if TYPE_CHECKING:
    from .params import SamplingParams

__all__ = ["OPENAI_API_BASE", "PROVIDER_ENV", "OpenAIProvider", "serves"]

OPENAI_API_BASE = "https://api.openai.com/v1"
PROVIDER_ENV = "ENSEMBLE_PROVIDER"  # "litellm": every model string through litellm


def serves(model: str) -> bool:
    """Whether this provider serves a model string: `openai/<name>`, unless the environment
    variable ENSEMBLE_PROVIDER=litellm asks for litellm."""
    if os.environ.get(PROVIDER_ENV, "").strip().lower() == "litellm":
        return False
    return model.startswith("openai/") and len(model) > len("openai/")


class OpenAIProvider:
    """`openai/...` models through the official SDK (see the module docstring)."""

    name = "openai"

    def __init__(self, model: str, options: ProviderOptions | None = None) -> None:
        from ..secrets import register_env_keys
        from .endpoints import endpoint_key

        self.model = model
        self.options = options or ProviderOptions()
        self.target = model  # the litellm model string (token counts go through litellm)
        self.wire_model = model.split("/", 1)[1] if model.startswith("openai/") else model
        self.api_base = self.options.endpoint.api_base
        # as litellm and the SDK do, OPENAI_BASE_URL / OPENAI_API_BASE move OpenAI's own API
        self.base_url = (self.api_base or os.environ.get("OPENAI_BASE_URL")
                         or os.environ.get("OPENAI_API_BASE") or OPENAI_API_BASE)
        register_env_keys()
        self._key, self._key_source = resolve_key("openai", self.options)
        self.endpoint = endpoint_key("openai", self.api_base, self._key)
        # the store key's endpoint: the same as litellm's, so both providers share samples
        self.identity = normalise_api_base(self.api_base) if self.api_base else None
        self._client: Any = None  # the SDK's client: the Files and Batch API
        self._client_loop: asyncio.AbstractEventLoop | None = None
        # aiohttp's sessions; made by a function that holds no reference to the provider, so
        # that a provider dropped while its loop runs on is collected (and its session closed)
        self._sessions: PerLoop[Any] = PerLoop(
            functools.partial(new_session, self.options.endpoint.transport,
                              self.options.limits.max_concurrency, self._key), _close_session)
        self._proxy: Mapping[str, Any] | None = None  # the transport's, read on first use
        self._price: tuple[float, float] | None = None  # the price table's, read on first use
        self._price_known = False
        # OpenAI's own API takes max_completion_tokens (its reasoning models refuse
        # max_tokens); other servers may know only max_tokens
        self._max_tokens_name = ("max_completion_tokens" if self.base_url == OPENAI_API_BASE
                                 else "max_tokens")
        # its own client's pool holds max_concurrency connections: no cap of its own. Token
        # logprobs: OpenAI's API returns them for most models (not its reasoning models), an
        # OpenAI-compatible server may or may not: unknown until a reply says; at most 20
        # alternatives per token, OpenAI's bound
        self.capabilities = Capabilities(max_concurrency=None, supports_n=None,
                                         batch_api=self.batch_api,
                                         top_logprobs=OPENAI_TOP_LOGPROBS,
                                         logprobs_source="OpenAI's API",
                                         tokenizer=TIKTOKEN)

    def batch_api(self) -> Any:
        """The SDK's Files and Batch API on this provider's client (batch mode)."""
        from .openai_batch import OpenAIBatchAPI

        return OpenAIBatchAPI(self.target, client=self.client, model=self.wire_model,
                              api_base=self.api_base, timeout=self.options.retry.timeout,
                              max_attempts=self.options.retry.max_attempts,
                              max_tokens_name=self._max_tokens_name)

    def price(self, prompt_tokens: int, completion_tokens: int, *,
              batch: bool = False) -> float | None:
        """USD at `price_per_1k` if given (batch lines too: `CostPolicy.cost`), else
        litellm's price table read as a file; batch lines at the table's Batch API rates
        (None where it has none)."""
        if batch and self.options.cost.price_per_1k is None:
            rates = token_price(self.target, batch=True)
            return None if rates is None else (prompt_tokens * rates[0]
                                               + completion_tokens * rates[1])
        return self._cost(prompt_tokens, completion_tokens)

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        """Prompt tokens by tiktoken (estimates, --dry-run and --max-cost's first check; without
        importing litellm, whose counter gives the same count for these models)."""
        return tiktoken_count(self.target, messages)

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, api_base={self.api_base!r})"

    async def start(self) -> None:
        """Check, before any request, that a key is set for OpenAI's own API."""
        if self._key is None:
            raise AuthenticationError(
                f"no API key for {self.model}: set OPENAI_API_KEY or pass --api-key / api_key=",
                model=self.model, provider="openai", reason="no API key")

    async def aclose(self) -> None:
        """Close the client and its connections (a client of another, finished event loop is
        dropped: its connections ended with that loop)."""
        client, loop = self._client, self._client_loop
        self._client = self._client_loop = None
        if client is not None and loop is asyncio.get_running_loop():
            await client.close()
        await self._sessions.aclose()

    def client(self) -> Any:
        """This provider's `AsyncOpenAI` client on the running event loop."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = new_client(self.base_url, self._key,
                                      self.options.limits.max_concurrency,
                                      self.options.endpoint.transport)
            self._client_loop = loop
        return self._client

    async def session(self) -> Any:
        """This provider's aiohttp session on the running event loop (chat completions)."""
        return await self._sessions.get()

    async def _post(self, body: dict[str, Any], headers: dict[str, str], timeout: float
                    ) -> bytes:
        """POST a chat completion; a reply that is not 2xx raises aiohttp's
        ClientResponseError carrying its status, headers and body (translate_error reads
        them as it reads the SDK's APIStatusError). aiohttp's total timeout bounds the whole
        request, connecting included."""
        import aiohttp

        session = await self.session()
        if self._proxy is None:
            self._proxy = transport_of(self.options.endpoint.transport).proxy(self.base_url)
        async with session.post(
                f"{self.base_url.rstrip('/')}/chat/completions", data=json.dumps(body),
                headers=headers, timeout=aiohttp.ClientTimeout(total=timeout),
                **self._proxy) as resp:
            raw = await resp.read()
            if resp.status >= 300:
                text = raw.decode("utf-8", "replace")
                err = aiohttp.ClientResponseError(resp.request_info, resp.history,
                                                  status=resp.status, message=text[:200],
                                                  headers=resp.headers)
                err.body = text  # type: ignore[attr-defined]
                raise err
            return raw

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, first_index: int = 0,
                       headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        body = self._body(messages, params, n)
        headers = {**(headers or {}), INDEX_HEADER: str(first_index)}
        t0 = time.perf_counter()
        try:
            raw = await self._post(body, headers, timeout)
        except asyncio.TimeoutError:
            raise ProviderTimeoutError(
                f"no reply from {self.base_url} within {timeout:g} s (--timeout)",
                model=self.model, provider="openai", api_base=self.api_base,
                reason="timeout") from None
        except Exception as exc:  # noqa: BLE001 - translated in one place
            raise translate_error(exc, model=self.model, api_base=self.api_base, n=n,
                                  timeout=timeout, key_source=self._key_source) from None
        latency = time.perf_counter() - t0
        return self._completion(raw, latency)

    def _body(self, messages: Sequence[Mapping[str, str]], params: SamplingParams,
              n: int) -> dict[str, Any]:
        return chat_body(self.wire_model, messages, params, n,
                         max_tokens_name=self._max_tokens_name)

    def _completion(self, raw: bytes, latency: float) -> Completion:
        try:
            doc = json.loads(raw)
        except ValueError:
            text = raw[:200].decode("utf-8", "replace")
            if text.lstrip().startswith("<"):
                raise page_error(text, model=self.model, api_base=self.api_base) from None
            where = self.api_base or "the openai API"
            raise MalformedResponseError(f"the reply from {where} is not valid JSON",
                                         model=self.model, provider="openai",
                                         api_base=self.api_base,
                                         reason="malformed reply") from None
        try:
            comp = completion_of(doc, latency=latency, price=self._cost)
        except ValueError:
            said = error_in_reply(doc, model=self.model, api_base=self.api_base)
            if said is not None:
                raise said from None
            raise page_error(json.dumps(doc)[:200], model=self.model,
                             api_base=self.api_base) from None
        if not comp.choices:
            raise MalformedResponseError(f"{self.model}: reply without choices",
                                         model=self.model, provider="openai",
                                         api_base=self.api_base, reason="reply without choices")
        return comp

    def _cost(self, prompt_tokens: Any, completion_tokens: Any) -> float | None:
        if not isinstance(prompt_tokens, int) or not isinstance(completion_tokens, int):
            return None
        given = self.options.cost.cost(prompt_tokens, completion_tokens)
        if given is not None:
            return given
        if not self._price_known:
            self._price = token_price(self.model)
            self._price_known = True
        if self._price is None:
            return None
        return prompt_tokens * self._price[0] + completion_tokens * self._price[1]


async def _close_session(session: Any) -> None:
    await session.close()
