"""The spend cap of a served endpoint (`ensemble serve --max-cost USD`), fleet-wide with Redis.

Every vote is admitted against the cap before it draws: it reserves its worst case (the most
samples it may draw, at the mean cost per sample its served model has cost so far) and, once
decided, settles what it cost; the difference is refunded. Until a served model's cost per
sample is known, its votes are admitted one at a time per replica, so the cap can be passed by
at most one vote's cost per replica.

The ledger is buffered: each replica adds its settled spend to a local buffer and flushes it to
Redis at every heartbeat (`INCRBYFLOAT` in a Lua script, with the replica's current
reservations written beside it and the fleet's total read back in the same call), and at once
for every admission and settlement once the fleet is within 20% of the cap. The flush is
safe under concurrency: the script is atomic across replicas, and within a replica the amount
flushed is taken from the buffer only after Redis took it (a vote settling meanwhile adds to
the buffer, a failed flush leaves it there). Admission reads the fleet's spend and the other
replicas' reservations as of the last flush: far from the cap that view is at most a
heartbeat old; near it, every admission reads the ledger first, so the cap can be passed by
the votes admitted at the same moment on other replicas (and by a vote costing more than its
reservation); a replica killed mid-vote leaves its reservations behind
for at most three heartbeats. A settlement also flushes at once when this replica's unflushed
spend reaches its share (÷ replicas) of what is left of the cap: what no other replica can
see yet stays within what is left.

Once spent, new votes are refused with one error (`SpendCapReached`: HTTP 429, code
`insufficient_quota`, as OpenAI's own exhausted quota). Without Redis (or while it is down) the
same ledger holds for this replica alone (what it flushed before is kept).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from ..errors import EnsembleError
from .connection import FleetConnection, FleetDown

__all__ = ["Reservation", "SpendCapReached", "SpendLedger"]

_FLUSH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local spent = tonumber(redis.call('INCRBYFLOAT', KEYS[1], ARGV[1]))
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3] .. ':' .. (now + tonumber(ARGV[4])))
local others = 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local amount, expiry = string.match(all[i + 1], '([^:]+):([^:]+)')
  if tonumber(expiry) < now then
    redis.call('HDEL', KEYS[2], all[i])
  elseif all[i] ~= ARGV[2] then
    others = others + tonumber(amount)
  end
end
return {tostring(spent), tostring(others)}
"""


_NEAR = 0.8  # past this share of the cap, admissions and settlements flush at once


class SpendCapReached(EnsembleError):
    """The endpoint's spend cap is spent (or this vote's worst case would pass it)."""


@dataclass
class Reservation:
    """A vote's admission: what it reserved, refunded when it settles."""

    model: str
    amount: float
    serial: bool  # admitted alone while its model's cost per sample is unknown
    settled: bool = False


class SpendLedger:
    """Spend and reservations against `max_cost` dollars (see the module's docstring)."""

    def __init__(self, max_cost: float, conn: FleetConnection | None = None) -> None:
        self.max_cost = float(max_cost)
        self.conn = conn
        self.flushed_total = 0.0  # the fleet's spend at the last flush (this replica's alone
        # without Redis)
        self.others_reserved = 0.0
        self.unflushed = 0.0
        self.reserved = 0.0
        self.spent_here = 0.0  # what this replica's votes cost (for /metrics)
        self.refused = 0
        self._per_sample: dict[str, tuple[float, int]] = {}  # model -> (cost, samples)
        self._serial: dict[str, asyncio.Lock] = {}
        self._unknown_price: str | None = None
        self._flushing: asyncio.Lock | None = None
        if conn is not None:
            conn.on_beat(self.flush)

    @property
    def spent(self) -> float:
        """The fleet's spend as this replica knows it now."""
        return self.flushed_total + self.unflushed

    def per_sample(self, model: str) -> float | None:
        got = self._per_sample.get(model)
        return None if got is None or got[1] == 0 else got[0] / got[1]

    async def admit(self, model: str, samples: int) -> Reservation:
        """Reserve a vote of at most `samples` samples of `model`; `SpendCapReached` if the
        cap is spent or would be passed."""
        if self._unknown_price is not None:
            self._refuse(self._unknown_price)
        per = self.per_sample(model)
        if per is None:  # its first vote: alone, so at most one vote passes the cap
            lock = self._serial.setdefault(model, asyncio.Lock())
            await lock.acquire()
            per = self.per_sample(model)
            if per is not None:
                lock.release()
            else:
                try:
                    self._check(0.0)
                except SpendCapReached:
                    lock.release()
                    raise
                return Reservation(model, 0.0, serial=True)
        amount = per * max(1, samples)
        if self._near(amount):  # near the cap, ask the fleet now rather than a heartbeat ago
            await self.flush()
        self._check(amount)
        self.reserved += amount
        if self._near(0.0) and self.conn is not None:
            self.conn.spawn(self.flush())  # the other replicas see this reservation now
        return Reservation(model, amount, serial=False)

    def _near(self, amount: float) -> bool:
        """Whether the fleet is within 20% of the cap (where a stale view could pass it)."""
        return (self.conn is not None and self.spent + self.reserved + self.others_reserved
                + amount > _NEAR * self.max_cost)

    def _unseen_too_big(self) -> bool:
        """Whether this replica's unflushed spend is more than its share of what is left of
        the cap (as it sees it): the others cannot see it, so every replica holding back
        that much could pass the cap together. (With the heartbeat alone, two replicas
        voting fast each spent $0.63 of a $1 cap unseen by the other: $1.48 in all.)"""
        assert self.conn is not None
        left = self.max_cost - (self.spent + self.reserved + self.others_reserved)
        return self.unflushed * self.conn.replicas >= left

    def _check(self, amount: float) -> None:
        committed = self.spent + self.reserved + self.others_reserved
        if committed >= self.max_cost:
            self._refuse(f"the endpoint's spend cap of ${self.max_cost:g} is spent "
                         f"(${self.spent:.4f}{' across the fleet' if self.conn else ''}); "
                         "new votes are refused: raise --max-cost (max_cost: in the config) "
                         "and restart the replicas")
        if committed + amount > self.max_cost:
            self._refuse(f"this vote may cost up to ${amount:.4f}, more than the "
                         f"${self.max_cost - committed:.4f} left of the endpoint's spend cap "
                         f"of ${self.max_cost:g} (${self.spent:.4f} spent, "
                         f"${self.reserved + self.others_reserved:.4f} reserved by votes in "
                         "progress); retry later or ask for fewer samples")

    def _refuse(self, message: str) -> None:
        self.refused += 1
        raise SpendCapReached(message)

    def settle(self, res: Reservation, cost: float | None, samples: int) -> None:
        """What the vote cost (None: unknown price); its reservation is given back."""
        if res.settled:
            return
        res.settled = True
        self.reserved = max(0.0, self.reserved - res.amount)
        if cost is not None:
            self.unflushed += cost
            self.spent_here += cost
            if samples > 0:
                total, n = self._per_sample.get(res.model, (0.0, 0))
                self._per_sample[res.model] = (total + cost, n + samples)
        elif samples > 0 and self._unknown_price is None:
            self._unknown_price = (f"the price of {res.model} is unknown, so the spend cap "
                                   "(--max-cost) cannot be enforced; give its price "
                                   "(--price-per-1k-tokens IN,OUT, or price_per_1k: in the "
                                   "config), or drop --max-cost")
        if self.conn is not None and self.conn.usable() and (self._near(0.0)
                                                             or self._unseen_too_big()):
            self.conn.spawn(self.flush())
        if res.serial:
            lock = self._serial.get(res.model)
            if lock is not None and lock.locked():
                lock.release()

    async def flush(self) -> None:
        """Add the buffered spend to the fleet's ledger and read the fleet's state back."""
        if self.conn is None or not self.conn.usable():
            return
        if self._flushing is None:
            self._flushing = asyncio.Lock()
        async with self._flushing:  # one flush at a time: a delta is never sent twice
            await self._flush(self.conn)

    async def _flush(self, conn: FleetConnection) -> None:
        delta = self.unflushed
        with contextlib.suppress(FleetDown):
            spent, others = await conn.run(
                _FLUSH, [conn.key("spent", tag="ledger"), conn.key("reserved", tag="ledger")],
                [f"{delta:.12f}", conn.replica_id, f"{self.reserved:.12f}",
                 int(3 * max(conn.heartbeat, 1.0) * 1000)])
            self.unflushed -= delta  # taken by Redis; settles since then stay buffered
            self.flushed_total = float(spent)
            self.others_reserved = float(others)

    def describe(self) -> dict[str, float]:
        return {"max_cost": self.max_cost, "spent": round(self.spent, 6),
                "reserved": round(self.reserved + self.others_reserved, 6)}
