"""A fleet of `ensemble serve` replicas sharing state through Redis (docs/serve.md, "Running
several replicas"): the upstream limits (`limits`), the idempotent vote cache (`votes`), the
spend ledger (`ledger`), and each replica's metrics (`metrics`). `connection` is the one link
to Redis every piece goes through. Needs the `fleet` extra (`pip install "ensemble-qr[fleet]"`).
"""

from __future__ import annotations

from .connection import FleetConnection, FleetDown, FleetSlow, FleetUnavailable, public_redis_url
from .limits import FleetLimiter, FleetTicket, fleet_limiters

__all__ = ["FleetConnection", "FleetDown", "FleetLimiter", "FleetSlow", "FleetTicket",
           "FleetUnavailable", "fleet_limiters", "public_redis_url"]
