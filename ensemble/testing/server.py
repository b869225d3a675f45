"""A simulated OpenAI-compatible expert server: real HTTP on 127.0.0.1 (aiohttp).

Box-and-ball prompts (the paper's, see `tasks.boxball`): the expert answers "L" with probability
sigmoid(2λ(2p − 1) + bias), with λ = λ₁ / t and p the exact posterior the prompt implies; at
t = 0 it answers the argmax (a fair coin at p = 1/2 without bias). With `logprobs`, the first
answer token carries log P(L) and log P(R) in its top_logprobs.

Multiple-choice prompts (the paper's MathQA prompt: "### Question:" ... "### Options:" with
lines "A) ..."): the accuracy model encodes c.i.i.d. signals, as in the paper's theory. Each
question q has, deterministically from hash(seed, question), a reading accuracy
ρ_q ~ Beta(mc_a, mc_b) and a distractor option d_q ≠ correct. At t > 0 each sample independently
reads the question correctly with probability ρ_q (otherwise it reads the distractor) and then
answers by quantal response among the K options with λ = λ₁/t: P(j) ∝ exp(2λ u_j), u = +1 for
the option read, −1 for the others. At t = 0 the model's randomness is frozen: one reading per
question (correct iff U_q < ρ_q, U_q fixed by the hash), repeated by every sample. So one
greedy answer is right with probability E[ρ], a single sample at t > 0 a little less often, and
a plurality of several samples at moderate t is right whenever ρ_q > 1/2: at n = 1 higher t
hurts, at n >= 3 a moderate t helps (the paper's pattern). The correct letters come from
`answer_key`: it maps the question text (between "### Question:" and "### Options:",
whitespace-normalised) or, for prompts in another format, "sha256:" + the hex digest of the whole
last user message, to the correct letter; `answer_key_from_questions` builds it from
`tasks.Question` objects. A question missing from the key gets a correct letter drawn from the
hash (so the server still answers, but accuracy is then measured against that letter).

Every draw is a deterministic function of (seed, messages, temperature, sample index). Clients
send the first sample index of a request in the `x-ensemble-sample-index` header (choices of an
n > 1 request take the following indices); without it the server numbers samples per prompt.
So a run interrupted by faults or a kill, then resumed, gets exactly the samples of an unbroken
run with the same seed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .faults import FaultPlan

__all__ = ["MCModel", "ServerStats", "SimulatedServer", "answer_key_from_questions",
           "prompt_hash", "prompt_key", "question_text"]

INDEX_HEADER = "x-ensemble-sample-index"
_QUESTION = re.compile(r"### Question:\s*(.*?)\s*### Options:\s*(.*?)(?:\n\s*\n|###|$)", re.DOTALL)
_OPTION = re.compile(r"^\s*\(?([A-Z])\)", re.MULTILINE)


def _norm(text: str) -> str:
    return " ".join(text.split())


def question_text(prompt: str) -> str | None:
    """The question of a multiple-choice prompt in the paper's format, whitespace-normalised."""
    m = _QUESTION.search(prompt)
    return _norm(m.group(1)) if m else None


def prompt_key(messages: Any, temperature: float) -> str:
    """The server's key of a prompt (`ServerStats.served` is keyed by (prompt_key, index))."""
    return hashlib.sha256(json.dumps([messages, float(temperature)], sort_keys=True)
                          .encode()).hexdigest()[:16]


def prompt_hash(prompt: str) -> str:
    """The answer-key entry of a prompt that is not in the MathQA format: "sha256:<hex>"."""
    return "sha256:" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def answer_key_from_questions(questions: Iterable[Any]) -> dict[str, str]:
    """An answer key for `SimulatedServer` from `tasks.Question` objects.

    Each question is keyed by its question text (the paper's MathQA prompt: the text between
    "### Question:" and "### Options:") or, for prompts in other formats, by `prompt_hash` of
    the whole prompt. Question ids are not used: the server sees only the prompt.
    """
    key = {}
    for q in questions:
        if q.correct is None:
            continue
        text = question_text(q.prompt) or prompt_hash(q.prompt)
        key[text] = str(q.correct).upper()
    return key


@dataclass(frozen=True)
class MCModel:
    """The multiple-choice accuracy model: reading accuracy ρ_q ~ Beta(a, b) per question."""

    a: float = 3.0
    b: float = 2.0


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

    def indices_served(self) -> dict[str, list[int]]:
        """Per prompt key (hash of messages and temperature), the sample indices served."""
        out: dict[str, list[int]] = {}
        for (key, idx), _count in sorted(self.served.items()):
            out.setdefault(key, []).append(idx)
        return out


def _u64(*parts: Any) -> int:
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big")


class SimulatedServer:
    """A real OpenAI-compatible HTTP server with a planted quantal-response expert.

    Use as a context manager (sync or async); `base_url` is "http://127.0.0.1:PORT/v1".
    `lam1` is λ₁, the expert's rationality at t = 1 in ψ_λ units (λ = λ₁ / t; greedy at t = 0);
    `bias` is added on the logit scale of P("L"). `mc_model` (or `mc_a`, `mc_b`) sets the
    multiple-choice reading accuracy Beta(a, b). `faults` injects failures, `reject_n` answers
    400 to n > 1 (like llama.cpp), `invalid_rate` is the share of replies without an answer,
    `require_api_key` makes it answer 401 to any other key, `models` 404 to other model names.
    `stats` counts requests, completions, faults and the (prompt, sample index) pairs served.
    """

    def __init__(self, *, lam1: float = 10.0, bias: float = 0.0,
                 answer_key: Mapping[str, str] | None = None, mc_model: MCModel | None = None,
                 mc_a: float = 3.0, mc_b: float = 2.0, latency: float = 0.0, faults: FaultPlan | None = None,
                 seed: int = 0, port: int = 0, host: str = "127.0.0.1", reject_n: bool = False,
                 invalid_rate: float = 0.0, require_api_key: str | None = None,
                 models: Iterable[str] | None = None, max_n: int = 128) -> None:
        self.lam1 = float(lam1)
        self.bias = float(bias)
        self.answer_key = {_norm(k): v.upper() for k, v in (answer_key or {}).items()}
        if mc_model is not None:
            mc_a, mc_b = mc_model.a, mc_model.b
        if not (mc_a > 0 and mc_b > 0):
            from ..errors import InputError

            raise InputError(f"the Beta(a, b) reading accuracy needs a, b > 0, got {mc_a}, {mc_b}")
        if not 0.0 <= invalid_rate <= 1.0:
            from ..errors import InputError

            raise InputError(f"invalid_rate must lie in [0, 1], got {invalid_rate}")
        self.mc_a, self.mc_b = float(mc_a), float(mc_b)
        self.latency = float(latency)
        self.faults = faults or FaultPlan()
        self.seed = int(seed)
        self.host = host
        self.port = int(port)
        self.reject_n = reject_n
        self.invalid_rate = float(invalid_rate)
        self.require_api_key = require_api_key
        self.models = set(models) if models is not None else None
        self.max_n = max_n
        self.stats = ServerStats()
        self._lock = threading.Lock()
        self._counters: Counter = Counter()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: Any = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> SimulatedServer:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="ensemble-sim-server", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        try:
            fut.result(10)
        except Exception:  # pragma: no cover - best effort
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> SimulatedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> SimulatedServer:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:  # noqa: BLE001 - reported to start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.close()

    async def _startup(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_post("/chat/completions", self._handle_chat)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_get("/health", self._handle_health)
        # a hanging "timeout" fault must not hold up stop() for its whole duration
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        sock = site._server.sockets[0]  # type: ignore[union-attr]
        self.port = sock.getsockname()[1]

    async def _shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def serve_forever(self) -> None:
        """Serve in the current event loop until cancelled (used by `ensemble testing serve`)."""
        self._loop = asyncio.get_running_loop()
        await self._startup()
        try:
            await asyncio.Event().wait()
        finally:
            await self._shutdown()

    # -- handlers ----------------------------------------------------------------------------
    async def _handle_health(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"status": "ok"})

    async def _handle_models(self, request: Any) -> Any:
        from aiohttp import web

        names = sorted(self.models) if self.models else ["sim-expert"]
        return web.json_response({"object": "list", "data": [
            {"id": m, "object": "model", "owned_by": "ensemble.testing"} for m in names]})

    def _error_response(self, status: int, message: str, etype: str, *,
                        headers: Mapping[str, str] | None = None, param: str | None = None) -> Any:
        from aiohttp import web

        return web.json_response({"error": {"message": message, "type": etype, "param": param,
                                            "code": None}}, status=status, headers=headers)

    async def _handle_chat(self, request: Any) -> Any:
        with self._lock:
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            return await self._chat(request)
        finally:
            with self._lock:
                self.stats.in_flight -= 1

    async def _chat(self, request: Any) -> Any:
        from aiohttp import web

        with self._lock:
            self.stats.requests += 1
            number = self.stats.requests
        if self.require_api_key is not None:
            auth = request.headers.get("Authorization", "")
            if auth != f"Bearer {self.require_api_key}":
                return self._error_response(401, "Incorrect API key provided.",
                                            "invalid_request_error")
        try:
            body = await request.json()
        except Exception:
            return self._error_response(400, "request body is not valid JSON",
                                        "invalid_request_error")
        model = str(body.get("model", ""))
        if self.models is not None and model not in self.models:
            return self._error_response(404, f"The model `{model}` does not exist.",
                                        "invalid_request_error")
        n = int(body.get("n") or 1)
        if n > 1 and self.reject_n:
            return self._error_response(400, "only n = 1 is supported by this server",
                                        "invalid_request_error", param="n")
        if n < 1 or n > self.max_n:
            return self._error_response(400, f"n must be between 1 and {self.max_n}",
                                        "invalid_request_error", param="n")
        fault = self.faults.fault_for(number)
        if fault is not None:
            with self._lock:
                self.stats.faults[fault] += 1
            if fault == "429":
                return self._error_response(429, "Rate limit reached, slow down.", "rate_limit",
                                            headers={"Retry-After": f"{self.faults.retry_after}"})
            if fault in ("500", "503"):
                return self._error_response(int(fault), "The server had an error.", "server_error")
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
        messages = body.get("messages") or []
        temperature = float(body.get("temperature", 1.0))
        prompt = str(messages[-1].get("content", "")) if messages else ""
        pkey = prompt_key(messages, temperature)
        start_hdr = request.headers.get(INDEX_HEADER)
        with self._lock:
            if start_hdr is not None and start_hdr.isdigit():
                start = int(start_hdr)
            else:
                start = self._counters[pkey]
            self._counters[pkey] = max(self._counters[pkey], start + n)
        k = n
        if fault == "short_n" and n > 1:
            k = max(1, n // 2)
        want_lp = bool(body.get("logprobs"))
        top_lp = int(body.get("top_logprobs") or 0)
        max_tokens = body.get("max_tokens")
        choices = []
        for j in range(k):
            idx = start + j
            text, lp = self._answer(prompt, temperature, idx, pkey,
                                    short=max_tokens is not None and int(max_tokens) <= 5)
            choice: dict[str, Any] = {"index": j, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": text}}
            if want_lp:
                choice["logprobs"] = self._logprobs(text, lp, top_lp)
            choices.append(choice)
            with self._lock:
                self.stats.served[(pkey, idx)] += 1
        with self._lock:
            self.stats.completions += k
            self.stats.temperatures.append(temperature)
            self.stats.n_values.append(n)
        ptoks = sum(len(str(m.get("content", "")).split()) for m in messages)
        ctoks = sum(len(c["message"]["content"].split()) for c in choices)
        return web.json_response({
            "id": f"chatcmpl-sim-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": model or "sim-expert", "choices": choices,
            "usage": {"prompt_tokens": ptoks, "completion_tokens": ctoks,
                      "total_tokens": ptoks + ctoks},
        })

    # -- the planted expert -------------------------------------------------------------------
    def _rng(self, *parts: Any) -> np.random.Generator:
        return np.random.default_rng(_u64(self.seed, *parts))

    def _lam(self, temperature: float) -> float:
        return math.inf if temperature <= 0 else self.lam1 / temperature

    def _answer(self, prompt: str, temperature: float, idx: int, pkey: str, *, short: bool
                ) -> tuple[str, dict[str, float] | None]:
        from tasks.boxball import posterior_from_prompt

        rng = self._rng(pkey, idx)
        if self.invalid_rate > 0 and rng.random() < self.invalid_rate:
            return "I cannot decide which box it is.", None
        post = posterior_from_prompt(prompt)
        if post is not None:
            return self._box_answer(post, temperature, rng, short=short)
        q = question_text(prompt)
        if q is not None:
            letters = _OPTION.findall(prompt[prompt.find("### Options:"):])
            return self._mc_answer(q, letters or list("ABCDE"), temperature, rng), None
        h = prompt_hash(prompt)
        if h in self.answer_key:
            letters = _OPTION.findall(prompt) or list("ABCDE")
            return self._mc_answer(h, letters, temperature, rng), None
        return "<reason>simulated: a generic reply.</reason>\n<answer>OK</answer>", None

    def _box_answer(self, p: float, temperature: float, rng: np.random.Generator, *, short: bool
                    ) -> tuple[str, dict[str, float]]:
        lam = self._lam(temperature)
        if abs(p - 0.5) < 1e-9:
            p = 0.5  # the prompt's fractions give 0.5 only up to rounding: a tie is a tie
        if math.isinf(lam):
            z = (2 * p - 1) * 1e9 + self.bias
            prob_l = 1.0 if z > 0 else (0.0 if z < 0 else 0.5)
        else:
            z = 2 * lam * (2 * p - 1) + self.bias
            prob_l = 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0
        letter = "L" if rng.random() < prob_l else "R"
        lp = {"L": math.log(max(prob_l, 1e-300)), "R": math.log(max(1 - prob_l, 1e-300))}
        if short:
            return letter, lp
        return (f"<reason>simulated: posterior P(left) = {p:.4f}</reason>\n"
                f"<answer>{letter}</answer>"), lp

    def _mc_answer(self, question: str, letters: list[str], temperature: float,
                   rng: np.random.Generator) -> str:
        qrng = self._rng("mc", question)
        rho = float(qrng.beta(self.mc_a, self.mc_b))
        frozen_u = float(qrng.random())
        correct = self.answer_key.get(question)
        if correct is not None and correct not in letters:
            letters = sorted(set(letters) | {correct})
        K = len(letters)
        if correct not in letters:
            correct = letters[int(qrng.integers(K))]
        ci = letters.index(correct)
        di = (ci + 1 + int(qrng.integers(K - 1))) % K if K > 1 else ci
        lam = self._lam(temperature)
        if math.isinf(lam):
            choice = read = ci if frozen_u < rho else di
        else:
            read = ci if rng.random() < rho else di
            logits = np.full(K, -2.0 * lam)
            logits[read] = 2.0 * lam
            probs = np.exp(logits - logits.max())
            probs /= probs.sum()
            choice = int(rng.choice(K, p=probs))
        return (f"<reason>simulated: read option {letters[read]}</reason>\n"
                f"<answer>{letters[choice]}</answer>")

    @staticmethod
    def _logprobs(text: str, lp: dict[str, float] | None, top: int) -> dict[str, Any]:
        m = re.search(r"<answer>(.*?)</answer>", text)
        token = m.group(1) if m else text.strip()[:1]
        if lp is None:
            lp = {token: 0.0}
        tops = sorted(lp.items(), key=lambda kv: -kv[1])[:max(top, 1)]
        return {"content": [{"token": token, "logprob": lp.get(token, 0.0), "bytes": None,
                             "top_logprobs": [{"token": t, "logprob": v, "bytes": None}
                                              for t, v in tops]}]}
