"""Adaptive concurrency: at most `limit` requests in flight, halved on 429, regrown after (AIMD)."""

from __future__ import annotations

import asyncio


class AdaptiveLimiter:
    """An async context manager bounding in-flight requests; the bound adapts to rate limits."""

    def __init__(self, max_concurrency: int) -> None:
        self.max = max(1, int(max_concurrency))
        self.limit = float(self.max)
        self.in_flight = 0
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    async def __aenter__(self) -> AdaptiveLimiter:
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.in_flight < max(1, int(self.limit)))
            self.in_flight += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        cond = self._condition()
        async with cond:
            self.in_flight -= 1
            cond.notify_all()

    def backoff(self) -> None:
        """A 429: halve the concurrency (multiplicative decrease)."""
        self.limit = max(1.0, self.limit / 2)

    def success(self) -> None:
        """A success: grow back by about one slot per `limit` successes (additive increase)."""
        if self.limit < self.max:
            self.limit = min(float(self.max), self.limit + 1.0 / max(1.0, self.limit))
            if self._cond is not None:
                # wake waiters that the larger limit admits
                asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        cond = self._condition()
        async with cond:
            cond.notify_all()
