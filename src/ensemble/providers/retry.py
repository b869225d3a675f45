"""The one retry policy, for online requests (the sampler) and Batch API calls alike, driven by
tenacity's public API: an `AsyncRetrying` loop with this policy's predicates.

- 429 and overloaded replies (`backpressure`) do not use up attempts: online, the endpoint's
  limiter holds the next attempt for the Retry-After (its shared cool-down); a Batch API call
  waits out any failure's Retry-After itself;
- other transient errors (`retryable`: 5xx, timeouts, dropped connections, malformed replies)
  get at most `max_attempts` attempts (or the error's own `attempts_cap`; one, e.g. for a
  refused loopback port, is not retried at all), with jittered exponential backoff over those
  attempts;
- every retry happens within `max_retry_time` seconds of the first attempt, and a Retry-After
  longer than the time left gives up at once (waiting part of it would only fail later);
- everything else fails at once.

One request's retries are a `Tries` (what the predicates read); `RetryPolicy.retrying(tries)`
is the loop. A request's first attempt runs outside it and hands its failure over
(`Tries.handover`): tenacity's asyncio loop costs 30-60 µs of CPU per call, a tenth of an
online request's whole cost, which a request that succeeds at once (nearly all) need not pay.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import ProviderError

__all__ = ["RetryPolicy", "Tries"]

T = TypeVar("T")


class Tries:
    """One request's retries so far, which the policy's predicates read: its failed attempts
    that count against `max_attempts` (`transient`), when its first attempt was sent
    (`first`: the time budget runs from there), its last failure, and a Retry-After that
    outran the budget (`asked`)."""

    def __init__(self) -> None:
        self.transient = 0
        self.first: float | None = None
        self.last: ProviderError | None = None
        self.asked: float | None = None
        self.pending: ProviderError | None = None

    def sent(self) -> None:
        """An attempt is being sent (the first one starts the time budget)."""
        if self.first is None:
            self.first = time.monotonic()

    def elapsed(self) -> float:
        return 0.0 if self.first is None else time.monotonic() - self.first

    def handover(self, failure: ProviderError) -> Tries:
        """The failure of an attempt made before the loop: the loop's first attempt raises it
        (`raise_pending`), so that the policy counts it and waits before the next."""
        self.pending = failure
        return self

    def raise_pending(self) -> None:
        failure, self.pending = self.pending, None
        if failure is not None:
            raise failure


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

    def retries(self, exc: BaseException) -> bool:
        """Whether a failure is worth another attempt at all (tenacity's `retry`)."""
        return (isinstance(exc, ProviderError) and (exc.retryable or exc.backpressure)
                and exc.attempts_cap != 1)

    def gives_up(self, tries: Tries) -> bool:
        """Whether the retries end after `tries.last` (tenacity's `stop`): its attempts used
        up, the time budget spent, or a Retry-After longer than what is left of it."""
        exc = tries.last
        if exc is None:
            return False
        elapsed = tries.elapsed()
        if tries.transient >= self.cap(exc) or elapsed >= self.max_retry_time:
            return True
        if exc.retry_after is not None and exc.retry_after > self.max_retry_time - elapsed:
            tries.asked = exc.retry_after
            return True
        return False

    def backoff(self, attempts: int) -> float:
        """Seconds before the next attempt after `attempts` transient failures: uniform in
        [0, min(max_wait, multiplier * 2^attempts)] (full jitter, tenacity's
        `wait_random_exponential` over the transient attempts alone: a run of 429s before a
        500 does not lengthen its backoff)."""
        return random.uniform(0.0, min(self.max_wait,
                                       self.multiplier * 2.0 ** max(1, attempts)))

    def delay(self, tries: Tries, *, limiter_holds: bool) -> float:
        """Seconds to wait before the next attempt (tenacity's `wait`), within the time left.
        With `limiter_holds` (online) backpressure waits not here but in the endpoint's
        limiter, whose shared cool-down holds the next attempt for the Retry-After, and a
        transient error backs off; without (a Batch API call) a failure's Retry-After is
        waited out here, and one without backs off."""
        exc = tries.last
        if exc is None:
            return 0.0
        if limiter_holds:
            wait = 0.0 if exc.backpressure else self.backoff(tries.transient)
        elif exc.retry_after is not None:
            wait = exc.retry_after
        else:
            wait = self.backoff(tries.transient)
        return min(wait, max(0.0, self.max_retry_time - tries.elapsed()))

    def retrying(self, tries: Tries, *, gave_up: Callable[[Tries], ProviderError],
                 limiter_holds: bool = False,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 before_sleep: Callable[[Any], Any] | None = None) -> Any:
        """tenacity's `AsyncRetrying` under this policy for one request: a failure it does not
        retry is raised as it is; when the retries end, `gave_up(tries)` is raised."""
        from tenacity import AsyncRetrying, retry_if_exception

        def after(state: Any) -> None:  # count the failed attempt
            exc = state.outcome.exception()
            if isinstance(exc, ProviderError):
                tries.last = exc
                if not exc.backpressure:
                    tries.transient += 1

        def give_up(state: Any) -> Any:
            raise gave_up(tries)

        return AsyncRetrying(
            retry=retry_if_exception(self.retries), after=after,
            stop=lambda state: self.gives_up(tries),
            wait=lambda state: self.delay(tries, limiter_holds=limiter_holds),
            sleep=sleep, before_sleep=before_sleep, retry_error_callback=give_up)

    async def call(self, fn: Callable[[], Awaitable[T]],
                   translate: Callable[[BaseException], ProviderError]) -> T:
        """`await fn()` under this policy, every failure translated; for calls with no
        limiter of their own (a Batch API's files and batches). When the retries end, the
        last failure is raised."""
        tries = Tries()

        def last(tries: Tries) -> ProviderError:
            assert tries.last is not None  # the loop gives up only after a failure
            return tries.last

        async for attempt in self.retrying(tries, gave_up=last):
            with attempt:
                tries.sent()
                try:
                    return await fn()
                except Exception as raw:  # noqa: BLE001 - translated in one place
                    raise translate(raw) from None
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover
