"""What batch mode needs from a provider's Files and Batch API: the `BatchAPI` protocol,
`BatchInfo` (a provider's batch as read from its API) and `BatchCalls` (what every Batch API
client shares: its calls under the one retry policy, their errors in the one translation
table; its wire format: the input file's lines, the output file's lines read back).
A provider declares its Batch API in `Capabilities.batch_api`: litellm's is
`ensemble.providers.litellm_batch.LiteLLMBatchAPI`, the openai SDK's
`ensemble.providers.openai_batch.OpenAIBatchAPI`, both in OpenAI's format
(`ensemble.providers.openai_wire`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from .._sync import within
from ..errors import (
    BadRequestError,
    EndpointNotFoundError,
    ModelNotFoundError,
    ProviderError,
    ProviderTimeoutError,
    ServerError,
)
from .base import Completion
from .params import SamplingParams
from .retry import RetryPolicy
from .translate import exception_chain, reply_body, translate_error

__all__ = ["BatchAPI", "BatchCalls", "BatchInfo", "LineResult", "LineWriter", "not_run"]

# write(custom_id, count): the input file's line of a request for `count` samples of a prompt
LineWriter = Callable[[str, int], bytes]


@dataclass(frozen=True)
class LineResult:
    """One line of a batch's output or error file, read: the request it answers
    (`custom_id`), its HTTP status (None: the batch did not run it), and its completion or
    its error."""

    custom_id: str
    status: int | None
    completion: Completion | None = None
    error: ProviderError | None = None


def not_run(what: str, *, model: str, api_base: str | None) -> ProviderError:
    """The error of a request its batch never ran (`what` the batch did: "expired", ...): a
    retryable `ServerError`, so its samples are submitted again."""
    return ServerError(f"{model}: the batch {what} before this request ran",
                       reason=f"batch {what}", model=model, status=None, api_base=api_base)


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

    async def upload(self, file: IO[bytes], *, filename: str) -> str:
        """Upload a JSONL input file (purpose "batch") from an open binary file, streamed
        (a paper-sized input file is never held whole); its file id."""
        ...

    async def create(self, file_id: str, *, metadata: dict[str, str]) -> BatchInfo: ...

    async def retrieve(self, batch_id: str) -> BatchInfo: ...

    def lines(self, file_id: str) -> AsyncIterator[bytes]:
        """The lines of a file (a batch's output or error file), streamed: a paper-sized
        output file is never held whole."""
        ...

    async def cancel(self, batch_id: str) -> BatchInfo: ...

    async def list(self, *, after: str | None = None, limit: int = 100
                   ) -> tuple[list[BatchInfo], bool]:
        """A page of batches, newest first, and whether there are more."""
        ...

    def request_lines(self, messages: Sequence[Mapping[str, Any]], params: SamplingParams
                      ) -> LineWriter:
        """The input file's lines of one prompt, in the provider's wire format:
        `write(custom_id, count)` is the line (newline included) of a request for `count`
        samples."""
        ...

    def read_line(self, raw: bytes, *, batch_status: str = "") -> LineResult | None:
        """One line of an output or error file: the request it answers (its custom_id) and
        its completion or its error (a `ProviderError` by the one translation table); None
        for a line that cannot be read. `batch_status`: what the batch did, for a line it did
        not run."""
        ...


class BatchCalls:
    """What every Batch API client shares: each call bounded in time (`timeout` seconds, the
    file transfers at least 600), retried under the one retry policy (`max_attempts`; a call
    made with `retry=False` is tried once), and its failure translated by the one table
    (`ensemble.providers.translate`), in the words of a Batch API: a 404 names a missing Batch
    API or an unknown batch, a rejected call what was rejected."""

    provider: str
    endpoint: str
    model: str

    def __init__(self, target: str, *, api_base: str | None, timeout: float,
                 max_attempts: int) -> None:
        self.target = target
        self.api_base = api_base
        self.timeout = float(timeout)
        self.max_attempts = int(max_attempts)
        self.retry = RetryPolicy(max_attempts=self.max_attempts)

    async def call(self, what: str, make: Callable[[float], Awaitable[Any]], *,
                   retry: bool = True, timeout: float | None = None) -> Any:
        """`await make(seconds)` under the policy; `make` starts the call with that timeout."""
        wait = timeout or self.timeout

        async def once() -> Any:
            try:
                return await within(make(wait), wait * 1.5 + 1.0)
            except asyncio.TimeoutError:
                exc: ProviderError = ProviderTimeoutError(
                    f"no reply from {self.endpoint} to {what} within {wait:g} s",
                    model=self.target, provider=self.provider, api_base=self.api_base,
                    reason="timeout")
                raise exc from None

        policy = self.retry if retry else RetryPolicy(max_attempts=1)
        return await policy.call(once, lambda raw: self.translate(raw, what))

    def translate(self, raw: BaseException, what: str) -> ProviderError:
        """The `ProviderError` of a failed call (`what`: "a file upload", "the batch X")."""
        exc = translate_error(raw, model=self.target, api_base=self.api_base)
        where = self.api_base or f"the {self.provider} API"
        if exc.status == 404 or isinstance(exc, (EndpointNotFoundError, ModelNotFoundError)):
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
            body = reply_body(exception_chain(raw))
            detail = " ".join(str((body or {}).get("message") or "").split())[:200] \
                if isinstance(body, dict) else ""
            return BadRequestError(f"{where} rejected {what} ({exc.status or 400}): "
                                   f"{detail or 'no detail'}", model=self.target,
                                   provider=self.provider, status=exc.status,
                                   api_base=self.api_base, reason=exc.reason)
        return exc
