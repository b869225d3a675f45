"""What one `ensemble serve` process adds to run as a replica of a fleet (and alone): the link
to the fleet's Redis and the shared limits it installs, the idempotent vote cache, the spend
cap, the metrics, readiness and the drain on SIGTERM.

    GET /health    liveness, always 200 while the process serves (the fleet's state in it)
    GET /ready     200 when it should get traffic; 503 while draining, or while Redis is down
                   and the config does not allow local limits
    GET /metrics   Prometheus text format (the `fleet` extra's prometheus-client)

Without `fleet.redis_url` everything here holds for the one process: limits in-process, the vote
cache and the spend cap in memory.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from ..errors import InputError
from ..fleet.connection import FleetConnection
from ..fleet.ledger import Reservation, SpendCapReached, SpendLedger
from ..fleet.votes import Claim, KeyReused, Reply, VoteCache
from ..providers.limiter import LimiterBackend, use_limiter_backend
from .config import ServeConfig

__all__ = ["IDEMPOTENCY_HEADER", "KeyReused", "Replica", "Reply", "SpendCapReached"]

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


def _metrics() -> Any:
    try:
        from ..fleet.metrics import Metrics
    except ImportError:  # pragma: no cover - prometheus-client is in the fleet extra and dev
        return None
    try:
        return Metrics()
    except ImportError:  # pragma: no cover
        return None


class Replica:
    """The fleet side of one endpoint (see the module's docstring)."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        fleet = config.fleet
        url = fleet.url() if fleet is not None else None
        self.conn: FleetConnection | None = None
        if url is not None and fleet is not None:
            self.conn = FleetConnection(url, prefix=fleet.prefix, replicas=fleet.replicas,
                                        on_down=fleet.on_redis_down)
        self.lease_ttl = fleet.lease_ttl if fleet is not None else 15.0
        self.votes = VoteCache(self.conn, ttl=fleet.idempotency_ttl if fleet else 86400.0,
                               lease_ttl=self.lease_ttl)
        self.ledger = (SpendLedger(config.max_cost, self.conn)
                       if config.max_cost is not None else None)
        self.metrics = _metrics()
        self.draining = False
        self.started = False
        self._installed: LimiterBackend | None = None
        self._accepted = 0  # requests whose body was read and not yet answered

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect to Redis (a refusal is one line), install the limiter backend."""
        backend: LimiterBackend | None = None
        if self.conn is not None:
            from ..fleet.limits import fleet_limiters

            await self.conn.start()
            backend = fleet_limiters(self.conn, lease_ttl=self.lease_ttl)
            if self.ledger is not None:
                await self.ledger.flush()  # the fleet's spend so far, before the first vote
        if self.metrics is not None:
            from ..fleet.metrics import observed_limiters

            backend = observed_limiters(self.metrics, backend)
        if backend is not None:
            use_limiter_backend(backend)
            self._installed = backend
        self.started = True

    async def stop(self) -> None:
        if self._installed is not None:
            use_limiter_backend(None)
            self._installed = None
        if self.ledger is not None:
            await self.ledger.flush()
        if self.conn is not None:
            await self.conn.aclose()

    def drain(self) -> None:
        """Stop taking new requests (/ready says so); those accepted finish."""
        self.draining = True
        if self.metrics is not None:
            self.metrics.draining.set(1)

    async def drained(self, deadline: float) -> bool:
        """Wait (at most `deadline` seconds) until no accepted request is left."""
        end = time.monotonic() + deadline
        while self._accepted > 0 and time.monotonic() < end:
            await asyncio.sleep(0.05)
        return self._accepted == 0

    def accepted(self, delta: int) -> None:
        self._accepted += delta

    # -- state -------------------------------------------------------------------------------
    def ready(self) -> tuple[bool, str]:
        if not self.started:
            return False, "starting"
        if self.draining:
            return False, "draining"
        fleet = self.config.fleet
        if self.conn is not None and not self.conn.healthy and fleet is not None \
                and fleet.on_redis_down != "local":
            return False, "Redis is down and fleet.on_redis_down is refuse"
        return True, "ready"

    def describe(self) -> dict[str, Any]:
        """The fleet part of /health (no credential)."""
        doc: dict[str, Any] = {"draining": self.draining, "accepted": self._accepted,
                               "pid": os.getpid()}
        if self.conn is not None:
            doc["fleet"] = self.conn.describe()
        if self.ledger is not None:
            doc["spend"] = self.ledger.describe()
        return doc

    # -- a vote ------------------------------------------------------------------------------
    async def claim(self, scope: str, key: str, body: bytes, timeout: float) -> Claim:
        claim = await self.votes.claim(scope, key, body, timeout=timeout)
        if claim.reply is not None and self.metrics is not None:
            self.metrics.replays.inc()
        return claim

    async def admit(self, model: str, samples: int) -> Reservation | None:
        if self.ledger is None:
            return None
        try:
            return await self.ledger.admit(model, samples)
        except SpendCapReached:
            if self.metrics is not None:
                self.metrics.spend_refused.inc()
            raise

    def settle(self, res: Reservation | None, model: str, cost: float | None,
               samples: int) -> None:
        if res is not None and self.ledger is not None:
            self.ledger.settle(res, cost, samples)
        if self.metrics is not None:
            if samples:
                self.metrics.vote(model, samples, cost)
            if self.ledger is not None:
                self.metrics.spend.set(self.ledger.spent)

    def render_metrics(self) -> tuple[bytes, str]:
        if self.metrics is None:
            raise InputError("metrics need prometheus-client: pip install 'ensemble-qr[fleet]'")
        if self.conn is not None:
            self.metrics.redis_up.set(1 if self.conn.healthy else 0)
        return self.metrics.render()
