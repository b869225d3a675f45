"""The embedded llama.cpp model behind the provider seam. The weights, `ensemble models pull`
and the servers' lifecycle (start, share, stop, the thread budget) are `ensemble.local`'s;
this module only talks to a running server, through the litellm provider."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import ensemble.local as runtime

from .base import Capabilities, Completion
from .litellm import LiteLLMProvider
from .options import ProviderOptions

if TYPE_CHECKING:
    from .params import SamplingParams

__all__ = ["LocalProvider"]


class LocalProvider:
    """The embedded llama.cpp model (`local`, `local/<path>`, `local:<name>`).

    The server starts on first use (`start`) and stays up until `aclose` (an `Ensemble`
    closes it in `close()`; every server still running stops at interpreter exit), so
    sequential `decide()` calls do not reload the model. Requests go through litellm to the
    server's OpenAI-compatible API. Declares: one request at a time (the server decodes one
    sequence at a time, n_parallel = 1: requests beyond one in flight only wait in its queue,
    where they can run into their timeout), no `n` (one request per sample, noted in run
    summaries), no Batch API.
    """

    name = "local"

    # llama.cpp's server returns token logprobs (its own, before its sampling chain: the same
    # at every temperature) and the top alternatives at each token
    capabilities = Capabilities(max_concurrency=1, supports_n=False, batch_api=None,
                                logprobs=True, logprobs_source="llama.cpp's server")

    def __init__(self, model: str, options: ProviderOptions | None = None) -> None:
        self.model = model
        self.options = options or ProviderOptions()
        self.path = runtime.resolve_weights(model)  # fail early, with the fix in the message
        self.endpoint = ("local", str(self.path), "-")
        # the weights, not the port of this run's server, say where samples come from
        self.identity: str | None = f"local:sha256:{runtime.weights_digest(self.path)}"
        self.api_base: str | None = None
        self._local: runtime.LocalEndpoint | None = None
        self._inner: LiteLLMProvider | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalProvider(model={self.model!r})"

    @property
    def starting(self) -> str | None:
        """What `start` is about to do, for a status line (None once started): loading the
        weights takes tens of seconds, with nothing else to show."""
        if self._inner is not None:
            return None
        size = self.path.stat().st_size / 1e6
        return (f"loading the local model {self.path.name} ({size:.0f} MB) and starting its "
                "server; the first sample follows (this can take a minute on a busy machine)")

    async def start(self) -> None:
        if self._inner is not None:
            return
        endpoint = await asyncio.to_thread(runtime.acquire, self.model)
        with self._lock:
            if self._inner is not None:  # started concurrently: give the extra back
                runtime.release(endpoint)
                return
            self._local = endpoint
            self.api_base = endpoint.api_base
            self._inner = LiteLLMProvider(
                self.model, self.options.replace(api_base=endpoint.api_base, api_key=None),
                target_model=endpoint.model)

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, first_index: int = 0,
                       headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        await self.start()
        inner, local = self._inner, self._local
        assert inner is not None and local is not None
        # the servers of the process share the machine's cores (`ensemble.local.cores`)
        await runtime.cores.hold(local.threads)
        try:
            return await inner.complete(messages, params, n=n, first_index=first_index,
                                        headers=headers, timeout=timeout)
        finally:
            runtime.cores.give(local.threads)

    def price(self, prompt_tokens: int, completion_tokens: int, *,
              batch: bool = False) -> float | None:
        return None  # the machine's own time: no price per token

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        return None

    async def aclose(self) -> None:
        with self._lock:
            endpoint, self._local, self._inner = self._local, None, None
        if endpoint is not None:
            await asyncio.to_thread(runtime.release, endpoint)


