"""The embedded llama.cpp model behind the provider seam. The weights, `ensemble models pull`
and the servers' lifecycle (start, share, stop, the thread budget, the slots) are
`ensemble.local`'s; this module only talks to a running server, through the litellm provider.

n choices in one request. The server decodes up to its `slots` sequences at once, in one batch
(`ensemble.local.DEFAULT_SLOTS`), so a request asks for its n samples at once (n at most the
slots: llama.cpp refuses more); requests go one at a time (see `LocalProvider.__init__`).
What llama.cpp does with n, and what this module makes of it:
- each choice is an independent sample: child j of a request is seeded with the request's seed
  + j (no seed: each its own random seed). A request for samples i.. is sent seed + i, so with
  a seed sample i is seeded seed + i however the samples are split into requests;
- its `usage.completion_tokens` for n > 1 is one choice's count, not the sum: each choice's
  own tokens are counted from its token logprobs (asked for, then dropped where the request
  did not ask for them), and the reply's completion tokens are their sum;
- the prompt is read once for the n choices (its tokens counted once);
- a request's n choices decode in one batch, so its reply takes longer the more choices it
  holds: it waits --timeout for each of its choices (requests go one at a time, so no other
  request's sequences share its batch);
- the KV cache is one pool of cells for every slot: a request takes, before it is sent, its
  prompt's cells and max_tokens for each choice (`cells_for`), so requests beyond the pool
  wait here (`ensemble.local.Seats`) instead of failing in the server; a request that does
  not fit the pool alone is split into requests of fewer choices.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import ensemble.local as runtime

from ..errors import ProviderTimeoutError
from .base import Capabilities, Choice, Completion
from .litellm import LiteLLMProvider
from .options import ProviderOptions

if TYPE_CHECKING:
    from .params import SamplingParams

__all__ = ["LocalProvider", "prompt_cells"]

#: Cells counted beyond the messages' text: the chat template's role markers (per message) and
#: what it adds on its own (SmolLM2's adds a system message when there is none: "Name a
#: colour." is 14 bytes and 34 prompt tokens).
_TEMPLATE_CELLS = 16
_PROMPT_CELLS = 64


def prompt_cells(messages: Sequence[Mapping[str, Any]]) -> int:
    """An upper bound on the prompt's tokens without the tokenizer: one per UTF-8 byte of the
    messages' text (a token spells at least one byte), plus the template's own."""
    return _PROMPT_CELLS + sum(len(str(m.get("content") or "").encode()) + _TEMPLATE_CELLS
                               for m in messages)


class LocalProvider:
    """The embedded llama.cpp model (`local`, `local/<path>`, `local:<name>`).

    The server starts on first use (`start`) and stays up until `aclose` (an `Ensemble`
    closes it in `close()`; every server still running stops at interpreter exit), so
    sequential `decide()` calls do not reload the model. Requests go through litellm to the
    server's OpenAI-compatible API. Declares: one request at a time, `n` up to the server's
    slots (the module docstring), no Batch API.
    """

    name = "local"

    def __init__(self, model: str, options: ProviderOptions | None = None) -> None:
        self.model = model
        self.options = options or ProviderOptions()
        self.path = runtime.resolve_weights(model)  # fail early, with the fix in the message
        self.endpoint = ("local", str(self.path), "-")
        # the weights, not the port of this run's server, say where samples come from
        self.identity: str | None = f"local:sha256:{runtime.weights_digest(self.path)}"
        self.api_base: str | None = None
        slots = runtime.slot_setting()
        # one request at a time, of up to `slots` choices: requests of other prompts side by
        # side share one KV cache, and each token then attends over every prompt in it (on 2
        # idle cores 16 one-sample requests at once drew x0.44 the samples/s of one at a time;
        # at load 14, x2.5): the slots are for a question's n samples
        # llama.cpp's server returns token logprobs (its own, before its sampling chain: the
        # same at every temperature) and the top alternatives at each token
        self.capabilities = Capabilities(
            max_concurrency=1, supports_n=True, max_n=slots, batch_api=None,
            logprobs=True, logprobs_source="llama.cpp's server")
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

    def cells_for(self, messages: Sequence[Mapping[str, Any]], params: SamplingParams
                  ) -> tuple[int, int]:
        """(prompt, per choice): the KV cells a request may fill: its prompt once
        (`prompt_cells`) and, for each choice, max_tokens (none given: what one sequence
        has left after the prompt, which is then sent as its max_tokens)."""
        local = self._local
        assert local is not None
        prompt = min(prompt_cells(messages), local.sequence_cells)
        reply = params.max_tokens or max(1, local.sequence_cells - prompt)
        return prompt, reply

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, first_index: int = 0,
                       headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        await self.start()
        local = self._local
        assert local is not None
        prompt, reply = self.cells_for(messages, params)
        # the most choices one request holds within the pool (at least one: alone, it goes)
        per = max(1, min(n, local.slots, (local.cells - prompt) // reply))
        parts = await asyncio.gather(*(
            self._request(messages, params, n=min(per, n - i), first_index=first_index + i,
                          max_tokens=reply, cells=prompt + min(per, n - i) * reply,
                          headers=headers, timeout=timeout)
            for i in range(0, n, per)))
        return _joined(parts)

    async def _request(self, messages: Sequence[Mapping[str, str]], params: SamplingParams,
                       *, n: int, first_index: int, max_tokens: int, cells: int,
                       headers: Mapping[str, str] | None, timeout: float) -> Completion:
        inner, local = self._inner, self._local
        assert inner is not None and local is not None
        count = n > 1 and not params.logprobs  # each choice's tokens, from its logprobs
        sent = dataclasses.replace(
            params, logprobs=params.logprobs or count, max_tokens=max_tokens,
            seed=None if params.seed is None else params.seed + first_index)
        seats = runtime.seats_of(local)
        await seats.hold(n, cells)
        try:
            # the servers of the process share the machine's cores (`ensemble.local.cores`);
            # one server's requests decode in one batch, under one hold
            await runtime.cores.hold(local.threads, owner=local.path)
            try:
                # a request's n choices decode in one batch (one request at a time: no other
                # request's sequences beside them), so its reply takes about n times one
                # sequence's: --timeout per choice (one choice: --timeout itself)
                wait = timeout * n
                try:
                    comp = await inner.complete(messages, sent, n=n, first_index=first_index,
                                                headers=headers, timeout=wait)
                except ProviderTimeoutError as exc:
                    raise ProviderTimeoutError(
                        f"no reply from the local model within {wait:g} s (--timeout"
                        + ("" if n == 1 else f" {timeout:g} s for each of the {n} samples "
                           "it decodes at once") + ")", model=exc.model, provider=self.name,
                        api_base=exc.api_base, reason=exc.reason) from None
            finally:
                runtime.cores.give(local.threads, owner=local.path)
        finally:
            seats.give(n, cells)
        return _counted(comp, keep_logprobs=params.logprobs)

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


def _tokens_of(choice: Choice) -> int | None:
    """A choice's completion tokens: its token logprobs, one per token (None: none given)."""
    lp = choice.logprobs
    content = lp.get("content") if isinstance(lp, Mapping) else None
    return len(content) if isinstance(content, list) else None


def _counted(comp: Completion, *, keep_logprobs: bool) -> Completion:
    """A reply with each choice's own tokens and their sum as the reply's completion tokens
    (for n > 1 llama.cpp reports one choice's), logprobs kept only where they were asked for.
    """
    if len(comp.choices) == 1:
        tokens = [comp.completion_tokens]
    else:
        tokens = [_tokens_of(c) for c in comp.choices]
    choices = tuple(dataclasses.replace(c, tokens=t,
                                        logprobs=c.logprobs if keep_logprobs else None)
                    for c, t in zip(comp.choices, tokens, strict=True))
    total = None if any(t is None for t in tokens) else sum(t or 0 for t in tokens)
    return dataclasses.replace(comp, choices=choices, completion_tokens=total)


def _joined(parts: Sequence[Completion]) -> Completion:
    """One reply from the requests one was split into: their choices in order, the prompt
    counted once, completion tokens summed (None if one is unknown), the longest latency."""
    if len(parts) == 1:
        return parts[0]
    done = [p.completion_tokens for p in parts]
    return Completion(choices=tuple(c for p in parts for c in p.choices),
                      prompt_tokens=parts[0].prompt_tokens,
                      completion_tokens=None if None in done else sum(d or 0 for d in done),
                      cost_usd=None, latency_s=max(p.latency_s for p in parts))
