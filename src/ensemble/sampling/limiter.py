"""The limiter lives in `ensemble.providers.limiter` (an endpoint's gate, with the providers that
talk to endpoints) and the endpoint key in `ensemble.providers.endpoints`; their names are
re-exported here for code that imports them from their old home."""

from ..providers.endpoints import endpoint_key
from ..providers.limiter import (
    EndpointLimiter,
    LimiterStatus,
    Ticket,
    limiter_for,
    reset_limiters,
)

__all__ = ["EndpointLimiter", "LimiterStatus", "Ticket", "endpoint_key", "limiter_for",
           "reset_limiters"]
