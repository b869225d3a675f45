"""A replica's metrics in Prometheus's text format (`GET /metrics`), with `prometheus-client`.

What is counted, and where:
- HTTP requests by route and status, and their latency (the endpoint's middleware);
- votes, the samples they drew and their cost, by served model (each decision);
- upstream requests by outcome (`ok`, `rate_limited`: a 429 or an overload reply, `error`),
  their tokens, and the time each waited for its slot (`ObservedLimiter`, the limiter backend
  that wraps every upstream's limiter, so every path to an upstream is counted where it is
  sent: one count per request that reached the upstream's door);
- idempotent replays, votes refused by the spend cap, the spend, requests in progress, whether
  the replica is draining and whether Redis answers.

Each app has its own registry (not the process-wide default), so two endpoints in one process
(tests) do not mix their counts.
"""

from __future__ import annotations

import time
from typing import Any

from ..providers.limiter import EndpointLimiter, Limiter, LimiterBackend, LimiterStatus, Ticket

__all__ = ["Metrics", "ObservedLimiter", "observed_limiters"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    120.0, 300.0)
_WAIT_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_OUTCOMES = {"ok": "ok", "backpressure": "rate_limited", "error": "error"}


class Metrics:
    """The counters, gauges and histograms of one endpoint (see the module's docstring)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        r = self.registry = CollectorRegistry()
        self.requests = Counter("ensemble_requests", "HTTP requests answered, by route and "
                                "status", ["route", "status"], registry=r)
        self.latency = Histogram("ensemble_request_seconds", "seconds from a request's "
                                 "arrival to its reply, by route", ["route"],
                                 buckets=_LATENCY_BUCKETS, registry=r)
        self.votes = Counter("ensemble_votes", "votes decided, by served model", ["model"],
                             registry=r)
        self.samples = Counter("ensemble_samples", "samples the votes drew, by served model",
                               ["model"], registry=r)
        self.cost = Counter("ensemble_cost_usd", "what the votes cost (USD), by served model",
                            ["model"], registry=r)
        self.upstream = Counter("ensemble_upstream_requests", "requests sent upstream, by "
                                "upstream and outcome (ok, rate_limited, error)",
                                ["upstream", "outcome"], registry=r)
        self.rate_limited = Counter("ensemble_upstream_rate_limited", "upstream 429 and "
                                    "overload replies, by upstream", ["upstream"], registry=r)
        self.tokens = Counter("ensemble_upstream_tokens", "tokens the upstream replies "
                              "reported, by upstream", ["upstream"], registry=r)
        self.limiter_wait = Histogram("ensemble_limiter_wait_seconds", "seconds a request "
                                      "waited for its upstream slot (this replica's limiter "
                                      "and the fleet's)", ["upstream"], buckets=_WAIT_BUCKETS,
                                      registry=r)
        self.replays = Counter("ensemble_idempotent_replays", "requests answered from the "
                               "idempotent vote cache", registry=r)
        self.spend_refused = Counter("ensemble_spend_refused", "votes refused by the spend "
                                     "cap", registry=r)
        self.spend = Gauge("ensemble_spend_usd", "the endpoint's spend as this replica knows "
                           "it (fleet-wide with Redis)", registry=r)
        self.active = Gauge("ensemble_requests_active", "requests admitted and not yet "
                            "answered", registry=r)
        self.draining = Gauge("ensemble_draining", "1 while the replica drains before it "
                              "stops", registry=r)
        self.redis_up = Gauge("ensemble_redis_up", "1 while Redis answers (absent without a "
                              "fleet)", registry=r)

    def render(self) -> tuple[bytes, str]:
        """The exposition (Prometheus text format) and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def request(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def vote(self, model: str, samples: int, cost: float | None) -> None:
        self.votes.labels(model).inc()
        self.samples.labels(model).inc(samples)
        if cost:
            self.cost.labels(model).inc(cost)


class ObservedLimiter:
    """A limiter that counts what passes it into `Metrics` (every call goes to `inner`)."""

    def __init__(self, inner: Limiter, metrics: Metrics) -> None:
        self.inner = inner
        self.name = inner.name
        self.metrics = metrics

    def attach(self, *, max_concurrency: int, rpm: float | None = None,
               tpm: float | None = None) -> int:
        return self.inner.attach(max_concurrency=max_concurrency, rpm=rpm, tpm=tpm)

    def detach(self, token: int) -> None:
        self.inner.detach(token)

    async def acquire(self, *, est_tokens: float | None = None) -> Ticket:
        t0 = time.perf_counter()
        ticket = await self.inner.acquire(est_tokens=est_tokens)
        self.metrics.limiter_wait.labels(self.name).observe(time.perf_counter() - t0)
        return ticket

    def release(self, ticket: Ticket, *, outcome: str = "ok", retry_after: float | None = None,
                tokens: float | None = None) -> None:
        self.inner.release(ticket, outcome=outcome, retry_after=retry_after, tokens=tokens)
        label = _OUTCOMES.get(outcome)
        if label is None:  # "unused": never sent
            return
        self.metrics.upstream.labels(self.name, label).inc()
        if label == "rate_limited":
            self.metrics.rate_limited.labels(self.name).inc()
        if tokens:
            self.metrics.tokens.labels(self.name).inc(tokens)

    def status(self) -> LimiterStatus:
        return self.inner.status()

    def __getattr__(self, name: str) -> Any:  # the inner limiter's own (local_share, ...)
        return getattr(self.inner, name)


def observed_limiters(metrics: Metrics, inner: LimiterBackend | None = None) -> LimiterBackend:
    """The limiter backend that counts into `metrics`, around `inner` (None: the in-process
    limiter alone)."""

    def wrap(key: tuple[str, str, str], local: EndpointLimiter) -> Limiter:
        return ObservedLimiter(local if inner is None else inner(key, local), metrics)

    return wrap
