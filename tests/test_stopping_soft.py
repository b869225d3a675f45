"""`bayes-soft`: the Bayes stopping rule on soft evidence (issue 37, `ensemble.stopping.soft`).

Its gain r (votes per soft sample) is fitted without labels on the pilots and recovers the
planted chain beliefs' κ + 1; on noise beliefs its signal check keeps it on the hard counts;
with r = 1 on hard tallies it is `bayes` state for state; an Ensemble draws the logprobs it
reads and keeps its pilots' evidence; the evals replay it on each sample's own P(option)."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble import Ensemble
from ensemble.stopping import StopSpec
from ensemble.stopping.drawn import Drawn, Observation
from ensemble.stopping.plan import FitContext, StopMemory
from ensemble.stopping.soft import SoftBayesRule, SoftFit
from ensemble.testing import ChainBeliefs, SimulatedServer

OPTS = ["A", "B", "C"]


def _pilots(beliefs: ChainBeliefs, questions: int, k: int = 2, seed: int = 0,
            spread: float = 2.0) -> list[Drawn]:
    """Pilots of k samples: answers drawn from each question's π, each sample's belief drawn
    by the simulator's own `ChainBeliefs` around it."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(questions):
        pi = rng.dirichlet(np.ones(len(OPTS)) * spread)
        obs = []
        for _ in range(k):
            a = int(rng.choice(len(OPTS), p=pi))
            b = beliefs.draw(pi, a, rng)
            obs.append(Observation(OPTS[a], shares=dict(zip(OPTS, b, strict=True))))
        out.append(Drawn((tuple(obs),), (20,)))
    return out


def _fit(pilots: list[Drawn]) -> SoftBayesRule:
    rule = StopSpec("bayes-soft", max_n=20).fit(pilots, StopMemory(),
                                                 FitContext(budgets=(20,), lams=(None,)))
    assert isinstance(rule, SoftBayesRule)
    return rule


@pytest.mark.parametrize("kappa", [1.0, 4.0])
def test_the_gain_is_fitted_from_the_pilots_as_the_planted_kappa_plus_one(kappa):
    rule = _fit(_pilots(ChainBeliefs(kappa=kappa), 400))
    assert rule.gain.on and rule.gain.r == pytest.approx(kappa + 1, rel=0.25)
    assert rule.notes[0].startswith(f"bayes-soft: one soft sample counts as {rule.gain.r:g}")


def test_on_noise_beliefs_it_stops_on_the_hard_counts_and_says_why():
    pilots = _pilots(ChainBeliefs(mode="noise"), 400)
    rule = _fit(pilots)
    assert not rule.gain.on and rule.gain.r == 1.0
    assert "stops on the hard counts: the logprobs showed no signal" in rule.notes[0]
    hard = StopSpec("bayes", max_n=20).fit(pilots, StopMemory(),
                                           FitContext(budgets=(20,), lams=(None,)))
    for d in pilots[:50]:  # the same decisions as bayes
        assert rule.next(d) == hard.next(d)
    few = _fit(_pilots(ChainBeliefs(), 10))
    assert not few.gain.on and "10 of the 30 pilots" in few.notes[0]


def test_with_a_gain_of_one_on_hard_tallies_it_is_bayes_state_for_state():
    hard = StopSpec("bayes", max_n=12, cost=0.002).fit(
        _pilots(ChainBeliefs(), 60), StopMemory(), FitContext(budgets=(12,), lams=(None,)))
    soft = SoftBayesRule(max_n=12, prior=hard.prior, cost=0.002,  # type: ignore[attr-defined]
                         gain=SoftFit(1.0, True, 60, 5.0, 120))
    n, a, b = np.meshgrid(np.arange(13), np.arange(13), np.arange(13), indexing="ij")
    ok = (b <= a) & (a + b <= n)
    got = soft.stops_at(n[ok], a[ok], b[ok])
    want = hard.table[n[ok], a[ok], b[ok]] == 0  # type: ignore[attr-defined]
    assert (got == want).all()


def test_an_ensemble_draws_the_logprobs_bayes_soft_reads_and_keeps_its_pilots(box_questions):
    qs = [q.prompt for q in box_questions[:36]]
    with SimulatedServer(lam1=2.0, seed=2) as srv, Ensemble(
            "openai/sim-expert", api_base=srv.base_url, temperature=1.0, n=10,
            stop="bayes-soft", choices=["L", "R"]) as ens:
        assert ens.params.logprobs and ens.params.top_logprobs == 5
        ds = ens.decide_many(qs)
        kept = ens.stop_memory.get("evidence:bayes-soft")
    assert all(d.stop == "bayes-soft" and 2 <= d.n_samples <= 10 for d in ds)
    assert all(s.answer_lp is not None for d in ds for s in d.samples)
    assert len(kept) == len(qs) and all(k is not None for k in kept)


def test_the_evals_replay_it_on_each_samples_own_shares():
    from ensemble.evals.adaptive import adaptive_eval

    rng = np.random.default_rng(3)
    pilots = _pilots(ChainBeliefs(), 300, k=8, seed=3, spread=0.5)  # clear questions
    codes = np.array([[OPTS.index(o.key) for o in d.members[0]] for d in pilots])
    shares = np.array([[[o.shares[x] for x in OPTS] for o in d.members[0]] for d in pilots])
    correct = rng.integers(0, 3, len(pilots))
    spec = StopSpec("bayes-soft", max_n=8)
    soft = adaptive_eval(codes, spec, correct=correct, n_options=3, orders=3, reps=100,
                         shares=shares[None])[0]
    hard = adaptive_eval(codes, spec, correct=correct, n_options=3, orders=3, reps=100)[0]
    assert soft.notes[0].startswith("bayes-soft: one soft sample counts as")
    assert hard.notes[0].startswith("bayes-soft: stops on the hard counts: 0 of the 30")
    assert not np.array_equal(soft.question_samples, hard.question_samples)


@pytest.mark.parametrize("votes, cost", [(40, 0.004), (60, 0.0004), (120, 0.001)])
def test_its_table_over_the_reachable_states_is_bayes_backward_induction(votes, cost):
    """The soft rule's table (one per order of an eval's replay, so computed on the states
    it reads only) equals the bayes rule's backward induction wherever a state can occur:
    r votes left at a of m with m + r <= votes, a <= m."""
    from ensemble.stopping import BetaPrior, GridPrior
    from ensemble.stopping.bayes import stop_table
    from ensemble.stopping.soft import reachable_stop_table

    r = np.arange(votes + 1)[:, None, None]
    m = np.arange(votes + 1)[None, :, None]
    a = np.arange(votes + 1)[None, None, :]
    can = (m + r <= votes) & (a <= m)
    for prior in (BetaPrior(0.3), BetaPrior(2.7), GridPrior.of([0.1, 0.3, 0.5], [1, 2, 1])):
        full = stop_table(prior, votes, cost)
        fast = reachable_stop_table(prior, votes, cost)
        np.testing.assert_array_equal(fast[can], full[can])
        assert 0.2 < full[can].mean() < 0.99  # both actions occur
