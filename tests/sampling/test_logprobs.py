"""Compact logprobs (issue 37): what the soft rules read of each sample, drawn through the
sampler from the simulated server, stored, read back, migrated from schema 4."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3

import pytest

from ensemble.sampling.logprobs import answer_logprob, compact, option_probs, trace_summary
from ensemble.sampling.parsing import choice_parser
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.store import SCHEMA_VERSION, SampleStore
from ensemble.sampling.types import SampleRequest
from ensemble.testing import SimulatedServer

MODEL = "openai/sim-expert"


def _tok(token, lp, tops=()):
    return {"token": token, "logprob": lp,
            "top_logprobs": [{"token": t, "logprob": v} for t, v in tops]}


def test_a_drawn_samples_compact_logprobs_are_the_planted_belief(tmp_path, box_questions,
                                                                 box_parse):
    """Each sample's answer_lp holds the answer token the server planted, and its options'
    probabilities are exactly the served top_logprobs (recounted by hand); the store gives
    the same back when the run is read again."""
    q = next(q for q in box_questions if 0.6 < q.posterior < 0.8)
    store = tmp_path / "s.sqlite"
    with SimulatedServer(lam1=2.0, seed=3, keep_replies=True) as srv:
        async def go():
            async with Sampler(MODEL, api_base=srv.base_url, transport=srv.transport(),
                               store=store) as s:
                return await s.sample([SampleRequest.of(q.prompt, temperature=1.0, k=8,
                                                        logprobs=True, top_logprobs=2)],
                                      parser=box_parse)
        rows = asyncio.run(go())
        served = [lp for r in srv.stats.replies for lp in r.logprobs]
    assert len(served) == 8
    for s, lp in zip(rows[0], served, strict=True):
        tops = {d["token"]: d["logprob"] for d in lp["content"][0]["top_logprobs"]}
        assert s.answer_lp["s"] == s.answer and s.answer_lp["at"] == 0
        got = option_probs(s.answer_lp, s.answer, box_parse, options=["L", "R"])
        assert got == pytest.approx({k: math.exp(v) for k, v in tops.items()}, abs=1e-3)
        assert answer_logprob(s.answer_lp, s.answer, box_parse) == pytest.approx(
            tops[s.answer], abs=1e-4)
    with SampleStore(store) as st:
        again = st.get(rows[0][0].key, range(8), parser=box_parse)
    assert [again[i].answer_lp for i in range(8)] == [s.answer_lp for s in rows[0]]


def test_a_schema_4_store_is_migrated_and_its_full_logprobs_compacted_on_reading(tmp_path):
    path = tmp_path / "old.sqlite"
    with SampleStore(path) as st:  # a current store, taken back to schema 4 as it was
        pass
    full = {"content": [_tok("The", -0.5), _tok(" answer", -0.1), _tok(" is", -0.01),
                        _tok(" yes", -0.2, [(" yes", -0.2), (" no", -2.0), (" Yes", -4.0)])]}
    with sqlite3.connect(path) as c:
        c.execute("ALTER TABLE samples DROP COLUMN answer_lp")
        c.execute("PRAGMA user_version = 4")
        c.execute("INSERT INTO samples (key, idx, model, text, finish_reason, logprobs, created,"
                  " source) VALUES ('k', 0, 'm', 'The answer is yes', 'stop', ?, 1, 'online')",
                  (json.dumps(full),))
    parse = choice_parser(["yes", "no"])
    with SampleStore(path) as st:
        assert st.schema_version == SCHEMA_VERSION == 5
        s = st.get("k", [0], parser=parse)[0]
    assert s.answer == "yes" and s.answer_lp["s"] == " yes" and s.answer_lp["at"] == 3
    got = option_probs(s.answer_lp, "yes", parse, options=["yes", "no"])
    assert got == pytest.approx({"yes": math.exp(-0.2) + math.exp(-4.0), "no": math.exp(-2.0)},
                                abs=1e-3)


def test_a_number_of_several_tokens_is_the_product_of_its_tokens():
    parse = lambda text: (text.strip() if text.strip().isdigit() else None)  # noqa: E731
    lp = {"content": [_tok("12", -0.3), _tok(" +", -0.2), _tok(" 52", -0.1), _tok(" =", -0.05),
                      _tok(" 6", -0.7, [(" 6", -0.7), (" 5", -0.9)]), _tok("4", -0.4)]}
    small = compact(lp, "64", parse)
    assert small["s"] == " 64" and small["at"] == 4 and small["lp"] == [-0.7, -0.4]
    assert answer_logprob(small, "64", parse) == pytest.approx(-1.1)
    # open answers: the sampled answer's own probability, the rest unassigned
    assert option_probs(small, "64", parse) == pytest.approx({"64": math.exp(-1.1)})
    assert answer_logprob(small, "12", parse) is None  # not the answer it was located for
    assert compact(lp, None, parse)["trace"][0] == 6 and "s" not in compact(lp, None, parse)


def test_deepconf_confidences_of_a_trace():
    """C_i = −mean of the top-k logprobs; groups are sliding windows; low is the lowest
    group, tail the last window (reference values computed by hand)."""
    toks = [_tok("a", -0.1, [("a", -0.1), ("b", -3.0)]),    # C = 1.55
            _tok("b", -1.0, [("b", -1.0), ("c", -1.0)]),    # C = 1.0
            _tok("c", -0.01, [("c", -0.01), ("d", -5.0)])]  # C = 2.505
    n, mean, conf, low, tail = trace_summary(toks, window=2)
    assert n == 3 and mean == pytest.approx(-1.11 / 3, abs=1e-4)
    assert conf == pytest.approx((1.55 + 1.0 + 2.505) / 3, abs=1e-4)
    assert low == pytest.approx((1.55 + 1.0) / 2, abs=1e-4)
    assert tail == pytest.approx((1.0 + 2.505) / 2, abs=1e-4)


def test_samples_stored_without_logprobs_are_redrawn_and_the_run_says_so(tmp_path, box_questions,
                                                                          box_parse):
    """Logprobs are part of the store key: a draw that reads them does not reuse samples
    stored without them; it draws them again and says so, with what their first draw cost
    (one note, before the requests); drawn once with them, a second draw requests nothing,
    and neither does a draw without them (samples drawn with logprobs serve it)."""
    q = box_questions[5]
    store = tmp_path / "s.sqlite"
    with SimulatedServer(lam1=2.0, seed=1) as srv:
        async def go(**params):
            async with Sampler(MODEL, api_base=srv.base_url, transport=srv.transport(),
                               store=store) as s:
                rows = await s.sample([SampleRequest.of(q.prompt, temperature=1.0, k=4,
                                                        **params)], parser=box_parse)
                return rows, s.stats

        first, plain = asyncio.run(go())
        rows, soft = asyncio.run(go(logprobs=True, top_logprobs=5))
        again = asyncio.run(go(logprobs=True, top_logprobs=5))[1]
        store.unlink()
        asyncio.run(go(logprobs=True, top_logprobs=5))
        served, hard = asyncio.run(go())
    assert plain.requests == 1 and soft.requests == 1 and again.requests == 0
    tokens = sum(s.completion_tokens for s in first[0])
    assert [n for n in soft.notes if "without logprobs" in n] == [
        f"4 of the samples asked for are stored without logprobs; this draw reads logprobs (a "
        f"rule weighs each sample by them), which are part of the store key, so those samples "
        f"are requested again, with them: their first draw took {tokens:,} completion tokens "
        f"(its price was not stored), and a redraw about as much"]
    assert not any("without logprobs" in n for n in again.notes)
    assert all(s.answer_lp is not None for s in rows[0])
    assert hard.requests == 0 and all(s.answer_lp is not None for s in served[0])
