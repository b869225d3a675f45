"""Per-provider request gates: bounded, adaptive concurrency (AIMD) and a requests-per-minute
throttle, shared by every Sampler that talks to the same endpoint from one event loop."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

__all__ = ["AdaptiveLimiter", "ProviderGate", "gate_for"]


class AdaptiveLimiter:
    """An async context manager bounding in-flight requests; the bound adapts to rate limits.

    Multiplicative decrease on a 429 (the bound halves), additive increase on success (about one
    slot per `limit` successes) back up to `max`.
    """

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

    def lower_max(self, max_concurrency: int) -> None:
        """A second user of the gate asks for a smaller bound: the smaller one wins."""
        m = max(1, int(max_concurrency))
        if m < self.max:
            self.max = m
            self.limit = min(self.limit, float(m))

    def backoff(self) -> None:
        """A 429: halve the concurrency (multiplicative decrease)."""
        self.limit = max(1.0, self.limit / 2)

    def success(self) -> None:
        """A success: grow back by about one slot per `limit` successes (additive increase)."""
        if self.limit < self.max:
            grown = min(float(self.max), self.limit + 1.0 / max(1.0, self.limit))
            admits_more = int(grown) > int(self.limit)
            self.limit = grown
            if admits_more and self._cond is not None:
                # wake the waiters that the larger bound admits
                asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        cond = self._condition()
        async with cond:
            cond.notify_all()


class ProviderGate:
    """What every request to one endpoint passes: the adaptive limiter, then the rpm throttle."""

    def __init__(self, max_concurrency: int, rpm: float | None) -> None:
        self.limiter = AdaptiveLimiter(max_concurrency)
        self.rpm: float | None = None
        self.throttler: Any = None
        self.set_rpm(rpm)

    def set_rpm(self, rpm: float | None) -> None:
        """Add or tighten the requests-per-minute limit (the smaller one wins)."""
        if rpm is None or (self.rpm is not None and rpm >= self.rpm):
            return
        from asyncio_throttle import Throttler

        self.rpm = float(rpm)
        # evenly spaced, one request every 60/rpm seconds: no burst of a minute's worth at the
        # start, which providers that meter per second would answer with 429s
        self.throttler = Throttler(rate_limit=1, period=60.0 / float(rpm))

    async def throttle(self) -> None:
        if self.throttler is not None:
            async with self.throttler:
                pass


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], ProviderGate]] \
    = weakref.WeakKeyDictionary()


def gate_for(provider: str, api_base: str | None, *, max_concurrency: int,
             rpm: float | None) -> ProviderGate:
    """The gate of (provider, api_base) in the running event loop, created on first use.

    Samplers on one endpoint share it, so `max_concurrency` and `rpm` bound the endpoint, not
    each sampler; when two samplers ask for different bounds the smaller one applies.
    """
    loop = asyncio.get_running_loop()
    gates = _GATES.setdefault(loop, {})
    key = (provider, api_base or "")
    gate = gates.get(key)
    if gate is None:
        gate = gates[key] = ProviderGate(max_concurrency, rpm)
    else:
        gate.limiter.lower_max(max_concurrency)
        gate.set_rpm(rpm)
    return gate
