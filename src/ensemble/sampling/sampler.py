"""The async sampler: k samples per (prompt, parameters), concurrent, limited, retried, durable.

    async with Sampler("openai/gpt-4o-mini", store="run/samples.sqlite") as s:
        rows = await s.sample([SampleRequest.of(prompt, temperature=0.7, k=10)])
        result = await s.run(requests)   # rows and failures, never raising for one prompt

- Requests go through the provider seam (`ensemble.providers`): the provider the registry
  names for the model string (litellm by default, the embedded llama.cpp model for
  `local/...`), or any `Provider` passed in (the in-process fake, a litellm Router). What the
  provider can do (concurrency, `n`, a Batch API, prices) is what it declares.
- Every request passes the endpoint's process-wide limiter (`limiter.py`): concurrency, request
  and token rates, and one shared cool-down after a 429 or an overload. Those are backpressure:
  the request waits and is retried without using up `max_attempts`, until its sample's time
  budget (`max_retry_time`) runs out. Other transient errors (5xx, timeouts, dropped
  connections, malformed replies) get `max_attempts` attempts with jittered exponential backoff
  (tenacity's `wait_random_exponential`); 400/401/403/404 fail at once: the one retry policy
  of `ensemble.providers.retry`, which Batch API calls use too.
- Work is fed to a fixed pool of workers from a lazy queue (no task per request created up
  front), so the cost per sample does not grow with the size of the run.
- The provider's `n` carries several samples in one request where it works; the number of
  choices is checked, missing ones are requested again, and a provider that rejects or ignores
  `n` is remembered and served one request per sample. Never fewer samples than asked, silently.
- With a store, each sample's (key, index) is leased before it is requested, written (and the
  lease dropped) in one transaction when it arrives; a rerun requests only what is missing, and
  a second process on the same store waits for the first one's samples instead of paying again.
- Failure policy: a prompt that fails for good costs that prompt, not the run: every other
  request finishes and is stored, and `run` returns the failures. Systemic failures (401/403, a
  wrong or unreachable endpoint, `max_failures` permanent failures in a row, the cost cap) stop
  new requests at once; requests in flight finish and are stored. Content refusals do not count
  towards `max_failures`: they belong to their prompts (a rerun of refused prompts is all
  refusals).
- Each request carries its first sample index (`Provider.complete(first_index=...)`; over
  HTTP the `x-ensemble-sample-index` header: the simulated server makes draws reproducible
  with it).
- `mode="batch"`: the missing samples go through the provider's Batch API instead
  (`ensemble.sampling.batch`), into the same store with the same keys, returning the same
  `SampleResult`. Both paths share the run's state (`run.RunContext`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._sync import outlive_caller, stop_reason
from ..errors import ContentRefusedError, InputError, ProviderError, StoreError
from ..providers.base import Completion, Provider
from ..providers.limiter import Limiter, limiter_for
from ..providers.options import ProviderKwargs, ProviderOptions
from ..providers.registry import provider_for
from ..providers.router import as_provider
from ..providers.translate import NUnsupported
from .batch_options import BatchOptions
from .estimate import estimate_run, price_bound
from .online import (
    CostCapReached,
    OnlineRequests,
    RunWasStopped,
    StoredMeanwhile,
)
from .results import (
    RunEstimate,
    SampleFailure,
    SampleResult,
    failure_of,
    raise_for_failures,
    redraw_note,
)
from .run import (
    BUSY_POLL,
    LEASE_TTL,
    OWN_POLL,
    RunContext,
    contiguous,
    request_meta,
    status_interval,
)
from .store import SampleStore, new_holder
from .types import (
    JobStats,
    Parser,
    Sample,
    SampleRequest,
    request_key,
    with_logprobs,
    without_logprobs,
)
from .units import RowView, Unit, UnitQueue

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

__all__ = ["Sampler"]


class Sampler:
    """Draws samples from one model. Use `async with Sampler(...) as s: await s.sample(reqs)`.

    options:   `ProviderOptions` (api_base, api_key, timeout, max_concurrency, rpm, tpm,
               max_attempts, max_retry_time, max_failures), or the same names as keywords.
    provider:  a `Provider` to use instead of the one the model string implies (e.g.
               `ensemble.testing.FakeExpertProvider`); the caller keeps ownership of it.
    store:     a path or SampleStore for durable, resumable sampling; None keeps nothing.
    use_n:     "auto" tries the provider's `n` and falls back when it is rejected or ignored;
               True / False force it. `max_n`: most samples asked in one request.
    refresh:   re-draw samples even if stored (and overwrite them).
    max_cost:  stop new requests once spent plus in flight would pass this many USD.
    on_status: called with a one-line status ("waiting: ...") whenever no sample arrived for
               `status_every` s (None: $ENSEMBLE_STATUS_EVERY or 10); default: a logger.
    progress:  a rich progress bar on stderr when it is a terminal.
    mode:      "online" (requests as above) or "batch" (the provider's Batch API: half the
               price, within 24 h; needs a store; `batch`: its `BatchOptions`).
    in_flight: where its requests sent with a store outlive a cancelled caller (an Ensemble's).
    """

    def __init__(self, model: str, *, options: ProviderOptions | None = None,
                 provider: Provider | None = None,
                 store: SampleStore | str | os.PathLike[str] | None = None,
                 use_n: bool | str = "auto", max_n: int = 16, refresh: bool = False,
                 progress: bool = False, extra_headers: dict[str, str] | None = None,
                 max_cost: float | None = None,
                 on_status: Callable[[str], None] | None = None, status_every: float | None = None,
                 mode: str = "online", batch: BatchOptions | None = None,
                 in_flight: set[asyncio.Task[Any]] | None = None,
                 **provider_options: Unpack[ProviderKwargs]) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError("model must be a non-empty string such as openai/gpt-4o-mini")
        if use_n not in ("auto", True, False):
            raise InputError(f"use_n must be 'auto', True or False, got {use_n!r}")
        if isinstance(max_n, bool) or not isinstance(max_n, int) or max_n < 1:
            raise InputError(f"max_n must be an integer >= 1, got {max_n!r}")
        if max_cost is not None and not (isinstance(max_cost, (int, float)) and max_cost > 0):
            raise InputError(f"max_cost must be a number of USD > 0, got {max_cost!r}")
        status_every = status_interval(status_every)
        self.mode, self.batch = _check_mode(mode, batch, store=store, refresh=refresh,
                                            max_cost=max_cost)
        self.model = model
        self.options = ProviderOptions.build(options, **provider_options)
        provider = as_provider(provider, model=model, options=self.options)  # a litellm Router
        self._own_provider = provider is None
        self.provider: Provider = provider if provider is not None else provider_for(
            model, self.options)
        self.max_n = min(max_n, self.provider.capabilities.max_n or max_n)  # its own cap on n
        self.refresh = refresh
        self.max_cost = None if max_cost is None else float(max_cost)
        self.extra_headers = dict(extra_headers or {})
        self._own_store = store is not None and not isinstance(store, SampleStore)
        self._store_path = store if self._own_store else None
        self.store: SampleStore | None = (SampleStore(store) if self._own_store  # type: ignore[arg-type]
                                          else store)  # type: ignore[assignment]
        self.holder = new_holder()
        supports_n = self.provider.capabilities.supports_n
        self.run_state = RunContext(
            model=model, store=self.store, holder=self.holder,
            n_ok=supports_n if use_n == "auto" else bool(use_n), on_status=on_status,
            status_every=float(status_every), progress=progress, cooldown=self._cooldown)
        if use_n == "auto" and supports_n is False:
            self.run_state.note(f"{model}: the provider takes one sample per request (no n)")
        self._limiter: Limiter | None = None
        self._limiter_token = 0
        self._probe: asyncio.Lock | None = None
        # (key, index) pairs this process is requesting now: another request of this run for
        # the same prompt (two questions with one prompt) waits for them instead of paying
        # again for samples the store keeps only once
        self._drawing: set[tuple[str, int]] = set()
        self._consecutive_failures = 0
        self._in_flight: set[asyncio.Task[Any]] = set() if in_flight is None else in_flight
        self._online = OnlineRequests(self.run_state, self.provider, self.options,
                                      max_cost=self.max_cost, extra_headers=self.extra_headers,
                                      stored=lambda: self.store is not None)

    def __repr__(self) -> str:  # never shows the key
        return f"Sampler(model={self.model!r}, api_base={self.options.endpoint.api_base!r})"

    @property
    def provider_name(self) -> str:
        """Which provider serves this sampler: "openai" (the official SDK), "litellm", ..."""
        return self.provider.name

    @property
    def api_base(self) -> str | None:
        return self.provider.api_base or self.options.endpoint.api_base

    @property
    def stats(self) -> JobStats:
        return self.run_state.stats

    @property
    def status_every(self) -> float:
        return self.run_state.status_every

    def key_of(self, req: SampleRequest) -> str:
        """The store key of a request's samples: (endpoint, model, messages, parameters)."""
        return request_key(self.model, req.messages, req.params, endpoint=self.provider.identity)

    def _cooldown(self) -> float:
        lim = self._limiter.status() if self._limiter is not None else None
        return lim.cooldown_s if lim is not None else 0.0

    # -- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Sampler:
        await self._resolve()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        if interrupted := exc_type in (asyncio.CancelledError, KeyboardInterrupt):
            self.run_state.stop_for("the caller cancelled the run; stopped new requests")
        await self.aclose(why=(stop_reason() or "interrupted") if interrupted else "closing")

    async def aclose(self, *, why: str = "closing") -> None:
        """Close what this sampler opened: its own provider (not one passed in) and store.
        Requests still in flight (their caller cancelled: Ctrl-C) would die with them: they
        are waited for briefly first, their replies stored (`RunContext.settle`). With an
        Ensemble's provider and store they go on alone: the Ensemble's close waits for them."""
        try:
            if self._own_store or self._own_provider:
                await self.run_state.settle([t for t in self._in_flight if not t.done()],
                                            sent=self._online.in_flight, why=why)
        finally:
            self.run_state.flush()  # a store that could not take a reply: once more
            await self._close()

    async def _close(self) -> None:
        if self._limiter is not None:
            self._limiter.detach(self._limiter_token)
            self._limiter = self._online.limiter = None
        if self._own_provider:
            await self.provider.aclose()
        self.run_state.release()
        if self._own_store and self.store is not None:
            self.store.close()
            self.store = self.run_state.store = None

    async def _resolve(self) -> None:
        if self._own_store and self.store is None:  # reused after aclose()
            self.store = self.run_state.store = SampleStore(self._store_path)  # type: ignore[arg-type]
        if getattr(self.provider, "starting", None):  # a slow start says what it does first
            self.run_state.say(self.provider.starting)  # type: ignore[attr-defined]
        await self.provider.start()
        if self._limiter is None:
            lim = self.options.limits
            # a provider may declare it serves fewer requests at once (llama.cpp's server: one)
            caps = self.provider.capabilities
            conc = min(lim.max_concurrency, caps.max_concurrency or lim.max_concurrency)
            if conc < lim.max_concurrency and caps.limit_reason:
                self.run_state.note(f"{caps.limit_reason}, fewer than max_concurrency="
                                    f"{lim.max_concurrency}: concurrency is capped at {conc}")
            self._limiter = limiter_for(self.provider.endpoint, max_concurrency=conc,
                                        rpm=lim.rpm, tpm=lim.tpm)
            self._limiter_token = self._limiter.attach(max_concurrency=conc, rpm=lim.rpm,
                                                       tpm=lim.tpm)
            self._online.limiter = self._limiter

    def _check_logprobs(self, requests: Sequence[SampleRequest]) -> None:
        """Refuse, before any request, a draw that asks for token logprobs its provider
        declares it cannot return (`Capabilities.refuses`): one line, nothing sent or paid.
        Where the provider does not know, a reply that comes back without them is refused by
        the rule that reads them."""
        asked = [r.params for r in requests if r.params.logprobs]
        if not asked:
            return
        why = self.provider.capabilities.refuses(
            top_logprobs=max(p.top_logprobs or 0 for p in asked))
        if why is not None:
            raise InputError(
                f"{self.model}: its provider ({self.provider_name}) {why}, which this draw "
                "reads (a rule or stopping rule that weighs votes by token logprobs: soft, "
                "confidence, deepconf, weighted); use a rule that reads the answers alone "
                "(plurality, majority, ...), or a model whose provider returns logprobs")

    # -- sampling ----------------------------------------------------------------------------
    async def sample(self, requests: Sequence[SampleRequest], *, parser: Parser | None = None
                     ) -> list[list[Sample]]:
        """k samples for each request, in request order, each list indexed 0..k-1.

        When requests fail for good, it raises after every other request has finished and
        been stored: the error that stopped the run (e.g. `AuthenticationError`), the one
        prompt's error when one prompt failed, else `SamplingFailed` listing them all.
        `run` returns the failures instead of raising.
        """
        result = await self.run(requests, parser=parser)
        raise_for_failures(result, len(requests), stored=self.store is not None)
        return result.rows  # type: ignore[return-value]

    async def run(self, requests: Sequence[SampleRequest], *, parser: Parser | None = None,
                  parsers: Sequence[Parser] | None = None) -> SampleResult:
        """Draw every missing sample; return the rows and the failures (see the module doc).
        `parsers`: each request's own parser (questions of different kinds), else `parser`."""
        ctx = self.run_state
        for r in requests:
            if not isinstance(r, SampleRequest):
                raise InputError(f"requests must be SampleRequest objects, got {type(r).__name__}")
        ctx.parse = parser if parser is not None else ctx.parse
        await self._resolve()
        ctx.parsers = dict(zip(map(self.key_of, requests), parsers, strict=True)) if parsers else {}
        self._check_logprobs(requests)
        if self.mode == "batch":  # the provider's Batch API: ensemble/sampling/batch.py
            from .batch import run_batch

            return await run_batch(ctx, self.provider, requests, self.batch or BatchOptions(),
                                   max_n=self.max_n)
        t0 = time.perf_counter()
        ctx.stop = None
        self._consecutive_failures = 0
        ctx.last_progress = time.monotonic()
        rows: list[list[Sample | None]] = [[None] * r.k for r in requests]
        failures: list[SampleFailure] = []
        self.stats.samples_total += sum(r.k for r in requests)
        helpers: list[asyncio.Task[None]] = []
        ctx.start_progress()  # before the store is read: a rerun's read takes seconds
        try:
            units = self._plan(requests, rows)
            if units and self.max_cost is not None:
                self._check_price_known()
            self._probe = asyncio.Lock()
            ctx.drawing()
            queue = UnitQueue(units)
            if queue.pending:
                n_workers = min(queue.pending, self.options.limits.max_concurrency)
                if self.store is not None:
                    helpers.append(asyncio.ensure_future(ctx.heartbeat()))
                    # samples leased to a batch of this store arrive when it is collected
                    from .batch import follow_batches

                    helpers.append(asyncio.ensure_future(follow_batches(ctx, self.provider)))
                helpers.append(asyncio.ensure_future(self._watch()))
                workers = [asyncio.ensure_future(self._worker(queue, requests, rows, failures))
                           for _ in range(n_workers)]
                try:
                    await asyncio.gather(*workers)
                except BaseException as exc:
                    if isinstance(exc, asyncio.CancelledError):  # nothing more is sent
                        ctx.stop_for("the caller cancelled the run; stopped new requests")
                    for w in workers:
                        w.cancel()
                    await asyncio.gather(*workers, return_exceptions=True)
                    raise
        finally:
            for h in helpers:
                h.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            ctx.release()
            self.stats.wall_time_s += time.perf_counter() - t0
            ctx.stop_progress()
        self.stats.failed += sum(len(f.indices) for f in failures)
        ctx.store_outcome()
        self._online.cost_outcome()
        stopped = ctx.stop
        if stopped is not None:
            stopped.failures = list(failures)
        ctx.check_complete(rows, failures, "the sampler")
        return SampleResult(rows=rows, failures=failures, stopped=stopped)

    async def draw(self, req: SampleRequest, start: int, k: int, *, request: int = 0,
                   parser: Parser | None = None, watch: bool = False
                   ) -> tuple[list[Sample | None], list[SampleFailure]]:
        """Samples start..start+k−1 of one request (sample i of a prompt is stored sample i):
        read from the store, waited for while another run of the store draws them, or
        requested, through the provider's `n` (at most `max_n` a request). Returns them in
        order (None where one failed for good, or was not asked because the run was stopped:
        `run_state.stop` says why) and the failures (naming `request`).

        The step of adaptive drawing: whoever draws decides from the samples so far what to
        draw next (`ensemble.drawing`, the Python API's one draw loop), after a `run` of every
        question's first samples. Online only: a batch returns its answers hours later.

        `watch`: say what the draw waits for when nothing arrived for `status_every` s, as a
        run does (a whole decision drawn in one step: one question, every sample at once).
        """
        if self.mode == "batch":
            raise InputError("adaptive sampling needs answers as they arrive; batch mode returns "
                             "them hours later: sample online, or score --adaptive on a fixed "
                             "batch run (eval --adaptive replays the drawn samples)")
        ctx = self.run_state
        if parser is not None:
            ctx.parse, ctx.parsers = parser, {}
        await self._resolve()
        self._check_logprobs([req])
        if self._probe is None:
            self._probe = asyncio.Lock()
        row: list[Sample | None] = [None] * (start + k)
        failures: list[SampleFailure] = []
        if k <= 0 or ctx.stop is not None:
            return row[start:], failures
        key = self.key_of(req)
        self.stats.samples_total += k
        per = 1 if ctx.n_ok is False else self.max_n
        ctx.last_progress = time.monotonic()
        watcher = asyncio.ensure_future(self._watch()) if watch else None
        try:
            await asyncio.gather(*(
                self._draw_indices(request, req, key, list(range(i, min(i + per, start + k))),
                                   row, failures) for i in range(start, start + k, per)))
        finally:
            if watcher is not None:
                watcher.cancel()
        self.stats.failed += sum(len(f.indices) for f in failures)
        return row[start:], failures

    async def _draw_indices(self, ri: int, req: SampleRequest, key: str, indices: list[int],
                            row: list[Sample | None], failures: list[SampleFailure]) -> bool:
        """Fill row[i] for i in `indices`: from the store, by waiting for another run's lease,
        or by requesting them. False when they failed for good (recorded in `failures`)."""
        unit = Unit(ri, key, list(indices))
        while True:
            todo = list(unit.indices)
            if self.store is not None and not self.refresh:
                waiting = UnitQueue([])
                todo = self._claim(unit, RowView(ri, row), waiting)  # type: ignore[arg-type]
                busy = waiting.first_deferred()
                if busy is not None:  # another run is drawing some: wait for them
                    if todo and not await self._request_unit(unit, req, todo, row, failures):
                        return False
                    await asyncio.sleep(BUSY_POLL)
                    unit = Unit(ri, key, busy.indices)
                    continue
            elif self.store is not None:
                self.store.claim([(key, todo)], holder=self.holder, ttl=LEASE_TTL)
            if not todo:
                return True
            return await self._request_unit(unit, req, todo, row, failures)

    async def _request_unit(self, unit: Unit, req: SampleRequest, todo: list[int],
                            row: list[Sample | None], failures: list[SampleFailure]) -> bool:
        try:
            await self._run_unit(req, unit.key, todo, row)
            return True
        except (ProviderError, RunWasStopped) as exc:
            self._fail(unit, req, todo, row, exc, failures)
            return False
        finally:
            self._drawing.difference_update((unit.key, i) for i in todo)

    def estimate(self, requests: Sequence[SampleRequest]) -> RunEstimate:
        """What `run` would request, and cost, without sending anything (a dry run;
        `ensemble.sampling.estimate`)."""
        return estimate_run(requests, key_of=self.key_of,
                            store=None if self.refresh else self.store,
                            per_request=self.max_n if self.run_state.n_ok is not False else 1,
                            provider=self.provider, model=self.model,
                            price_per_1k=self.options.cost.price_per_1k)

    def _plan(self, requests: Sequence[SampleRequest], rows: list[list[Sample | None]]
              ) -> list[Unit]:
        """Read what the store holds; return the units of missing samples."""
        ctx = self.run_state
        units: list[Unit] = []
        redrawn: list[Sample] = []
        for ri, req in enumerate(requests):
            key = self.key_of(req)
            have: dict[int, Sample] = {}
            if self.store is not None and not self.refresh:
                have = self.store.get(key, range(req.k), parser=ctx.parser_for(key))
                if len(have) < req.k and not req.params.logprobs:
                    # samples drawn with logprobs (for a soft rule) serve a request without
                    for other in with_logprobs(req):
                        more = self.store.get(self.key_of(other), range(req.k),
                                              parser=ctx.parser_for(key))
                        have.update({i: s for i, s in more.items() if i not in have})
            for s in have.values():
                if s.cost_usd is None:
                    self.stats.stored_cost_usd = None
                elif self.stats.stored_cost_usd is not None:
                    self.stats.stored_cost_usd += s.cost_usd
            ctx.fill(rows[ri], have, cached=True)
            missing = [i for i in range(req.k) if i not in have]
            if missing and req.params.logprobs and self.store is not None and not self.refresh:
                redrawn += self.store.get(self.key_of(without_logprobs(req)), missing).values()
            per_unit = 1 if ctx.n_ok is False else self.max_n
            for run in contiguous(missing):
                for start in range(0, len(run), per_unit):
                    units.append(Unit(ri, key, run[start:start + per_unit]))
        if redrawn:
            ctx.note(redraw_note(redrawn))
            ctx.say(ctx.stats.notes[-1])
        return units

    async def _worker(self, queue: UnitQueue, requests: Sequence[SampleRequest],
                      rows: list[list[Sample | None]], failures: list[SampleFailure]) -> None:
        while self.run_state.stop is None:
            unit = await queue.next()
            if unit is None:
                return
            req = requests[unit.ri]
            todo = unit.indices
            try:
                if self.store is not None and not self.refresh:
                    todo = self._claim(unit, rows, queue)
                    if not todo:
                        queue.done(unit)
                        continue
                elif self.store is not None:
                    self.store.claim([(unit.key, todo)], holder=self.holder, ttl=LEASE_TTL)
            except StoreError as exc:  # a full disk: stop drawing, keep what is in flight
                self.run_state.store_failed(exc)
                return
            try:
                await self._run_unit(req, unit.key, todo, rows[unit.ri])
            except (ProviderError, RunWasStopped) as exc:
                self._fail(unit, req, todo, rows[unit.ri], exc, failures)
            finally:
                self._drawing.difference_update((unit.key, i) for i in todo)
            queue.done(unit)

    def _claim(self, unit: Unit, rows: list[list[Sample | None]], queue: UnitQueue
               ) -> list[int]:
        """Lease the unit's samples; read those another run has stored meanwhile; defer those
        another live run is drawing. Returns the indices to request now."""
        if self.store is None:  # no store, no leases: everything is to request
            return list(unit.indices)
        claim = self.store.claim([(unit.key, unit.indices)], holder=self.holder, ttl=LEASE_TTL)[0]
        if claim.done:
            got = self.store.get(unit.key, claim.done, parser=self.run_state.parser_for(unit.key))
            self.run_state.fill(rows[unit.ri], got, shared=True)
        # this process's own leases come back as claimed: those another request of this run
        # is drawing now wait for its reply (read from the store when it is stored)
        mine = [i for i in claim.claimed if (unit.key, i) in self._drawing]
        if claim.busy or mine:
            wait = BUSY_POLL if claim.busy else OWN_POLL
            queue.defer(Unit(unit.ri, unit.key, sorted(claim.busy + mine),
                              not_before=time.monotonic() + wait))
        todo = [i for i in claim.claimed if (unit.key, i) not in self._drawing]
        self._drawing.update((unit.key, i) for i in todo)
        return todo

    def _stored_meanwhile(self, key: str, indices: list[int]) -> dict[int, Sample]:
        """Samples among `indices` that another run stored since this one leased them (its
        lease ran out while this process waited, was suspended or retried); leases the rest
        again."""
        if self.store is None or self.refresh:
            return {}
        claim = self.store.claim([(key, indices)], holder=self.holder, ttl=LEASE_TTL)[0]
        return (self.store.get(key, claim.done, parser=self.run_state.parser_for(key)) if claim.done
                else {})

    def _check_price_known(self) -> None:
        """Refuse `max_cost` before the first request when the provider knows no price for
        the model (nothing is sent)."""
        if self.options.cost.price_per_1k is not None:
            return
        cost, why = price_bound(self.provider, self.model, None, 0, 0)
        if cost is None:
            raise InputError(f"--max-cost cannot be enforced: the price of {self.model} is "
                             f"{why}; nothing was sent")

    def _fail(self, unit: Unit, req: SampleRequest, todo: list[int],
              row: list[Sample | None], exc: ProviderError | RunWasStopped,
              failures: list[SampleFailure]) -> None:
        ctx = self.run_state
        missing = tuple(i for i in todo if row[i] is None)
        ctx.release(keys=[(unit.key, i) for i in missing])
        if not missing or isinstance(exc, (RunWasStopped, CostCapReached)):
            return  # not attempted: the run was stopped (the stop itself says why)
        failures.append(failure_of(exc, request=unit.ri, tag=req.tag, key=unit.key,
                                   indices=missing))
        if not isinstance(exc, ContentRefusedError):
            # a refusal is the prompt's, not the endpoint's: a rerun of refused prompts, all
            # refused again, must not read as a systemic failure
            self._consecutive_failures += 1
        if exc.systemic:
            ctx.stop_for(f"{exc}; stopped new requests", cause=exc)
        elif self._consecutive_failures >= self.options.failures.max_failures:
            ctx.stop_for(
                f"{self._consecutive_failures} requests in a row failed for good (last: {exc}); "
                "stopped new requests so as not to spend more (--max-failures "
                f"{self.options.failures.max_failures})", cause=exc)

    async def _run_unit(self, req: SampleRequest, key: str, indices: list[int],
                        row: list[Sample | None]) -> None:
        ctx = self.run_state
        todo = list(indices)
        while todo:
            if ctx.stop is not None:
                raise RunWasStopped()
            if ctx.n_ok is False and len(todo) > 1:
                # n unsupported: one request per sample, concurrently (bounded by the limiter)
                results = await asyncio.gather(
                    *(self._run_unit(req, key, [i], row) for i in todo),
                    return_exceptions=True)
                errors = [r for r in results if isinstance(r, BaseException)]
                if errors:
                    raise errors[0]
                return
            if ctx.n_ok is None and len(todo) > 1 and self._probe is not None \
                    and self._probe.locked():
                # another unit is finding out whether the provider honours n: wait for it
                # rather than sending a burst of requests that may all be rejected
                async with self._probe:
                    pass
            use_n = ctx.n_ok is not False and len(todo) > 1
            batch = todo if use_n else todo[:1]
            try:
                if use_n and ctx.n_ok is None and self._probe is not None:
                    async with self._probe:
                        if ctx.n_ok is False:
                            continue
                        comp, samples = await self._request(req, key, batch)
                        self._learn_n(len(batch), len(comp.choices))
                else:
                    comp, samples = await self._request(req, key, batch)
                    if len(batch) > 1:
                        self._learn_n(len(batch), len(comp.choices))
            except StoredMeanwhile as st:  # another run stored them while this one waited
                ctx.fill(row, st.samples, shared=True)
                todo = [i for i in todo if row[i] is None]
                continue
            except NUnsupported:
                if ctx.n_ok is not False:
                    ctx.n_ok = False
                    ctx.note(f"{self.model} rejects n > 1: one request per sample")
                continue
            if 1 < len(samples) < len(batch):
                ctx.note(f"{self.model} returned fewer choices than n; requested the rest")
            for smp in samples:
                row[smp.index] = smp
            self._consecutive_failures = 0
            ctx.took(len(samples), sum(not smp.valid for smp in samples))
            todo = batch[len(samples):] + todo[len(batch):]

    async def _request(self, req: SampleRequest, key: str, batch: list[int]
                       ) -> tuple[Completion, list[Sample]]:
        """One request for the samples `batch` of `req`, and those samples, stored. With a
        store, a request already sent survives its caller's cancellation (a client gone): its
        reply is stored, so a repeat does not pay for it again; requests not yet sent are not
        sent (`run` stops new requests then)."""
        ctx = self.run_state

        async def fetch() -> tuple[Completion, list[Sample]]:
            comp = await self._online.request(
                req, n=len(batch), start=batch[0],
                recheck=functools.partial(self._stored_meanwhile, key, batch))
            samples = ctx.samples(key, batch[0], list(comp.choices[:len(batch)]),
                                  prompt_tokens=comp.prompt_tokens,
                                  completion_tokens=comp.completion_tokens,
                                  cost=comp.cost_usd, latency=comp.latency_s)
            if self.store is not None:
                ctx.put(samples, model=self.model,
                        request=request_meta(self.model, req, self.provider.identity))
            return comp, samples

        if self.store is None:
            return await fetch()
        return await outlive_caller(fetch(), keep=self._in_flight)

    def _learn_n(self, asked: int, got: int) -> None:
        """What one n > 1 reply says about the provider's support for n."""
        ctx = self.run_state
        if got >= 2:
            ctx.n_ok = True
        elif got == 1 and ctx.n_ok is None:
            # n silently ignored (one choice for n > 1): separate requests from now on
            ctx.n_ok = False
            ctx.note(f"{self.model} answered n = {asked} with one choice: it ignores n; "
                     "one request per sample")

    # -- "waiting" lines -----------------------------------------------------------------------
    async def _watch(self) -> None:
        """Say what the run waits for when no sample arrived for `status_every` seconds."""
        ctx = self.run_state
        while True:
            await asyncio.sleep(ctx.status_every)
            idle = time.monotonic() - ctx.last_progress
            if idle < ctx.status_every:
                continue
            ctx.say(self.status_line(idle))

    def status_line(self, idle: float | None = None) -> str:
        """One line on what the run is doing, in the user's terms."""
        lim = self._limiter.status() if self._limiter is not None else None
        return self._online.status_line(lim, idle, where=self.api_base or self.model)


def _check_mode(mode: str, batch: BatchOptions | None, *, store: Any, refresh: bool,
                max_cost: float | None) -> tuple[str, BatchOptions | None]:
    """The sampling mode and its batch options, checked: batch mode resumes from a store, and
    neither re-draws everything nor caps a cost it only learns when a batch is done."""
    if mode not in ("online", "batch"):
        raise InputError(f"mode must be 'online' or 'batch', got {mode!r}")
    if batch is not None and not isinstance(batch, BatchOptions):
        raise InputError(f"batch must be a BatchOptions, got {type(batch).__name__}")
    if mode != "batch":
        return mode, None
    if store is None:
        raise InputError("batch mode needs a store (batches are resumed from it): pass store= "
                         "(--store FILE for `ensemble sample`)")
    if refresh:
        raise InputError("batch mode cannot re-draw stored samples (refresh / --refresh would "
                         "submit everything again on every rerun); use a new store instead")
    if max_cost is not None:
        raise InputError("--max-cost cannot be enforced in batch mode (a batch is priced when "
                         "it is done); try a small --limit first, or sample online")
    return mode, batch or BatchOptions()
