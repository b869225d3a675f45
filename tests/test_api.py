"""`Ensemble` and `@vote` end to end against the simulated server (real HTTP, litellm)."""

import asyncio
import math

import pytest

from ensemble import Decision, Ensemble, vote
from ensemble.errors import InputError
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

QS = get_task("boxball").questions()
CLEAR_L = next(q for q in QS if q.posterior > 0.9)
CLEAR_R = next(q for q in QS if q.posterior < 0.1)


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=5.0, seed=1) as srv:
        yield srv


def test_decide_returns_decision_votes_and_samples(server):
    ens = Ensemble("openai/sim-expert", api_base=server.base_url, temperature=0.5, n=5,
                   choices=["L", "R"], aggregator="majority")
    d = ens.decide(CLEAR_L.prompt)
    assert isinstance(d, Decision) and d.decision == "L"
    assert sum(d.votes.values()) == 5 and len(d.samples) == 5
    assert all(s.text and s.answer == "L" for s in d.samples)
    assert d.margin == 5 and d.n_invalid == 0 and d.prompt_tokens > 0


def test_decide_many_and_async(server):
    ens = Ensemble("openai/sim-expert", api_base=server.base_url, temperature=0.5, n=3,
                   choices=["L", "R"])
    ds = ens.decide_many([CLEAR_L.prompt, CLEAR_R.prompt])
    assert [d.decision for d in ds] == ["L", "R"]
    d = asyncio.run(ens.adecide(CLEAR_R.prompt))
    assert d.decision == "R"


def test_sync_wrapper_inside_running_loop(server):
    ens = Ensemble("openai/sim-expert", api_base=server.base_url, temperature=0.5, n=3,
                   choices=["L", "R"])

    async def inside():
        return ens.decide(CLEAR_L.prompt)  # a sync call from async code (as in Jupyter)

    assert asyncio.run(inside()).decision == "L"


def test_vote_decorator(server):
    @vote(model="openai/sim-expert", api_base=server.base_url, temperature=0.5, n=5,
          choices=["L", "R"])
    def which_box(q):
        return q.prompt

    assert which_box(CLEAR_R).decision == "R"
    assert asyncio.run(which_box.adecide(CLEAR_L)).decision == "L"

    @vote(model="openai/sim-expert", api_base=server.base_url, temperature=0.5, n=3,
          choices=["L", "R"])
    async def which_box_async(q):
        return q.prompt

    assert asyncio.run(which_box_async(CLEAR_L)).decision == "L"


def test_chat_messages_and_invalid_counted():
    with SimulatedServer(lam1=5.0, invalid_rate=1.0) as srv:
        ens = Ensemble("openai/sim-expert", api_base=srv.base_url, n=4, choices=["L", "R"])
        d = ens.decide([{"role": "user", "content": CLEAR_L.prompt}])
    assert d.decision is None and d.n_invalid == 4


@pytest.mark.parametrize("kw", [{"n": 0}, {"temperature": -1}, {"aggregator": "nope"},
                                {"aggregator": "robust"}])
def test_bad_options(kw):
    with pytest.raises(InputError):
        Ensemble("openai/sim-expert", **kw)


@pytest.mark.parametrize("provider,calls", [("openai", 20), ("litellm", 6)])
def test_sequential_decides_reuse_connections(provider, calls, monkeypatch):
    # the sync API runs on one event loop per Ensemble: its client's connections stay open
    # between calls (against a hosted provider, one TLS handshake instead of one per call;
    # each call opened its own before). litellm's ~0.3 s per call: fewer calls show it.
    monkeypatch.setenv("ENSEMBLE_PROVIDER", provider)
    with SimulatedServer(lam1=5.0, seed=2) as srv:
        with Ensemble("openai/sim-expert", api_base=srv.base_url, temperature=0.5, n=3,
                      choices=["L", "R"]) as ens:
            decided = [ens.decide(f"{CLEAR_L.prompt} ({i})").decision for i in range(calls)]
        assert srv.stats.requests >= calls and len(decided) == calls
        assert srv.stats.connections <= 2, srv.stats.connections


def test_close_or_garbage_collection_ends_the_sync_loop(server):
    # the loop the sync calls run on is the Ensemble's: `with` (close) ends its thread, and so
    # does dropping an Ensemble never closed
    import gc
    import threading
    import time

    def loops():
        return sum(t.name == "ensemble-sync" for t in threading.enumerate())

    before = loops()
    with Ensemble("openai/sim-expert", api_base=server.base_url, n=1,
                  choices=["L", "R"]) as ens:
        ens.decide(CLEAR_L.prompt)
        assert loops() == before + 1
    assert loops() == before
    ens = Ensemble("openai/sim-expert", api_base=server.base_url, n=1, choices=["L", "R"])
    assert ens.decide(CLEAR_R.prompt).decision == "R" and loops() == before + 1
    del ens
    gc.collect()
    deadline = time.monotonic() + 5
    while loops() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert loops() == before


def test_str_of_a_tied_decision_marks_the_tie():
    """Issue 32 item 11: `str(Decision)` of a 1-1 tie read `yes (yes: 1, no: 1)`."""
    from ensemble.aggregators import get_aggregator
    from ensemble.answers import resolve_answer
    from ensemble.decision import tally
    from ensemble.sampling.types import Sample

    rule = get_aggregator("plurality", rng=0)
    rows = [[Sample("k", 0, "<answer>yes</answer>", "yes"),
             Sample("k", 1, "<answer>no</answer>", "no")]]
    d = tally(rows, kind=resolve_answer(None, ["yes", "no"]),
              aggregate=lambda keys, groups: rule(keys, choices=["yes", "no"]),
              lams=(None,), stop=None)
    assert d.tie and d.decision in ("yes", "no")
    assert str(d).endswith("(yes: 1, no: 1; a tie, broken by the rule's tie-break)") or \
        str(d).endswith("(no: 1, yes: 1; a tie, broken by the rule's tie-break)"), str(d)


def _close_question(lam1: float) -> tuple[object, float]:
    """The box-and-ball question nearest 11 to 9 at n = 20 (q = 0.55) for an expert of λ₁."""
    from ensemble.qr import psi

    q = min(QS, key=lambda x: abs(float(psi(x.posterior, lam1)) - 0.55))
    return q, float(psi(q.posterior, lam1))


def test_a_fresh_ensembles_stopping_rule_does_not_believe_its_first_two_votes():
    """Issue 40.4: a fresh Ensemble(stop="bayes") fitted its prior on the one decision's pilot,
    so two agreeing votes made every question look settled: it stopped at 2 samples whenever
    the pilot agreed (half the runs on a question 11 to 9 at n = 20). Until 30 questions'
    pilots are seen it decides with the uniform prior, and says so in the Decision: in 500
    seeded runs (each a fresh Ensemble against its own simulated server, in-process, through
    the wire protocol) it stops at 2 in at most 5% (here in none)."""
    question, q = _close_question(2.0)
    assert 0.545 < q < 0.56  # 11 to 9 at n = 20

    async def run(seed: int) -> Decision:
        srv = SimulatedServer(lam1=2.0, seed=seed)
        async with Ensemble("openai/sim-expert", api_base=srv.base_url,
                            transport=srv.transport(), n=20, temperature=1.0, stop="bayes",
                            choices=["L", "R"]) as ens:
            return await ens.adecide(question.prompt)

    async def runs() -> list[Decision]:
        return [await run(seed) for seed in range(500)]

    ds = asyncio.run(runs())
    used = [d.n_samples for d in ds]
    assert sum(u == 2 for u in used) <= 0.05 * len(ds), sorted(used)
    assert all(d.stop == "bayes" and 2 <= d.n_samples <= 20 for d in ds)
    prior = ds[0].stop_prior
    assert prior is not None and prior.source == "default" and prior.questions == 1
    assert all(d.stop_prior == prior for d in ds)
    assert "uniform Beta(1, 1), the default until 30" in str(prior)
    assert ds[0].to_dict()["stop_prior"]["source"] == "default"


class _TokenBudget:
    """A plug-in stopping plan (`ensemble.stopping.StopPlan`), not a table: one sample at a
    time until the question's completion tokens reach `tokens` (issue 40.3's token-aware
    stopping in its simplest form); it keeps what each decision spent."""

    stop = "tokens"

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens

    def budgets(self, ns):
        return tuple(ns)

    def pilot_draw(self, i, budgets, memory):
        return tuple(1 for _ in budgets)

    def fit(self, pilots, memory, context):
        return self

    def remember(self, memory, pilot, drawn):
        memory.part("tokens", list).append(drawn.tokens)

    def next(self, drawn):
        if drawn.tokens is not None and drawn.tokens >= self.tokens:
            return tuple(0 for _ in drawn.members)
        return tuple(1 if left else 0 for left in drawn.left())


def test_any_stop_plan_drives_the_one_draw_loop_and_reads_tokens(server):
    """Issue 36.5/36.8: the Python API draws through one loop for every rule; a plan that is
    not a table (a plug-in) gets each sample's tokens through the wire and decides when to
    stop; the Ensemble keeps what it remembers."""
    plan = _TokenBudget(60)
    with Ensemble("openai/sim-expert", api_base=server.base_url, temperature=1.0, n=12,
                  stop=plan, choices=["L", "R"]) as ens:
        ds = ens.decide_many([CLEAR_L.prompt, CLEAR_R.prompt])
        kept = ens.stop_memory.get("tokens")
    for d in ds:
        tokens = [s.completion_tokens for s in d.samples]
        assert d.stop == "tokens" and all(t for t in tokens)
        assert sum(tokens) >= 60 and sum(tokens[:-1]) < 60 and len(tokens) < 12
    assert kept == [d.completion_tokens for d in ds]


class _SoftMargin:
    """A plug-in plan on soft evidence: it asks for the answer-token logprobs (`requests`)
    and stops once the soft tally's leader is 1.5 ahead."""

    stop = "soft-margin"

    def __init__(self) -> None:
        from ensemble.rules import Requests

        self.requests = Requests(answer_logprobs=True, top_logprobs=5)

    def budgets(self, ns):
        return tuple(ns)

    def pilot_draw(self, i, budgets, memory):
        return (1,)

    def fit(self, pilots, memory, context):
        return self

    def remember(self, memory, pilot, drawn):
        memory.part("tallies", list).append(drawn.tallies())

    def next(self, drawn):
        top = sorted(drawn.tallies().values(), reverse=True) + [0.0, 0.0]
        return (0,) if top[0] - top[1] >= 1.5 else (min(1, drawn.left()[0]),)


def test_a_stop_rule_on_soft_evidence_gets_the_logprobs_it_requests():
    """Issue 36.5 for issue 37: a stopping rule that reads soft evidence declares it; the
    Ensemble asks the provider for the logprobs (its aggregator, plurality, reads none), and
    each sample reaches the rule with its own P(option) at the answer position as its shares:
    the tallies the rule stopped on equal a hand recount of the logprobs the server planted."""
    from ensemble.decision import evidence_of

    with SimulatedServer(lam1=3.0, seed=4) as srv, Ensemble(
            "openai/sim-expert", api_base=srv.base_url, temperature=1.0, n=10,
            stop=_SoftMargin(), choices=["L", "R"]) as ens:
        assert ens.params.logprobs and ens.params.top_logprobs == 5
        ds = ens.decide_many([q.prompt for q in QS[:6]])
        kept = ens.stop_memory.get("tallies")
    for d, tallies in zip(ds, kept, strict=True):
        assert all(s.answer_lp is not None for s in d.samples)
        recount: dict[str, float] = {}
        for s in d.samples:
            for a, lp in evidence_of(s, options=["L", "R"]).options.items():
                recount[a] = recount.get(a, 0.0) + math.exp(lp)
        assert tallies == pytest.approx(recount)
        assert d.stop == "soft-margin" and 1 <= d.n_samples <= 10
