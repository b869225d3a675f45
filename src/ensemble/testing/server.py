"""A simulated OpenAI-compatible expert server: real HTTP on 127.0.0.1 (aiohttp).

It answers chat completions from a planted expert (`ensemble.testing.expert.SimulatedExpert`:
box-and-ball prompts by quantal response with λ = λ₁/t, multiple-choice prompts by a documented
accuracy model; see that module), and misbehaves on demand, like hosted providers do:

- `faults=FaultPlan(...)`: 429 with Retry-After, 500, 503, hangs ("timeout"), slow replies,
  malformed JSON, dropped connections, fewer choices than `n`;
- `rate_limit=(N, W)`: more than N accepted requests in any W seconds get 429 with
  `Retry-After: rate_limit_retry_after` (a provider at its limit; rejected requests do not count);
- `refuse_rate=r`: a share r of prompts (chosen by hash, the same on every request) is refused
  for good with 400 `content_policy_violation`;
- `reject_n=True`: 400 for n > 1 (like llama.cpp); `require_api_key`: 401 for any other key;
  `models`: 404 for other model names;
- `echo_key=True`: every reply's text quotes the API key the request carried; `usage=(P, C)`:
  every reply reports P prompt and C completion tokens (negative ones, say).

It speaks OpenAI's Files and Batch API too (`/v1/files`, `/v1/batches`: see
`ensemble.testing.batchapi`; `batch=BatchPlan(delay=..., fail_first=...)`), answering batch
lines with the same expert and the same sample indices as the chat route, and streams
(`stream=True`: server-sent events as OpenAI sends them, usage in the last chunk when
`stream_options={"include_usage": true}`).

Clients send the first sample index of a request in the `x-ensemble-sample-index` header
(choices of an n > 1 request take the following indices); without it the server numbers samples
per prompt. Every draw depends only on (seed, messages, temperature, sample index), so a run
interrupted by faults or a kill, then resumed, gets exactly the samples of an unbroken run.
`stats` counts what the server saw: chat requests, statuses, faults, the (prompt, index) pairs
served (by the chat route and batch lines alike), Files/Batch API calls and batch lines
executed, which is how tests count requests at the server rather than in the client.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._sync import LoopThread
from ..providers.base import INDEX_HEADER
from .batchapi import BatchPlan, SimulatedBatchAPI
from .expert import (
    ChainBeliefs,
    MCModel,
    SimulatedExpert,
    answer_key_from_questions,
    prompt_hash,
    prompt_key,
    question_text,
)
from .faults import FaultPlan
from .openexpert import OpenAnswers, StructuredPlan
from .seeds import stable_uniform
from .toolexpert import FormatPlan, ToolPlan, bad_tool_history
from .wire import SSE_HEADERS, error_doc, error_response

__all__ = ["INDEX_HEADER", "BatchPlan", "MCModel", "ServedReply", "ServerStats",
           "SimulatedServer", "answer_key_from_questions", "prompt_hash", "prompt_key",
           "question_text"]



@dataclass(frozen=True)
class ServedReply:
    """One chat completion the server answered (`ServerStats.replies`, in order served): the
    request's last message, temperature, sample indices, the texts and the usage it reported
    (the true ones: before `echo_key` or `usage` misreport them), the logprobs served when
    the request asked for them, each choice's tool calls, and the messages, tools and
    tool_choice and response_format received."""

    number: int  # the request's number (1, 2, ...: order of arrival)
    prompt: str
    temperature: float
    indices: tuple[int, ...]
    texts: tuple[str | None, ...]
    prompt_tokens: int
    completion_tokens: int
    logprobs: tuple[Any, ...] = ()  # per choice, the logprobs served (when asked)
    tool_calls: tuple[tuple[dict[str, Any], ...], ...] = ()  # per choice, the calls it made
    messages: tuple[Any, ...] = ()  # the request's messages, as received
    tools: tuple[Any, ...] = ()  # the request's tools and tool_choice, as received
    tool_choice: Any = None
    response_format: Any = None  # the request's response_format, as received


@dataclass
class ServerStats:
    """What the server has seen and done (read from the test thread; updated under a lock)."""

    requests: int = 0
    completions: int = 0
    faults: Counter = field(default_factory=Counter)
    served: Counter = field(default_factory=Counter)  # (prompt key, sample index) -> times served
    temperatures: list = field(default_factory=list)
    n_values: list = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0  # most requests being handled at once (connection-pool checks)
    connections: int = 0  # TCP connections chat requests came on (connection-reuse checks)
    statuses: Counter = field(default_factory=Counter)  # HTTP status -> replies
    rate_limited: int = 0  # 429s sent by the `rate_limit` window
    refused: int = 0  # 400 content-policy refusals sent
    accepted_times: list = field(default_factory=list)  # monotonic times of accepted requests
    streamed: int = 0  # chat replies sent as server-sent events
    batch_calls: Counter = field(default_factory=Counter)  # Files/Batch API route -> calls
    files_uploaded: int = 0
    batches_created: int = 0
    batch_lines: int = 0  # batch lines executed
    batch_line_faults: int = 0  # batch lines failed by `BatchPlan.fail_rate` / `fail_first`
    replies: list = field(default_factory=list)  # ServedReply per completion (keep_replies)

    def indices_served(self) -> dict[str, list[int]]:
        """Per prompt key (hash of messages and temperature), the sample indices served."""
        out: dict[str, list[int]] = {}
        for (key, idx), _count in sorted(self.served.items()):
            out.setdefault(key, []).append(idx)
        return out


class SimulatedServer:
    """A real OpenAI-compatible HTTP server with a planted expert, and faults on demand.

    Use as a context manager (sync or async); `base_url` is "http://127.0.0.1:PORT/v1".
    Expert options (see `SimulatedExpert`): `lam1` (λ₁, rationality at t = 1 in ψ_λ units),
    `bias` with `bias_form` ("fixed": the same at every t, or "scaled": divided by t with the
    rest of the logit), `link` ("logit" or "probit"), `answer_key`, `mc_model` (or `mc_a`,
    `mc_b`), `invalid_rate`, `seed`, `open_answers` (numbers written in varied equivalent forms)
    and `structured` (JSON replies for a `response_format` schema or JSON mode), see
    `ensemble.testing.openexpert`; `tools` (tool calls for a request with `tools`) and
    `formats` (replies in DSPy's or inspect_ai's format), see `ensemble.testing.toolexpert`;
    `beliefs` (what each sample's answer-token logprobs say: `ChainBeliefs`);
    or pass a ready `expert`. Provider behaviour: `latency`
    (seconds per request), `faults`, `rate_limit=(N, W)` with `rate_limit_retry_after`,
    `refuse_rate`, `reject_n`, `require_api_key`, `models`, `max_n`; `batch`: the Batch API's
    behaviour (`BatchPlan`: completion delay, failing lines, expiring batches, file limits);
    `echo_key`: quote the request's API key in every reply's text; `usage=(prompt,
    completion)`: report these token counts instead of the true ones (e.g. negative);
    `keep_replies`: log every completion answered in `stats.replies` (`ServedReply`: prompt,
    sample indices, texts, usage), for tests that check a client's result against what the
    server actually sent.
    """

    def __init__(self, *, lam1: float = 10.0, bias: float = 0.0, link: str = "logit",
                 answer_key: Mapping[str, str] | None = None, mc_model: MCModel | None = None,
                 mc_a: float = 3.0, mc_b: float = 2.0, latency: float = 0.0,
                 faults: FaultPlan | None = None, seed: int = 0, port: int = 0,
                 host: str = "127.0.0.1", reject_n: bool = False, invalid_rate: float = 0.0,
                 require_api_key: str | None = None, models: Iterable[str] | None = None,
                 max_n: int = 128, rate_limit: tuple[int, float] | None = None,
                 rate_limit_retry_after: float = 1.0, refuse_rate: float = 0.0,
                 expert: SimulatedExpert | None = None, batch: BatchPlan | None = None,
                 echo_key: bool = False, usage: tuple[int, int] | None = None,
                 keep_replies: bool = False, open_answers: OpenAnswers | None = None,
                 structured: StructuredPlan | None = None, bias_form: str = "fixed",
                 tools: ToolPlan | None = None, formats: FormatPlan | None = None,
                 beliefs: ChainBeliefs | None = None) -> None:
        from ..errors import InputError

        self.expert = expert or SimulatedExpert(
            lam1=lam1, bias=bias, link=link, answer_key=answer_key,
            mc_model=mc_model or MCModel(mc_a, mc_b), invalid_rate=invalid_rate, seed=seed,
            open_answers=open_answers, structured=structured, bias_form=bias_form,
            tools=tools, formats=formats, beliefs=beliefs)
        if rate_limit is not None and (int(rate_limit[0]) < 1 or not float(rate_limit[1]) > 0):
            raise InputError(f"rate_limit must be (requests >= 1, window seconds > 0), got "
                             f"{rate_limit!r}")
        if not 0.0 <= refuse_rate <= 1.0:
            raise InputError(f"refuse_rate must lie in [0, 1], got {refuse_rate}")
        self.latency = float(latency)
        self.faults = faults or FaultPlan()
        self.seed = int(seed)
        self.host = host
        self.port = int(port)
        self.reject_n = reject_n
        self.require_api_key = require_api_key
        self.models = set(models) if models is not None else None
        self.max_n = max_n
        self.rate_limit = (int(rate_limit[0]), float(rate_limit[1])) if rate_limit else None
        self.rate_limit_retry_after = float(rate_limit_retry_after)
        self.refuse_rate = float(refuse_rate)
        self.echo_key = bool(echo_key)
        self.usage = None if usage is None else (int(usage[0]), int(usage[1]))
        self.keep_replies = keep_replies
        self.stats = ServerStats()
        self.batch_api = SimulatedBatchAPI(self, batch or BatchPlan(seed=self.seed))
        self.lock = threading.Lock()
        self._window: collections.deque[float] = collections.deque()
        self._counters: Counter = Counter()
        self._peers: set[Any] = set()  # the client (host, port) of every connection seen
        self._unnamed_peers: weakref.WeakSet[Any] = weakref.WeakSet()  # Unix sockets' clients
        self._runner: Any = None
        self._thread = LoopThread("ensemble-sim-server")

    @property
    def lam1(self) -> float:
        return self.expert.lam1

    def refuses(self, prompt: str) -> bool:
        """Whether the server refuses this prompt for good (the `refuse_rate` share, by hash)."""
        if self.refuse_rate <= 0:
            return False
        return stable_uniform(self.seed, "refuse", prompt) < self.refuse_rate

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> SimulatedServer:
        self._thread.start(self._startup)
        return self

    def stop(self) -> None:
        try:
            self._thread.stop(self._shutdown, timeout=10)
        except Exception:  # pragma: no cover - best effort
            pass

    def __enter__(self) -> SimulatedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> SimulatedServer:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    async def _startup(self) -> None:
        from aiohttp import web

        self._runner = self.runner()
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        self.port = int(self._runner.addresses[0][1])  # the port bound (0: one the OS chose)

    def runner(self) -> Any:
        """The server's aiohttp application in an `AppRunner`, not yet set up: what `start()`
        serves on `host:port` and `InProcessTransport` on a Unix socket of the caller's event
        loop."""
        from aiohttp import web

        # batch input files run to hundreds of MB (OpenAI takes up to 200 MB per batch)
        app = web.Application(client_max_size=self.batch_api.plan.max_bytes + 1024 * 1024)
        for method, path, handler in self.routes():
            app.router.add_route(method, path, handler)
        # a hanging "timeout" fault must not hold up stop() for its whole duration
        return web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)

    def routes(self) -> list[tuple[str, str, Any]]:
        """(method, path, handler) of every route the server's application serves."""
        return [("POST", "/v1/chat/completions", self._handle_chat),
                ("POST", "/chat/completions", self._handle_chat),
                ("GET", "/v1/models", self._handle_models),
                ("GET", "/health", self._handle_health),
                ("GET", "/stats", self._handle_stats), *self.batch_api.routes()]

    def transport(self) -> Any:
        """This server in this process, on the caller's event loop, behind the providers'
        HTTP seam: pass it as `transport=` (a provider option:
        `Ensemble(..., transport=server.transport())`), or to an httpx client as its
        transport; see `ensemble.testing.InProcessTransport`. The server need not be started."""
        from .inprocess import InProcessTransport

        return InProcessTransport(self)

    async def _shutdown(self) -> None:
        """Stop listening, then cancel the batches still running and wait for them."""
        try:
            if self._runner is not None:
                runner, self._runner = self._runner, None
                await runner.cleanup()
        finally:
            await self.batch_api.aclose()

    async def serve_forever(self, on_ready: Callable[[str], object] | None = None) -> None:
        """Serve in the current event loop until cancelled (used by `ensemble testing serve`);
        `on_ready(base_url)` once listening."""
        await self._startup()
        try:
            if on_ready is not None:
                on_ready(self.base_url)
            await asyncio.Event().wait()
        finally:
            await self._shutdown()

    # -- handlers ----------------------------------------------------------------------------
    async def _handle_health(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"status": "ok"})

    async def _handle_stats(self, request: Any) -> Any:
        """What the server counted (for benchmarks that run it in its own process)."""
        from aiohttp import web

        with self.lock:
            st = self.stats
            acc = st.accepted_times
            doc = {"requests": st.requests, "completions": st.completions,
                   "statuses": {str(k): v for k, v in st.statuses.items()},
                   "rate_limited": st.rate_limited, "refused": st.refused,
                   "faults": dict(st.faults), "served": len(st.served),
                   "served_twice": sum(1 for c in st.served.values() if c > 1),
                   "max_in_flight": st.max_in_flight, "connections": st.connections,
                   "accepted": len(acc),
                   "accepted_span_s": (acc[-1] - acc[0]) if len(acc) > 1 else 0.0,
                   "streamed": st.streamed, "batch_calls": dict(st.batch_calls),
                   "files_uploaded": st.files_uploaded, "batches_created": st.batches_created,
                   "batch_lines": st.batch_lines, "batch_line_faults": st.batch_line_faults}
        return web.json_response(doc)

    async def _handle_models(self, request: Any) -> Any:
        from aiohttp import web

        names = sorted(self.models) if self.models else ["sim-expert"]
        return web.json_response({"object": "list", "data": [
            {"id": m, "object": "model", "owned_by": "ensemble.testing"} for m in names]})

    async def _handle_chat(self, request: Any) -> Any:
        # a TCP connection is its client's (host, port): one while it is open, and the port
        # stays in TIME_WAIT a minute after it closes; a Unix socket's client has no name
        # (InProcessTransport): there the connection is its transport, while it lives
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        with self.lock:
            seen = self._peers if peer else self._unnamed_peers
            if (peer or transport) not in seen:
                seen.add(peer or transport)
                self.stats.connections += 1
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        status: Any = "dropped"
        try:
            resp = await self._chat(request)
            status = resp.status
            return resp
        finally:
            with self.lock:
                self.stats.in_flight -= 1
                self.stats.statuses[status] += 1

    def _over_rate_limit(self) -> bool:
        """Count this request in the sliding window; True if it is over the limit."""
        if self.rate_limit is None:
            return False
        limit, window = self.rate_limit
        now = time.monotonic()
        with self.lock:
            while self._window and self._window[0] <= now - window:
                self._window.popleft()
            if len(self._window) >= limit:
                self.stats.rate_limited += 1
                return True
            self._window.append(now)
            self.stats.accepted_times.append(now)
            return False

    async def _chat(self, request: Any) -> Any:
        from aiohttp import web

        with self.lock:
            self.stats.requests += 1
            number = self.stats.requests
        denied = self.check_key(request)
        if denied is not None:
            return denied
        try:
            body = await request.json()
        except Exception:
            return error_response(400, "request body is not valid JSON",
                                        "invalid_request_error")
        bad = self.check_body(body)
        if bad is not None:
            return error_response(bad[0], bad[1]["message"], bad[1]["type"],
                                        param=bad[1].get("param"), code=bad[1].get("code"))
        if self._over_rate_limit():
            return error_response(
                429, "Rate limit reached for requests, please retry after "
                     f"{self.rate_limit_retry_after:g} s.", "requests",
                headers={"Retry-After": f"{self.rate_limit_retry_after:g}"},
                code="rate_limit_exceeded")
        fault = self.faults.fault_for(number)
        if fault is not None:
            with self.lock:
                self.stats.faults[fault] += 1
            if fault == "429":
                return error_response(429, "Rate limit reached, slow down.", "rate_limit",
                                            headers={"Retry-After": f"{self.faults.retry_after}"})
            if fault in ("500", "503"):
                return error_response(int(fault), "The server had an error.", "server_error")
            if fault == "timeout":
                await asyncio.sleep(self.faults.hang)
            if fault == "slow":
                await asyncio.sleep(self.faults.slow)
            if fault == "malformed":
                return web.Response(text='{"id": "x", "choices": [', status=200,
                                    content_type="application/json")
            if fault == "drop":
                if request.transport is not None:
                    request.transport.abort()
                return web.Response(status=500)
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        start_hdr = request.headers.get(INDEX_HEADER)
        start = int(start_hdr) if start_hdr is not None and start_hdr.isdigit() else None
        status, doc = self.completion(body, start=start, number=number,
                                      short_n=fault == "short_n")
        if status != 200:
            err = doc["error"]
            return error_response(status, err["message"], err["type"],
                                        param=err.get("param"), code=err.get("code"))
        self.misreport(doc, request.headers.get("Authorization", ""))
        if body.get("stream"):
            return await self._stream(request, doc, body)
        return web.json_response(doc)

    def misreport(self, doc: dict[str, Any], auth: str) -> None:
        """What a careless provider does to a good reply: `echo_key` quotes the request's key
        in every choice's text (after the answer; with the header's form and bare); `usage`
        replaces the token counts reported (e.g. negative ones). Chat replies and batch lines
        alike."""
        if self.echo_key:
            key = auth.removeprefix("Bearer ").strip()
            for ch in doc["choices"]:
                quoted = f"\n(debug: Authorization: Bearer {key}; key={key}; {key})"
                ch["message"]["content"] = (ch["message"]["content"] or "") + quoted
        if self.usage is not None:
            pt, ct = self.usage
            doc["usage"] = {"prompt_tokens": pt, "completion_tokens": ct,
                            "total_tokens": pt + ct}

    def check_key(self, request: Any) -> Any:
        """401 unless the request carries `require_api_key` (None: any key passes)."""
        if self.require_api_key is None:
            return None
        auth = request.headers.get("Authorization", "")
        if auth == f"Bearer {self.require_api_key}":
            return None
        # like some providers, echo the key back: clients must not print it
        given = auth.removeprefix("Bearer ").strip()
        return error_response(401, f"Incorrect API key provided: {given}.",
                                    "invalid_request_error")

    def check_body(self, body: Any) -> tuple[int, dict[str, Any]] | None:
        """(status, error) for a chat request this server refuses before answering: an
        unknown model, an n out of range, a stream option without a stream."""
        if not isinstance(body, dict):
            return 400, error_doc("the request body must be a JSON object",
                                        "invalid_request_error")["error"]
        model = str(body.get("model", ""))
        if self.models is not None and model not in self.models:
            return 404, error_doc(f"The model `{model}` does not exist.",
                                        "invalid_request_error", code="model_not_found")["error"]
        n = int(body.get("n") or 1)
        if n > 1 and self.reject_n:
            return 400, error_doc("only n = 1 is supported by this server",
                                        "invalid_request_error", param="n")["error"]
        if n < 1 or n > self.max_n:
            return 400, error_doc(f"n must be between 1 and {self.max_n}",
                                        "invalid_request_error", param="n")["error"]
        stream = body.get("stream", False)
        if stream not in (True, False, None):
            return 400, error_doc(f"stream must be a boolean, got {stream!r}",
                                        "invalid_request_error", param="stream")["error"]
        bad_history = bad_tool_history(body.get("messages") or [])
        if bad_history is not None:
            return 400, error_doc(bad_history, "invalid_request_error",
                                  param="messages")["error"]
        if body.get("stream_options") is not None and not stream:
            # as OpenAI does: stream options without a stream are a mistake, not ignored
            return 400, error_doc("The 'stream_options' parameter is only allowed when "
                                        "'stream' is enabled.", "invalid_request_error",
                                        param="stream_options")["error"]
        return None

    def completion(self, body: dict[str, Any], *, start: int | None, number: int,
                   short_n: bool = False) -> tuple[int, dict[str, Any]]:
        """(status, document) of a chat completion request that passed the checks: a
        content-policy refusal, or the expert's choices for sample indices start .. start+n-1
        (without `start`, numbered per prompt). Shared by the chat route and batch lines."""
        messages = body.get("messages") or []
        temperature = float(body.get("temperature", 1.0))
        prompt = str(messages[-1].get("content") or "") if messages else ""
        if self.refuses(prompt):
            with self.lock:
                self.stats.refused += 1
            return 400, error_doc(
                "Your request was rejected as a result of our safety system.",
                "invalid_request_error", code="content_policy_violation")
        n = int(body.get("n") or 1)
        pkey = prompt_key(messages, temperature)
        with self.lock:
            if start is None:
                start = self._counters[pkey]
            self._counters[pkey] = max(self._counters[pkey], start + n)
        k = n
        if short_n and n > 1:
            k = max(1, n // 2)
        want_lp = bool(body.get("logprobs"))
        top_lp = int(body.get("top_logprobs") or 0)
        max_tokens = body.get("max_tokens")
        short = max_tokens is not None and int(max_tokens) <= 5
        choices = []
        for j in range(k):
            idx = start + j
            reply = self.expert.reply(messages, temperature, idx, short=short, key=pkey,
                                      response_format=body.get("response_format"),
                                      tools=body.get("tools"),
                                      tool_choice=body.get("tool_choice"))
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if reply.tool_calls:
                message["tool_calls"] = list(reply.tool_calls)
            choice: dict[str, Any] = {"index": j, "message": message,
                                      "finish_reason": "tool_calls" if reply.tool_calls
                                      else "stop"}
            if want_lp:
                choice["logprobs"] = self.expert.logprobs_for(reply, top_lp, pkey, idx)
            choices.append(choice)
            with self.lock:
                self.stats.served[(pkey, idx)] += 1
        with self.lock:
            self.stats.completions += k
            self.stats.temperatures.append(temperature)
            self.stats.n_values.append(n)
        texts = tuple(c["message"]["content"] for c in choices)
        calls = tuple(tuple(c["message"].get("tool_calls") or ()) for c in choices)
        ptoks, ctoks = self.expert.usage(messages, texts)
        ctoks += sum(len(json.dumps(c).split()) for cs in calls for c in cs)
        if self.keep_replies:
            with self.lock:
                self.stats.replies.append(ServedReply(
                    number, prompt, temperature, tuple(range(start, start + k)), texts, ptoks,
                    ctoks, tuple(c.get("logprobs") for c in choices) if want_lp else (),
                    calls, tuple(messages), tuple(body.get("tools") or ()),
                    body.get("tool_choice"), body.get("response_format")))
        model = str(body.get("model", ""))
        return 200, {
            "id": f"chatcmpl-sim-{number}", "object": "chat.completion",
            "created": int(time.time()), "model": model or "sim-expert", "choices": choices,
            "usage": {"prompt_tokens": ptoks, "completion_tokens": ctoks,
                      "total_tokens": ptoks + ctoks},
        }

    async def _stream(self, request: Any, doc: dict[str, Any], body: dict[str, Any]) -> Any:
        """The completion as server-sent events (`sse_events`), written as they are made."""
        from aiohttp import web

        with self.lock:
            self.stats.streamed += 1
        events = sse_events(doc, body)
        resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await resp.prepare(request)
        for event in events:
            await resp.write(event)
        await resp.write_eof()
        return resp


def sse_events(doc: dict[str, Any], body: dict[str, Any]) -> list[bytes]:
    """A chat completion document as server-sent events, chunked as the OpenAI API sends
    them: per choice a role chunk, content chunks and a finish chunk; with
    `stream_options.include_usage` every chunk carries `usage: null` and a last chunk with no
    choices carries the usage; then `data: [DONE]`."""
    import json

    opts = body.get("stream_options") or {}
    usage = bool(opts.get("include_usage")) if isinstance(opts, dict) else False
    head = {"id": doc["id"], "object": "chat.completion.chunk", "created": doc["created"],
            "model": doc["model"], "system_fingerprint": None}
    events: list[bytes] = []

    def send(choices: list[dict[str, Any]], **extra: Any) -> None:
        chunk = {**head, "choices": choices, **extra}
        if usage and "usage" not in extra:
            chunk["usage"] = None
        events.append(f"data: {json.dumps(chunk)}\n\n".encode())

    for ch in doc["choices"]:
        j = ch["index"]
        send([{"index": j, "delta": {"role": "assistant", "content": ""},
               "logprobs": None, "finish_reason": None}])
        text = ch["message"]["content"] or ""
        pieces = [text[i:i + 16] for i in range(0, len(text), 16)] or [""]
        for pi, piece in enumerate(pieces):
            lp = ch.get("logprobs") if pi == 0 else None
            send([{"index": j, "delta": {"content": piece}, "logprobs": lp,
                   "finish_reason": None}])
        calls = ch["message"].get("tool_calls") or []
        if calls:
            send([{"index": j, "delta": {"tool_calls": [
                {"index": i, **c} for i, c in enumerate(calls)]}, "logprobs": None,
                "finish_reason": None}])
        send([{"index": j, "delta": {}, "logprobs": None, "finish_reason": ch["finish_reason"]}])
    if usage:
        send([], usage=doc["usage"])
    events.append(b"data: [DONE]\n\n")
    return events
