"""Limits shared by a fleet of replicas through Redis, in front of each replica's own limiter.

`FleetLimiter` implements `ensemble.providers.limiter.Limiter` around an endpoint's in-process
`EndpointLimiter`; `fleet_limiters(conn)` is the backend `use_limiter_backend` installs, so
every request of the replica to an upstream deployment passes both.

Fleet-wide (in Redis, one set of keys per upstream deployment, hash-tagged for Redis Cluster):
- the in-flight cap (`max_concurrency`): a sorted set of leases, each expiring `lease_ttl`
  seconds after its last renewal (the replica's heartbeat renews its own), so a replica killed
  mid-request gives its slots back within `lease_ttl`;
- the request rate (`rpm`): GCRA (the generic cell rate algorithm, a theoretical arrival time
  advanced by 60/rpm seconds per request; a tolerance of one request), so requests are spaced
  evenly across the fleet as the in-process limiter spaces them in one process, and any window
  of W seconds holds at most W·rpm/60 + 2 requests;
- the token rate (`tpm`): the same algorithm weighted by tokens (a tolerance of one request's
  reservation): a request reserves the
  endpoint's running mean tokens per request on admission, and its release charges or refunds
  the difference with what the reply reported (an error or an unsent request refunds it all);
- the cool-down: a 429 or overload anywhere (with its Retry-After, else 1 s) holds every
  replica's next request to that deployment.

One round trip per request: a release is not sent on its own at once; the replica's next
acquire carries it (and every other release since its last call) in its own script call, and a
release no acquire picks up within `_TELL_DELAY` (10 ms) goes alone, with the others of those
10 ms. So another replica may see a freed in-flight slot up to 10 ms late; a 429's cool-down is
told at once. (Two calls per request cost a replica about a third more CPU than the in-process
limiter: bench_fleet throughput.)

Per replica (the in-process limiter, as without a fleet): the AIMD concurrency bound and the
learned rate. They are control loops on what one process observes (its own successes before a
429); merging them across replicas would need a consensus on whose measurement counts, while the
shared cool-down already stops the whole fleet on a 429, so each replica's loop converges on its
own share. The FIFO queue of a replica's waiters is local too; at most one of them at a time
polls Redis while the fleet is saturated.

When Redis is lost, each replica attaches local shares of the limits to its in-process limiter
(max_concurrency, rpm and tpm divided by the replicas last seen alive, `FleetConnection.replicas`;
the tpm share also paced as requests of the mean size, as the fleet paces it)
and drops them when Redis answers again; requests in flight are never failed by the outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import math
import time

from ..providers.limiter import EndpointLimiter, Limiter, LimiterBackend, LimiterStatus, Ticket
from .connection import FleetConnection, FleetDown

__all__ = ["FleetLimiter", "FleetTicket", "fleet_limiters"]

LEASE_TTL = 15.0  # seconds a lease outlives its last renewal (a killed replica's slots)
_IN_FLIGHT_POLL = 0.01  # seconds between polls while the fleet's in-flight cap is full
_MAX_POLL = 1.0  # longest single wait before asking Redis again

# What the replica did not tell yet: the leases of requests done since its last call and the
# net token charge (+) or refund (-) of their replies; both scripts apply it first. KEYS: the
# in-flight set, the rate, the tokens, the cool-down; ARGV[first..]: lease, tokens pairs.
# Waits come back in microseconds (a script's numbers reach Python as integers).
_TELL = """
local function tell(now, tiv, first)
  local d = 0
  for i = first, #ARGV, 2 do
    if ARGV[i] ~= '' then redis.call('ZREM', KEYS[1], ARGV[i]) end
    d = d + tonumber(ARGV[i + 1])
  end
  if tiv > 0 and d ~= 0 then
    local base = tonumber(redis.call('GET', KEYS[3]) or '0')
    if d > 0 and base < now then base = now end
    local nt = math.max(base + d * tiv, now)
    if nt > now then
      redis.call('SET', KEYS[3], nt, 'PX', math.ceil(nt - now) + 1000)
    else
      redis.call('DEL', KEYS[3])
    end
  end
end
-- Redis's clock in milliseconds to the microsecond: under a high limit (6,000,000/min is one
-- request per 10 us) a whole-millisecond clock fitted ~2 grants in a millisecond and refused
-- the rest, so nearly every request of a busy replica waited and asked again
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
"""

_ACQUIRE = _TELL + """
tell(now, tonumber(ARGV[6]), 8)
local cd = tonumber(redis.call('GET', KEYS[4]) or '0')
if cd > now then return {0, math.ceil((cd - now) * 1000), 'cooldown'} end
local cap = tonumber(ARGV[3])
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if redis.call('ZCARD', KEYS[1]) >= cap then return {0, -1, 'in-flight'} end
end
local riv = tonumber(ARGV[4])
local tat = now
if riv > 0 then
  tat = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), now)
  local over = tat - now - tonumber(ARGV[5])
  if over > 0 then return {0, math.ceil(over * 1000), 'rate'} end
end
local tiv = tonumber(ARGV[6])
local est = tonumber(ARGV[7])
local ttat = now
if tiv > 0 and est > 0 then
  ttat = math.max(tonumber(redis.call('GET', KEYS[3]) or '0'), now)
  -- a tolerance of one request's tokens, as the rate's of one request: a waiter that wakes
  -- late catches up instead of losing the time (under load: 72% of the limit without it)
  local tover = ttat - now - est * tiv
  if tover > 0 then return {0, math.ceil(tover * 1000), 'tokens'} end
end
if riv > 0 then
  redis.call('SET', KEYS[2], tat + riv, 'PX', math.ceil(tat + riv - now) + 1000)
end
if tiv > 0 and est > 0 then
  local nt = ttat + est * tiv
  redis.call('SET', KEYS[3], nt, 'PX', math.ceil(nt - now) + 1000)
end
if cap > 0 then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
end
return {1, 0, ''}
"""

_RELEASE = _TELL + """
tell(now, tonumber(ARGV[1]), 3)
local cd = tonumber(ARGV[2])
if cd > 0 then
  local hold = now + cd
  local cur = tonumber(redis.call('GET', KEYS[4]) or '0')
  if hold > cur then redis.call('SET', KEYS[4], hold, 'PX', math.ceil(cd) + 1000) end
end
return 1
"""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1
"""

_TELL_DELAY = 0.01  # seconds a release waits for the next acquire to carry it to Redis
_DEFAULT_COOLDOWN = 1.0  # seconds the fleet holds after a 429 without Retry-After
_MAX_COOLDOWN = 60.0
_ids = itertools.count(1)


class FleetTicket(Ticket):
    """A slot of the replica's limiter and, while Redis answers, a lease of the fleet's."""

    __slots__ = ("lease", "local", "reserved")

    def __init__(self, local: Ticket, lease: str | None, reserved: float) -> None:
        super().__init__(local.est_tokens)
        self.local = local
        self.lease = lease
        self.reserved = reserved  # tokens reserved in the fleet's token rate


class FleetLimiter:
    """One upstream deployment's limits, shared by the fleet (see the module's docstring)."""

    def __init__(self, key: tuple[str, str, str], local: EndpointLimiter,
                 conn: FleetConnection, *, lease_ttl: float = LEASE_TTL) -> None:
        self.name = local.name
        self.local = local
        self.conn = conn
        self.lease_ttl = float(lease_ttl)
        tag = "lim:" + hashlib.sha256("\x1f".join(key).encode()).hexdigest()[:16]
        self.keys = {k: conn.key(k, tag=tag) for k in ("in-flight", "rate", "tokens",
                                                        "cooldown")}
        self._defaults = (local.max, local.rpm, local.tpm)
        self._users: dict[int, tuple[int, float | None, float | None]] = {}
        self._share: int | None = None  # the local limiter's token for the local share
        self._leases: set[str] = set()
        self._queue: asyncio.Lock | None = None
        self._queued = 0
        self._freed: asyncio.Event | None = None
        self._fleet_cooldown_until = 0.0
        self._untold: list[tuple[str, float]] = []  # (lease, token delta) not told to Redis
        self._tell_at: asyncio.TimerHandle | None = None
        self.fleet_waits = 0  # acquisitions the fleet made wait (any reason)
        conn.subscribe(self._health)
        conn.on_beat(self._renew)
        conn.on_close(self._tell)
        if not conn.healthy:
            self._health(False)

    # -- limits ------------------------------------------------------------------------------
    @property
    def limits(self) -> tuple[int, float | None, float | None]:
        """The fleet-wide limits: the tightest of the attached users' (else the defaults)."""
        if not self._users:
            return self._defaults
        users = list(self._users.values())
        rpms = [u[1] for u in users if u[1] is not None]
        tpms = [u[2] for u in users if u[2] is not None]
        return (min(u[0] for u in users), min(rpms) if rpms else None,
                min(tpms) if tpms else None)

    def attach(self, *, max_concurrency: int, rpm: float | None = None,
               tpm: float | None = None) -> int:
        token = self.local.attach(max_concurrency=max_concurrency, rpm=rpm, tpm=tpm)
        self._users[token] = (max(1, int(max_concurrency)), rpm, tpm)
        if self._share is not None:
            self._attach_share()
        return token

    def detach(self, token: int) -> None:
        self._users.pop(token, None)
        self.local.detach(token)
        if self._share is not None:
            self._attach_share()

    def _attach_share(self) -> None:
        """Impose limit ÷ replicas on the local limiter (Redis is down)."""
        if self._share is not None:
            self.local.detach(self._share)
        conc, rpm, tpm = self.limits
        r = self.conn.replicas
        share_rpm = None if rpm is None else rpm / r
        mean = self.local.token_estimate
        if tpm is not None and mean > 0:
            # the local tpm is a budget per minute: it would let the tokens this replica did
            # not use in the last minute go at once (bench_fleet tokens, a replica on its
            # share for 2 s: 53 req/s in a 5 s window for a fleet of 20). Spaced as requests
            # of the mean size, as the fleet spaces them
            paced = tpm / r / mean
            share_rpm = paced if share_rpm is None else min(share_rpm, paced)
        self._share = self.local.attach(max_concurrency=max(1, math.floor(conc / r)),
                                        rpm=share_rpm, tpm=None if tpm is None else tpm / r)

    def _health(self, up: bool) -> None:
        if up and self._share is not None:
            token, self._share = self._share, None
            self._leases.clear()  # a restarted Redis forgot them; a surviving one expires them
            self._untold.clear()
            self.local.detach(token)
        elif not up and self._share is None:
            self._attach_share()

    @property
    def local_share(self) -> tuple[int, float | None, float | None] | None:
        """The local share in force while Redis is down (None: the fleet's limits apply)."""
        if self._share is None:
            return None
        conc, rpm, tpm = self.limits
        r = self.conn.replicas
        return (max(1, math.floor(conc / r)), None if rpm is None else rpm / r,
                None if tpm is None else tpm / r)

    # -- acquiring ---------------------------------------------------------------------------
    async def acquire(self, *, est_tokens: float | None = None) -> Ticket:
        """A local slot, then a fleet lease (while Redis answers). A local slot alone is a
        grant only while Redis is down (the local share is attached then): a request whose
        wait for the fleet an outage cut short queues again locally, and if Redis is back
        when its turn comes it asks the fleet again. (Sent on the local grant alone, the
        requests queued during an outage went out after it at each replica's full local
        rate, on top of the fleet's: 42-60 req/s for a 20 req/s fleet, bench_fleet outage.)"""
        while True:
            ticket = await self.local.acquire(est_tokens=est_tokens)
            if not self.conn.usable():
                return FleetTicket(ticket, None, 0.0)
            _, _, tpm = self.limits
            est = 0.0
            if tpm is not None:
                est = float(est_tokens) if est_tokens is not None else self.local.token_estimate
            try:
                lease = await self._lease(est)
            except FleetDown:
                # lost mid-wait: queue again locally, now under the local share, rather than
                # send every request that was waiting for the fleet at once
                self.local.release(ticket, outcome="unused")
                continue
            except BaseException:
                self.local.release(ticket, outcome="unused")
                raise
            return FleetTicket(ticket, lease, est)

    async def _try(self, lease: str, est: float) -> tuple[bool, float, str]:
        conc, rpm, tpm = self.limits
        riv = 0.0 if rpm is None else 60000.0 / rpm
        tiv = 0.0 if tpm is None else 60000.0 / tpm
        told = self._told()
        try:
            ok, wait_us, why = await self.conn.run(
                _ACQUIRE, self._script_keys,
                [lease, int(self.lease_ttl * 1000), conc, riv, riv, tiv, est, *told])
        except BaseException:
            # cancelled mid-call, or a reply too late (FleetSlow): the releases it carried may
            # not have reached Redis. Tell their leases again (removing one twice is
            # harmless); not their token deltas (charged twice, they would be wrong), at worst
            # one reply's tokens unaccounted. (Redis lost: `_health` drops them on its return)
            self._untold.extend((str(told[i]), 0.0) for i in range(0, len(told), 2)
                                if told[i])
            if self.conn.usable():
                self._tell_later()
            raise
        if int(ok):
            self._leases.add(lease)
            return True, 0.0, ""
        wait = float(wait_us) / 1e6
        if why == "cooldown":
            self._fleet_cooldown_until = max(self._fleet_cooldown_until,
                                             time.monotonic() + wait)
        return False, wait, str(why)

    async def _lease(self, est: float) -> str:
        lease = f"{self.conn.replica_id}:{next(_ids)}"
        if self._queued == 0:  # nobody of this replica waits: ask at once
            ok, _, _ = await self._try(lease, est)
            if ok:
                return lease
        if self._queue is None:
            self._queue, self._freed = asyncio.Lock(), asyncio.Event()
        assert self._freed is not None
        self.fleet_waits += 1
        self._queued += 1
        try:
            async with self._queue:  # this replica's waiters poll Redis one at a time (FIFO)
                while True:
                    ok, wait, _ = await self._try(lease, est)
                    if ok:
                        return lease
                    if wait < 0:  # in-flight cap: a release frees a slot (ours, or polled)
                        self._freed.clear()
                        with contextlib.suppress(asyncio.TimeoutError):
                            await asyncio.wait_for(self._freed.wait(), _IN_FLIGHT_POLL)
                    else:
                        await asyncio.sleep(min(wait, _MAX_POLL))
        finally:
            self._queued -= 1

    # -- releasing ---------------------------------------------------------------------------
    def release(self, ticket: Ticket, *, outcome: str = "ok", retry_after: float | None = None,
                tokens: float | None = None) -> None:
        if not isinstance(ticket, FleetTicket):  # pragma: no cover - handed out by acquire
            self.local.release(ticket, outcome=outcome, retry_after=retry_after, tokens=tokens)
            return
        self.local.release(ticket.local, outcome=outcome, retry_after=retry_after,
                           tokens=tokens)
        cooldown = 0.0
        if outcome == "backpressure":
            cooldown = min(float(retry_after) if retry_after and retry_after > 0
                           else _DEFAULT_COOLDOWN, _MAX_COOLDOWN)
        used = float(tokens or 0.0) if outcome == "ok" else 0.0
        delta = used - ticket.reserved if ticket.reserved or used else 0.0
        if ticket.lease is None and not cooldown:
            return
        if ticket.lease is not None:
            self._leases.discard(ticket.lease)
        if self._freed is not None:
            self._freed.set()
        if not self.conn.usable():
            return  # the lease expires by itself; the cool-down held this replica
        self._untold.append((ticket.lease or "", delta))
        if cooldown:  # every replica must hold now
            self.conn.spawn(self._tell(cooldown))
        else:
            # the next acquire (soon, on a busy replica) carries it in its own call: one round
            # trip per request instead of two; else it goes alone (with any others) after
            # _TELL_DELAY, which is how much later another replica may see the slot free
            self._tell_later()

    def _tell_later(self) -> None:
        if self._tell_at is None and self._untold:
            self._tell_at = asyncio.get_running_loop().call_later(_TELL_DELAY, self._tell_soon)

    @property
    def _script_keys(self) -> list[str]:
        return [self.keys["in-flight"], self.keys["rate"], self.keys["tokens"],
                self.keys["cooldown"]]

    def _told(self) -> list[object]:
        """The untold releases as script arguments (lease, tokens pairs), now told."""
        if self._tell_at is not None:
            self._tell_at.cancel()
            self._tell_at = None
        if not self._untold:
            return []
        untold, self._untold = self._untold, []
        return [x for lease, delta in untold for x in (lease, delta)]

    def _tell_soon(self) -> None:
        self._tell_at = None
        if self._untold and self.conn.usable():
            self.conn.spawn(self._tell())

    async def _tell(self, cooldown: float = 0.0) -> None:
        """Tell Redis the untold releases (and a cool-down) in one call."""
        args = self._told()
        if not args and not cooldown:
            return
        _, _, tpm = self.limits
        tiv = 0.0 if tpm is None else 60000.0 / tpm
        await self.conn.run(_RELEASE, self._script_keys, [tiv, cooldown * 1000.0, *args])

    async def _renew(self) -> None:
        if self._leases:
            await self.conn.run(_RENEW, [self.keys["in-flight"]],
                                [int(self.lease_ttl * 1000), *sorted(self._leases)])

    # -- observing ---------------------------------------------------------------------------
    def status(self) -> LimiterStatus:
        st = self.local.status()
        fleet_cd = max(0.0, self._fleet_cooldown_until - time.monotonic())
        return LimiterStatus(in_flight=st.in_flight, waiting=st.waiting + self._queued,
                             limit=st.limit, max_concurrency=st.max_concurrency,
                             cooldown_s=max(st.cooldown_s, fleet_cd), rate=st.rate,
                             backpressure_events=st.backpressure_events)

    async def fleet_in_flight(self) -> int:
        """Leases held across the fleet now (tests, /health)."""
        n = await self.conn.command("zcard", self.keys["in-flight"])
        return int(n)


def fleet_limiters(conn: FleetConnection, *, lease_ttl: float = LEASE_TTL) -> LimiterBackend:
    """The limiter backend of a replica of the fleet behind `conn`."""

    def wrap(key: tuple[str, str, str], local: EndpointLimiter) -> Limiter:
        return FleetLimiter(key, local, conn, lease_ttl=lease_ttl)

    return wrap

