"""The openai SDK's Files and Batch API: the Batch API `OpenAIProvider` declares (OpenAI
itself, or any OpenAI-compatible base URL that offers /files and /batches).

Through the SDK's public resources (`files.create`, `batches.create`, `batches.retrieve`,
`files.with_streaming_response.content`, `batches.cancel`, `batches.list`) on the provider's
own client, the same calls litellm's Batch API makes for OpenAI, without importing litellm
(which alone holds ~130 MB of a batch run's memory here). Input files are uploaded from an
open file and output files read line by line, both streamed by the SDK's HTTP client.
Calls are retried and their errors translated as in every Batch API (`BatchCalls`): batch
creation is never retried blind (the caller looks for the batch by its metadata first).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import IO, Any

from .batch import BatchCalls, BatchInfo
from .openai_wire import BATCH_ENDPOINT, OpenAILines

__all__ = ["OpenAIBatchAPI"]


class OpenAIBatchAPI(OpenAILines, BatchCalls):
    """The Files and Batch API behind an `AsyncOpenAI` client (`client()` gives the client of
    the running event loop: the provider's shared one)."""

    provider = "openai"

    def __init__(self, target: str, *, client: Callable[[], Any], model: str,
                 api_base: str | None, timeout: float = 60.0, max_attempts: int = 6,
                 max_tokens_name: str = "max_tokens") -> None:
        super().__init__(target, api_base=api_base, timeout=timeout, max_attempts=max_attempts)
        self.client = client
        self.model = model  # the name a line's body carries
        self.max_tokens_name = max_tokens_name  # as the provider's online requests name it
        self.endpoint = api_base or self.provider  # as litellm's Batch API records it

    def __repr__(self) -> str:  # the client holds the key: never shown
        return f"OpenAIBatchAPI(model={self.target!r}, endpoint={self.endpoint!r})"

    async def upload(self, file: IO[bytes], *, filename: str) -> str:
        obj = await self.call(
            "a file upload",
            lambda wait: self.client().files.create(
                file=(filename, file, "application/jsonl"), purpose="batch", timeout=wait),
            timeout=max(self.timeout, 600.0))
        return str(obj.id)

    async def create(self, file_id: str, *, metadata: dict[str, str]) -> BatchInfo:
        obj = await self.call(
            "a batch creation",
            lambda wait: self.client().batches.create(
                completion_window="24h", endpoint=BATCH_ENDPOINT, input_file_id=file_id,
                metadata=metadata, timeout=wait),
            retry=False)
        return BatchInfo.of(obj)

    async def retrieve(self, batch_id: str) -> BatchInfo:
        obj = await self.call(f"the batch {batch_id}",
                              lambda wait: self.client().batches.retrieve(batch_id,
                                                                          timeout=wait))
        return BatchInfo.of(obj)

    async def lines(self, file_id: str) -> AsyncIterator[bytes]:
        """The file's lines, streamed (`GET /files/{id}/content`)."""
        what = f"the file {file_id}"
        content = self.client().files.with_streaming_response.content
        try:
            async with content(file_id, timeout=max(self.timeout, 600.0)) as resp:
                async for line in resp.iter_lines():
                    yield line.encode()
        except Exception as raw:  # noqa: BLE001 - translated in one place
            raise self.translate(raw, what) from None

    async def cancel(self, batch_id: str) -> BatchInfo:
        obj = await self.call(f"the batch {batch_id}",
                              lambda wait: self.client().batches.cancel(batch_id, timeout=wait))
        return BatchInfo.of(obj)

    async def list(self, *, after: str | None = None, limit: int = 100
                   ) -> tuple[list[BatchInfo], bool]:
        kw: dict[str, Any] = {"limit": limit}
        if after is not None:
            kw["after"] = after
        page = await self.call("the list of batches",
                               lambda wait: self.client().batches.list(**kw, timeout=wait))
        return [BatchInfo.of(b) for b in (page.data or [])], bool(page.has_more)
