"""The async sampler: k samples per (prompt, parameters), concurrent, limited, retried, durable.

    async with Sampler("openai/gpt-4o-mini", store="run/samples.sqlite") as s:
        rows = await s.sample([SampleRequest.of(prompt, temperature=0.7, k=10)])
        result = await s.run(requests)   # rows and failures, never raising for one prompt

- Requests go through the provider seam (`ensemble.sampling.provider`): litellm by default, the
  embedded llama.cpp model for `local/...`, or any `Provider` passed in (the in-process fake).
- Every request passes the endpoint's process-wide limiter (`limiter.py`): concurrency, request
  and token rates, and one shared cool-down after a 429 or an overload. Those are backpressure:
  the request waits and is retried without using up `max_attempts`, until its sample's time
  budget (`max_retry_time`) runs out. Other transient errors (5xx, timeouts, dropped
  connections, malformed replies) get `max_attempts` attempts with jittered exponential backoff
  (tenacity's `wait_random_exponential`); 400/401/403/404 fail at once.
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
- Each request carries its first sample index in the `x-ensemble-sample-index` header (the
  simulated server makes draws reproducible with it).
- `mode="batch"`: the missing samples go through the provider's Batch API instead
  (`ensemble.sampling.batch`), into the same store with the same keys, returning the same
  `SampleResult`.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import (
    ContentRefusedError,
    EnsembleError,
    InputError,
    ProviderError,
    RetryBudgetExceeded,
    RunStopped,
    SamplingFailed,
)
from .batch import BatchOptions
from .limiter import EndpointLimiter, limiter_for
from .options import ProviderKwargs, ProviderOptions
from .parsing import extract_answer
from .provider import Completion, Provider, make_provider
from .replies import checked
from .router import as_provider
from .store import SampleStore, new_holder
from .types import JobStats, Parser, Sample, SampleRequest, request_key

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

__all__ = ["INDEX_HEADER", "RunEstimate", "SampleFailure", "SampleResult", "Sampler",
           "raise_for_failures"]

INDEX_HEADER = "x-ensemble-sample-index"
LEASE_TTL = 60.0  # seconds a lease lives without renewal (renewed every TTL / 3)
_BUSY_POLL = 0.5  # seconds between checks for samples another process is drawing
log = logging.getLogger("ensemble.sampling")


@dataclass(frozen=True)
class SampleFailure:
    """A request that failed for good: which prompt, which samples, and why."""

    request: int  # index into the requests given to `run`
    tag: str | None  # the request's tag (e.g. the question id)
    key: str
    indices: tuple[int, ...]
    error: str  # the error's class name, e.g. "ContentRefusedError"
    status: int | None
    reason: str  # a short label: "400 content policy", "timeout", ...
    message: str  # one line, redacted
    exception: ProviderError | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"request": self.request, "tag": self.tag, "indices": list(self.indices),
                "error": self.error, "status": self.status, "reason": self.reason,
                "message": self.message}


@dataclass
class SampleResult:
    """What `Sampler.run` returns: the samples (None where a request failed) and the failures.

    `stopped` is the systemic failure that stopped new requests, if one did.
    """

    rows: list[list[Sample | None]]
    failures: list[SampleFailure] = field(default_factory=list)
    stopped: RunStopped | None = None

    @property
    def complete(self) -> bool:
        return not self.failures and self.stopped is None

    def failed_requests(self) -> set[int]:
        """Indices of the requests with at least one sample missing."""
        return {i for i, row in enumerate(self.rows) if any(s is None for s in row)}


@dataclass
class _Unit:
    """Contiguous sample indices of one request, requested together (the provider's `n`)."""

    ri: int
    key: str
    indices: list[int]
    not_before: float = 0.0  # monotonic time before which a busy unit is not re-checked


def _default_parser(text: str) -> str | None:
    return extract_answer(text)


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
               `status_every` seconds; default: the "ensemble.sampling" logger.
    progress:  a rich progress bar on stderr when it is a terminal.
    mode:      "online" (requests as above) or "batch" (the provider's Batch API: half the
               price, within 24 h; needs a store; `batch`: its `BatchOptions`).
    """

    def __init__(self, model: str, *, options: ProviderOptions | None = None,
                 provider: Provider | None = None,
                 store: SampleStore | str | os.PathLike[str] | None = None,
                 use_n: bool | str = "auto", max_n: int = 16, refresh: bool = False,
                 progress: bool = False, extra_headers: dict[str, str] | None = None,
                 max_cost: float | None = None,
                 on_status: Callable[[str], None] | None = None, status_every: float = 10.0,
                 mode: str = "online", batch: BatchOptions | None = None,
                 **provider_options: Unpack[ProviderKwargs]) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError("model must be a non-empty string such as openai/gpt-4o-mini")
        if use_n not in ("auto", True, False):
            raise InputError(f"use_n must be 'auto', True or False, got {use_n!r}")
        if isinstance(max_n, bool) or not isinstance(max_n, int) or max_n < 1:
            raise InputError(f"max_n must be an integer >= 1, got {max_n!r}")
        if max_cost is not None and not (isinstance(max_cost, (int, float)) and max_cost > 0):
            raise InputError(f"max_cost must be a number of USD > 0, got {max_cost!r}")
        if not status_every > 0:
            raise InputError(f"status_every must be > 0 seconds, got {status_every!r}")
        self.mode, self.batch = _check_mode(mode, batch, store=store, refresh=refresh,
                                            max_cost=max_cost)
        self.model = model
        self.options = ProviderOptions.build(options, **provider_options)
        provider = as_provider(provider, model=model, options=self.options)  # a litellm Router
        self._own_provider = provider is None
        self.provider: Provider = provider if provider is not None else make_provider(
            model, self.options)
        self.max_n = max_n
        self.refresh = refresh
        self.progress = progress
        self.max_cost = None if max_cost is None else float(max_cost)
        self.extra_headers = dict(extra_headers or {})
        self.on_status = on_status
        self.status_every = float(status_every)
        self.stats = JobStats()
        if use_n == "auto":
            self._n_ok: bool | None = self.provider.supports_n
            if self._n_ok is False:
                self._note(f"{model}: the provider takes one sample per request (no n)")
        else:
            self._n_ok = bool(use_n)
        self._own_store = store is not None and not isinstance(store, SampleStore)
        self._store_path = store if self._own_store else None
        self.store: SampleStore | None = (SampleStore(store) if self._own_store  # type: ignore[arg-type]
                                          else store)  # type: ignore[assignment]
        self.holder = new_holder()
        self._limiter: EndpointLimiter | None = None
        self._limiter_token = 0
        self._probe: asyncio.Lock | None = None
        self._bar: Any = None
        self._task_id: Any = None
        self._stop: RunStopped | None = None
        self._consecutive_failures = 0
        self._last_progress = time.monotonic()
        self._in_flight = 0
        self._paid = 0  # replies received (priced)
        self._retrying = 0
        self._bad_usage: str | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"Sampler(model={self.model!r}, api_base={self.options.api_base!r})"

    @property
    def provider_name(self) -> str:
        """Which provider serves this sampler: "openai" (the official SDK), "litellm", ..."""
        return str(getattr(self.provider, "name", None) or type(self.provider).__name__)

    @property
    def api_base(self) -> str | None:
        return self.provider.api_base or self.options.api_base

    # -- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Sampler:
        await self._resolve()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close what this sampler opened: its own provider (not one passed in) and store."""
        if self._limiter is not None:
            self._limiter.detach(self._limiter_token)
            self._limiter = None
        if self._own_provider:
            await self.provider.aclose()
        if self.store is not None:
            try:
                self.store.release(self.holder)
            except EnsembleError:
                pass
        if self._own_store and self.store is not None:
            self.store.close()
            self.store = None

    async def _resolve(self) -> None:
        if self._own_store and self.store is None:  # reused after aclose()
            self.store = SampleStore(self._store_path)  # type: ignore[arg-type]
        await self.provider.start()
        if self._limiter is None:
            o = self.options
            if getattr(self.provider, "endpoint", ("",))[0] not in ("fake", "local") \
                    and not getattr(self.provider, "sized_pool", False):
                from .client import pool_capacity

                cap = pool_capacity()
                if cap is not None and cap < o.max_concurrency:
                    self._note(f"litellm's HTTP pool holds {cap} connections per host, fewer "
                               f"than max_concurrency={o.max_concurrency}: concurrency is "
                               f"capped at {cap} (litellm's pool is set by its environment: "
                               "AIOHTTP_CONNECTOR_LIMIT, DISABLE_AIOHTTP_TRANSPORT)")
            # a provider may know it serves fewer requests at once (the local llama.cpp server)
            cap = getattr(self.provider, "max_concurrency", None) or o.max_concurrency
            self._limiter = limiter_for(self.provider.endpoint,
                                        max_concurrency=min(o.max_concurrency, cap),
                                        rpm=o.rpm, tpm=o.tpm)
            self._limiter_token = self._limiter.attach(
                max_concurrency=min(o.max_concurrency, cap), rpm=o.rpm, tpm=o.tpm)

    def key_of(self, req: SampleRequest) -> str:
        """The store key of a request's samples: (endpoint, model, messages, parameters)."""
        return request_key(self.model, req.messages, req.params,
                           endpoint=self.provider.identity)

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

    async def run(self, requests: Sequence[SampleRequest], *, parser: Parser | None = None
                  ) -> SampleResult:
        """Draw every missing sample; return the rows and the failures (see the module doc)."""
        parse = parser or _default_parser
        for r in requests:
            if not isinstance(r, SampleRequest):
                raise InputError(f"requests must be SampleRequest objects, got {type(r).__name__}")
        await self._resolve()
        if self.mode == "batch":  # the provider's Batch API: ensemble/sampling/batch.py
            from .batch import run_batch

            return await run_batch(self, requests, parse, self.batch or BatchOptions())
        t0 = time.perf_counter()
        self._stop = None
        self._consecutive_failures = 0
        self._last_progress = time.monotonic()
        rows: list[list[Sample | None]] = [[None] * r.k for r in requests]
        failures: list[SampleFailure] = []
        units = self._plan(requests, rows, parse)
        if units and self.max_cost is not None:
            self._check_price_known()
        self._probe = asyncio.Lock()
        self._start_progress()
        queue = _UnitQueue(units)
        helpers: list[asyncio.Task[None]] = []
        try:
            if queue.pending:
                n_workers = min(queue.pending, self.options.max_concurrency)
                if self.store is not None:
                    helpers.append(asyncio.ensure_future(self._heartbeat()))
                    # samples leased to a batch of this store arrive when it is collected
                    from .batch import follow_batches

                    helpers.append(asyncio.ensure_future(follow_batches(self, parse)))
                helpers.append(asyncio.ensure_future(self._watch()))
                workers = [asyncio.ensure_future(self._worker(queue, requests, rows, parse,
                                                              failures))
                           for _ in range(n_workers)]
                try:
                    await asyncio.gather(*workers)
                except BaseException:
                    for w in workers:
                        w.cancel()
                    await asyncio.gather(*workers, return_exceptions=True)
                    raise
        finally:
            for h in helpers:
                h.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            if self.store is not None:
                try:
                    self.store.release(self.holder)
                except EnsembleError:
                    pass
            self.stats.wall_time_s += time.perf_counter() - t0
            self._stop_progress()
        self.stats.failed += sum(len(f.indices) for f in failures)
        stopped = self._stop
        if stopped is not None:
            stopped.failures = list(failures)
        for ri, row in enumerate(rows):  # never fewer samples than asked, silently
            if any(s is None for s in row) and not any(f.request == ri for f in failures) \
                    and stopped is None:
                raise EnsembleError(f"{self.model}: the sampler got fewer samples than asked; "
                                    "this is a bug, please report it")
        return SampleResult(rows=rows, failures=failures, stopped=stopped)

    async def run_adaptive(self, requests: Sequence[SampleRequest], spec: Any, *,
                           parser: Parser | None = None, history: Any = None) -> SampleResult:
        """Draw each request's samples adaptively: a `StopSpec` (ensemble.stopping) decides,
        per question, after each batch of answers, whether to stop or how many more to draw,
        up to `spec.max_n` (each request's `k` is ignored).

        Every question first gets `spec.first_draw()` samples (the pilot; the bayes rule fits
        its prior across questions from it, together with `history`: (top, second) pilot
        counts of earlier questions, e.g. an Ensemble's). Then all open questions proceed
        concurrently within the endpoint's limits, each drawing its next batch (the rule's
        lossless k, through the provider's `n`) as soon as its answers arrive. Sample i of a
        question is the same stored sample as in a fixed run: samples already stored cost no
        request. Rows hold the samples drawn, indices 0..m-1 (m varies by question).
        """
        from dataclasses import replace

        if self.mode == "batch":
            raise InputError("adaptive sampling needs answers as they arrive; batch mode returns "
                             "them hours later: sample online, or score --adaptive on a fixed "
                             "batch run (eval --adaptive replays the drawn samples)")

        from ..stopping import answer_counts

        parse = parser or _default_parser
        first = spec.first_draw()
        pilot_reqs = [replace(r, k=first) for r in requests]
        pilot = await self.run(pilot_reqs, parser=parse)
        if pilot.stopped is not None or not requests:
            return pilot
        failed = {f.request for f in pilot.failures}
        answers = [[s.answer for s in row if s is not None] for row in pilot.rows]
        if spec.needs_pilot:
            counts = [answer_counts(a) for i, a in enumerate(answers) if i not in failed]
            tops = [c[1] for c in counts] + [c[0] for c in (history or [])]
            seconds = [c[2] for c in counts] + [c[1] for c in (history or [])]
            rule = spec.rule_from_counts(tops, seconds)
        else:
            rule = spec.rule()
        self.last_rule = rule
        rows: list[list[Sample | None]] = [
            list(pilot.rows[i]) + [None] * max(0, spec.max_n - len(pilot.rows[i]))
            for i in range(len(requests))]
        failures = list(pilot.failures)
        t0 = time.perf_counter()
        order = iter([i for i in range(len(requests)) if i not in failed])

        async def worker() -> None:
            for ri in order:
                if self._stop is not None:
                    return
                req = replace(requests[ri], k=spec.max_n)
                key = self.key_of(req)
                row = rows[ri]
                drawn = first
                while self._stop is None:
                    k = rule.more([s.answer for s in row[:drawn] if s is not None])
                    k = min(k, spec.max_n - drawn)
                    if k <= 0:
                        break
                    idx = list(range(drawn, drawn + k))
                    self.stats.samples_total += k
                    if not await self._draw_indices(ri, req, key, idx, row, parse, failures):
                        break
                    drawn += k

        self._start_progress()
        try:
            n_workers = max(1, min(len(requests), self.options.max_concurrency))
            await asyncio.gather(*(worker() for _ in range(n_workers)))
        finally:
            self.stats.wall_time_s += time.perf_counter() - t0
            self._stop_progress()
        out = [[s for s in row if s is not None] for row in rows]
        for ri, row in enumerate(rows):  # drawn samples form a prefix 0..m-1
            m = len(out[ri])
            if any(s is None for s in row[:m]) and not any(f.request == ri for f in failures):
                raise EnsembleError(f"{self.model}: adaptive sampling left a gap in the "
                                    "samples; this is a bug, please report it")
        return SampleResult(rows=out, failures=failures, stopped=self._stop)  # type: ignore

    async def _draw_indices(self, ri: int, req: SampleRequest, key: str, indices: list[int],
                            row: list[Sample | None], parse: Parser,
                            failures: list[SampleFailure]) -> bool:
        """Fill row[i] for i in `indices`: from the store, by waiting for another run's lease,
        or by requesting them. False when they failed for good (recorded in `failures`)."""
        unit = _Unit(ri, key, list(indices))
        while True:
            todo = list(unit.indices)
            if self.store is not None and not self.refresh:
                waiting = _UnitQueue([])
                todo = self._claim(unit, _RowView(ri, row), parse, waiting)  # type: ignore
                if waiting._deferred:  # another run is drawing some: wait for them
                    busy = waiting._deferred[0]
                    if todo:
                        ok = await self._request_unit(ri, req, key, todo, row, parse, failures,
                                                      unit)
                        if not ok:
                            return False
                    await asyncio.sleep(_BUSY_POLL)
                    unit = _Unit(ri, key, busy.indices)
                    continue
            elif self.store is not None:
                self.store.claim([(key, todo)], holder=self.holder, ttl=LEASE_TTL)
            if not todo:
                return True
            return await self._request_unit(ri, req, key, todo, row, parse, failures, unit)

    async def _request_unit(self, ri: int, req: SampleRequest, key: str, todo: list[int],
                            row: list[Sample | None], parse: Parser,
                            failures: list[SampleFailure], unit: _Unit) -> bool:
        try:
            await self._run_unit(req, key, todo, row, parse)
            return True
        except (ProviderError, _Stopped) as exc:
            self._fail(unit, req, todo, row, exc, failures)
            return False

    def estimate(self, requests: Sequence[SampleRequest]) -> RunEstimate:
        """What `run` would request, and cost, without sending anything (a dry run).

        Reads the store for what is there; counts the requests the missing samples take (the
        provider's `n` where it is known to work: `max_n` samples per request, else one each);
        counts prompt tokens with litellm's tokenizer, bounds completion tokens by `max_tokens`;
        prices both from `price_per_1k` or litellm's price table (None: unknown, with why).
        """
        n_ok = self._n_ok is not False
        stored = missing = n_requests = 0
        prompt_tokens = 0
        completion_max: int | None = 0
        for req in requests:
            key = self.key_of(req)
            have = (self.store.get(key, range(req.k)) if self.store is not None
                    and not self.refresh else {})
            miss = [i for i in range(req.k) if i not in have]
            stored += len(have)
            missing += len(miss)
            per = self.max_n if n_ok else 1
            reqs = sum(-(-len(run) // per) for run in _contiguous(miss))
            n_requests += reqs
            if reqs:
                prompt_tokens += reqs * _count_tokens(self.model, req.messages)
            if completion_max is not None:
                completion_max = (None if req.params.max_tokens is None
                                  else completion_max + len(miss) * req.params.max_tokens)
        cost, why = _price(self.model, self.options.price_per_1k, prompt_tokens, completion_max)
        return RunEstimate(samples_stored=stored, samples_missing=missing, requests=n_requests,
                           prompt_tokens=prompt_tokens, completion_tokens_max=completion_max,
                           cost_usd_max=cost, price=why)

    def _plan(self, requests: Sequence[SampleRequest], rows: list[list[Sample | None]],
              parse: Parser) -> list[_Unit]:
        """Read what the store holds; return the units of missing samples."""
        units: list[_Unit] = []
        for ri, req in enumerate(requests):
            key = self.key_of(req)
            have: dict[int, Sample] = {}
            if self.store is not None and not self.refresh:
                have = self.store.get(key, range(req.k), parser=parse)
            for i, s in have.items():
                rows[ri][i] = s
                if not s.valid:
                    self.stats.invalid += 1
                if s.cost_usd is None:
                    self.stats.stored_cost_usd = None
                elif self.stats.stored_cost_usd is not None:
                    self.stats.stored_cost_usd += s.cost_usd
            self.stats.samples_total += req.k
            self.stats.samples_cached += len(have)
            self.stats.samples_done += len(have)
            missing = [i for i in range(req.k) if i not in have]
            per_unit = 1 if self._n_ok is False else self.max_n
            for run in _contiguous(missing):
                for start in range(0, len(run), per_unit):
                    units.append(_Unit(ri, key, run[start:start + per_unit]))
        return units

    async def _worker(self, queue: _UnitQueue, requests: Sequence[SampleRequest],
                      rows: list[list[Sample | None]], parse: Parser,
                      failures: list[SampleFailure]) -> None:
        while self._stop is None:
            unit = await queue.next()
            if unit is None:
                return
            req = requests[unit.ri]
            todo = unit.indices
            if self.store is not None and not self.refresh:
                todo = self._claim(unit, rows, parse, queue)
                if not todo:
                    queue.done(unit)
                    continue
            elif self.store is not None:
                self.store.claim([(unit.key, todo)], holder=self.holder, ttl=LEASE_TTL)
            try:
                await self._run_unit(req, unit.key, todo, rows[unit.ri], parse)
            except (ProviderError, _Stopped) as exc:
                self._fail(unit, req, todo, rows[unit.ri], exc, failures)
            queue.done(unit)

    def _claim(self, unit: _Unit, rows: list[list[Sample | None]], parse: Parser,
               queue: _UnitQueue) -> list[int]:
        """Lease the unit's samples; read those another run has stored meanwhile; defer those
        another live run is drawing. Returns the indices to request now."""
        if self.store is None:  # no store, no leases: everything is to request
            return list(unit.indices)
        claim = self.store.claim([(unit.key, unit.indices)], holder=self.holder,
                                 ttl=LEASE_TTL)[0]
        if claim.done:
            self._take_stored(rows[unit.ri],
                              self.store.get(unit.key, claim.done, parser=parse))
        if claim.busy:
            queue.defer(_Unit(unit.ri, unit.key, claim.busy,
                              not_before=time.monotonic() + _BUSY_POLL))
        return claim.claimed

    def _take_stored(self, row: list[Sample | None], got: dict[int, Sample]) -> None:
        """Fill `row` with samples another run stored meanwhile."""
        for i, s in got.items():
            if row[i] is None:
                row[i] = s
                self.stats.samples_done += 1
                self.stats.samples_shared += 1
                if not s.valid:
                    self.stats.invalid += 1
        self._advance(len(got))

    def _stored_meanwhile(self, key: str, indices: list[int], parse: Parser
                          ) -> dict[int, Sample]:
        """Samples among `indices` that another run stored since this one leased them (its
        lease ran out while this process waited, was suspended or retried); leases the rest
        again."""
        if self.store is None or self.refresh:
            return {}
        claim = self.store.claim([(key, indices)], holder=self.holder, ttl=LEASE_TTL)[0]
        return self.store.get(key, claim.done, parser=parse) if claim.done else {}

    def _fail(self, unit: _Unit, req: SampleRequest, todo: list[int],
              row: list[Sample | None], exc: ProviderError | _Stopped,
              failures: list[SampleFailure]) -> None:
        missing = tuple(i for i in todo if row[i] is None)
        if self.store is not None:
            try:
                self.store.release(self.holder, [(unit.key, i) for i in missing])
            except EnsembleError:
                pass
        if not missing or isinstance(exc, (_Stopped, _CostCap)):
            return  # not attempted: the run was stopped (the stop itself says why)
        failures.append(SampleFailure(
            request=unit.ri, tag=req.tag, key=unit.key, indices=missing,
            error=type(exc).__name__, status=exc.status, reason=exc.reason,
            message=" ".join(str(exc).split()), exception=exc))
        if not isinstance(exc, ContentRefusedError):
            # a refusal is the prompt's, not the endpoint's: a rerun of refused prompts, all
            # refused again, must not read as a systemic failure
            self._consecutive_failures += 1
        if self._stop is not None:
            return
        if exc.systemic:
            self._stop = RunStopped(f"{exc}; stopped new requests", cause=exc)
        elif self._consecutive_failures >= self.options.max_failures:
            self._stop = RunStopped(
                f"{self._consecutive_failures} requests in a row failed for good (last: {exc}); "
                "stopped new requests so as not to spend more (--max-failures "
                f"{self.options.max_failures})", cause=exc)

    async def _run_unit(self, req: SampleRequest, key: str, indices: list[int],
                        row: list[Sample | None], parse: Parser) -> None:
        todo = list(indices)
        while todo:
            if self._stop is not None:
                raise _Stopped()
            if self._n_ok is False and len(todo) > 1:
                # n unsupported: one request per sample, concurrently (bounded by the limiter)
                results = await asyncio.gather(
                    *(self._run_unit(req, key, [i], row, parse) for i in todo),
                    return_exceptions=True)
                errors = [r for r in results if isinstance(r, BaseException)]
                if errors:
                    raise errors[0]
                return
            if self._n_ok is None and len(todo) > 1 and self._probe is not None \
                    and self._probe.locked():
                # another unit is finding out whether the provider honours n: wait for it
                # rather than sending a burst of requests that may all be rejected
                async with self._probe:
                    pass
            use_n = self._n_ok is not False and len(todo) > 1
            batch = todo if use_n else todo[:1]
            recheck = functools.partial(self._stored_meanwhile, key, batch, parse)
            try:
                if use_n and self._n_ok is None and self._probe is not None:
                    async with self._probe:
                        if self._n_ok is False:
                            continue
                        comp = await self._request(req, n=len(batch), start=batch[0],
                                                   recheck=recheck)
                        self._learn_n(len(batch), len(comp.choices))
                else:
                    comp = await self._request(req, n=len(batch), start=batch[0],
                                               recheck=recheck)
                    if len(batch) > 1:
                        self._learn_n(len(batch), len(comp.choices))
            except _Stored as st:  # another run stored them while this one waited
                self._take_stored(row, st.samples)
                todo = [i for i in todo if row[i] is None]
                continue
            except ProviderError as exc:
                from .client import NUnsupported

                if isinstance(exc, NUnsupported):
                    if self._n_ok is not False:
                        self._n_ok = False
                        self._note(f"{self.model} rejects n > 1: one request per sample")
                    continue
                raise
            got = list(comp.choices[:len(batch)])
            if 1 < len(got) < len(batch):
                self._note(f"{self.model} returned fewer choices than n; requested the rest")
            self._store_reply(req, key, batch[:len(got)], comp, got, row, parse)
            todo = batch[len(got):] + todo[len(batch):]

    def _store_reply(self, req: SampleRequest, key: str, indices: list[int], comp: Completion,
                     got: list[Any], row: list[Sample | None], parse: Parser) -> None:
        share = max(1, len(got))
        # the reply's completion tokens split over its choices so that they sum to the reply's
        each, extra = divmod(comp.completion_tokens or 0, share)
        samples = []
        for j, ch in enumerate(got):
            samples.append(Sample(
                key=key, index=indices[j], text=ch.text, answer=self._parse(parse, ch.text),
                finish_reason=ch.finish_reason,
                prompt_tokens=comp.prompt_tokens if j == 0 else 0,
                completion_tokens=(None if comp.completion_tokens is None
                                   else each + (j < extra)),
                cost_usd=None if comp.cost_usd is None else comp.cost_usd / share,
                latency_s=comp.latency_s, logprobs=ch.logprobs))
        if self.store is not None:
            meta = _request_meta(self.model, req, self.provider.identity)
            self.store.put_many(samples, model=self.model, request=meta, holder=self.holder)
        for s in samples:
            row[s.index] = s
            if not s.valid:
                self.stats.invalid += 1
        self.stats.samples_done += len(samples)
        self._consecutive_failures = 0
        self._last_progress = time.monotonic()
        self._advance(len(samples))

    def _learn_n(self, asked: int, got: int) -> None:
        """What one n > 1 reply says about the provider's support for n."""
        if got >= 2:
            self._n_ok = True
        elif got == 1 and self._n_ok is None:
            # n silently ignored (one choice for n > 1): separate requests from now on
            self._n_ok = False
            self._note(f"{self.model} answered n = {asked} with one choice: it ignores n; "
                       "one request per sample")

    def _note(self, msg: str) -> None:
        if msg not in self.stats.notes:
            self.stats.notes.append(msg)

    def _parse(self, parse: Parser, text: str | None) -> str | None:
        if not text:
            return None
        try:
            return parse(text)
        except Exception as exc:  # noqa: BLE001 - a parser bug makes an invalid answer, not a crash
            self._note(f"the answer parser raised {type(exc).__name__}; answer counted invalid")
            return None

    # -- one request, with the retry policy --------------------------------------------------
    async def _request(self, req: SampleRequest, *, n: int, start: int,
                       recheck: Callable[[], dict[int, Sample]] | None = None) -> Completion:
        """One request with the retry policy. `recheck` reads the samples another run stored
        meanwhile; it is asked before a retry and before a request sent long after its lease
        was taken (a suspended process, a long queue), so nothing stored is paid twice."""
        limiter = self._limiter
        t_enter = time.monotonic()
        if limiter is None:  # pragma: no cover - _resolve sets it
            raise EnsembleError("the sampler was not started; use `async with Sampler(...)`")
        headers = {**self.extra_headers, INDEX_HEADER: str(start)}
        o = self.options
        t_first: float | None = None
        attempts = 0
        backoff: Any = None
        last: ProviderError | None = None
        while True:
            await self._check_cost()
            if last is None or t_first is None:
                ticket = await limiter.acquire()
            else:  # a retry waits for the endpoint's cool-down within the sample's time budget
                left = o.max_retry_time - (time.monotonic() - t_first)
                try:
                    ticket = await asyncio.wait_for(limiter.acquire(), max(0.0, left))
                except asyncio.TimeoutError:
                    raise self._gave_up(last, attempts, time.monotonic() - t_first) from None
            if self._stop is not None:
                limiter.release(ticket, outcome="unused")
                raise _Stopped()
            now = time.monotonic()
            if recheck is not None and (last is not None or now - t_enter > LEASE_TTL / 2):
                got = recheck()
                if got:
                    limiter.release(ticket, outcome="unused")
                    raise _Stored(got)
            if t_first is None:
                t_first = now
            self.stats.requests += 1
            self._in_flight += 1
            try:
                comp = await self.provider.complete(req.messages, req.params, n=n,
                                                    headers=headers, timeout=o.timeout)
            except ProviderError as exc:
                last = exc
                self._in_flight -= 1
                self.stats.errors += 1
                limiter.release(ticket, outcome="backpressure" if exc.backpressure else "error",
                                retry_after=exc.retry_after)
                if exc.backpressure:
                    self.stats.rate_limited += 1
                elif not exc.retryable:
                    raise
                else:
                    attempts += 1
                elapsed = time.monotonic() - t_first
                cap = min(o.max_attempts, exc.attempts_cap or o.max_attempts)
                if exc.attempts_cap == 1:
                    raise  # retrying cannot help (a refused loopback port, TLS): say it as is
                if attempts >= cap or elapsed >= o.max_retry_time:
                    raise self._gave_up(exc, attempts, elapsed) from None
                wait = exc.retry_after
                if wait is not None and wait > o.max_retry_time - elapsed:
                    # the provider asks for more than the sample's time budget has left:
                    # waiting part of it would only fail later
                    raise self._gave_up(exc, attempts, elapsed, asked=wait) from None
                self.stats.retries += 1
                self._retrying += 1
                try:
                    if not exc.backpressure:
                        if backoff is None:
                            from tenacity import wait_random_exponential

                            backoff = wait_random_exponential(multiplier=0.25, max=20.0)
                        delay = backoff(_RetryState(attempts))
                        await asyncio.sleep(min(delay, max(0.0, o.max_retry_time - elapsed)))
                    # backpressure: the limiter's shared cool-down holds the next attempt
                finally:
                    self._retrying -= 1
                continue
            except BaseException:
                self._in_flight -= 1
                limiter.release(ticket, outcome="error")
                raise
            self._in_flight -= 1
            raw, comp = comp, checked(comp)  # the one door replies come in by
            if comp.cost_usd is None and raw.cost_usd is not None:
                self._bad_usage = (f"{self.api_base or self.model} reported token usage "
                                   f"that cannot be true ({raw.prompt_tokens} prompt, "
                                   f"{raw.completion_tokens} completion tokens, cost "
                                   f"{raw.cost_usd!r}); counted as unknown, not as a credit")
                self._note(self._bad_usage)
            tokens = (comp.prompt_tokens or 0) + (comp.completion_tokens or 0)
            limiter.release(ticket, outcome="ok", tokens=tokens or None)
            self._account(comp)
            return comp

    def _gave_up(self, exc: ProviderError, attempts: int, elapsed: float, *,
                 asked: float | None = None) -> ProviderError:
        budget = self.options.max_retry_time
        if asked is not None:
            what = (f"{elapsed:.0f} s: the provider asked to wait {asked:g} s (Retry-After), "
                    f"more than the {max(0.0, budget - elapsed):.0f} s left of --max-retry-time "
                    f"{budget:g}; retry later, or raise --max-retry-time to wait it out")
        elif attempts:
            what = f"{attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.0f} s"
        else:
            what = f"{elapsed:.0f} s of rate limiting (--max-retry-time {budget:g})"
        err = RetryBudgetExceeded(f"{exc}; gave up after {what}", model=self.model,
                                  provider=exc.provider, status=exc.status,
                                  retry_after=exc.retry_after, api_base=exc.api_base,
                                  reason=exc.reason)
        err.systemic = exc.systemic  # an unreachable endpoint stays systemic
        return err

    async def _check_cost(self) -> None:
        """Stop new requests when spent plus in flight would pass `max_cost`. Until the first
        price is known, one request at a time, so the cap is passed by at most one request."""
        if self.max_cost is None:
            return
        s = self.stats
        while self._paid == 0 and self._in_flight > 0:
            await asyncio.sleep(0.01)
        if s.cost_usd is None:
            why = (self._bad_usage if self._bad_usage is not None else
                   f"the price of {self.model} is unknown")
            self._stop_for_cost(f"{why}, so --max-cost cannot be enforced; give the price with "
                                "--price-per-1k-tokens IN,OUT, or drop --max-cost")
        per = (s.cost_usd or 0.0) / self._paid if self._paid > 0 else 0.0
        if s.cost_usd is not None and s.cost_usd + per * (self._in_flight + 1) > self.max_cost:
            self._stop_for_cost(self._cost_stop_message(s.cost_usd, per))

    def _cost_stop_message(self, spent: float, per: float) -> str:
        """Why the cap stopped the run where it did: the estimate and the reserve."""
        flying = self._in_flight
        reserve = per * flying
        again = ("rerun with a higher cap to continue from the store" if self.store is not None
                 else "rerun with a higher cap (without --store the samples drawn are not kept)")
        return (f"spent ${spent:.4f} of the --max-cost ${self.max_cost:g}; each request costs "
                f"about ${per:.4f} (the average of the {self._paid} replies so far), "
                f"{flying} requests in flight hold ${reserve:.4f} of the cap, and one more "
                f"request would pass it, so no new request was sent (lower --max-concurrency "
                f"to reserve less); {again}")

    def _check_price_known(self) -> None:
        """Refuse `max_cost` before the first request when no price is known for the model
        (litellm prices replies from its table or from `price_per_1k`)."""
        from .client import LiteLLMProvider
        from .openai_sdk import OpenAIProvider

        if self.options.price_per_1k is not None or not isinstance(
                self.provider, (LiteLLMProvider, OpenAIProvider)):
            return
        if isinstance(self.provider, OpenAIProvider):  # the price table without litellm
            from .prices import token_price

            if token_price(self.provider.target) is None:
                raise InputError(
                    f"--max-cost cannot be enforced: the price of {self.model} is unknown: "
                    f"litellm's price table has no price for {self.provider.target}; give one "
                    "with --price-per-1k-tokens IN,OUT; nothing was sent")
            return
        cost, why = _price(self.provider.target, None, 0, 0)
        if cost is None:
            raise InputError(f"--max-cost cannot be enforced: the price of {self.model} is "
                             f"{why}; nothing was sent")

    def _stop_for_cost(self, message: str) -> None:
        if self._stop is None:
            self._stop = RunStopped(f"cost cap: {message}")
        raise _CostCap(message)

    def _account(self, comp: Completion) -> None:
        self._paid += 1
        self.stats.prompt_tokens += comp.prompt_tokens or 0
        self.stats.completion_tokens += comp.completion_tokens or 0
        if comp.cost_usd is None:
            self.stats.cost_unknown_requests += 1
            self.stats.cost_usd = None
        elif self.stats.cost_usd is not None:
            self.stats.cost_usd += comp.cost_usd

    # -- background: leases and "waiting" lines ----------------------------------------------
    async def _heartbeat(self) -> None:
        while self.store is not None:
            await asyncio.sleep(LEASE_TTL / 3)
            try:
                self.store.renew(self.holder, LEASE_TTL)
            except EnsembleError as exc:  # pragma: no cover - a store gone bad
                log.warning("%s", exc)

    async def _watch(self) -> None:
        """Say what the run waits for when no sample arrived for `status_every` seconds."""
        while True:
            await asyncio.sleep(self.status_every)
            idle = time.monotonic() - self._last_progress
            if idle < self.status_every:
                continue
            self._say(self.status_line(idle))

    def status_line(self, idle: float | None = None) -> str:
        """One line on what the run is doing, in the user's terms."""
        s = self.stats
        parts = [f"{s.samples_done}/{s.samples_total} samples"]
        if idle is not None:
            parts.append(f"none for {idle:.0f} s")
        lim = self._limiter.status() if self._limiter is not None else None
        if lim is not None and lim.cooldown_s > 0:
            parts.append(f"cooling down {lim.cooldown_s:.1f} s after the provider's rate limit")
        if self._in_flight:
            parts.append(f"{self._in_flight} requests waiting for {self.api_base or self.model}"
                         f" (timeout {self.options.timeout:g} s)")
        if lim is not None and lim.waiting:
            parts.append(f"{lim.waiting} queued for the endpoint's limit")
        if self._retrying:
            parts.append(f"{self._retrying} retrying")
        if s.rate_limited:
            parts.append(f"{s.rate_limited} rate-limit replies so far")
        return "waiting: " + "; ".join(parts)

    def _say(self, line: str) -> None:
        from ..secrets import redact

        line = redact(line)
        if self.on_status is not None:
            self.on_status(line)
        else:
            log.info("%s", line)

    # -- progress ----------------------------------------------------------------------------
    def _start_progress(self) -> None:
        # a progress bar is for people: none when stderr is a pipe or a file
        if not self.progress or self._bar is not None or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("[bold]sampling[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TextColumn("{task.fields[info]}"),
            TimeRemainingColumn(), console=Console(stderr=True), transient=False)
        self._bar.start()
        self._task_id = self._bar.add_task("sampling", total=self.stats.samples_total,
                                           completed=self.stats.samples_done, rate="",
                                           info="")
        self._t_start = time.perf_counter()
        self._done_start = self.stats.samples_done
        self._bar_at = 0.0

    def _advance(self, k: int) -> None:
        if self._bar is None:
            return
        now = time.perf_counter()
        self._bar.update(self._task_id, advance=k)
        if now - self._bar_at < 0.2:  # the text fields are costly: refresh them 5 times a second
            return
        self._bar_at = now
        s = self.stats
        el = max(1e-9, now - self._t_start)
        cost = "cost ?" if s.cost_usd is None else f"${s.cost_usd:.4f}"
        lim = self._limiter.status() if self._limiter is not None else None
        cool = f" cooling {lim.cooldown_s:.0f}s" if lim is not None and lim.cooldown_s > 0 else ""
        self._bar.update(self._task_id,
                         rate=f"{(s.samples_done - self._done_start) / el:.1f}/s",
                         info=(f"retries {s.retries} rate-limited {s.rate_limited} invalid "
                               f"{s.invalid} {cost}{cool}"))

    def _stop_progress(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class _RowView:
    """A stand-in for the run's list of rows that holds one row (at its request index)."""

    def __init__(self, ri: int, row: list[Sample | None]) -> None:
        self._ri = ri
        self._row = row

    def __getitem__(self, i: int) -> list[Sample | None]:
        if i != self._ri:  # pragma: no cover - internal misuse
            raise IndexError(i)
        return self._row


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


class _CostCap(RetryBudgetExceeded):
    """Internal: the cost cap refused a request (the run's `RunStopped` says why)."""

    systemic = True


class _Stored(Exception):
    """Internal: another run stored (some of) these samples before this request was sent."""

    def __init__(self, samples: dict[int, Sample]) -> None:
        super().__init__(f"{len(samples)} samples stored meanwhile")
        self.samples = samples


class _Stopped(Exception):
    """Internal: the run was stopped before this request was sent."""


class _RetryState:
    """The piece of tenacity's RetryCallState its wait functions read."""

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number


class _UnitQueue:
    """Units to request, handed to workers one at a time; units whose samples another process
    is drawing wait in `deferred` until their next check."""

    def __init__(self, units: list[_Unit]) -> None:
        self._units: Iterator[_Unit] = iter(units)
        self._left = len(units)
        self.pending = len(units)
        self._deferred: collections.deque[_Unit] = collections.deque()
        self._active = 0

    async def next(self) -> _Unit | None:
        while True:
            if self._deferred and self._deferred[0].not_before <= time.monotonic():
                self._active += 1
                return self._deferred.popleft()
            if self._left:
                self._left -= 1
                self._active += 1
                return next(self._units)
            if not self._deferred:
                return None
            await asyncio.sleep(max(0.0, self._deferred[0].not_before - time.monotonic()))

    def defer(self, unit: _Unit) -> None:
        self._deferred.append(unit)

    def done(self, unit: _Unit) -> None:
        self._active -= 1


def raise_for_failures(result: SampleResult, n_requests: int, *, stored: bool = True) -> None:
    """Raise what `Sampler.sample` raises for a result with failures (see there). `stored`:
    whether a store keeps the samples drawn (the message says so only then)."""
    if result.stopped is not None:
        cause = result.stopped.cause
        if isinstance(cause, ProviderError) and cause.systemic:
            raise cause  # e.g. AuthenticationError: the type says what to fix
        raise result.stopped
    if not result.failures:
        return
    failed = {f.request for f in result.failures}
    first = result.failures[0].exception
    if len(failed) == 1 and first is not None:
        raise first
    raise SamplingFailed(_failure_summary(result.failures, n_requests, stored=stored),
                         failures=list(result.failures))


@dataclass(frozen=True)
class RunEstimate:
    """A dry run's count: what would be requested, and at most what it would cost."""

    samples_stored: int
    samples_missing: int
    requests: int
    prompt_tokens: int
    completion_tokens_max: int | None  # None: no max_tokens, no bound
    cost_usd_max: float | None  # None: unknown (see `price`)
    price: str  # where the price comes from, or why it is unknown

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": True, "samples_stored": self.samples_stored,
                "samples_missing": self.samples_missing, "requests": self.requests,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens_max": self.completion_tokens_max,
                "cost_usd_max": self.cost_usd_max, "price": self.price}


def _count_tokens(model: str, messages: Sequence[Any]) -> int:
    from .client import litellm

    try:
        return int(litellm().token_counter(model=model, messages=list(messages)))
    except Exception:  # noqa: BLE001 - a model litellm cannot tokenise: about 4 chars a token
        return sum(len(str(m.get("content", ""))) for m in messages) // 4 + 4


def _price(model: str, per_1k: tuple[float, float] | None, prompt: int,
           completion_max: int | None) -> tuple[float | None, str]:
    if per_1k is not None:
        src = f"--price-per-1k-tokens {per_1k[0]:g},{per_1k[1]:g}"
        pin, pout = per_1k[0] / 1000.0, per_1k[1] / 1000.0
    else:
        from .client import litellm

        try:
            info = litellm().get_model_info(model)
            pin = float(info.get("input_cost_per_token") or 0.0)
            pout = float(info.get("output_cost_per_token") or 0.0)
        except Exception:  # noqa: BLE001
            pin = pout = 0.0
        if not (pin or pout):
            return None, (f"unknown: litellm's price table has no price for {model}; give one "
                          "with --price-per-1k-tokens IN,OUT")
        src = f"litellm's price table ({pin * 1e6:g} / {pout * 1e6:g} USD per 1M tokens)"
    if completion_max is None:
        return None, f"{src}; completion tokens unbounded (no --max-tokens)"
    return prompt * pin + completion_max * pout, src


def _failure_summary(failures: Sequence[SampleFailure], n_requests: int, *,
                     stored: bool = True) -> str:
    """One line: "2 of 73 prompts failed (2 x 400 content policy): <first message>"."""
    reqs = {f.request for f in failures}
    reasons = collections.Counter(f.reason for f in failures)
    why = ", ".join(f"{c} x {r}" for r, c in reasons.most_common(3))
    if not stored:
        return (f"{len(reqs)} of {n_requests} prompts failed ({why}): {failures[0].message}; "
                "no store keeps the samples drawn (give one to resume where this stopped)")
    rest = "; the other samples are stored" if len(reqs) < n_requests else ""
    return (f"{len(reqs)} of {n_requests} prompts failed ({why}): {failures[0].message}{rest}; "
            "rerun to retry the failed ones")


_SECRET_NAME = re.compile(r"(^|_)(api_?key|key|secret|password|authorization|access_token|"
                          r"auth_token|bearer)$", re.IGNORECASE)


def _request_meta(model: str, req: SampleRequest, endpoint: str | None = None
                  ) -> dict[str, Any]:
    """What the store keeps of a request: endpoint, model, messages and parameters, never
    credentials (an endpoint identity carries none: see `normalise_api_base`)."""
    params = {k: v for k, v in req.params.as_dict().items() if not _SECRET_NAME.search(k)}
    meta: dict[str, Any] = {"model": model, "messages": list(req.messages), "params": params}
    if endpoint is not None:
        meta["endpoint"] = endpoint
    return meta


def _contiguous(indices: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs
