"""A replica's link to the fleet's Redis: one client, its health, the replicas alive.

Every piece of shared state (the limits, the vote cache, the spend ledger) goes through one
`FleetConnection`. Redis is reached with `redis-py`'s asyncio client; state that must change
atomically is a Lua script (`redis-py`'s `register_script`: EVALSHA, loaded again after a
restart), with Redis's own clock (`TIME`), so the replicas' clocks never have to agree.

Health: a command that fails (connection refused, a timeout, a reset) marks the link down and
tells every subscriber (`subscribe`): the limiters fall back to their local shares (limit ÷
replicas), the caches and the ledger to this replica alone. A probe pings every
`probe_interval` seconds while down; the first answer marks the link up again and tells the
subscribers, who go back to the shared state. Nothing waits on a dead Redis for longer than
`timeout` (the socket's connect and read timeouts).

Replicas: each replica heartbeats its id into a sorted set every `heartbeat` seconds (expiring
after three beats); the count of live ids is what a local share divides by. The count last seen
is kept while Redis is down; before any was seen, the configured `replicas` (else 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import EnsembleError, InputError
from ..secrets import redact, register

__all__ = ["FleetConnection", "FleetDown", "FleetSlow", "FleetUnavailable", "public_redis_url"]

_HEARTBEAT_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return redis.call('ZCARD', KEYS[1])
"""

_LEAVE_LUA = """
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
"""


class FleetUnavailable(InputError):
    """Redis could not be reached when the replica started (and the config does not allow
    local limits)."""


class FleetDown(EnsembleError):
    """A Redis command failed: the link is down now (callers fall back to local state)."""


class FleetSlow(FleetDown):
    """A Redis command timed out but Redis answers: the link stays up (the command's effect
    is unknown; callers that retry must be safe to run it twice)."""


def public_redis_url(url: str) -> str:
    """The Redis URL without its password (what logs, /health and errors may show)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "redis://(unparseable URL)"
    if parts.password is None and "@" not in parts.netloc:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    auth = f"{user}:***@" if parts.password is not None else (f"{user}@" if user else "")
    return urlunsplit((parts.scheme, auth + host, parts.path, "", ""))


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions as rex

    return (rex.ConnectionError, rex.TimeoutError, rex.BusyLoadingError, OSError,
            asyncio.TimeoutError)


class FleetConnection:
    """The link of one replica to the fleet's Redis (`url`; `prefix` names this fleet's keys).

    `replicas`: how many replicas the fleet runs, for local shares before Redis has been
    seen (afterwards the heartbeat's count, never below this); `on_down`: "refuse" (Redis
    unreachable at start is an error) or "local" (start on local shares, said in /health).
    """

    def __init__(self, url: str, *, prefix: str = "ensemble", replicas: int | None = None,
                 on_down: str = "refuse", timeout: float = 1.0, heartbeat: float = 1.0,
                 probe_interval: float = 0.5) -> None:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise InputError(f"the Redis URL {public_redis_url(url)!r} must start with "
                             "redis://, rediss:// or unix://")
        if on_down not in ("refuse", "local"):
            raise InputError(f"on_redis_down must be 'refuse' or 'local', got {on_down!r}")
        self.url = url
        with contextlib.suppress(ValueError):
            register(urlsplit(url).password)  # never in a log line or an error message
        self.public_url = public_redis_url(url)
        self.prefix = prefix
        self.configured_replicas = replicas
        self.on_down = on_down
        self.timeout = float(timeout)
        self.heartbeat = float(heartbeat)
        self.probe_interval = float(probe_interval)
        self.replica_id = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.healthy = False
        self.seen_replicas: int | None = None
        self.down_since: float | None = None
        self.last_error: str | None = None
        self.outages = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._scripts: dict[str, Any] = {}
        self._subscribers: list[Callable[[bool], None]] = []
        self._beats: list[Callable[[], Awaitable[None]]] = []
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[Any]] = set()

    # -- keys and scripts --------------------------------------------------------------------
    def key(self, *parts: str, tag: str) -> str:
        """A key of this fleet; keys with one `tag` share a Redis Cluster slot ({tag})."""
        return ":".join((self.prefix, "{" + tag + "}", *parts))

    def script(self, source: str) -> Any:
        s = self._scripts.get(source)
        if s is None:
            s = self._scripts[source] = self._client.register_script(source)
        return s

    @property
    def replicas(self) -> int:
        """What a local share divides by: the replicas last seen alive (at least the
        configured count), else the configured count, else 1."""
        seen = self.seen_replicas or 0
        return max(1, seen, self.configured_replicas or 0)

    def usable(self) -> bool:
        """Whether shared state can be used now, from the running loop."""
        if not self.healthy or self._client is None:
            return False
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect and ping (in the serving loop). Unreachable: `FleetUnavailable` with one
        line, or, with on_down "local", start down (local shares) and keep probing."""
        import redis.asyncio as aioredis

        self.loop = asyncio.get_running_loop()
        self._client = aioredis.Redis.from_url(
            self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
            retry_on_timeout=False, decode_responses=True)
        try:
            await self._beat()
            self.healthy = True
        except _redis_errors() as exc:
            self.last_error = _why(exc)
            if self.on_down != "local":
                await self._close_client()
                raise FleetUnavailable(
                    f"cannot reach Redis at {self.public_url} ({self.last_error}); start it, "
                    "fix the Redis URL (--redis-url or fleet.redis_url), or set "
                    "fleet.on_redis_down: local to run on local shares of the limits") from None
            self.down_since = time.monotonic()
            self.outages += 1
            print(f"ensemble: warning: Redis at {self.public_url} is unreachable "
                  f"({self.last_error}); running on local shares of the limits (limit ÷ "
                  f"{self.replicas} replicas) until it answers", file=sys.stderr, flush=True)
        self._task = asyncio.ensure_future(self._run())

    async def aclose(self) -> None:
        # every wait here is bounded: a client cancelled mid-command must not hold the exit
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=self.timeout)
        if self.healthy:
            for closer in list(self._closers):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closer(), self.timeout)
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=self.timeout)
        if self.healthy:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.script(_LEAVE_LUA)(
                    keys=[self.key("replicas", tag="fleet")], args=[self.replica_id]),
                    self.timeout)
        await self._close_client()
        self.healthy = False

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        self._scripts.clear()
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.aclose(), self.timeout)

    # -- health ------------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[bool], None]) -> None:
        """`callback(up)` on every change of health (False: down, True: back)."""
        self._subscribers.append(callback)

    def on_beat(self, beat: Callable[[], Awaitable[None]]) -> None:
        """Run `beat()` at every heartbeat while Redis is up (lease renewals, ledger flushes)."""
        self._beats.append(beat)

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Run `closer()` when the replica leaves while Redis is up (what it has not told)."""
        self._closers.append(closer)

    def lost(self, exc: BaseException) -> None:
        """A command failed: the link is down until a probe gets an answer."""
        self.last_error = _why(exc)
        if not self.healthy:
            return
        self.healthy = False
        self.down_since = time.monotonic()
        self.outages += 1
        print(f"ensemble: warning: lost Redis at {self.public_url} ({self.last_error}); "
              f"limits fall back to local shares (limit ÷ {self.replicas} replicas) until it "
              "answers", file=sys.stderr, flush=True)
        for cb in list(self._subscribers):
            cb(False)

    def _back(self) -> None:
        self.healthy = True
        down = time.monotonic() - (self.down_since or time.monotonic())
        self.down_since = None
        print(f"ensemble: Redis at {self.public_url} answers again after {down:.1f} s; "
              "shared limits resume", file=sys.stderr, flush=True)
        for cb in list(self._subscribers):
            cb(True)

    async def run(self, source: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run a Lua script; a Redis failure marks the link down and raises `FleetDown`."""
        if not self.usable():
            raise FleetDown(f"Redis at {self.public_url} is down")
        try:
            return await self.script(source)(keys=list(keys), args=list(args))
        except _redis_errors() as exc:
            raise await self._failed(exc) from None

    async def command(self, name: str, *args: Any) -> Any:
        """One plain Redis command, under the same failure handling as `run`."""
        if not self.usable():
            raise FleetDown(f"Redis at {self.public_url} is down")
        try:
            return await getattr(self._client, name)(*args)
        except _redis_errors() as exc:
            raise await self._failed(exc) from None

    async def _failed(self, exc: BaseException) -> FleetDown:
        """The error for a failed command; the link marked down unless it only timed out
        while Redis still answers a ping (a reply later than `timeout`: a busy Redis, or this
        replica's loop held up on a loaded machine; taken for lost, the replica ran 0.7-2.3 s
        on its local share on top of the fleet's limit). The caller asks again or goes
        without the shared state for this one call."""
        import redis.exceptions as rex

        if isinstance(exc, (rex.TimeoutError, TimeoutError)) and self._client is not None:
            try:
                await asyncio.wait_for(self._client.ping(), self.timeout)
            except Exception:  # noqa: BLE001 - no answer either: lost, below
                pass
            else:
                return FleetSlow(f"Redis at {self.public_url} answered late ({_why(exc)})")
        self.lost(exc)
        return FleetDown(f"Redis at {self.public_url}: {self.last_error}")

    def spawn(self, coro: Awaitable[Any]) -> None:
        """Run `coro` in the background (a release, a flush), keeping a reference to it."""
        task = asyncio.ensure_future(coro)
        self._pending.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled():
            task.exception()  # FleetDown was already accounted for; never "never retrieved"

    async def _beat(self) -> None:
        ttl = int(max(3 * self.heartbeat, 1.0) * 1000)
        live = await self.script(_HEARTBEAT_LUA)(keys=[self.key("replicas", tag="fleet")],
                                                 args=[self.replica_id, ttl])
        self.seen_replicas = int(live)

    async def _run(self) -> None:
        """Heartbeat while up; probe while down."""
        while True:
            await asyncio.sleep(self.heartbeat if self.healthy else self.probe_interval)
            try:
                await self._beat()
            except _redis_errors() as exc:
                if self.healthy:
                    await self._failed(exc)  # lost, unless it was only late
                else:
                    self.last_error = _why(exc)
                continue
            except Exception as exc:  # noqa: BLE001 - e.g. a script error: keep beating
                self.last_error = _why(exc)
                continue
            if not self.healthy:
                # the connections opened before the outage are dead (a restarted Redis closed
                # them): drop them, or each fails once and the link flaps down and up again
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._client.connection_pool.disconnect(),
                                           self.timeout)
                self._back()
            for beat in list(self._beats):
                with contextlib.suppress(FleetDown):
                    await beat()

    def describe(self) -> dict[str, Any]:
        """The link as /health shows it (the URL without its password)."""
        doc: dict[str, Any] = {"redis": self.public_url,
                               "state": "ok" if self.healthy else "down",
                               "replica": self.replica_id, "replicas": self.replicas,
                               "outages": self.outages}
        if not self.healthy:
            doc["limits"] = f"local shares (limit ÷ {self.replicas})"
            doc["down_s"] = round(time.monotonic() - (self.down_since or time.monotonic()), 1)
            if self.last_error:
                doc["error"] = self.last_error
        return doc


def _why(exc: BaseException) -> str:
    text = redact(str(exc)).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
