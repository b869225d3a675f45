"""What batch mode needs from a provider's Files and Batch API: the `BatchAPI` protocol and
`BatchInfo`, a provider's batch as read from its API. A provider declares its Batch API in
`Capabilities.batch_api`; litellm's is `ensemble.providers.litellm_batch.LiteLLMBatchAPI`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["BATCH_ENDPOINT", "BatchAPI", "BatchInfo"]

BATCH_ENDPOINT = "/v1/chat/completions"


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

    def lines(self, file_id: str) -> AsyncIterator[bytes]:
        """The lines of a file (a batch's output or error file), streamed: a paper-sized
        output file is never held whole."""
        ...

    async def cancel(self, batch_id: str) -> BatchInfo: ...

    async def list(self, *, after: str | None = None, limit: int = 100
                   ) -> tuple[list[BatchInfo], bool]:
        """A page of batches, newest first, and whether there are more."""
        ...
