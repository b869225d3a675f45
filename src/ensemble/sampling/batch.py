"""Batch mode: the missing samples of a run through the provider's Batch API, durable and
resumable, into the same store with the same keys as online samples.

    async with Sampler("openai/gpt-4o-mini", store="run/samples.sqlite", mode="batch") as s:
        result = await s.run(requests)          # the same SampleResult as online

`Sampler.run` hands over to `run_batch` when `mode == "batch"`. Through litellm's Files and
Batches API (`acreate_file`, `acreate_batch`, `aretrieve_batch`, `afile_content`,
`acancel_batch`, `alist_batches`), never a job system of our own:

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
- **Cost.** litellm's batch prices (`input_cost_per_token_batches`,
  `output_cost_per_token_batches` in its price map) where it has them; unknown (None)
  otherwise: litellm's own fallback, half the online price, is a guess, not a price.
"""

from __future__ import annotations

import asyncio
import collections
import io
import json
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import (
    AuthenticationError,
    BadRequestError,
    BatchesSubmitted,
    ContentRefusedError,
    EndpointNotFoundError,
    EnsembleError,
    InputError,
    ModelNotFoundError,
    ProviderError,
    RateLimitError,
    RunStopped,
    ServerError,
)
from ..secrets import redact
from .replies import checked_logprobs, checked_text, usable_tokens
from .store import BatchLine, BatchRecord, SampleStore, batch_holder
from .types import Parser, Sample, SampleRequest, provider_of

if TYPE_CHECKING:
    from .sampler import SampleFailure, Sampler, SampleResult

__all__ = ["BATCH_ENDPOINT", "BatchAPI", "BatchInfo", "BatchOptions", "LiteLLMBatchAPI",
           "batch_api_for", "custom_id", "parse_custom_id", "run_batch"]

BATCH_ENDPOINT = "/v1/chat/completions"
SUBMISSION_KEY = "ensemble_submission"  # the batch metadata that names our record
TERMINAL = ("completed", "failed", "expired", "cancelled")
# providers litellm's acreate_batch takes (its custom_llm_provider Literal)
BATCH_PROVIDERS = ("openai", "azure", "vertex_ai", "bedrock", "hosted_vllm", "litellm_proxy",
                   "mistral", "xai")
_LEASE_MARGIN = 3600.0  # seconds a batch's leases outlive its expiry (finalizing takes time)


def custom_id(key: str, start: int, count: int) -> str:
    """The custom_id of a batch line: the store key and the sample indices it covers."""
    return f"{key}:{start}:{count}"


def parse_custom_id(text: str) -> tuple[str, int, int] | None:
    """(key, first sample index, count) of a custom_id made by `custom_id`, else None."""
    parts = str(text).rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return parts[0], int(parts[1]), int(parts[2])


@dataclass(frozen=True)
class BatchOptions:
    """How batch mode submits and waits.

    detach:          submit and return at once (raises `BatchesSubmitted` naming the batches);
                     a rerun of the same command collects.
    max_lines, max_bytes: per input file (OpenAI: 50,000 lines, 200 MB).
    max_submissions: submissions of one line in one run (the first and the resubmissions of
                     failed, expired or cancelled lines).
    poll_initial, poll_factor, poll_max: seconds between status checks: poll_initial at first,
                     growing by poll_factor up to poll_max.
    """

    detach: bool = False
    max_lines: int = 50_000
    max_bytes: int = 200 * 1024 * 1024
    max_submissions: int = 3
    poll_initial: float = 2.0
    poll_factor: float = 1.5
    poll_max: float = 300.0
    completion_window: str = "24h"

    def __post_init__(self) -> None:
        for name in ("max_lines", "max_bytes", "max_submissions"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"batch option {name} must be an integer >= 1, got {v!r}")
        for name in ("poll_initial", "poll_max"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v < float("inf")):
                raise InputError(f"batch option {name} must be a number of seconds > 0, "
                                 f"got {v!r}")
        if not (isinstance(self.poll_factor, (int, float)) and self.poll_factor >= 1):
            raise InputError(f"batch option poll_factor must be >= 1, got {self.poll_factor!r}")


@dataclass(frozen=True)
class BatchInfo:
    """A provider's batch, as read from its API (OpenAI's batch object)."""

    id: str
    status: str
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: float | None = None
    in_progress_at: float | None = None
    expires_at: float | None = None
    counts: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    @classmethod
    def of(cls, obj: Any) -> BatchInfo:
        """From litellm's batch object (OpenAI's `Batch`) or a plain dict."""
        def get(o: Any, name: str) -> Any:
            return o.get(name) if isinstance(o, Mapping) else getattr(o, name, None)

        rc = get(obj, "request_counts")
        counts = {k: int(get(rc, k) or 0) for k in ("total", "completed", "failed")} \
            if rc is not None else {}
        errs = get(obj, "errors")
        data = get(errs, "data") if errs is not None else None
        errors = tuple(f"{get(e, 'code') or 'error'}: {get(e, 'message') or ''}".strip()
                       + (f" (line {get(e, 'line')})" if get(e, "line") else "")
                       for e in (data or ()))
        meta = get(obj, "metadata") or {}
        return cls(id=str(get(obj, "id")), status=str(get(obj, "status")),
                   input_file_id=get(obj, "input_file_id"),
                   output_file_id=get(obj, "output_file_id"),
                   error_file_id=get(obj, "error_file_id"),
                   created_at=_num(get(obj, "created_at")),
                   in_progress_at=_num(get(obj, "in_progress_at")),
                   expires_at=_num(get(obj, "expires_at")), counts=counts,
                   metadata={str(k): str(v) for k, v in dict(meta).items()}, errors=errors)


def _num(x: Any) -> float | None:
    try:
        return None if x is None else float(x)
    except (TypeError, ValueError):
        return None


class BatchAPI(Protocol):
    """What batch mode needs from a provider's Files and Batch API."""

    provider: str  # litellm's provider name, e.g. "openai"
    endpoint: str  # the api_base, or the provider's name: shown and recorded, never a key
    model: str  # the model name the provider expects in a line's body

    async def upload(self, data: bytes, *, filename: str) -> str:
        """Upload a JSONL input file (purpose "batch"); its file id."""
        ...

    async def create(self, file_id: str, *, metadata: dict[str, str]) -> BatchInfo: ...

    async def retrieve(self, batch_id: str) -> BatchInfo: ...

    async def content(self, file_id: str) -> bytes: ...

    async def cancel(self, batch_id: str) -> BatchInfo: ...

    async def list(self, *, after: str | None = None, limit: int = 100
                   ) -> tuple[list[BatchInfo], bool]:
        """A page of batches, newest first, and whether there are more."""
        ...


class LiteLLMBatchAPI:
    """The Files and Batch API of a provider, through litellm (OpenAI, Azure, Vertex, Bedrock,
    Mistral, vLLM and any OpenAI-compatible base URL).

    Calls are retried for transient errors (5xx, timeouts, dropped connections; 429 waits out
    its Retry-After) up to `max_attempts`, except batch creation, which is never retried blind:
    the caller looks for the batch by its metadata first (a create that timed out may have
    succeeded).
    """

    def __init__(self, model: str, *, api_base: str | None, api_key: str | None,
                 timeout: float = 60.0, max_attempts: int = 6) -> None:
        from .client import litellm

        ll = litellm()
        self.target = model
        self.api_base = api_base
        self._key = api_key
        self.timeout = float(timeout)
        self.max_attempts = int(max_attempts)
        try:
            name, prov, _, _ = ll.get_llm_provider(model, api_base=api_base)
        except Exception:  # noqa: BLE001 - litellm raises a plain BadRequestError here
            raise ModelNotFoundError(f"unknown model {model!r}: use a litellm model string such "
                                     "as openai/gpt-4o-mini", model=model,
                                     reason="unknown model") from None
        if prov not in BATCH_PROVIDERS:
            raise InputError(f"batch mode is not available for {prov} models through litellm "
                             f"(its Batch API covers {', '.join(BATCH_PROVIDERS)}); run "
                             "without --batch")
        self.provider = str(prov)
        self.model = str(name)
        self.endpoint = api_base or self.provider

    def __repr__(self) -> str:  # never shows the key
        return f"LiteLLMBatchAPI(model={self.target!r}, endpoint={self.endpoint!r})"

    def _kw(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"custom_llm_provider": self.provider, "max_retries": 0}
        if self.api_base:
            kw["api_base"] = self.api_base
        if self._key is not None:
            kw["api_key"] = self._key
        if self.provider not in ("openai", "hosted_vllm", "litellm_proxy", "azure"):
            kw["model"] = self.target  # litellm translates the file for these providers
        return kw

    async def _call(self, what: str, fn: Any, *args: Any, retry: bool = True,
                    timeout: float | None = None, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await asyncio.wait_for(
                    fn(*args, **self._kw(), timeout=timeout or self.timeout, **kwargs),
                    (timeout or self.timeout) * 1.5 + 1.0)
            except asyncio.TimeoutError:
                exc: ProviderError = ServerError(
                    f"no reply from {self.endpoint} to {what} within {timeout or self.timeout:g}"
                    " s", model=self.target, provider=self.provider, api_base=self.api_base,
                    reason="timeout")
                exc.retryable = True
            except Exception as raw:  # noqa: BLE001 - translated in one place
                exc = self._translate(raw, what)
            if not retry or not (exc.retryable or exc.backpressure) \
                    or attempt >= self.max_attempts:
                raise exc
            delay = (exc.retry_after if exc.retry_after is not None
                     else min(30.0, 0.5 * 2 ** attempt))
            await asyncio.sleep(delay)

    def _translate(self, raw: BaseException, what: str) -> ProviderError:
        from .client import translate_error

        exc = translate_error(raw, model=self.target, api_base=self.api_base)
        if exc.status == 404 or isinstance(exc, (EndpointNotFoundError, ModelNotFoundError)):
            where = self.api_base or f"the {self.provider} API"
            if isinstance(exc, EndpointNotFoundError):
                err: ProviderError = EndpointNotFoundError(
                    f"{where} has no Batch API ({what} answered 404): it does not offer "
                    "/files and /batches there; run without --batch", model=self.target,
                    provider=self.provider, status=404, api_base=self.api_base,
                    reason="no Batch API")
            else:
                err = ModelNotFoundError(
                    f"{where} does not know {what} (404): batches and files belong to the key "
                    "and endpoint that created them; use the same --api-base and key",
                    model=self.target, provider=self.provider, status=404,
                    api_base=self.api_base, reason="batch not found")
            return err
        if type(exc) is BadRequestError:  # not a refusal: the call itself was rejected
            from .client import _chain, _reply_body

            body = _reply_body(_chain(raw))
            detail = " ".join(str((body or {}).get("message") or "").split())[:200] \
                if isinstance(body, dict) else ""
            where = self.api_base or f"the {self.provider} API"
            return BadRequestError(f"{where} rejected {what} ({exc.status or 400}): "
                                   f"{detail or 'no detail'}", model=self.target,
                                   provider=self.provider, status=exc.status,
                                   api_base=self.api_base, reason=exc.reason)
        return exc

    async def upload(self, data: bytes, *, filename: str) -> str:
        from .client import litellm

        obj = await self._call("a file upload", litellm().acreate_file,
                               file=(filename, data, "application/jsonl"), purpose="batch",
                               timeout=max(self.timeout, 600.0))
        return str(obj.id)

    async def create(self, file_id: str, *, metadata: dict[str, str]) -> BatchInfo:
        from .client import litellm

        obj = await self._call("a batch creation", litellm().acreate_batch, retry=False,
                               completion_window="24h", endpoint=BATCH_ENDPOINT,
                               input_file_id=file_id, metadata=metadata)
        return BatchInfo.of(obj)

    async def retrieve(self, batch_id: str) -> BatchInfo:
        from .client import litellm

        # without this flag litellm's logging downloads a finished batch's output file again,
        # on every retrieve, to price it; we price the lines as we read them
        obj = await self._call(f"the batch {batch_id}", litellm().aretrieve_batch,
                               batch_id=batch_id,
                               litellm_metadata={"batch_ignore_default_logging": True})
        return BatchInfo.of(obj)

    async def content(self, file_id: str) -> bytes:
        from .client import litellm

        obj = await self._call(f"the file {file_id}", litellm().afile_content, file_id=file_id,
                               timeout=max(self.timeout, 600.0))
        data = getattr(obj, "content", obj)
        return data if isinstance(data, bytes) else bytes(data)

    async def cancel(self, batch_id: str) -> BatchInfo:
        from .client import litellm

        obj = await self._call(f"the batch {batch_id}", litellm().acancel_batch,
                               batch_id=batch_id)
        return BatchInfo.of(obj)

    async def list(self, *, after: str | None = None, limit: int = 100
                   ) -> tuple[list[BatchInfo], bool]:
        from .client import litellm

        obj = await self._call("the list of batches", litellm().alist_batches, after=after,
                               limit=limit)
        data = obj.get("data") if isinstance(obj, Mapping) else getattr(obj, "data", None)
        more = obj.get("has_more") if isinstance(obj, Mapping) else getattr(obj, "has_more",
                                                                             False)
        return [BatchInfo.of(b) for b in (data or [])], bool(more)


def batch_api_for(provider: Any, model: str, *, api_base: str | None, timeout: float,
                  max_attempts: int) -> BatchAPI:
    """The Batch API behind a sampler's provider: its own `batch_api()` if it offers one, else
    litellm's for the provider's model, endpoint and key."""
    own = getattr(provider, "batch_api", None)
    if callable(own):
        api: BatchAPI = own()
        return api
    from .client import LiteLLMProvider

    # the openai SDK provider declares that its batches go through litellm's Files/Batch API
    if not (isinstance(provider, LiteLLMProvider) or getattr(provider, "litellm_batches", False)):
        raise InputError(f"batch mode needs a provider with a Batch API (litellm's); "
                         f"{type(provider).__name__} has none: run without --batch")
    # the key the provider resolved (explicit, the environment's, or the loopback placeholder)
    key = getattr(provider, "_key", None)
    return LiteLLMBatchAPI(provider.target, api_base=api_base, api_key=key, timeout=timeout,
                           max_attempts=max_attempts)


# -- errors of single lines --------------------------------------------------------------------
def line_error(status: int | None, error: Any, *, model: str, api_base: str | None,
               batch_status: str = "") -> ProviderError:
    """The `ProviderError` of a failed batch line, from its status code and error object (by
    status and the error's own code, as for online replies)."""
    err = error if isinstance(error, Mapping) else {}
    if isinstance(err.get("error"), Mapping):
        err = err["error"]
    code = str(err.get("code") or "")
    detail = " ".join(str(err.get("message") or "").split())[:200]
    kw: dict[str, Any] = {"model": model, "provider": provider_of(model), "status": status,
                          "api_base": api_base}
    if status is None:
        what = {"batch_expired": "expired", "batch_cancelled": "cancelled"}.get(
            code, batch_status or "not run")
        exc: ProviderError = ServerError(f"{model}: the batch {what} before this request ran",
                                         reason=f"batch {what}", **kw)
        exc.retryable = True
        return exc
    if status == 400 and code == "content_policy_violation":
        return ContentRefusedError(f"{model}: the provider refuses this prompt (content policy"
                                   f"{': ' + detail if detail else ''})",
                                   reason="400 content policy", **kw)
    if status in (400, 422):
        return BadRequestError(f"{model}: request rejected ({status}): {detail or 'no detail'}"
                               "; check the model name and sampling parameters",
                               reason=f"{status} bad request", **kw)
    if status in (401, 403):
        return AuthenticationError(f"{model}: the provider refused the key for this batch "
                                   f"({status}): {detail}", reason=f"{status} unauthorized", **kw)
    if status == 404:
        return ModelNotFoundError(f"{model}: the provider does not know the model (404"
                                  f"{': ' + detail if detail else ''}); check the model name",
                                  reason="404 model not found", **kw)
    if status == 429:
        return RateLimitError(f"{model}: the batch line was rate limited (429)",
                              reason="429 rate limit", **kw)
    exc = ServerError(f"{model}: the batch line failed ({status}{': ' + detail if detail else ''})",
                      reason=f"{status} server error", **kw)
    exc.retryable = True
    return exc


def _resubmittable(exc: ProviderError) -> bool:
    return exc.retryable or exc.backpressure


# -- the run -----------------------------------------------------------------------------------
@dataclass
class _Todo:
    key: str
    indices: list[int]


class _BatchRun:
    """One `Sampler.run` in batch mode (see the module docstring)."""

    def __init__(self, sampler: Sampler, requests: Sequence[SampleRequest], parse: Parser,
                 opts: BatchOptions) -> None:
        if sampler.store is None:
            raise InputError("batch mode needs a store (batches are resumed from it): pass "
                             "store= / --store / --out")
        self.s = sampler
        self.store: SampleStore = sampler.store
        self.requests = requests
        self.parse = parse
        self.opts = opts
        o = sampler.options
        self.api: BatchAPI = batch_api_for(sampler.provider, sampler.model,
                                           api_base=sampler.api_base, timeout=o.timeout,
                                           max_attempts=o.max_attempts)
        self.rows: list[list[Sample | None]] = [[None] * r.k for r in requests]
        self.keys = [sampler.key_of(r) for r in requests]
        self.by_key: dict[str, list[int]] = collections.defaultdict(list)
        for ri, k in enumerate(self.keys):
            self.by_key[k].append(ri)
        self.attempts: collections.Counter[tuple[str, int]] = collections.Counter()
        self.errors: dict[tuple[str, int], ProviderError] = {}
        self.per_line = 1 if sampler._n_ok is False else sampler.max_n
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
        from .sampler import SampleResult

        s = self.s
        t0 = time.perf_counter()
        st = s.stats
        for r in self.requests:
            st.samples_total += r.k
        self._fill(initial=True)
        beat = asyncio.ensure_future(self._heartbeat())
        try:
            s._start_progress()
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
                s._say("interrupted: " + self._ids_text(pending) + " keep running at the "
                       "provider; rerun the same command to collect")
            raise
        finally:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
            try:
                self.store.release(s.holder)
            except EnsembleError:
                pass
            st.wall_time_s += time.perf_counter() - t0
            s._stop_progress()
        failures = self._failures()
        st.failed += sum(len(f.indices) for f in failures)
        if self.submitted_ids:
            s._note(f"batch mode: {len(self.submitted_ids)} batches submitted "
                    f"({', '.join(self.submitted_ids)}), {self.lines_submitted} requests")
        if self.stop is not None:
            self.stop.failures = list(failures)
        else:
            for ri, row in enumerate(self.rows):
                if any(x is None for x in row) and not any(f.request == ri for f in failures):
                    raise EnsembleError(f"{s.model}: batch mode got fewer samples than asked; "
                                        "this is a bug, please report it")
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
        return r.model == self.s.model and r.endpoint == self.api.endpoint

    # -- samples in the store ------------------------------------------------------------------
    def _fill(self, *, initial: bool = False) -> None:
        """Rows from the store (samples stored before, collected, or drawn by another run)."""
        st = self.s.stats
        for key, ris in self.by_key.items():
            missing = {i for ri in ris for i, x in enumerate(self.rows[ri]) if x is None}
            if not missing:
                continue
            got = self.store.get(key, missing, parser=self.parse)
            n_new = 0
            for ri in ris:
                row = self.rows[ri]
                for i, smp in got.items():
                    if i < len(row) and row[i] is None:
                        row[i] = smp
                        n_new += 1
                        st.samples_done += 1
                        if initial:
                            st.samples_cached += 1
                        if not smp.valid:
                            st.invalid += 1
            if n_new:
                self.s._advance(n_new)

    # -- planning and submitting ---------------------------------------------------------------
    def _plan(self) -> list[_Todo]:
        """Claim the missing samples that no live batch covers; return them as lines to
        submit. Samples leased by another run are waited for; samples that used up their
        submissions, or failed for good, are left to the failure report."""
        ours = {r.id for r in self._pending()}
        covered = {(k, i) for b, k, a, c in self.store.pending_lines() if b in ours
                   for i in range(a, a + c)}
        want: list[tuple[str, list[int]]] = []
        for key, ris in self.by_key.items():
            missing = sorted({i for ri in ris for i, x in enumerate(self.rows[ri]) if x is None})
            free = [i for i in missing if (key, i) not in covered and self._may_submit(key, i)]
            if free:
                want.append((key, free))
        self.waiting_other = 0
        if not want:
            return []
        claims = self.store.claim(want, holder=self.s.holder, ttl=_lease_ttl())
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
        return self.attempts[(key, i)] < self.opts.max_submissions

    def _lines(self, todo: list[_Todo]) -> list[tuple[BatchLine, bytes]]:
        """The input lines (and their JSONL bytes) of the claimed samples."""
        out = []
        metas: dict[str, dict[str, Any]] = {}
        for t in todo:
            ri = self.by_key[t.key][0]
            req = self.requests[ri]
            if t.key not in metas:
                body = {"model": self.api.model, "messages": [dict(m) for m in req.messages]}
                params = dict(req.params.as_dict())
                extra = params.pop("extra_body", None)
                body.update(params)
                if isinstance(extra, Mapping):
                    body.update(extra)
                metas[t.key] = body
            for run in _runs(t.indices):
                for a in range(0, len(run), self.per_line):
                    part = run[a:a + self.per_line]
                    cid = custom_id(t.key, part[0], len(part))
                    line_body: dict[str, Any] = dict(metas[t.key])
                    if len(part) > 1:
                        line_body["n"] = len(part)
                    doc = {"custom_id": cid, "method": "POST", "url": BATCH_ENDPOINT,
                           "body": line_body}
                    data = (json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
                            + "\n").encode()
                    out.append((BatchLine(cid, t.key, part[0], len(part)), data))
        return out

    def _files(self, lines: list[tuple[BatchLine, bytes]]
               ) -> list[list[tuple[BatchLine, bytes]]]:
        """Lines split into input files within `max_lines` and `max_bytes`."""
        files: list[list[tuple[BatchLine, bytes]]] = [[]]
        size = 0
        for ln in lines:
            if len(ln[1]) > self.opts.max_bytes:
                raise InputError(f"one batch line is {len(ln[1])} bytes, more than the "
                                 f"provider's {self.opts.max_bytes} per file")
            if files[-1] and (len(files[-1]) >= self.opts.max_lines
                              or size + len(ln[1]) > self.opts.max_bytes):
                files.append([])
                size = 0
            files[-1].append(ln)
            size += len(ln[1])
        return [f for f in files if f]

    async def _submit(self, todo: list[_Todo]) -> None:
        s = self.s
        for chunk in self._files(self._lines(todo)):
            if self.stop is not None:
                break
            lines = [ln for ln, _ in chunk]
            now = time.time()
            rid = uuid.uuid4().hex[:16]
            rec = BatchRecord(id=rid, provider=self.api.provider, endpoint=self.api.endpoint,
                              model=s.model, status="submitting", lines=len(lines),
                              samples=sum(ln.count for ln in lines), created=now, updated=now)
            self.store.add_batch(rec, lines, holder=s.holder)
            self.submitting.add(rid)
            try:
                info = await self._upload_and_create(rid, b"".join(d for _, d in chunk))
            except ProviderError as exc:
                self.submitting.discard(rid)
                self.store.close_batch(rid, status="abandoned")
                self._fail_lines(lines, exc)
                if exc.systemic or not _resubmittable(exc):
                    self._stop_for(exc)
                continue
            finally:
                self.submitting.discard(rid)
            self._created(rid, info)
            for ln in lines:
                for i in ln.indices:
                    if self.attempts[(ln.key, i)]:
                        s.stats.retries += 1
                    self.attempts[(ln.key, i)] += 1
            self.lines_submitted += len(lines)
            s.stats.requests += len(lines)
            self.submitted_ids.append(info.id)
            s._say(f"batch: submitted {info.id} ({len(lines)} requests, {rec.samples} samples)"
                   f" to {self.api.endpoint}; status {info.status}")
        self.poll = self.opts.poll_initial

    async def _upload_and_create(self, rid: str, data: bytes) -> BatchInfo:
        file_id = await self.api.upload(data, filename=f"ensemble-{rid}.jsonl")
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
        live_holders = {h for _, _, h, exp in self.store.leases() if exp > now}
        for rec in self.store.batches(pending=True):
            if rec.status != "submitting" or not self._ours(rec):
                continue
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
                self.s._say(f"batch: a submission interrupted before the provider accepted it "
                            f"({rec.lines} requests) is planned again")
                continue
            self._created(rec.id, found)
            lines = self.store.batch_lines(rec.id)
            self.store.claim([(ln.key, list(ln.indices)) for ln in lines],
                             holder=batch_holder(rec.id),
                             ttl=(found.expires_at or now + 86400) + _LEASE_MARGIN - now)
            self.s._say(f"batch: re-attached to {found.id}, submitted before an interruption")

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
                self.s._note(f"could not check batch {rec.batch_id} ({exc.reason}); retrying")
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
                    self.s._note(f"could not read the results of batch {rec.batch_id} "
                                 f"({exc.reason}); retrying")

    async def _collect(self, rec: BatchRecord, info: BatchInfo) -> None:
        """Store a finished batch's samples, note its failed lines, close its record. The
        result files are read line by line and stored 5,000 samples per transaction, so memory
        stays bounded by the file itself, not by what it parses into."""
        from .sampler import _request_meta

        s = self.s
        lines = {ln.custom_id: ln for ln in self.store.batch_lines(rec.id)}
        seen: set[str] = set()
        buf: list[Sample] = []
        updates: list[tuple[str, str, str | None]] = []
        api_base = s.api_base
        fewer = False
        stored = 0
        batch_status = info.status if info.status != "completed" else ""
        if info.status == "failed" and info.errors:
            batch_status = "failed (" + "; ".join(info.errors)[:200] + ")"

        def flush() -> None:
            nonlocal stored
            if not buf:
                return
            metas = {smp.key: _request_meta(s.model, self.requests[self.by_key[smp.key][0]],
                                            s.provider.identity)
                     for smp in buf if smp.key in self.by_key}
            self.store.put_many(buf, model=s.model, holder=batch_holder(rec.id),
                                requests=metas)
            stored += len(buf)
            buf.clear()

        def take(ln: BatchLine, status: int | None, body: Any) -> None:
            nonlocal fewer
            if status == 200 and isinstance(body, Mapping):
                got = self._samples(ln, body)
                buf.extend(got)
                if len(got) == ln.count:
                    updates.append((ln.custom_id, "done", None))
                    return
                fewer = True
                updates.append((ln.custom_id, "partial", f"{len(got)} of {ln.count} choices"))
                short = ServerError(f"{s.model}: a batch line answered n = {ln.count} with "
                                    f"{len(got)} choices", model=s.model, status=200,
                                    api_base=api_base, reason="fewer choices than n")
                short.retryable = True
                for i in list(ln.indices)[len(got):]:
                    self.errors[(ln.key, i)] = short
                return
            exc = line_error(status, body, model=s.model, api_base=api_base,
                             batch_status=batch_status)
            s.stats.errors += 1
            if exc.backpressure:
                s.stats.rate_limited += 1
            updates.append((ln.custom_id, "failed", exc.reason))
            for i in ln.indices:
                self.errors[(ln.key, i)] = exc
            if exc.systemic:
                self._stop_for(exc)

        for fid in (info.output_file_id, info.error_file_id):
            if not fid:
                continue
            data = await self.api.content(fid)
            for row in _jsonl(data):
                cid = str(row.get("custom_id"))
                ln = lines.get(cid)
                if ln is None or cid in seen:
                    continue
                seen.add(cid)
                resp = row.get("response") or None
                if isinstance(resp, Mapping):
                    take(ln, int(resp.get("status_code") or 0) or None, resp.get("body"))
                else:
                    take(ln, None, row.get("error"))
                if len(buf) >= 5000:  # one transaction per 5,000 samples
                    flush()
            del data
        for cid, ln in lines.items():
            if cid not in seen:  # in neither file: the batch never ran it
                take(ln, None, None)
        flush()
        if fewer and self.per_line > 1:
            self.per_line = 1
            s._n_ok = False
            s._note(f"{s.model} answered batch lines with fewer choices than n: one sample "
                    "per line from now on")
        self.store.set_line_status(rec.id, updates)
        self.store.close_batch(rec.id)
        n_failed = sum(1 for _, st_, _ in updates if st_ == "failed")
        s._say(f"batch: {rec.batch_id} {info.status}: {stored} samples stored"
               + (f", {n_failed} requests failed" if n_failed else ""))

    def _samples(self, ln: BatchLine, body: Mapping[str, Any]) -> list[Sample]:
        s = self.s
        choices = sorted(body.get("choices") or [], key=lambda c: c.get("index", 0) or 0)
        got = choices[:ln.count]
        usage = body.get("usage") or {}
        pt = usable_tokens(usage.get("prompt_tokens"))  # impossible usage is unknown
        ct = usable_tokens(usage.get("completion_tokens"))
        cost = self._cost(pt, ct)
        s.stats.prompt_tokens += pt or 0
        s.stats.completion_tokens += ct or 0
        if cost is None:
            s.stats.cost_unknown_requests += 1
            s.stats.cost_usd = None
        elif s.stats.cost_usd is not None:
            s.stats.cost_usd += cost
        share = max(1, len(got))
        out = []
        for j, ch in enumerate(got):
            msg = ch.get("message") or {}
            text = checked_text(msg.get("content"))  # no API key is stored, whoever echoes it
            out.append(Sample(
                key=ln.key, index=ln.start + j, text=text, answer=s._parse(self.parse, text),
                finish_reason=ch.get("finish_reason"),
                prompt_tokens=pt if j == 0 else 0,
                completion_tokens=None if ct is None else round(ct / share),
                cost_usd=None if cost is None else cost / share, latency_s=None,
                logprobs=checked_logprobs(ch.get("logprobs")), source="batch"))
        return out

    _price: tuple[bool, Any] | None = None

    def _cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """The line's price at litellm's batch rates; None where litellm has none."""
        if prompt_tokens is None or completion_tokens is None:
            return None
        if self._price is None:
            self._price = _batch_pricing(self.s.provider, self.api)
        known, calc = self._price
        if not known:
            return None
        try:
            p, c = calc(prompt_tokens, completion_tokens)
        except Exception:  # noqa: BLE001 - an unknown price is unknown, not zero
            return None
        return float(p) + float(c)

    def _fail_lines(self, lines: Sequence[BatchLine], exc: ProviderError) -> None:
        for ln in lines:
            for i in ln.indices:
                self.errors[(ln.key, i)] = exc
                self.attempts[(ln.key, i)] += 1

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
                s._say(self.status_line(pending, next_check=max(0.0, until - now)))
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

    async def _heartbeat(self) -> None:
        from .sampler import LEASE_TTL

        while True:
            await asyncio.sleep(LEASE_TTL / 3)
            try:
                self.store.renew(self.s.holder, LEASE_TTL)
                for rid in list(self.submitting):
                    self.store.renew(batch_holder(rid), LEASE_TTL)
            except EnsembleError:  # pragma: no cover - a store gone bad
                pass

    # -- the result ----------------------------------------------------------------------------
    def _failures(self) -> list[SampleFailure]:
        from .sampler import SampleFailure

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
                out.append(SampleFailure(
                    request=ri, tag=self.requests[ri].tag, key=key, indices=tuple(idx),
                    error=type(exc).__name__, status=exc.status, reason=exc.reason,
                    message=" ".join(str(exc).split())
                    + (f" (after {self.attempts[(key, idx[0])]} submissions)"
                       if _resubmittable(exc) else ""), exception=exc))
        return out


def _lease_ttl() -> float:
    from .sampler import LEASE_TTL

    return LEASE_TTL


def _runs(indices: Sequence[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _jsonl(data: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, one at a time."""
    for raw in io.BytesIO(data):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            continue  # a line we cannot read counts as not returned: it is resubmitted
        if isinstance(doc, dict):
            yield doc


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _batch_pricing(provider: Any, api: BatchAPI) -> tuple[bool, Any]:
    """(known, f(prompt_tokens, completion_tokens) -> (prompt USD, completion USD)) at
    litellm's batch rates; unknown unless its price map has batch prices for the model."""
    from .client import litellm

    ll = litellm()
    target = getattr(provider, "target", None) or getattr(api, "target", None)
    if not target:
        return False, None
    try:
        info = ll.get_model_info(target)
    except Exception:  # noqa: BLE001 - not in the price map
        return False, None
    if not (info.get("input_cost_per_token_batches") is not None
            and info.get("output_cost_per_token_batches") is not None):
        return False, None
    from litellm.cost_calculator import batch_cost_calculator
    from litellm.types.utils import Usage

    def calc(pt: int, ct: int) -> tuple[float, float]:
        usage = Usage(prompt_tokens=pt, completion_tokens=ct, total_tokens=pt + ct)
        return batch_cost_calculator(usage=usage, model=target,
                                     custom_llm_provider=api.provider)

    return True, calc


async def follow_batches(sampler: Sampler, parse: Parser) -> None:
    """For an online run on a store with batches in flight: collect them as they finish, so
    the samples they hold (leased to the batch, which the online run waits for rather than
    paying twice) arrive even when no batch-mode process is attached. Submits nothing;
    ends when no batch of this model and endpoint is pending, or when it cannot help (a
    provider without a Batch API, an error reading one)."""
    store = sampler.store
    if store is None or not store.batches(pending=True):
        return
    try:
        run = _BatchRun(sampler, [], parse, BatchOptions())
    except EnsembleError:
        return  # no Batch API behind this provider: the batches wait for a --batch rerun
    pending = run._pending()
    if not pending:
        return
    sampler._say(f"batch: {run._ids_text(pending)} of this store in flight; their samples are "
                 "collected from them, not requested again")
    while pending:
        await run._refresh()
        if run.stop is not None:
            sampler._note(f"could not follow the batches in flight: {run.stop.cause}")
            return
        pending = run._pending()
        await asyncio.sleep(run.poll)
        run.poll = min(run.opts.poll_max, run.poll * run.opts.poll_factor)


async def run_batch(sampler: Sampler, requests: Sequence[SampleRequest], parse: Parser,
                    options: BatchOptions) -> SampleResult:
    """`Sampler.run` in batch mode (see the module docstring)."""
    return await _BatchRun(sampler, requests, parse, options).run()

