"""One limiter per endpoint per process: concurrency, request and token rates, shared cool-down.

Every request to an endpoint, from any Sampler, Ensemble or concurrent `adecide` call of the
process, in any thread or event loop, passes the endpoint's `EndpointLimiter`. Endpoints are
keyed by (provider, api_base, a fingerprint of the API key), never the key itself
(`ensemble.providers.endpoints.endpoint_key`, which each provider computes for itself).

It lives with the providers: an endpoint is what a provider talks to, and the Router provider
builds one limiter per deployment; the sampler attaches to the limiter of its provider.

What it enforces, all at once:
- at most `max_concurrency` requests in flight (the smallest any user asked for), and an
  adaptive bound below it: halved on backpressure (429 / overloaded), regrown by one slot per
  `limit` successes (AIMD);
- a request rate: `rpm` if given, and a rate learned from backpressure (on a 429 the rate is set
  just under the success rate measured before it, then regrown slowly), requests evenly spaced;
- a tokens-per-minute budget `tpm`, fed by the usage replies report;
- one shared cool-down: a Retry-After holds every request to the endpoint, not only the one that
  received it.

Waiters queue in FIFO order and a release wakes exactly one waiter per free slot (no herd of
wake-ups: the cost per request does not grow with the number of waiting requests). State is
guarded by a threading lock and waiters are futures of their own event loops, so the limiter is
shared across threads and loops: each Ensemble's sync calls run on a loop of its own, and async
callers on theirs.

Written here rather than taken from asyncio-throttle (no longer a dependency: docs/sampling.md,
"One limiter per endpoint per process"): that throttle counts requests in a sliding window and
nothing else (no concurrency cap, cool-down or token budget), is not thread-safe, and wakes its
waiters by polling.

`Limiter` is the protocol every caller uses (the sampler's online requests, the Router's
deployments); `EndpointLimiter` is the in-process one and the default. A process that shares
its limits with other processes (a fleet of `ensemble serve` replicas, through Redis:
`ensemble.fleet.limits`) installs a wrapper with `use_limiter_backend`: `limiter_for` then
hands out the wrapper around each endpoint's in-process limiter.
"""

from __future__ import annotations

import asyncio
import collections
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["EndpointLimiter", "Limiter", "LimiterBackend", "LimiterStatus", "Ticket",
           "limiter_for", "reset_limiters", "use_limiter_backend"]

# learned-rate dynamics (tuned with tests/bench/bench_rate_limit.py, see docs/sampling.md)
_DECREASE = 0.9  # a 429 sets the rate to this share of the success rate measured before it
_GROWTH_PER_S = 0.005  # then the rate grows by this share per second without backpressure
_WINDOW_S = 1.0  # the success rate is measured over this window
_MIN_RATE = 0.05  # requests per second, floor of the learned rate
_BUSY = 5  # successes in the window before a 429 reads as "our rate is too high"
_HOLD_S = 2.0  # at most one rate decrease per this many seconds
_DEFAULT_COOLDOWN = 1.0  # seconds of cool-down after backpressure without a Retry-After
_MAX_COOLDOWN = 60.0


@dataclass(frozen=True)
class LimiterStatus:
    """What an endpoint's limiter is doing now (for progress and "waiting" lines)."""

    in_flight: int
    waiting: int
    limit: int
    max_concurrency: int
    cooldown_s: float  # seconds of shared cool-down left (0: none)
    rate: float | None  # requests per second enforced now (None: unpaced)
    backpressure_events: int


class Ticket:
    """A granted slot; give it back with `EndpointLimiter.release`."""

    __slots__ = ("est_tokens", "released", "sent_at")

    def __init__(self, est_tokens: float) -> None:
        self.est_tokens = est_tokens
        self.sent_at = time.monotonic()
        self.released = False


class Limiter(Protocol):
    """What a caller of an endpoint's limiter uses: attach its limits, take a slot before each
    request and give it back with the outcome."""

    name: str

    def attach(self, *, max_concurrency: int, rpm: float | None = None,
               tpm: float | None = None) -> int: ...

    def detach(self, token: int) -> None: ...

    async def acquire(self, *, est_tokens: float | None = None) -> Ticket: ...

    def release(self, ticket: Ticket, *, outcome: str = "ok", retry_after: float | None = None,
                tokens: float | None = None) -> None: ...

    def status(self) -> LimiterStatus: ...


class _Waiter:
    __slots__ = ("est_tokens", "fut", "granted", "loop", "ticket")

    def __init__(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None],
                 est_tokens: float) -> None:
        self.loop = loop
        self.fut = fut
        self.est_tokens = est_tokens
        self.granted = False
        self.ticket: Ticket | None = None


class EndpointLimiter:
    """The gate of one endpoint. Use `async with limiter.slot() as ticket` or acquire/release."""

    def __init__(self, name: str, *, max_concurrency: int, rpm: float | None = None,
                 tpm: float | None = None) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.max = max(1, int(max_concurrency))
        self.limit = float(self.max)
        self.in_flight = 0
        self.rpm = rpm
        self.tpm = tpm
        self.learned_rate: float | None = None
        self._rate_at = time.monotonic()
        self._next_send = 0.0
        self.cooldown_until = 0.0
        self._episode_until = 0.0  # one decrease per backpressure episode
        self._rate_hold_until = 0.0
        self._cooldown_streak = 0
        self.backpressure_events = 0
        self._successes: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, float]] = collections.deque()
        self._tokens_sum = 0.0
        self._tokens_in_flight = 0.0
        self._token_estimate = 0.0  # running mean tokens per request
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._timer_at: float | None = None
        self._users: dict[int, tuple[int, float | None, float | None]] = {}
        self._next_user = 0

    # -- configuration -----------------------------------------------------------------------
    def attach(self, *, max_concurrency: int, rpm: float | None = None,
               tpm: float | None = None) -> int:
        """A user (a Sampler) starts using the endpoint with these limits; while users overlap
        the tightest of each applies. Returns a token for `detach`."""
        with self._lock:
            self._next_user += 1
            self._users[self._next_user] = (max(1, int(max_concurrency)), rpm, tpm)
            self._apply_users()
            return self._next_user

    def detach(self, token: int) -> None:
        """The user is done: the limits of the remaining users apply (the learned rate and any
        cool-down stay: they describe the endpoint, not the user)."""
        with self._lock:
            if self._users.pop(token, None) is not None and self._users:
                self._apply_users()
            self._pump(time.monotonic())

    def _apply_users(self) -> None:
        users = list(self._users.values())
        m = min(u[0] for u in users)
        if m != self.max:
            grew = m > self.max
            self.max = m
            self.limit = float(m) if grew else min(self.limit, float(m))
        rpms = [u[1] for u in users if u[1] is not None]
        tpms = [u[2] for u in users if u[2] is not None]
        self.rpm = min(rpms) if rpms else None
        self.tpm = min(tpms) if tpms else None

    # -- acquiring ---------------------------------------------------------------------------
    async def acquire(self, *, est_tokens: float | None = None) -> Ticket:
        """Wait for a slot (FIFO) and take it."""
        est = self._token_estimate if est_tokens is None else float(est_tokens)
        loop = asyncio.get_running_loop()
        with self._lock:
            now = time.monotonic()
            if not self._waiters and self._admissible(now, est) == 0.0:
                return self._take(now, est)
            w = _Waiter(loop, loop.create_future(), est)
            self._waiters.append(w)
            self._pump(now)
        try:
            await w.fut
        except BaseException:
            with self._lock:
                if w.granted and w.ticket is not None:
                    self._give_back(w.ticket)
                else:
                    try:
                        self._waiters.remove(w)
                    except ValueError:
                        pass
                self._pump(time.monotonic())
            raise
        if w.ticket is None:  # pragma: no cover - granted waiters always hold a ticket
            raise RuntimeError("limiter granted a slot without a ticket")
        return w.ticket

    def _admissible(self, now: float, est: float) -> float:
        """0.0 if a request may go now; else seconds until time-based limits allow it
        (math.inf when only a release can free a slot)."""
        if self.in_flight >= max(1, int(self.limit)):
            return math.inf
        wait = max(0.0, self.cooldown_until - now)
        rate = self._rate(now)
        if rate is not None:
            wait = max(wait, self._next_send - now)
        if self.tpm is not None and est > 0:
            wait = max(wait, self._tpm_wait(now, est))
        return wait

    def _rate(self, now: float) -> float | None:
        """The enforced request rate (per second): the tighter of rpm and the learned rate."""
        rates = []
        if self.rpm is not None:
            rates.append(self.rpm / 60.0)
        if self.learned_rate is not None:
            # multiplicative growth while no backpressure arrives
            grown = self.learned_rate * (1.0 + _GROWTH_PER_S * max(0.0, now - self._rate_at))
            rates.append(grown)
        return min(rates) if rates else None

    def _tpm_wait(self, now: float, est: float) -> float:
        if self.tpm is None:
            return 0.0
        self._expire_tokens(now)
        budget = self.tpm
        if self._tokens_sum + self._tokens_in_flight + est <= budget or (
                self._tokens_sum == 0 and self._tokens_in_flight == 0):
            return 0.0
        # wait until enough of the last minute's usage has aged out
        need = self._tokens_sum + self._tokens_in_flight + est - budget
        freed = 0.0
        for t, n in self._tokens:
            freed += n
            if freed >= need:
                return max(0.0, t + 60.0 - now)
        return math.inf  # only in-flight requests hold the budget: wait for a release

    def _expire_tokens(self, now: float) -> None:
        while self._tokens and self._tokens[0][0] <= now - 60.0:
            _, n = self._tokens.popleft()
            self._tokens_sum -= n

    def _take(self, now: float, est: float) -> Ticket:
        self.in_flight += 1
        self._tokens_in_flight += est
        rate = self._rate(now)
        if rate is not None:
            self._next_send = max(self._next_send, now) + 1.0 / rate
        return Ticket(est)

    def _pump(self, now: float) -> None:
        """Grant waiters in order while the head may go; arm a timer for time-based waits."""
        while self._waiters:
            head = self._waiters[0]
            if head.fut.cancelled():
                self._waiters.popleft()
                continue
            wait = self._admissible(now, head.est_tokens)
            if wait > 0.0:
                if math.isfinite(wait):
                    self._arm_timer(head.loop, now + wait)
                return
            self._waiters.popleft()
            head.granted = True
            head.ticket = self._take(now, head.est_tokens)
            try:
                head.loop.call_soon_threadsafe(_resolve, head.fut)
            except RuntimeError:  # its loop is closed: nobody will use the slot
                self._give_back(head.ticket)

    def _arm_timer(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer_at is not None and self._timer_at <= at:
            return
        self._timer_at = at
        delay = max(0.0, at - time.monotonic())

        def fire() -> None:
            with self._lock:
                if self._timer_at == at:
                    self._timer_at = None
                self._pump(time.monotonic())

        try:
            loop.call_soon_threadsafe(loop.call_later, delay, fire)
        except RuntimeError:
            self._timer_at = None

    # -- releasing ---------------------------------------------------------------------------
    def _give_back(self, ticket: Ticket) -> None:
        if ticket.released:
            return
        ticket.released = True
        self.in_flight -= 1
        self._tokens_in_flight = max(0.0, self._tokens_in_flight - ticket.est_tokens)

    def release(self, ticket: Ticket, *, outcome: str = "ok", retry_after: float | None = None,
                tokens: float | None = None) -> None:
        """Give the slot back. outcome: "ok" (a reply), "backpressure" (429 / overloaded: the
        endpoint slows down and cools down for Retry-After) or "error" (anything else)."""
        with self._lock:
            now = time.monotonic()
            self._give_back(ticket)
            if tokens:
                self._tokens.append((now, float(tokens)))
                self._tokens_sum += float(tokens)
                self._token_estimate = (0.9 * self._token_estimate + 0.1 * float(tokens)
                                        if self._token_estimate else float(tokens))
            if outcome == "ok":
                self._successes.append(now)
                while self._successes and self._successes[0] < now - _WINDOW_S:
                    self._successes.popleft()
                self._cooldown_streak = 0
                if self.limit < self.max:
                    self.limit = min(float(self.max), self.limit + 1.0 / max(1.0, self.limit))
            elif outcome == "backpressure":
                self._backpressure(now, retry_after)
            self._pump(now)

    def _backpressure(self, now: float, retry_after: float | None) -> None:
        self.backpressure_events += 1
        if retry_after is None or retry_after <= 0:
            retry_after = min(_MAX_COOLDOWN, _DEFAULT_COOLDOWN * 2 ** self._cooldown_streak)
        retry_after = min(float(retry_after), _MAX_COOLDOWN)
        self.cooldown_until = max(self.cooldown_until, now + retry_after)
        if now < self._episode_until:
            return  # the same episode: replies to requests sent before the first 429
        self._cooldown_streak += 1
        self._episode_until = self.cooldown_until
        self.limit = max(1.0, self.limit / 2.0)
        while self._successes and self._successes[0] < now - _WINDOW_S:
            self._successes.popleft()
        measured = len(self._successes) / _WINDOW_S
        current = self._rate(now)
        if len(self._successes) >= _BUSY and now >= self._rate_hold_until:
            # a 429 while we were sending fast: our rate is the likely cause. Go just under the
            # success rate seen before it (never below half the current rate in one step).
            # At low traffic a 429 says little about our rate (a provider's random 429s would
            # otherwise grind it to a halt): the cool-down and the halved concurrency suffice.
            target = measured if current is None else max(min(measured, current), current / 2)
            self.learned_rate = max(_MIN_RATE, _DECREASE * target)
            self._rate_at = self.cooldown_until
            self._rate_hold_until = self.cooldown_until + _HOLD_S
        self._next_send = self.cooldown_until

    # -- observing ---------------------------------------------------------------------------
    @property
    def token_estimate(self) -> float:
        """The running mean of tokens per request (0 before the first reply with usage)."""
        with self._lock:
            return self._token_estimate

    def status(self) -> LimiterStatus:
        with self._lock:
            now = time.monotonic()
            return LimiterStatus(
                in_flight=self.in_flight, waiting=len(self._waiters),
                limit=max(1, int(self.limit)), max_concurrency=self.max,
                cooldown_s=max(0.0, self.cooldown_until - now), rate=self._rate(now),
                backpressure_events=self.backpressure_events)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


# a backend wraps an endpoint's in-process limiter (its key, the limiter) in one of its own
LimiterBackend = Callable[[tuple[str, str, str], EndpointLimiter], Limiter]

_registry_lock = threading.Lock()
_registry: dict[tuple[str, str, str], Limiter] = {}
_backend: LimiterBackend | None = None


def limiter_for(key: tuple[str, str, str], *, max_concurrency: int, rpm: float | None = None,
                tpm: float | None = None) -> Limiter:
    """The process-wide limiter of an endpoint, created on first use (wrapped by the installed
    backend, if any). The limits given apply when nobody is attached; users `attach` theirs
    for as long as they sample."""
    with _registry_lock:
        lim = _registry.get(key)
        if lim is None:
            name = f"{key[0]} {key[1]}".strip()
            local = EndpointLimiter(name, max_concurrency=max_concurrency, rpm=rpm, tpm=tpm)
            lim = _registry[key] = local if _backend is None else _backend(key, local)
    return lim


def use_limiter_backend(backend: LimiterBackend | None) -> None:
    """Wrap every endpoint's limiter made from now on in `backend` (None: the in-process
    limiters alone). Limiters made before are forgotten, so no endpoint has two."""
    global _backend
    with _registry_lock:
        _backend = backend
        _registry.clear()


def reset_limiters() -> None:
    """Forget every endpoint's limiter (tests; a long-lived process that changes its limits)."""
    with _registry_lock:
        _registry.clear()
