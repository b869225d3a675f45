"""End-to-end: the sampler through both providers against the simulated server, in this
process (`server.transport()`: the server on a Unix socket of the test's loop, reached by the
providers' production clients); the faults a socket shows (drops, hangs, malformed bodies)
over TCP on 127.0.0.1 as well."""

import asyncio
import math

import pytest
from scipy.stats import binomtest

from ensemble.errors import (
    AuthenticationError,
    ModelNotFoundError,
    RetryBudgetExceeded,
)
from ensemble.qr import psi
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.store import SampleStore
from ensemble.sampling.types import SampleRequest
from ensemble.testing import FaultPlan, SimulatedServer

pytestmark = pytest.mark.usefixtures("each_provider")  # both providers: conftest.py

MODEL = "openai/sim-expert"


def draw(server, requests, parse, *, real_http=False, **kw):
    """Sample through `server`: in this process, or over real HTTP with `real_http`."""
    if not real_http:
        kw["transport"] = server.transport()

    async def go():
        async with Sampler(MODEL, api_base=server.base_url, **kw) as s:
            return await s.sample(requests, parser=parse), s.stats

    return asyncio.run(go())


def pick(questions, lo, hi):
    return next(q for q in questions if lo < q.posterior < hi)


def test_k_samples_are_distinct_draws_matching_planted_psi(box_questions, box_parse):
    q = pick(box_questions, 0.55, 0.7)
    lam1, t, k = 2.0, 1.0, 400
    with SimulatedServer(lam1=lam1, seed=7) as srv:
        rows, stats = draw(srv, [SampleRequest.of(q.prompt, temperature=t, k=k)],
                           box_parse)
    answers = [s.answer for s in rows[0]]
    assert len(answers) == k and len({s.index for s in rows[0]}) == k
    ones = answers.count("L")
    expected = psi(q.posterior, lam1 / t)
    # a cache collapsing repeats would give 0 or k; the planted ψ must be inside a 99.9% test
    assert binomtest(ones, k, expected).pvalue > 1e-3
    assert 0 < ones < k
    assert stats.requests == math.ceil(k / 16)  # n carried 16 samples per request


def test_greedy_is_argmax(box_questions, box_parse):
    qs = [q for q in box_questions if abs(q.posterior - 0.5) > 0.05][:20]
    with SimulatedServer(lam1=1.0, seed=1) as srv:
        rows, _ = draw(srv, [SampleRequest.of(q.prompt, temperature=0, k=3) for q in qs],
                       box_parse)
    for q, row in zip(qs, rows, strict=True):
        assert {s.answer for s in row} == {"L" if q.posterior > 0.5 else "R"}


@pytest.mark.parametrize("server_kw", [{"reject_n": True},
                                        {"faults": FaultPlan(every=1, kinds=("short_n",))}])
def test_n_fallback_never_fewer_samples(box_questions, box_parse, server_kw):
    q = pick(box_questions, 0.3, 0.7)
    with SimulatedServer(lam1=2.0, seed=3, **server_kw) as srv:
        rows, stats = draw(srv, [SampleRequest.of(q.prompt, temperature=1.0, k=12)],
                           box_parse)
    with SimulatedServer(lam1=2.0, seed=3) as ref:
        ref_rows, _ = draw(ref, [SampleRequest.of(q.prompt, temperature=1.0, k=12)],
                           box_parse)
    assert [s.answer for s in rows[0]] == [s.answer for s in ref_rows[0]]
    assert len(rows[0]) == 12 and stats.notes


@pytest.mark.parametrize("kind", ["429", "500", "503", "timeout", "slow", "malformed", "drop",
                                  "short_n"])
def test_every_fault_kind_is_survived_with_identical_results(box_questions, box_parse, kind):
    qs = box_questions[100:112]
    reqs = [SampleRequest.of(q.prompt, temperature=1.0, k=4) for q in qs]
    plan = FaultPlan(rate=0.4, kinds=(kind,), hang=5.0, slow=0.2, seed=11)
    with SimulatedServer(lam1=3.0, seed=5, faults=plan) as srv:
        rows, stats = draw(srv, reqs, box_parse, timeout=1.0, max_retry_time=60,
                           real_http=kind in ("timeout", "malformed", "drop"))
        assert srv.stats.faults[kind] > 0
    with SimulatedServer(lam1=3.0, seed=5) as ref:
        ref_rows, _ = draw(ref, reqs, box_parse)
    assert [[s.answer for s in r] for r in rows] == [[s.answer for s in r] for r in ref_rows]
    if kind not in ("slow", "short_n"):
        assert stats.retries > 0


def test_retry_after_is_honoured(box_questions, box_parse):
    import time

    q = box_questions[5]
    plan = FaultPlan(first=2, kinds=("429",), retry_after=0.6)
    with SimulatedServer(lam1=3.0, faults=plan) as srv:
        t0 = time.perf_counter()
        rows, stats = draw(srv, [SampleRequest.of(q.prompt, temperature=1.0, k=1)],
                           box_parse)
        assert time.perf_counter() - t0 >= 1.2  # two waits of at least Retry-After
    assert stats.retries == 2 and len(rows[0]) == 1


def test_retries_are_bounded(box_questions, box_parse):
    plan = FaultPlan(rate=1.0, kinds=("500",))
    with SimulatedServer(lam1=3.0, faults=plan) as srv:
        with pytest.raises(RetryBudgetExceeded, match="gave up after 3 attempts"):
            draw(srv, [SampleRequest.of("hello", temperature=1.0, k=1)], box_parse,
                 max_attempts=3)
        assert srv.stats.requests == 3


def test_backpressure_does_not_use_up_attempts(box_questions, box_parse):
    """Four 429s, then an answer, with two attempts allowed: rate limits are waited out, not
    counted as attempts."""
    plan = FaultPlan(first=4, kinds=("429",), retry_after=0.01)
    with SimulatedServer(lam1=3.0, faults=plan) as srv:
        rows, stats = draw(srv, [SampleRequest.of(box_questions[7].prompt, temperature=1.0,
                                                  k=1)], box_parse, max_attempts=2)
        assert srv.stats.requests == 5
    assert len(rows[0]) == 1 and stats.rate_limited == 4 and stats.retries == 4


def test_a_retry_after_past_the_time_budget_gives_up_at_once(box_parse):
    import time

    plan = FaultPlan(first=1, kinds=("429",), retry_after=30)
    with SimulatedServer(lam1=3.0, faults=plan) as srv:
        t0 = time.perf_counter()
        with pytest.raises(RetryBudgetExceeded, match="asked to wait 30 s"):
            draw(srv, [SampleRequest.of("hello", temperature=1.0, k=1)], box_parse,
                 max_retry_time=5)
        assert time.perf_counter() - t0 < 3 and srv.stats.requests == 1


def test_auth_and_unknown_model_fail_fast(box_parse):
    with SimulatedServer(require_api_key="sk-right-key") as srv:
        with pytest.raises(AuthenticationError):
            draw(srv, [SampleRequest.of("x", temperature=1.0)], box_parse,
                 api_key="sk-wrong-key-123456")
        assert srv.stats.requests == 1
    with SimulatedServer(models=["other"]) as srv:
        with pytest.raises(ModelNotFoundError):
            draw(srv, [SampleRequest.of("x", temperature=1.0)], box_parse)
        assert srv.stats.requests == 1


def test_store_resumes_without_requests_and_keeps_no_secret(tmp_path, box_questions, box_parse):
    store = tmp_path / "s.sqlite"
    reqs = [SampleRequest.of(q.prompt, temperature=0.5, k=6) for q in box_questions[:10]]
    secret = "sk-SECRET-abcdef123456"
    with SimulatedServer(lam1=2.0, seed=2) as srv:
        first, st1 = draw(srv, reqs, box_parse, store=store, api_key=secret)
        second, st2 = draw(srv, reqs, box_parse, store=store, api_key=secret)
        assert st2.requests == 0 and st2.samples_cached == 60
        assert [[s.answer for s in r] for r in first] == [[s.answer for s in r] for r in second]
        # more samples of the same prompts: only the new indices are requested
        more = [SampleRequest(r.messages, r.params, k=8) for r in reqs]
        _, st3 = draw(srv, more, box_parse, store=store, use_n=False)
        assert st3.requests == 20
        _, st4 = draw(srv, reqs, box_parse, store=store, refresh=True)
        assert st4.requests > 0
    with SampleStore(store) as s:
        assert s.count() == 80
    for f in tmp_path.iterdir():
        assert secret.encode() not in f.read_bytes()


def test_invalid_answers_are_counted_not_fatal(box_questions, box_parse):
    with SimulatedServer(lam1=3.0, invalid_rate=0.5, seed=1) as srv:
        rows, stats = draw(srv,
                           [SampleRequest.of(box_questions[3].prompt, temperature=1.0, k=40)],
                           box_parse)
    invalid = sum(1 for s in rows[0] if not s.valid)
    assert 5 < invalid < 35 and stats.invalid == invalid
