"""The one retry policy, for online requests (the sampler) and Batch API calls alike.

- 429 and overloaded replies (`backpressure`) wait out their Retry-After and do not use up
  attempts, within `max_retry_time`;
- other transient errors (`retryable`: 5xx, timeouts, dropped connections, malformed replies)
  get at most `max_attempts` attempts (or the error's own `attempts_cap`, e.g. one for a
  refused loopback port), with tenacity's jittered exponential backoff;
- everything else fails at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ..errors import ProviderError

__all__ = ["RetryPolicy"]

T = TypeVar("T")


class _Attempt:
    """The piece of tenacity's RetryCallState its wait functions read."""

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long one request (or one Batch API call) is tried."""

    max_attempts: int = 6
    max_retry_time: float = 600.0
    multiplier: float = 0.25
    max_wait: float = 20.0

    def cap(self, exc: ProviderError) -> int:
        """Attempts this failure gets at most."""
        own = exc.attempts_cap  # set on errors that would repeat (a refused loopback port)
        return min(self.max_attempts, own) if own is not None else self.max_attempts

    def gives_up(self, exc: ProviderError, attempts: int, elapsed: float) -> bool:
        """Whether to stop after `attempts` counted attempts and `elapsed` seconds."""
        if not (exc.retryable or exc.backpressure):
            return True
        return attempts >= self.cap(exc) or elapsed >= self.max_retry_time

    def backoff(self, attempts: int) -> float:
        """Seconds before the next attempt after `attempts` transient failures (jittered)."""
        from tenacity import wait_random_exponential

        wait = wait_random_exponential(multiplier=self.multiplier, max=self.max_wait)
        return float(wait(_Attempt(max(1, attempts))))  # type: ignore[arg-type]

    def delay(self, exc: ProviderError, attempts: int) -> float:
        """Seconds to wait before retrying `exc`: its Retry-After, else the backoff."""
        if exc.retry_after is not None:
            return float(exc.retry_after)
        return self.backoff(attempts)

    async def call(self, fn: Callable[[], Awaitable[T]],
                   translate: Callable[[BaseException], ProviderError]) -> T:
        """`await fn()` under this policy, every failure translated; for calls with no
        limiter of their own (a Batch API's files and batches)."""
        t0 = time.monotonic()
        attempts = 0
        while True:
            try:
                return await fn()
            except Exception as raw:  # noqa: BLE001 - translated in one place
                exc = translate(raw)
            if not exc.backpressure:
                attempts += 1
            elapsed = time.monotonic() - t0
            if self.gives_up(exc, attempts, elapsed):
                raise exc
            await asyncio.sleep(min(self.delay(exc, attempts),
                                    max(0.0, self.max_retry_time - elapsed)))


