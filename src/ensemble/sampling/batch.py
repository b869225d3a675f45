"""Batch mode: the missing samples of a run through the provider's Batch API, durable and
resumable, into the same store with the same keys as online samples.

    async with Sampler("openai/gpt-4o-mini", store="run/samples.sqlite", mode="batch") as s:
        result = await s.run(requests)          # the same SampleResult as online

`Sampler.run` hands over to `run_batch` when `mode == "batch"`. Through the provider's Files
and Batch API (its `BatchAPI`: the openai SDK's, or litellm's), never a job system of our own;
the lines are in the provider's wire format, written and read by its `BatchAPI`
(`request_lines`, `read_line`): this module knows none.

- **Lines.** Each (prompt, parameters) with missing samples becomes input lines of at most
  `max_n` samples each (the provider's `n`; one per line once a provider is seen to ignore
  it), each with a `custom_id` "KEY:START:COUNT" naming its store key and sample indices
  START .. START+COUNT-1 (batch lines carry no headers, so the simulated server reads the first
  index from it). Lines are split into batches within the provider's limits (`max_lines`,
  `max_bytes` per input file: OpenAI's 50,000 lines and 200 MB by default).
- **Durable.** A batch is recorded in the store (`batches`, `batch_lines`) before its file is
  uploaded, and its provider id right after it is created, so a rerun after Ctrl-C, kill -9 or
  a reboot re-attaches to it: lines of a batch not yet collected are never submitted again, and
  samples already stored are never requested. A record left "submitting" by a process that died
  between the upload and the provider's reply is resolved by its metadata
  (`ensemble_submission`) in the provider's list of batches: adopted if the batch exists, else
  dropped and its lines planned again.
- **Leases.** While a batch is live its samples are leased to `batch:<id>` in the store until
  the batch's expiry: an online run on the same store waits for them instead of paying twice,
  and two batch runs never submit the same line.
- **Failures.** Lines that fail with a transient error (5xx, 429) and lines of expired or
  cancelled batches are resubmitted, at most `max_submissions` times per line in one run; lines
  refused for good (400, content policy) are not. What is still missing then is returned as
  `SampleFailure`s, so the evals' failure policy (failures.jsonl, --fail-on-error) applies
  unchanged; 401/403, a missing Batch API or an unknown batch stop the run (`stopped`).
- **Waiting.** Polls with backoff (`poll_initial` seconds, growing by `poll_factor` up to
  `poll_max`), and says every `status_every` seconds (10 s) what the batches are doing: status,
  request counts, the finish estimated from the provider's counts, the provider's deadline.
  `detach=True` submits and returns at once (`BatchesSubmitted`, naming the batches).
- **Cost.** A given `price_per_1k` prices a line as it prices an online reply (as given: no
  discount applied to it); else litellm's batch prices (`input_cost_per_token_batches`,
  `output_cost_per_token_batches` in its price map) where it has them; unknown (None)
  otherwise: litellm's own fallback, half the online price, is a guess, not a price.
"""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO

from ensemble.wording import counted

from .._sync import stop_reason
from ..errors import (
    BatchesSubmitted,
    EnsembleError,
    InputError,
    ProviderError,
    RunStopped,
    ServerError,
)
from ..providers.base import Completion, Provider
from ..providers.batch import BatchAPI, BatchInfo, LineResult, LineWriter, not_run
from ..secrets import redact
from .batch_input import input_files, input_lines
from .batch_options import BatchOptions, batch_api_for
from .replies import checked
from .results import SampleFailure, SampleResult, failure_of
from .run import LEASE_TTL, RunContext, request_meta
from .store import BatchLine, BatchRecord, SampleStore, batch_holder
from .types import Sample, SampleRequest, request_key

__all__ = ["follow_batches", "run_batch"]

SUBMISSION_KEY = "ensemble_submission"  # the batch metadata that names our record
TERMINAL = ("completed", "failed", "expired", "cancelled")
_LEASE_MARGIN = 3600.0  # seconds a batch's leases outlive its expiry (finalizing takes time)


def _resubmittable(exc: ProviderError) -> bool:
    return exc.retryable or exc.backpressure


# -- the run -----------------------------------------------------------------------------------
@dataclass
class _Todo:
    key: str
    indices: list[int]


class _Attempts:
    """Submissions of each sample (key, index) in this run: a list of counts per key (a
    paper-sized run has 298,500 samples: one (key, index) tuple each would hold ~40 MB)."""

    def __init__(self) -> None:
        self.by_key: dict[str, list[int]] = {}

    def get(self, key: str, i: int) -> int:
        row = self.by_key.get(key)
        return row[i] if row is not None and i < len(row) else 0

    def add(self, key: str, indices: Iterable[int]) -> int:
        """Count one more submission of each; how many had been submitted before."""
        row = self.by_key.setdefault(key, [])
        again = 0
        for i in indices:
            if i >= len(row):
                row.extend([0] * (i + 1 - len(row)))
            again += row[i] > 0
            row[i] += 1
        return again


class _BatchRun:
    """One run in batch mode (see the module docstring), on the run's shared state."""

    def __init__(self, ctx: RunContext, provider: Provider, requests: Sequence[SampleRequest],
                 opts: BatchOptions, *, max_n: int) -> None:
        if ctx.store is None:
            raise InputError("batch mode needs a store (batches are resumed from it): pass "
                             "store= / --store / --out")
        self.s = ctx
        self.provider = provider
        self.model = ctx.model
        self.api_base = provider.api_base
        self.store: SampleStore = ctx.store
        self.requests = requests
        self.opts = opts
        self.api: BatchAPI = batch_api_for(provider)
        self.rows: list[list[Sample | None]] = [[None] * r.k for r in requests]
        self.keys = [request_key(ctx.model, r.messages, r.params, endpoint=provider.identity)
                     for r in requests]
        self.by_key: dict[str, list[int]] = collections.defaultdict(list)
        for ri, k in enumerate(self.keys):
            self.by_key[k].append(ri)
        self.attempts = _Attempts()
        self.errors: dict[tuple[str, int], ProviderError] = {}
        self.per_line = 1 if ctx.n_ok is False else max_n
        self.stop: RunStopped | None = None
        self.submitting: set[str] = set()
        self.infos: dict[str, BatchInfo] = {}  # record id -> the provider's latest view
        self.seen_status: dict[str, str] = {}
        self.waiting_other = 0
        self.submitted_ids: list[str] = []
        self.lines_submitted = 0
        self.next_status = 0.0
        self.poll = opts.poll_initial

    # -- the loop ----------------------------------------------------------------------------
    async def run(self) -> SampleResult:
        s = self.s
        t0 = time.perf_counter()
        st = s.stats
        for r in self.requests:
            st.samples_total += r.k
        self._fill(initial=True)
        beat = asyncio.ensure_future(s.heartbeat(lambda: [batch_holder(r)
                                                             for r in self.submitting]))
        try:
            s.start_progress()
            s.drawing()  # the store is read (above)
            self.next_status = time.monotonic() + s.status_every
            while True:
                await self._resolve_submitting()
                await self._refresh()
                self._fill()
                if self.stop is not None:
                    break
                todo = self._plan()
                if todo:
                    await self._submit(todo)
                    if self.stop is not None:
                        break
                pending = self._pending()
                if self.opts.detach and pending:
                    raise self._detached(pending)
                if not pending and not todo and not self.waiting_other:
                    break
                await self._wait(pending)
        except (asyncio.CancelledError, KeyboardInterrupt):
            pending = self._pending()
            if pending:
                s.say((stop_reason() or "interrupted") + ": " + self._ids_text(pending)
                      + " keep running at the provider; rerun the same command to collect")
            raise
        finally:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
            s.release()
            st.wall_time_s += time.perf_counter() - t0
            s.stop_progress()
        failures = self._failures()
        st.failed += sum(len(f.indices) for f in failures)
        if self.submitted_ids:
            s.note(f"batch mode: {counted(len(self.submitted_ids), 'batch', 'batches')} "
                   f"submitted ({', '.join(self.submitted_ids)}), {self.lines_submitted} requests")
        if self.stop is not None:
            self.stop.failures = list(failures)
        else:
            s.check_complete(self.rows, failures, "batch mode")
        return SampleResult(rows=self.rows, failures=failures, stopped=self.stop)

    def _detached(self, pending: list[BatchRecord]) -> BatchesSubmitted:
        ids = [r.batch_id or r.id for r in pending]
        new = [i for i in ids if i in self.submitted_ids]
        done = self.s.stats.samples_done
        total = self.s.stats.samples_total
        what = (f"submitted {len(new)} batch{'es' if len(new) != 1 else ''}" if new
                else "nothing new to submit")
        return BatchesSubmitted(
            f"{what}; {len(pending)} in flight: {', '.join(ids)} ({done} of {total} samples "
            "stored); rerun the same command to collect", batch_ids=ids)

    def _ids_text(self, recs: Sequence[BatchRecord]) -> str:
        ids = [r.batch_id or r.id for r in recs]
        return f"{len(ids)} batch{'es' if len(ids) != 1 else ''} ({', '.join(ids)})"

    def _pending(self) -> list[BatchRecord]:
        return [r for r in self.store.batches(pending=True) if self._ours(r)]

    def _ours(self, r: BatchRecord) -> bool:
        """A record of this model on this endpoint (a store reused with another --api-base
        keeps the other endpoint's records: they cannot be read with this one)."""
        return r.model == self.model and r.endpoint == self.api.endpoint

    # -- samples in the store ------------------------------------------------------------------
    def _fill(self, *, initial: bool = False) -> None:
        """Rows from the store (samples stored before, collected, or drawn by another run)."""
        for key, ris in self.by_key.items():
            missing = {i for ri in ris for i, x in enumerate(self.rows[ri]) if x is None}
            if not missing:
                continue
            got = self.store.get(key, missing, parser=self.s.parser_for(key))
            for ri in ris:
                self.s.fill(self.rows[ri], got, cached=initial)

    # -- planning and submitting ---------------------------------------------------------------
    def _plan(self) -> list[_Todo]:
        """Claim the missing samples that no live batch covers; return them as lines to
        submit. Samples leased by another run are waited for; samples that used up their
        submissions, or failed for good, are left to the failure report."""
        ours = {r.id for r in self._pending()}
        covered: dict[str, list[range]] = {}  # per key: the index ranges of live lines
        for bid, k, start, count in self.store.pending_lines():
            if bid in ours:
                covered.setdefault(k, []).append(range(start, start + count))
        want: list[tuple[str, list[int]]] = []
        for key, ris in self.by_key.items():
            missing = sorted({i for ri in ris for i, x in enumerate(self.rows[ri]) if x is None})
            live = {i for r in covered.get(key, ()) for i in r}
            free = [i for i in missing if i not in live and self._may_submit(key, i)]
            if free:
                want.append((key, free))
        self.waiting_other = 0
        if not want:
            return []
        claims = self.store.claim(want, holder=self.s.holder, ttl=LEASE_TTL)
        todo = []
        for (key, _), c in zip(want, claims, strict=True):
            self.waiting_other += len(c.busy)
            if c.claimed:
                todo.append(_Todo(key, c.claimed))
        if any(c.done for c in claims):
            self._fill()
        return todo

    def _may_submit(self, key: str, i: int) -> bool:
        err = self.errors.get((key, i))
        if err is not None and not _resubmittable(err):
            return False
        return self.attempts.get(key, i) < self.opts.max_submissions

    def _writer(self, key: str) -> LineWriter:
        """The input file's lines of a prompt, in the provider's wire format."""
        req = self.requests[self.by_key[key][0]]
        return self.api.request_lines(req.messages, req.params)

    async def _submit(self, todo: list[_Todo]) -> None:
        """The claimed samples as input files (`ensemble.sampling.batch_input`: written line by
        line to temporary files, uploaded from there), each a batch."""
        # every file written before the first is submitted: a line too large for a file
        # stops the run before anything is paid for
        files = list(input_files(
            input_lines(((t.key, t.indices) for t in todo), self._writer, self.per_line),
            max_lines=self.opts.max_lines, max_bytes=self.opts.max_bytes))
        try:
            for chunk, file in files:
                if self.stop is not None:
                    break
                await self._submit_file(chunk, file)
                file.close()  # deletes it
        finally:
            for _, file in files:
                file.close()
        self.poll = self.opts.poll_initial

    async def _submit_file(self, lines: list[BatchLine], file: IO[bytes]) -> None:
        s = self.s
        now = time.time()
        rid = uuid.uuid4().hex[:16]
        rec = BatchRecord(id=rid, provider=self.api.provider, endpoint=self.api.endpoint,
                          model=self.model, status="submitting", lines=len(lines),
                          samples=sum(ln.count for ln in lines), created=now, updated=now)
        self.store.add_batch(rec, lines, holder=s.holder)
        self.submitting.add(rid)
        try:
            info = await self._upload_and_create(rid, file)
        except ProviderError as exc:
            self.submitting.discard(rid)
            self.store.close_batch(rid, status="abandoned")
            self._fail_lines(lines, exc)
            if exc.systemic or not _resubmittable(exc):
                self._stop_for(exc)
            return
        finally:
            self.submitting.discard(rid)
        self._created(rid, info)
        for ln in lines:
            s.stats.retries += self.attempts.add(ln.key, ln.indices)
        self.lines_submitted += len(lines)
        s.stats.requests += len(lines)
        self.submitted_ids.append(info.id)
        s.say(f"batch: submitted {info.id} ({counted(len(lines), 'request')}, "
              f"{counted(rec.samples, 'sample')})"
              f" to {self.api.endpoint}; status {info.status}")

    async def _upload_and_create(self, rid: str, file: IO[bytes]) -> BatchInfo:
        file_id = await self.api.upload(file, filename=f"ensemble-{rid}.jsonl")
        self.store.update_batch(rid, input_file_id=file_id)
        try:
            return await self.api.create(file_id, metadata={SUBMISSION_KEY: rid})
        except ProviderError as exc:
            if not _resubmittable(exc):
                raise
            # the create may have succeeded before the reply was lost: look before resending
            found = await self._find(rid, since=time.time() - 3600)
            if found is not None:
                return found
            return await self.api.create(file_id, metadata={SUBMISSION_KEY: rid})

    def _created(self, rid: str, info: BatchInfo) -> None:
        expires = info.expires_at or (time.time() + 24 * 3600)
        self.store.update_batch(rid, batch_id=info.id, status=info.status,
                                input_file_id=info.input_file_id, counts=info.counts,
                                expires=expires, lease_until=expires + _LEASE_MARGIN)
        self.infos[rid] = info
        self.seen_status[rid] = info.status

    async def _find(self, rid: str, *, since: float) -> BatchInfo | None:
        """The provider's batch whose metadata names our record `rid`, if it exists."""
        after: str | None = None
        for _ in range(50):  # at most 5,000 batches back
            page, more = await self.api.list(after=after, limit=100)
            for b in page:
                if b.metadata.get(SUBMISSION_KEY) == rid:
                    return b
            if not page or not more or (page[-1].created_at or 0) < since - 600:
                return None
            after = page[-1].id
        return None

    async def _resolve_submitting(self) -> None:
        """Records a dead process left "submitting": adopt their batch if the provider has
        it, else drop them (their lines are planned again)."""
        now = time.time()
        stale = [r for r in self.store.batches(pending=True)
                 if r.status == "submitting" and self._ours(r)]
        live_holders = self.store.live_holders(now) if stale else set()
        for rec in stale:
            if batch_holder(rec.id) in live_holders:
                continue  # another process is submitting it right now
            found = None
            if rec.input_file_id is not None:
                try:
                    found = await self._find(rec.id, since=rec.created)
                except ProviderError as exc:
                    self._stop_for(exc)
                    return
            if found is None:
                self.store.close_batch(rec.id, status="abandoned")
                self.s.say(f"batch: a submission interrupted before the provider accepted it "
                            f"({rec.lines} requests) is planned again")
                continue
            self._created(rec.id, found)
            lines = self.store.batch_lines(rec.id)
            self.store.claim([(ln.key, list(ln.indices)) for ln in lines],
                             holder=batch_holder(rec.id),
                             ttl=(found.expires_at or now + 86400) + _LEASE_MARGIN - now)
            self.s.say(f"batch: re-attached to {found.id}, submitted before an interruption")

    # -- following and collecting ------------------------------------------------------------
    async def _refresh(self) -> None:
        for rec in self._pending():
            if rec.status == "submitting" or rec.batch_id is None:
                continue
            try:
                info = await self.api.retrieve(rec.batch_id)
            except ProviderError as exc:
                if exc.systemic or not _resubmittable(exc):
                    self._stop_for(exc)
                    return
                self.s.note(f"could not check batch {rec.batch_id} ({exc.reason}); retrying")
                continue
            self.infos[rec.id] = info
            if info.status != rec.status or info.counts != rec.counts:
                self.store.update_batch(rec.id, status=info.status, counts=info.counts,
                                        output_file_id=info.output_file_id,
                                        error_file_id=info.error_file_id,
                                        info={"errors": [redact(e) for e in info.errors],
                                              "in_progress_at": info.in_progress_at})
            if self.seen_status.get(rec.id) != info.status:
                self.seen_status[rec.id] = info.status
                self.next_status = 0.0  # say it now
            if info.status in TERMINAL:
                try:
                    await self._collect(rec, info)
                except ProviderError as exc:
                    if exc.systemic or not _resubmittable(exc):
                        self._stop_for(exc)
                        return
                    self.s.note(f"could not read the results of batch {rec.batch_id} "
                                 f"({exc.reason}); retrying")

    async def _collect(self, rec: BatchRecord, info: BatchInfo) -> None:
        """Store a finished batch's samples, note its failed lines, close its record. The
        result files are streamed line by line (`BatchAPI.lines`) and stored 5,000 samples
        per transaction, so memory stays bounded whatever the size of the batch."""
        s = self.s
        lines = {ln.custom_id: ln for ln in self.store.batch_lines(rec.id)}
        seen: set[str] = set()
        col = _Collected(self, rec, info)
        for fid in (info.output_file_id, info.error_file_id):
            if not fid:
                continue
            async for raw in self.api.lines(fid):
                res = self.api.read_line(raw, batch_status=col.batch_status)
                ln = lines.get(res.custom_id) if res is not None else None
                if res is None or ln is None or res.custom_id in seen:
                    continue  # a line we cannot read counts as not returned: resubmitted
                seen.add(res.custom_id)
                col.take(ln, res)
                if len(col.buf) >= 5000:  # one transaction per 5,000 samples
                    col.flush()
        for cid, ln in lines.items():
            if cid not in seen:  # in neither file: the batch never ran it
                col.take(ln, LineResult(cid, None, error=not_run(
                    col.batch_status or "not run", model=self.model, api_base=self.api_base)))
        col.flush()
        if col.fewer and self.per_line > 1:
            self.per_line = 1
            s.n_ok = False
            s.note(f"{self.model} answered batch lines with fewer choices than n: one sample "
                   "per line from now on")
        self.store.set_line_status(rec.id, col.updates)
        self.store.close_batch(rec.id)
        n_failed = sum(1 for _, st_, _ in col.updates if st_ == "failed")
        s.say(f"batch: {rec.batch_id} {info.status}: {counted(col.stored, 'sample')} stored"
              + (f", {counted(n_failed, 'request')} failed" if n_failed else ""))

    def samples_of(self, ln: BatchLine, comp: Completion) -> list[Sample]:
        """The samples of a line's reply, accounted as one paid request."""
        comp = checked(comp)  # the one door: no API key is stored; impossible usage unknown
        pt, ct = comp.prompt_tokens, comp.completion_tokens
        cost = None if pt is None or ct is None else self.provider.price(pt, ct, batch=True)
        self.s.account(pt, ct, cost)
        return self.s.samples(ln.key, ln.start, list(comp.choices[:ln.count]), prompt_tokens=pt,
                              completion_tokens=ct, cost=cost, latency=None, source="batch")

    def _fail_lines(self, lines: Sequence[BatchLine], exc: ProviderError) -> None:
        for ln in lines:
            for i in ln.indices:
                self.errors[(ln.key, i)] = exc
            self.attempts.add(ln.key, ln.indices)

    def _stop_for(self, exc: ProviderError) -> None:
        if self.stop is None:
            self.stop = RunStopped(f"{exc}; stopped batch mode (batches in flight keep running:"
                                   " rerun the same command to collect them)", cause=exc)

    # -- waiting -------------------------------------------------------------------------------
    async def _wait(self, pending: list[BatchRecord]) -> None:
        s = self.s
        until = time.monotonic() + self.poll
        self.poll = min(self.opts.poll_max, self.poll * self.opts.poll_factor)
        while True:
            now = time.monotonic()
            if now >= self.next_status:
                s.say(self.status_line(pending, next_check=max(0.0, until - now)))
                self.next_status = now + s.status_every
            if now >= until:
                return
            await asyncio.sleep(max(0.0, min(until, self.next_status) - now))

    def status_line(self, pending: Sequence[BatchRecord], *, next_check: float = 0.0) -> str:
        """One line: the batches' status, request counts, estimated finish, deadline."""
        st = self.s.stats
        by: collections.Counter[str] = collections.Counter()
        total = done = failed = 0
        eta: float | None = None
        deadline: float | None = None
        now = time.time()
        for rec in pending:
            info = self.infos.get(rec.id)
            status = info.status if info is not None else rec.status
            by[status] += 1
            counts = info.counts if info is not None else rec.counts
            t, c, f = (counts.get("total", rec.lines), counts.get("completed", 0),
                       counts.get("failed", 0))
            total, done, failed = total + t, done + c, failed + f
            if info is not None and info.expires_at:
                deadline = info.expires_at if deadline is None else min(deadline,
                                                                       info.expires_at)
            start = info.in_progress_at if info is not None else None
            if start and c + f > 0 and t > c + f:
                rate = (c + f) / max(1.0, now - start)
                left = (t - c - f) / rate
                eta = left if eta is None else max(eta, left)
        parts = [", ".join(f"{n} {k}" for k, n in by.most_common())
                 + f" batch{'es' if len(pending) != 1 else ''}"]
        if total:
            parts.append(f"{done + failed}/{total} requests done"
                         + (f" ({failed} failed)" if failed else ""))
        parts.append(f"{st.samples_done}/{st.samples_total} samples stored")
        if eta is not None:
            parts.append(f"about {_span(eta)} left at the provider's pace")
        if deadline is not None:
            parts.append("deadline " + time.strftime("%Y-%m-%d %H:%M", time.localtime(deadline)))
        if self.waiting_other:
            parts.append(f"{self.waiting_other} samples being drawn by another run")
        if next_check > 0:
            parts.append(f"next check in {_span(next_check)}")
        return "waiting: batch: " + "; ".join(parts)

    # -- the result ----------------------------------------------------------------------------
    def _failures(self) -> list[SampleFailure]:
        out = []
        for ri, row in enumerate(self.rows):
            key = self.keys[ri]
            missing = [i for i, x in enumerate(row) if x is None]
            groups: dict[int, list[int]] = collections.defaultdict(list)
            excs: dict[int, ProviderError] = {}
            for i in missing:
                exc = self.errors.get((key, i))
                if exc is None:
                    continue
                groups[id(exc)].append(i)
                excs[id(exc)] = exc
            for eid, idx in groups.items():
                exc = excs[eid]
                out.append(failure_of(
                    exc, request=ri, tag=self.requests[ri].tag, key=key, indices=idx,
                    suffix=(f" (after {self.attempts.get(key, idx[0])} submissions)"
                            if _resubmittable(exc) else "")))
        return out


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


async def follow_batches(ctx: RunContext, provider: Provider) -> None:
    """For an online run on a store with batches in flight: collect them as they finish, so
    the samples they hold (leased to the batch, which the online run waits for rather than
    paying twice) arrive even when no batch-mode process is attached. Submits nothing;
    ends when no batch of this model and endpoint is pending, or when it cannot help (a
    provider without a Batch API, an error reading one)."""
    store = ctx.store
    if store is None or not store.batches(pending=True):
        return
    try:
        run = _BatchRun(ctx, provider, [], BatchOptions(), max_n=1)
    except EnsembleError:
        return  # no Batch API behind this provider: the batches wait for a --batch rerun
    pending = run._pending()
    if not pending:
        return
    ctx.say(f"batch: {run._ids_text(pending)} of this store in flight; their samples are "
            "collected from them, not requested again")
    while pending:
        await run._refresh()
        if run.stop is not None:
            ctx.note(f"could not follow the batches in flight: {run.stop.cause}")
            return
        pending = run._pending()
        await asyncio.sleep(run.poll)
        run.poll = min(run.opts.poll_max, run.poll * run.opts.poll_factor)


async def run_batch(ctx: RunContext, provider: Provider, requests: Sequence[SampleRequest],
                    options: BatchOptions, *, max_n: int) -> SampleResult:
    """A run in batch mode (see the module docstring): `Sampler.run` with `mode="batch"`."""
    return await _BatchRun(ctx, provider, requests, options, max_n=max_n).run()


class _Collected:
    """What one finished batch's files hold, taken line by line and stored in chunks."""

    def __init__(self, run: _BatchRun, rec: BatchRecord, info: BatchInfo) -> None:
        self.run = run
        self.rec = rec
        self.buf: list[Sample] = []
        self.updates: list[tuple[str, str, str | None]] = []
        self.fewer = False
        self.stored = 0
        self.batch_status = info.status if info.status != "completed" else ""
        if info.status == "failed" and info.errors:
            self.batch_status = "failed (" + "; ".join(info.errors)[:200] + ")"

    def flush(self) -> None:
        if not self.buf:
            return
        run = self.run
        metas = {smp.key: request_meta(run.model, run.requests[run.by_key[smp.key][0]],
                                       run.provider.identity)
                 for smp in self.buf if smp.key in run.by_key}
        run.store.put_many(self.buf, model=run.model, holder=batch_holder(self.rec.id),
                           requests=metas)
        self.stored += len(self.buf)
        run.s.stats.samples_batch += len(self.buf)
        self.buf.clear()

    def take(self, ln: BatchLine, res: LineResult) -> None:
        run = self.run
        model = run.model
        if res.completion is not None:
            got = run.samples_of(ln, res.completion)
            self.buf.extend(got)
            if len(got) == ln.count:
                self.updates.append((ln.custom_id, "done", None))
                return
            self.fewer = True
            self.updates.append((ln.custom_id, "partial", f"{len(got)} of {ln.count} choices"))
            short = ServerError(f"{model}: a batch line answered n = {ln.count} with "
                                f"{len(got)} choices", model=model, status=200,
                                api_base=run.api_base, reason="fewer choices than n")
            short.retryable = True
            for i in list(ln.indices)[len(got):]:
                run.errors[(ln.key, i)] = short
            return
        exc = res.error or not_run("not run", model=model, api_base=run.api_base)
        run.s.stats.errors += 1
        if exc.backpressure:
            run.s.stats.rate_limited += 1
        self.updates.append((ln.custom_id, "failed", exc.reason))
        for i in ln.indices:
            run.errors[(ln.key, i)] = exc
        if exc.systemic:
            run._stop_for(exc)
