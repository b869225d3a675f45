"""The async sampler: k samples per (prompt, parameters), concurrent, throttled, retried, durable.

- Concurrency is bounded per provider endpoint (samplers on one endpoint in one event loop share
  the bound) and adapts: halved on 429, regrown on success. An optional requests-per-minute
  throttle uses asyncio-throttle. litellm's HTTP connection pool is sized to the concurrency so
  that it never caps it.
- The provider's `n` carries several samples in one request where it works; the number of
  choices returned is checked, missing ones are requested again, and a provider that rejects
  `n` is remembered and served by separate requests. Never fewer samples than asked, silently.
- Retries (tenacity): 429, 5xx, timeouts, dropped connections and malformed replies, with
  exponential backoff and jitter, at least the provider's Retry-After, bounded in attempts and
  in total time. 400/401/403/404 fail at once with a message that says what to do.
- Each sample is written to the store as it arrives; a rerun reads them back and requests only
  what is missing. Each request carries its first sample index in the `x-ensemble-sample-index`
  header, which the simulated server uses to make draws reproducible across interruptions.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Sequence
from typing import Any

from ..errors import (
    EnsembleError,
    InputError,
    ProviderError,
    RateLimitError,
    RetryBudgetExceeded,
)
from .client import NUnsupported, complete, pool_capacity, provider_of, size_http_pool
from .limiter import ProviderGate, gate_for
from .parsing import extract_answer
from .store import SampleStore
from .types import JobStats, Parser, Sample, SampleRequest, request_key

__all__ = ["INDEX_HEADER", "Sampler"]

INDEX_HEADER = "x-ensemble-sample-index"


def _default_parser(text: str) -> str | None:
    return extract_answer(text)


class Sampler:
    """Draws samples from one model. Use `async with Sampler(...) as s: await s.sample(reqs)`.

    `store`: a path or SampleStore for durable, resumable sampling; None keeps nothing.
    `use_n`: "auto" tries the provider's `n` and falls back when it is rejected; True/False force.
    `refresh`: re-draw samples even if stored (and overwrite them).
    """

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 store: SampleStore | str | os.PathLike[str] | None = None,
                 max_concurrency: int = 16, rpm: float | None = None, timeout: float = 60.0,
                 max_attempts: int = 6, max_retry_time: float = 300.0,
                 use_n: bool | str = "auto", max_n: int = 16, refresh: bool = False,
                 progress: bool = False, extra_headers: dict[str, str] | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError("model must be a non-empty string such as openai/gpt-4o-mini")
        if max_concurrency < 1:
            raise InputError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if max_attempts < 1:
            raise InputError(f"max_attempts must be >= 1, got {max_attempts}")
        if rpm is not None and rpm <= 0:
            raise InputError(f"rpm must be > 0, got {rpm}")
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.timeout = float(timeout)
        self.max_attempts = int(max_attempts)
        self.max_retry_time = float(max_retry_time)
        self.max_n = max(1, int(max_n))
        self.refresh = refresh
        self.progress = progress
        self.extra_headers = dict(extra_headers or {})
        self._n_ok: bool | None = None if use_n == "auto" else bool(use_n)
        self._own_store = not isinstance(store, SampleStore) and store is not None
        self._store_path = store if self._own_store else None
        self.store: SampleStore | None = (SampleStore(store) if self._own_store
                                          else store)  # type: ignore[assignment]
        self.stats = JobStats()
        self.max_concurrency = int(max_concurrency)
        self._gate: ProviderGate | None = None
        self._gate_loop: Any = None
        self._probe: asyncio.Lock | None = None
        self._rpm = rpm
        self._endpoint: Any = None
        self._target_model = model
        self._target_base = api_base
        self._bar: Any = None
        self._task_id: Any = None

    def __repr__(self) -> str:  # never show the key
        return f"Sampler(model={self.model!r}, api_base={self.api_base!r})"

    # -- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> Sampler:
        await self._resolve()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._endpoint is not None:
            from .. import local

            endpoint, self._endpoint = self._endpoint, None
            await asyncio.to_thread(local.release, endpoint)
        if self._own_store and self.store is not None:
            self.store.close()
            self.store = None

    async def _resolve(self) -> None:
        if self._own_store and self.store is None:  # reused after aclose()
            self.store = SampleStore(self._store_path)  # type: ignore[arg-type]
        if self._endpoint is None and (self.model == "local" or self.model.startswith("local/")):
            from .. import local

            self._endpoint = await asyncio.to_thread(local.acquire, self.model)
            self._target_model = self._endpoint.model
            self._target_base = self._endpoint.api_base
        loop = asyncio.get_running_loop()
        if self._gate is None or self._gate_loop is not loop:
            # gates hold asyncio primitives of one loop: sample_sync runs a new loop each time
            self._gate_loop = loop
            size_http_pool(self.max_concurrency)
            cap = pool_capacity()
            if cap is not None and cap < self.max_concurrency:
                import warnings

                msg = (f"litellm's HTTP pool holds {cap} connections per host, fewer than "
                       f"max_concurrency={self.max_concurrency}: concurrency is capped at {cap}")
                self.stats.notes.append(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
            self._gate = gate_for(provider_of(self._target_model), self._target_base,
                                  max_concurrency=self.max_concurrency, rpm=self._rpm)

    # -- sampling ----------------------------------------------------------------------------
    def sample_sync(self, requests: Sequence[SampleRequest], *, parser: Parser | None = None
                    ) -> list[list[Sample]]:
        """Blocking `sample`; works inside and outside a running event loop."""
        from .._sync import run_sync

        return run_sync(self.sample(requests, parser=parser))

    async def sample(self, requests: Sequence[SampleRequest], *, parser: Parser | None = None
                     ) -> list[list[Sample]]:
        """k samples for each request, in request order, each list indexed 0..k-1."""
        parse = parser or _default_parser
        for r in requests:
            if r.k < 1:
                raise InputError(f"k must be >= 1, got {r.k}")
        await self._resolve()
        t0 = time.perf_counter()
        results: list[list[Sample | None]] = [[None] * r.k for r in requests]
        units: list[tuple[int, str, list[int]]] = []
        for ri, req in enumerate(requests):
            key = request_key(self.model, req.messages, req.params)
            have = {}
            if self.store is not None and not self.refresh:
                have = self.store.get(key, range(req.k), parser=parse)
            for i, s in have.items():
                results[ri][i] = s
                if not s.valid:
                    self.stats.invalid += 1
            missing = [i for i in range(req.k) if i not in have]
            self.stats.samples_total += req.k
            self.stats.samples_cached += len(have)
            self.stats.samples_done += len(have)
            for run in _contiguous(missing):
                for s in range(0, len(run), self.max_n):
                    units.append((ri, key, run[s:s + self.max_n]))
        self._probe = asyncio.Lock()
        self._start_progress()
        try:
            tasks = [asyncio.ensure_future(self._run_unit(requests[ri], key, idx, results[ri],
                                                          parse)) for ri, key, idx in units]
            if tasks:
                done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
                failed = [t for t in done if t.exception() is not None]
                if failed:
                    for t in pending:
                        t.cancel()
                    await asyncio.gather(*pending, return_exceptions=True)
                    raise failed[0].exception()  # type: ignore[misc]
        finally:
            self.stats.wall_time_s += time.perf_counter() - t0
            self._stop_progress()
        for row in results:
            if any(s is None for s in row):  # never fewer samples than asked, silently
                raise EnsembleError(f"{self.model}: the sampler got fewer samples than asked; "
                                    "this is a bug, please report it")
        return results  # type: ignore[return-value]

    async def _run_unit(self, req: SampleRequest, key: str, indices: list[int],
                        row: list[Sample | None], parse: Parser) -> None:
        todo = list(indices)
        while todo:
            if self._n_ok is None and len(todo) > 1 and self._probe is not None \
                    and self._probe.locked():
                # another unit is finding out whether the provider honours n: wait for it
                # rather than sending a burst of requests that may all be rejected
                async with self._probe:
                    pass
            use_n = self._n_ok is not False and len(todo) > 1
            if not use_n and len(todo) > 1:
                # n unsupported: one request per sample, concurrently (bounded by the gate)
                await asyncio.gather(*(self._run_unit(req, key, [i], row, parse) for i in todo))
                return
            batch = todo if use_n else todo[:1]
            try:
                if use_n and self._n_ok is None and self._probe is not None:
                    async with self._probe:
                        if self._n_ok is False:
                            continue
                        comp = await self._request(req, n=len(batch), start=batch[0])
                        self._learn_n(len(batch), len(comp.choices))
                else:
                    comp = await self._request(req, n=len(batch), start=batch[0])
                    if len(batch) > 1:
                        self._learn_n(len(batch), len(comp.choices))
            except NUnsupported:
                if self._n_ok is not False:
                    self._n_ok = False
                    self._note(f"{self.model} rejects n > 1: falling back to one request per "
                               "sample")
                continue
            got = list(comp.choices[:len(batch)])
            if 1 < len(got) < len(batch):
                self._note(f"{self.model} returned fewer choices than n; requested the rest")
            share = max(1, len(got))
            for j, ch in enumerate(got):
                idx = batch[j]
                sample = Sample(
                    key=key, index=idx, text=ch.text, answer=self._parse(parse, ch.text),
                    finish_reason=ch.finish_reason,
                    prompt_tokens=comp.prompt_tokens if j == 0 else 0,
                    completion_tokens=(None if comp.completion_tokens is None
                                       else round(comp.completion_tokens / share)),
                    cost_usd=None if comp.cost_usd is None else comp.cost_usd / share,
                    latency_s=comp.latency_s, logprobs=ch.logprobs)
                if self.store is not None:
                    self.store.put(sample, model=self.model, request=_request_meta(self.model, req))
                row[idx] = sample
                self.stats.samples_done += 1
                if not sample.valid:
                    self.stats.invalid += 1
            self._advance(len(got))
            todo = batch[len(got):] + todo[len(batch):]

    def _learn_n(self, asked: int, got: int) -> None:
        """What one n > 1 reply says about the provider's support for n."""
        if got >= 2:
            self._n_ok = True
        elif got == 1 and self._n_ok is None:
            # n silently ignored (one choice for n > 1): separate requests from now on
            self._n_ok = False
            self._note(f"{self.model} answered n = {asked} with one choice: it ignores n; "
                       "falling back to one request per sample")

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

    async def _attempt(self, req: SampleRequest, n: int, headers: dict[str, str]) -> Any:
        gate = self._gate
        assert gate is not None  # set by _resolve
        async with gate.limiter:
            await gate.throttle()
            self.stats.requests += 1
            try:
                comp = await complete(self._target_model, req.messages, req.params, n=n,
                                      api_base=self._target_base, api_key=self._api_key,
                                      timeout=self.timeout, extra_headers=headers)
            except ProviderError as exc:
                self.stats.errors += 1
                if isinstance(exc, RateLimitError):
                    gate.limiter.backoff()
                raise
        gate.limiter.success()
        return comp

    async def _request(self, req: SampleRequest, *, n: int, start: int) -> Any:
        headers = {**self.extra_headers, INDEX_HEADER: str(start)}
        t0 = time.monotonic()
        try:
            # fast path: most requests succeed at once, without building a retry loop
            comp = await self._attempt(req, n, headers)
        except ProviderError as exc:
            if not exc.retryable:
                raise
            comp = await self._retry(req, n, headers, exc, t0)
        self._account(comp)
        return comp

    async def _retry(self, req: SampleRequest, n: int, headers: dict[str, str],
                     first: ProviderError, t0: float) -> Any:
        from tenacity import (
            AsyncRetrying,
            retry_if_exception,
            stop_after_attempt,
            stop_after_delay,
            wait_random_exponential,
        )

        backoff = wait_random_exponential(multiplier=0.25, max=20.0)
        attempts = 1
        last: ProviderError = first

        def wait(state: Any) -> float:
            exc = state.outcome.exception() if state.outcome else last
            ra = getattr(exc, "retry_after", None)
            return min(max(backoff(state), ra or 0.0), self.max_retry_time)

        def sleep_first() -> float:
            ra = first.retry_after or 0.0
            return min(max(ra, 0.25 * (0.5 + __import__("random").random())),
                       self.max_retry_time)

        if self.max_attempts <= 1 or time.monotonic() - t0 >= self.max_retry_time:
            raise self._gave_up(first, attempts, t0)
        self.stats.retries += 1
        self._advance(0)
        await asyncio.sleep(sleep_first())
        remaining = self.max_retry_time - (time.monotonic() - t0)

        def before_sleep(state: Any) -> None:
            self.stats.retries += 1
            self._advance(0)

        try:
            async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(self.max_attempts - 1) | stop_after_delay(
                        max(0.0, remaining)),
                    wait=wait, reraise=True, before_sleep=before_sleep,
                    retry=retry_if_exception(lambda e: isinstance(e, ProviderError)
                                             and e.retryable)):
                with attempt:
                    attempts += 1
                    try:
                        return await self._attempt(req, n, headers)
                    except ProviderError as exc:
                        last = exc
                        raise
        except ProviderError as exc:
            if exc.retryable:
                raise self._gave_up(exc, attempts, t0) from None
            raise
        raise self._gave_up(last, attempts, t0)  # pragma: no cover

    def _gave_up(self, exc: ProviderError, attempts: int, t0: float) -> RetryBudgetExceeded:
        waited = time.monotonic() - t0
        return RetryBudgetExceeded(
            f"{self.model}: gave up after {attempts} attempts in {waited:.1f} s (last error: "
            f"{exc}); completed samples are kept in the store, rerun to resume",
            model=self.model, provider=exc.provider, status=exc.status,
            retry_after=exc.retry_after)

    def _account(self, comp: Any) -> None:
        self.stats.prompt_tokens += comp.prompt_tokens or 0
        self.stats.completion_tokens += comp.completion_tokens or 0
        if comp.cost_usd is None:
            self.stats.cost_unknown_requests += 1
            self.stats.cost_usd = None
        elif self.stats.cost_usd is not None:
            self.stats.cost_usd += comp.cost_usd

    # -- progress ----------------------------------------------------------------------------
    def _start_progress(self) -> None:
        import sys

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

    def _advance(self, k: int) -> None:
        if self._bar is None:
            return
        s = self.stats
        el = max(1e-9, time.perf_counter() - self._t_start)
        cost = "cost ?" if s.cost_usd is None else f"${s.cost_usd:.4f}"
        self._bar.update(self._task_id, advance=k,
                         rate=f"{(s.samples_done - self._done_start) / el:.1f}/s",
                         info=(f"retries {s.retries} errors {s.errors} invalid {s.invalid} "
                               f"tokens {s.prompt_tokens + s.completion_tokens} {cost}"))

    def _stop_progress(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


_SECRET_NAME = re.compile(r"(^|_)(api_?key|key|secret|password|authorization|access_token|"
                          r"auth_token|bearer)$", re.IGNORECASE)


def _request_meta(model: str, req: SampleRequest) -> dict[str, Any]:
    """What the store keeps of a request: model, messages and parameters, never credentials."""
    params = {k: v for k, v in req.params.as_dict().items() if not _SECRET_NAME.search(k)}
    return {"model": model, "messages": list(req.messages), "params": params}


def _contiguous(indices: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs

