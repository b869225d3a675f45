"""The voting endpoint's routes, on aiohttp's web server.

    POST /v1/chat/completions   the ensemble's decision as a chat.completion (or its chunks)
    POST /v1/responses          the same as a Responses API `response` (or its events)
    POST /v1/completions        the same as a legacy `text_completion` (prompt-style clients)
    GET  /v1/models             the served names;  GET /v1/models/{id}: one of them
    GET  /health                {"status": "ok", ...} (no key needed)
    GET  /ready, GET /metrics   readiness and Prometheus metrics (`replica`; no key needed)

Every POST route goes through one pipeline (`_serve`): its wire (`Wire`: chat's, or
`serve.responses` / `serve.completions`) reads the body as the chat request it stands for; the
request is decided by its served name's Ensemble (`ensembles.ServedEnsembles`), whose
endpoints' limiters are shared by every request of the process; the `chat.completion` is
written back in the route's own format. At most `max_queue` requests are admitted at once
(being decided or waiting for an upstream slot); past that a request gets 429 with Retry-After
instead of a place in an unbounded queue. A client that disconnects cancels its request: its
pending samples are never requested; with a store, the samples already requested are still
received and stored (a repeat does not pay for them again). Every error is OpenAI's error
object; messages are redacted. What a replica of a fleet adds (an `Idempotency-Key` answered
once, the spend cap, metrics, the drain) is `replica.Replica`'s.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..api import Ensemble
from ..errors import (
    EnsembleError,
    InputError,
    ProviderError,
    ProviderTimeoutError,
    RunStopped,
    SamplingFailed,
)
from ..profile import public_api_base
from ..secrets import redact
from .auth import authorized
from .completions import COMPLETIONS
from .config import ServeConfig
from .encodings import (
    BodyTooLarge,
    UndecodableBody,
    UnsupportedEncoding,
    decode_body,
    supported_encodings,
)
from .ensembles import ServedEnsembles, parse_overrides
from .logs import Outcome, RequestLog, RequestRecord
from .replica import (
    IDEMPOTENCY_HEADER,
    REPLAYED_HEADER,
    KeyReused,
    Replica,
    Reply,
    SpendCapReached,
)
from .replies import ChatCompletion, body as body_of, vote_headers
from .responses import RESPONSES
from .wire import (
    CHAT,
    ChatRequest,
    DocT,
    InfoT,
    RequestRejected,
    Wire,
    completion_doc,
    error_doc,
    json_decision,
)

__all__ = ["CLIENT_CLOSED", "VotingApp", "upstream_failure"]

CLIENT_CLOSED = 499  # the status logged for a request whose client went away (nginx's)
OPEN_PATHS = ("/health", "/ready", "/metrics")  # no key needed (probes, scrapers)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str, etype: str = "invalid_request_error", *,
           param: str | None = None, code: str | None = None,
           headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(error_doc(redact(message), etype, param=param, code=code),
                             status=status, headers=headers)


def upstream_failure(exc: EnsembleError) -> tuple[int, str, str]:
    """(status, message, code) for a decision that failed upstream: 504 for a timeout, else
    502; the message names the upstream (model and endpoint, without credentials)."""
    cause: BaseException | None = exc
    if isinstance(exc, RunStopped) and exc.cause is not None:
        cause = exc.cause
    elif isinstance(exc, SamplingFailed) and exc.failures:
        cause = getattr(exc.failures[0], "exception", None) or exc
    if not isinstance(cause, ProviderError):
        return 502, f"the upstream failed: {exc}", "upstream_error"
    where = public_api_base(cause.api_base) or "its provider's API"
    name = f"{cause.model or 'the upstream model'} at {where}"
    timed_out = isinstance(cause, ProviderTimeoutError) or "timeout" in cause.reason.lower()
    if timed_out:
        return 504, f"upstream {name} timed out: {cause}", "upstream_timeout"
    return 502, f"upstream {name} failed: {cause}", "upstream_error"


class VotingApp:
    """The endpoint's state (served ensembles, admission count, key, log) and its handlers."""

    def __init__(self, config: ServeConfig, *, api_key: str | None = None,
                 log: RequestLog | None = None) -> None:
        self.config = config
        self.api_key = api_key
        self.log = log or RequestLog(json_lines=config.log_json)
        self.ensembles = ServedEnsembles(config)
        self.replica = Replica(config)
        self.active = 0  # requests admitted and not yet answered
        self.rejected = 0  # requests turned away by the queue bound

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self.chat)
            app.router.add_post(f"{prefix}/responses", self.responses)
            app.router.add_post(f"{prefix}/completions", self.completions)
            app.router.add_get(f"{prefix}/models", self.models)
            app.router.add_get(f"{prefix}/models/{{model}}", self.model)
        app.router.add_get("/health", self.health)
        app.router.add_get("/ready", self.ready)
        app.router.add_get("/metrics", self.metrics)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)
        return app

    async def _startup(self, app: web.Application) -> None:
        await self.replica.start()

    async def _cleanup(self, app: web.Application) -> None:
        await self.ensembles.aclose()
        await self.replica.stop()

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every request counted in the metrics (route, status, seconds)."""
        t0 = time.perf_counter()
        status = 500
        try:
            resp = await self._guarded(request, handler)
            status = resp.status
            return resp
        except asyncio.CancelledError:
            status = CLIENT_CLOSED
            raise
        finally:
            metrics = self.replica.metrics
            if metrics is not None:
                resource = request.match_info.route.resource
                metrics.request(resource.canonical if resource is not None else "unmatched",
                                status, time.perf_counter() - t0)

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The key check (every route but OPEN_PATHS) and OpenAI-shaped errors for aiohttp's
        own (unknown route, wrong method, oversized body)."""
        t0 = time.perf_counter()
        if request.path not in OPEN_PATHS and not authorized(
                request.headers.get("Authorization"), self.api_key):
            self.log.write(RequestRecord(request.method, request.path, 401,
                                         time.perf_counter() - t0, error="invalid api key"))
            return _error(401, "Incorrect API key provided; send this endpoint's key as "
                               "Authorization: Bearer KEY", code="invalid_api_key")
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            self.log.write(RequestRecord(request.method, request.path, exc.status,
                                         time.perf_counter() - t0, error=exc.reason))
            what = {404: f"no route {request.path}; the endpoint serves POST "
                         "/v1/chat/completions, /v1/responses and /v1/completions, GET "
                         "/v1/models and GET /health",
                    405: f"{request.method} is not allowed on {request.path}",
                    413: "the request body is too large"}.get(exc.status, exc.reason)
            return _error(exc.status, what, code=exc.reason.lower().replace(" ", "_"))

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "models": self.ensembles.names,
                                  "active": self.active, "max_queue": self.config.max_queue,
                                  **self.replica.describe()})

    async def ready(self, request: web.Request) -> web.Response:
        ok, why = self.replica.ready()
        return web.json_response({"ready": ok, "status": why}, status=200 if ok else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        try:
            data, ctype = self.replica.render_metrics()
        except InputError as exc:
            return _error(501, str(exc), "server_error", code="metrics_unavailable")
        self.replica.metrics.active.set(self.active)
        return web.Response(body=data, headers={"Content-Type": ctype})

    async def models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "ensemble",
             "ensemble": self.ensembles.describe(name)} for name in self.ensembles.names]})

    async def model(self, request: web.Request) -> web.Response:
        name = request.match_info["model"]
        if self.ensembles.served(name) is None:
            return _error(404, f"The model `{name}` does not exist on this endpoint; it "
                               f"serves: {', '.join(self.ensembles.names)}", param="model",
                          code="model_not_found")
        return web.json_response({"id": name, "object": "model", "created": int(time.time()),
                                  "owned_by": "ensemble",
                                  "ensemble": self.ensembles.describe(name)})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._logged(request, CHAT)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._logged(request, RESPONSES)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._logged(request, COMPLETIONS)

    async def _logged(self, request: web.Request, wire: Wire[InfoT, DocT]
                      ) -> web.StreamResponse:
        t0 = time.perf_counter()
        rec = Outcome(request.method, request.path)
        try:
            resp = await self._serve(request, wire, rec)
            rec.status = resp.status
            return resp
        except asyncio.CancelledError:
            rec.status = CLIENT_CLOSED
            if not rec.deciding:
                rec.error = "client disconnected before its request was decided (nothing drawn)"
            else:
                rec.error = ("client disconnected; its pending samples were cancelled"
                             + ("" if self.config.store is None else
                                " (those already requested are stored when they arrive)"))
            raise
        except (ConnectionResetError, web.HTTPException):
            raise  # the client went away mid-stream; aiohttp's own replies
        except Exception as exc:  # noqa: BLE001 - a bug answers 500 and one log line, not a hang
            rec.error = f"internal error: {type(exc).__name__}: {exc}"
            return _error(500, f"the endpoint failed: {type(exc).__name__}: {exc}",
                          "server_error", code="internal_error")
        finally:
            self.log.write(rec.record(time.perf_counter() - t0))

    async def _serve(self, request: web.Request, wire: Wire[InfoT, DocT], rec: Outcome
                     ) -> web.StreamResponse:
        if self.replica.draining:  # not accepted: its body was not read
            rec.error = "draining"
            return _error(503, "this replica is shutting down; send the request again (another "
                               "replica takes it)", "server_error", code="draining",
                          headers={"Connection": "close", "Retry-After": "1"})
        wait = self.config.body_timeout
        try:
            raw = await asyncio.wait_for(request.read(), wait)
        except web.HTTPRequestEntityTooLarge:
            rec.error = "body too large"
            return _error(413, f"the request body is larger than {request.client_max_size} "
                               "bytes", code="request_too_large")
        except asyncio.TimeoutError:  # a slow or stalled client holds no slot for long
            rec.error = f"the body did not arrive within {wait:g} s (nothing was drawn)"
            return _error(408, f"the request body did not arrive within {wait:g} s; send it "
                               "whole", code="request_timeout", headers={"Connection": "close"})
        except web.RequestPayloadError as exc:  # e.g. a broken chunked transfer
            why = " ".join(str(exc).split())
            rec.error = f"unreadable body: {why}"
            return _error(400, f"the request body could not be read ({why}); send it as "
                               "plain or validly gzip-encoded JSON", code="unreadable_body")
        try:  # serve decodes, not aiohttp: its failures are then OpenAI errors (`encodings`)
            raw = decode_body(raw, request.headers.get("Content-Encoding"),
                              request.client_max_size)
        except UnsupportedEncoding as exc:
            rec.error = f"unsupported Content-Encoding {exc.coding!r}"
            accepted = supported_encodings()
            return _error(415, f"the request body's Content-Encoding {exc.coding!r} is not "
                               f"one serve reads; send it as {accepted}",
                          code="unsupported_content_encoding",
                          headers={"Accept-Encoding": accepted})
        except BodyTooLarge:
            rec.error = "body too large (decoded)"
            return _error(413, f"the request body is larger than {request.client_max_size} "
                               "bytes once decoded", code="request_too_large")
        except UndecodableBody as exc:
            rec.error = f"unreadable body: {exc}"
            return _error(400, f"the request body could not be read ({exc}); send it as "
                               "plain or validly gzip-encoded JSON", code="unreadable_body")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            # JSONDecodeError, an integer past Python's 4300 digits, nesting too deep
            rec.error = "malformed JSON"
            why = "" if isinstance(exc, json.JSONDecodeError) else \
                f" ({' '.join(str(exc).split()[:8])})" if isinstance(exc, ValueError) \
                else " (nested too deeply)"
            return _error(400, f"the request body is not valid JSON{why}; send {wire.what} "
                               "as a JSON object")
        self.replica.accepted(+1)  # a SIGTERM now waits for it (the drain deadline)
        try:
            return await self._accepted(request, wire, rec, body, raw)
        finally:
            self.replica.accepted(-1)

    async def _accepted(self, request: web.Request, wire: Wire[InfoT, DocT], rec: Outcome,
                        body: Any, raw: bytes) -> web.StreamResponse:
        try:
            req, info = wire.parse(body)
            rec.model = req.model
            served = self.ensembles.served(req.model)
            if served is None:
                names = ", ".join(self.ensembles.names)
                raise RequestRejected(f"The model `{req.model}` does not exist on this "
                                      f"endpoint; it serves: {names}", status=404,
                                      param="model", code="model_not_found")
            overrides = parse_overrides(req.overrides, served)
            ens = self.ensembles.get(req.model, overrides, req.response_format, req.sampling,
                                     tools=req.tools, tool_choice=req.tool_choice)
        except RequestRejected as exc:
            rec.error = str(exc)
            return _error(exc.status, str(exc), exc.etype, param=exc.param, code=exc.code)
        except InputError as exc:
            rec.error = str(exc)
            return _error(400, str(exc), param="ensemble")
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if not key:
            return await self._vote(request, wire, rec, req, info, ens,
                                    max(overrides.n or 0, overrides.max_n or 0, served.budget))
        try:
            claim = await self.replica.claim(request.path, key, raw,
                                             self.config.timeout_for(req.model))
        except KeyReused:
            rec.error = "idempotency key reused"
            return _error(422, f"this {IDEMPOTENCY_HEADER} came before with another request "
                               "body; send a new key with a new request",
                          code="idempotency_key_reused")
        except asyncio.TimeoutError:
            rec.error = "idempotency key in use"
            return _error(409, f"a request with this {IDEMPOTENCY_HEADER} is still being "
                               "decided; retry after the Retry-After seconds",
                          code="idempotency_key_in_use", headers={"Retry-After": "1"})
        if claim.reply is not None:
            rec.note = "replayed"
            stored = claim.reply
            return web.Response(body=stored.body, headers={
                **dict(stored.headers), "Content-Type": stored.content_type,
                REPLAYED_HEADER: "true"})
        kept = False
        try:
            resp = await self._vote(request, wire, rec, req, info, ens,
                                    max(overrides.n or 0, overrides.max_n or 0, served.budget),
                                    claim=claim)
            kept = resp.status == 200
            return resp
        finally:
            if not kept:
                await self.replica.votes.drop(claim)

    async def _vote(self, request: web.Request, wire: Wire[InfoT, DocT], rec: Outcome,
                    req: ChatRequest, info: Any, ens: Ensemble[Any], worst: int, *,
                    claim: Any = None) -> web.StreamResponse:
        """Admit, decide and answer one valid request (`worst`: the most samples it may
        draw, what the spend cap reserves; `claim`: its idempotency claim, kept on success)."""
        if self.active >= self.config.max_queue:
            self.rejected += 1
            rec.error = "queue full"
            return _error(429, f"the endpoint has {self.active} requests in progress, its "
                               "bound; retry after the Retry-After seconds", "rate_limit_error",
                          code="queue_full", headers={"Retry-After": "1"})
        try:
            reservation = await self.replica.admit(req.model, worst)
        except SpendCapReached as exc:
            rec.error = "spend cap"
            return _error(429, str(exc), "insufficient_quota", code="insufficient_quota")
        self.active += 1
        rec.deciding = True
        try:
            decided = await self._decide(req, ens, rec, reservation)
        finally:
            self.active -= 1
        if isinstance(decided, web.Response):
            return decided
        doc = wire.render(decided, req, info)
        headers = vote_headers(decided.ensemble)  # the vote, for clients that drop the body's
        if not req.stream:
            data = body_of(doc)
            if claim is not None:
                await self.replica.votes.keep(claim, Reply("application/json", data,
                                                           tuple(headers.items())))
            return web.Response(body=data, content_type="application/json", headers=headers)
        frames = [frame.encode() for frame in wire.frames(doc, req, info)]
        if claim is not None:
            await self.replica.votes.keep(claim, Reply("text/event-stream", b"".join(frames),
                                                       tuple(headers.items())))
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream",
                                                       "Cache-Control": "no-cache", **headers})
        await resp.prepare(request)
        for frame_bytes in frames:
            await resp.write(frame_bytes)
        await resp.write_eof()
        return resp

    async def _decide(self, req: ChatRequest, ens: Ensemble[Any], rec: Outcome,
                      reservation: Any = None) -> ChatCompletion | web.Response:
        """The `chat.completion` of a request's decision, or the error reply (the spend
        cap's reservation settled either way)."""
        timeout = self.config.timeout_for(req.model)
        decision: Any = None
        try:
            decision = await asyncio.wait_for(ens.adecide(req.messages), timeout)
        except asyncio.TimeoutError:
            rec.error = f"no decision within {timeout:g} s"
            kept = ("the samples already requested are kept in its store as they arrive"
                    if self.config.store is not None else "the samples drawn are not kept "
                    "(start the endpoint with --store to keep them for a retry)")
            return _error(504, f"no decision within the endpoint's request timeout "
                               f"({timeout:g} s); {kept}", "timeout", code="request_timeout")
        except InputError as exc:
            rec.error = str(exc)
            return _error(400, str(exc))
        except EnsembleError as exc:
            status, message, code = upstream_failure(exc)
            rec.error = message
            return _error(status, message, "upstream_error", code=code)
        finally:
            self.replica.settle(reservation, req.model,
                                None if decision is None else decision.cost_usd,
                                0 if decision is None else decision.n_samples)
        rec.samples, rec.margin, rec.stream = decision.n_samples, decision.margin, req.stream
        rec.decision = json_decision(decision)
        if req.ignored:
            rec.note = f"ignored {','.join(req.ignored)}"
        return completion_doc(req.model, decision, ens.members, n=req.n, ignored=req.ignored,
                              logprobs=req.logprobs, kind=ens.answer_kind)
