"""The openai SDK's HTTP client for an OpenAI-compatible endpoint, made in one place for the
providers that use it: the openai provider's own client, and the client litellm is handed
(`client=`, litellm's public parameter for OpenAI-compatible calls) when an httpx transport is
given (`ProviderOptions.endpoint.transport`, e.g. the simulated server in this process)."""

from __future__ import annotations

from typing import Any

__all__ = ["new_client"]


def new_client(base_url: str, key: str | None, size: int, transport: Any = None) -> Any:
    """An `AsyncOpenAI` client for an endpoint: the SDK's retries off, a pool of `size`
    connections, or the given httpx `transport` (`ProviderOptions.endpoint.transport`) instead
    of the network's."""
    import openai

    # the SDK's own HTTP client class and its Limits (httpx in openai 1.x-2.x, httpx2 in 3.x,
    # whose pool does not slow down with the number of connections as httpcore's does)
    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=size,
                                                    max_keepalive_connections=size)
    http = (openai.DefaultAsyncHttpxClient(limits=limits) if transport is None
            else openai.DefaultAsyncHttpxClient(transport=transport))
    return openai.AsyncOpenAI(api_key=key or "sk-no-key-required", base_url=base_url,
                              max_retries=0, http_client=http)
