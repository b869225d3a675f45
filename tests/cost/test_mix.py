"""A target_loss between two policies of the cost rule: its randomised optimum (issue 40.2).

The rule's value is a Lagrange multiplier; a target is a constraint, and the constrained
optimum mixes the two deterministic policies of the critical value (Beutler & Ross 1985). With
the planted prior below, the first vote (every question's) changes member at value ~5.71:
below, the cheap member first (0.52 dollars a question, loss 0.083 against the dear member's
vote); above, the dear member once (1.00, loss 0). No deterministic policy lies between, so a
target of 0.02 was met by the dear member alone (the old rule), where the mix meets it exactly
at 0.89. Checked here against the two policies built alone, a sweep of
every deterministic value (brute force), a simulation from the planted prior, the eval's
replay, and through the Ensemble on simulated members.
"""

from __future__ import annotations

import numpy as np
import pytest

from ensemble import Ensemble, Member
from ensemble.cost import CostRule, JointPrior
from ensemble.cost.rule import question_coin
from ensemble.cost.spec import CostSpec
from ensemble.evals.costeval import replay_cost
from ensemble.stopping import Drawn
from ensemble.testing import SimulatedServer
from ensemble.testing.expert import MCModel, SimulatedExpert

NODES = np.array([[0.9, 0.97], [0.2, 0.93], [0.55, 0.75]])
WEIGHTS = np.array([0.7, 0.2, 0.1])
PLANTED = JointPrior.of(NODES, WEIGHTS)
PRICES = [0.06, 1.0]
KW = dict(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=[1.5, 6.0])
TARGET = 0.02


@pytest.fixture(scope="module")
def mixed() -> CostRule:
    return CostRule(**KW, target_loss=TARGET)


def test_a_target_between_two_policies_is_met_exactly_by_mixing_them(mixed):
    meets = CostRule(**KW, value_usd=mixed.value_usd)
    cheaper = CostRule(**KW, value_usd=mixed.cheaper_value_usd)
    # the two policies of the critical value: one meets the target, the other does not
    assert meets.summary.loss <= TARGET < cheaper.summary.loss
    assert 0 < mixed.mix < 1 and mixed.summary.mix == mixed.mix
    # both optimal at that value: on one Lagrangian line (accuracy - dollars / value)
    v = mixed.value_usd
    assert meets.summary.accuracy - meets.summary.mean_cost_usd / v == pytest.approx(
        cheaper.summary.accuracy - cheaper.summary.mean_cost_usd / v, abs=1e-6)
    # the mix loses the target exactly, and is their mix in everything
    x = mixed.mix
    assert mixed.summary.loss == pytest.approx(TARGET, abs=1e-12)
    assert mixed.summary.mean_cost_usd == pytest.approx(
        (1 - x) * meets.summary.mean_cost_usd + x * cheaper.summary.mean_cost_usd)
    assert mixed.summary.mean_samples == pytest.approx(
        [(1 - x) * a + x * b for a, b in zip(meets.summary.mean_samples,
                                             cheaper.summary.mean_samples, strict=True)])
    assert mixed.evaluate(PLANTED).accuracy == pytest.approx(mixed.summary.accuracy)
    # brute force: no deterministic value meets the target for less than the generous policy
    # of the pair, and the mix costs less than it (the old rule ran it alone)
    meeting = [r.summary.mean_cost_usd for r in
               (CostRule(**KW, value_usd=float(u)) for u in np.geomspace(1.0, 200.0, 60))
               if r.summary.loss <= TARGET]
    assert min(meeting) >= meets.summary.mean_cost_usd - 1e-12
    assert mixed.summary.mean_cost_usd < 0.9 * meets.summary.mean_cost_usd


def test_each_question_runs_one_policy_keyed_by_the_question(mixed):
    # at the first vote the two policies part: the generous one asks the dear member
    keys = [f"question {i}" for i in range(400)]
    cheap = [k for k in keys if mixed.runs_cheaper(k)]
    assert len(cheap) / len(keys) == pytest.approx(mixed.mix, abs=4 * np.sqrt(
        mixed.mix * (1 - mixed.mix) / len(keys)))
    for k in keys[:40]:
        ask = mixed.next(Drawn.of([[], []], [8, 3], question=k))
        assert ask == ((1, 0) if k in cheap else (0, 1))
        assert mixed.runs_cheaper(k) == (question_coin(k) < mixed.mix)  # the same every time
    # without a key: the policy that meets the target
    assert mixed.next(Drawn.of([[], []], [8, 3])) == (0, 1)
    assert not mixed.runs_cheaper(None)
    # a value given: one deterministic policy, no mix
    assert CostRule(**KW, value_usd=mixed.value_usd).mix == 0.0


def _draw_questions(n: int, rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """Each question's stored samples (cheap 8, dear 3) from the planted prior: answer codes
    0 / 1 (labels flipped at random) and the reference (the dear member's favourite)."""
    k = rng.choice(len(WEIGHTS), p=WEIGHTS, size=n)
    q = NODES[k]
    flip = rng.random(n) < 0.5
    q = np.where(flip[:, None], 1 - q, q)
    codes = [(rng.random((n, m)) >= q[:, g:g + 1]).astype(np.int64)  # 0: answer 1
             for g, m in enumerate((8, 3))]
    return codes, (q[:, 1] < 0.5).astype(np.int64)


def test_the_mix_earns_and_spends_what_it_expects_replayed_vote_by_vote(mixed):
    rng = np.random.default_rng(5)
    Q = 3000
    codes, ref = _draw_questions(Q, rng)
    orders = [np.arange(m)[None, None, :].repeat(Q, 0) for m in (8, 3)]
    keys = [f"q{i}" for i in range(Q)]
    rp = replay_cost(mixed, codes, orders, options=2, questions=keys)
    # brute force: each question replayed by the one policy its key picks, built alone
    cheaper = [mixed.runs_cheaper(k) for k in keys]
    for flag, value in ((True, mixed.cheaper_value_usd), (False, mixed.value_usd)):
        alone = CostRule(**KW, value_usd=value)
        sel = np.nonzero(np.array(cheaper) == flag)[0]
        other = replay_cost(alone, [c[sel] for c in codes], [o[sel] for o in orders],
                            options=2)
        assert (other.drawn == rp.drawn[sel]).all()
        assert (other.decision == rp.decision[sel]).all()
    # and what it earns and spends is what the rule expects under the prior
    right = (rp.decision[:, 0] == ref).astype(float)
    spent = rp.spent[:, 0]
    assert abs(right.mean() - mixed.summary.accuracy) < 4 * right.std() / np.sqrt(Q)
    assert abs(spent.mean() - mixed.summary.mean_cost_usd) < 4 * spent.std() / np.sqrt(Q)


# -- through the Ensemble: the prompt keys its policy -------------------------------------------

def test_an_ensemble_runs_each_prompt_on_its_policy_and_again_the_same(tmp_path):
    cheap = SimulatedExpert(lam1=3.0, mc_model=MCModel(4.0, 1.0), seed=1, difficulty_seed=3)
    dear = SimulatedExpert(lam1=30.0, mc_model=MCModel(20.0, 1.0), seed=2, difficulty_seed=3)
    prompts = [f"Question {i}: which colour? Answer with one of: red, green" for i in range(24)]
    spec = CostSpec(prior=PLANTED, prices=(0.06, 1.0), target_loss=TARGET)

    def ensemble(s1: SimulatedServer, s2: SimulatedServer) -> Ensemble:
        return Ensemble(members=[
            Member("openai/cheap", api_base="http://cheap/v1", transport=s1.transport(), n=8,
                   temperature=1.0, lam=1.5),
            Member("openai/dear", api_base="http://dear/v1", transport=s2.transport(), n=3,
                   temperature=1.0, lam=6.0)],
            choices=["red", "green"], store=tmp_path / "s.sqlite", stop=spec)

    with SimulatedServer(expert=cheap) as s1, SimulatedServer(expert=dear) as s2:
        with ensemble(s1, s2) as ens:
            ds = ens.decide_many(prompts)
        asked = s1.stats.requests + s2.stats.requests
        with ensemble(s1, s2) as ens:
            again = ens.decide_many(prompts)
        assert s1.stats.requests + s2.stats.requests == asked  # from the store: no request
    outs = [d.cost_rule for d in ds]
    assert all(o is not None and o.mix == pytest.approx(0.24, abs=0.01) for o in outs)
    flags = [o.cheaper for o in outs if o is not None]
    assert 0 < sum(flags) < len(flags)  # both policies ran
    for o in outs:
        assert o is not None
        # the generous policy asks the dear member once and decides; the cheaper one starts
        # with the cheap member
        assert o.cheaper or o.drawn == (0, 1)
        assert not o.cheaper or o.drawn[0] >= 1
    assert [(d.decision, d.cost_rule.drawn, d.cost_rule.cheaper) for d in again] == \
        [(d.decision, d.cost_rule.drawn, d.cost_rule.cheaper) for d in ds]
    assert ds[0].to_dict()["cost_rule"]["mix"] == outs[0].mix
