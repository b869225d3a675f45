"""litellm's Files and Batch API (OpenAI, Azure, Vertex, Bedrock, Mistral, vLLM and any
OpenAI-compatible base URL): the Batch API `LiteLLMProvider` declares."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Mapping
from typing import IO, Any

from ..errors import InputError, ModelNotFoundError
from .batch import BatchCalls, BatchInfo
from .litellm_lib import litellm
from .openai_wire import BATCH_ENDPOINT, OpenAILines

__all__ = ["BATCH_PROVIDERS", "LiteLLMBatchAPI"]

# providers litellm's acreate_batch takes (its custom_llm_provider Literal)
BATCH_PROVIDERS = ("openai", "azure", "vertex_ai", "bedrock", "hosted_vllm", "litellm_proxy",
                   "mistral", "xai")
# providers whose files are served at the OpenAI route, streamed without litellm
STREAMED = ("openai", "hosted_vllm", "litellm_proxy")


class LiteLLMBatchAPI(OpenAILines, BatchCalls):
    """The Files and Batch API of a provider, through litellm (OpenAI, Azure, Vertex, Bedrock,
    Mistral, vLLM and any OpenAI-compatible base URL).

    Calls are retried under the one retry policy (`ensemble.providers.retry`, through
    `BatchCalls`): transient errors (5xx, timeouts, dropped connections) up to
    `max_attempts`, 429 waits out its Retry-After; except batch creation, which is never
    retried blind: the caller looks for the batch by its metadata first (a create that timed
    out may have succeeded).
    """

    def __init__(self, model: str, *, api_base: str | None, api_key: str | None,
                 timeout: float = 60.0, max_attempts: int = 6) -> None:
        ll = litellm()
        super().__init__(model, api_base=api_base, timeout=timeout, max_attempts=max_attempts)
        self._key = api_key
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
        return await self.call(what, lambda wait: fn(*args, **self._kw(), timeout=wait,
                                                     **kwargs),
                               retry=retry, timeout=timeout)

    async def upload(self, file: IO[bytes], *, filename: str) -> str:
        # litellm hands the open file to the openai SDK, whose HTTP client streams it
        obj = await self._call("a file upload", litellm().acreate_file,
                               file=(filename, file, "application/jsonl"), purpose="batch",
                               timeout=max(self.timeout, 600.0))
        return str(obj.id)

    async def create(self, file_id: str, *, metadata: dict[str, str]) -> BatchInfo:
        obj = await self._call("a batch creation", litellm().acreate_batch, retry=False,
                               completion_window="24h", endpoint=BATCH_ENDPOINT,
                               input_file_id=file_id, metadata=metadata)
        return BatchInfo.of(obj)

    async def retrieve(self, batch_id: str) -> BatchInfo:
        # without this flag litellm's logging downloads a finished batch's output file again,
        # on every retrieve, to price it; we price the lines as we read them
        obj = await self._call(f"the batch {batch_id}", litellm().aretrieve_batch,
                               batch_id=batch_id,
                               litellm_metadata={"batch_ignore_default_logging": True})
        return BatchInfo.of(obj)

    async def content(self, file_id: str) -> bytes:
        """A whole file, through litellm (for providers whose files are not served over an
        OpenAI-compatible route)."""
        obj = await self._call(f"the file {file_id}", litellm().afile_content, file_id=file_id,
                               timeout=max(self.timeout, 600.0))
        data = getattr(obj, "content", obj)
        return data if isinstance(data, bytes) else bytes(data)

    async def lines(self, file_id: str) -> AsyncIterator[bytes]:
        """The file's lines, streamed from its OpenAI-compatible route (`GET
        /files/{id}/content`) where there is one, else read whole through litellm."""
        base = self.api_base or ("https://api.openai.com/v1" if self.provider == "openai"
                                 else None)
        if base is None or self.provider not in STREAMED:
            data = await self.content(file_id)
            for raw in io.BytesIO(data):
                yield raw
            return
        import httpx

        what = f"the file {file_id}"
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        url = f"{base.rstrip('/')}/files/{file_id}/content"
        timeout = httpx.Timeout(self.timeout, read=max(self.timeout, 600.0))
        try:
            async with httpx.AsyncClient(timeout=timeout) as client, \
                    client.stream("GET", url, headers=headers) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    resp.raise_for_status()
                async for line in resp.aiter_lines():
                    yield line.encode()
        except httpx.HTTPError as raw:
            raise self.translate(raw, what) from None

    async def cancel(self, batch_id: str) -> BatchInfo:
        obj = await self._call(f"the batch {batch_id}", litellm().acancel_batch,
                               batch_id=batch_id)
        return BatchInfo.of(obj)

    async def list(self, *, after: str | None = None, limit: int = 100
                   ) -> tuple[list[BatchInfo], bool]:
        obj = await self._call("the list of batches", litellm().alist_batches, after=after,
                               limit=limit)
        data = obj.get("data") if isinstance(obj, Mapping) else getattr(obj, "data", None)
        more = obj.get("has_more") if isinstance(obj, Mapping) else getattr(obj, "has_more",
                                                                             False)
        return [BatchInfo.of(b) for b in (data or [])], bool(more)
