"""The cost rule over members: planted-truth checks (its joint prior recovers a planted one;
what it expects of itself under the prior is what a simulation measures), whom it asks, and
bad input."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble.cost import CostRule, JointPrior, fit_joint_prior, member_counts
from ensemble.errors import InputError

# easy questions, traps where the cheap member agrees on a distractor, and split ones
NODES = np.array([[0.9, 0.97], [0.2, 0.93], [0.55, 0.75]])
WEIGHTS = np.array([0.7, 0.2, 0.1])
PLANTED = JointPrior.of(NODES, WEIGHTS)
PRICES = [0.06, 1.0]  # per vote: the expensive member costs 16.7 cheap ones
LAMS = [1.5, 6.0]


def _questions(n: int, rng: np.random.Generator, nodes: np.ndarray = NODES,
               weights: np.ndarray = WEIGHTS) -> tuple[np.ndarray, np.ndarray]:
    """q per question (labels flipped at random: the prior is symmetric) and the reference
    (1: answer 1), the expensive member's favourite (its λ outweighs the cheap one's)."""
    k = rng.choice(len(weights), p=weights, size=n)
    q = nodes[k]
    flip = rng.random(n) < 0.5
    q = np.where(flip[:, None], 1 - q, q)
    return q, (q[:, 1] > 0.5).astype(int)


def _simulate(rule: CostRule, n: int, seed: int, nodes: np.ndarray = NODES,
              weights: np.ndarray = WEIGHTS) -> tuple[np.ndarray, np.ndarray]:
    """Run the rule's policy on n questions drawn from the planted prior, vote by vote:
    (right per question, dollars per question)."""
    g = np.random.default_rng(seed)
    q, ref = _questions(n, g, nodes, weights)
    d1, cost = _play(rule, q, g)
    right = np.where(ref == 1, d1, 1 - d1)
    return right, cost


def _play(rule: CostRule, q: np.ndarray, g: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The rule's policy played vote by vote on questions whose members vote 1 with
    probability q[i, g]: (decided answer 1 per question, dollars per question)."""
    n = len(q)
    act, win = rule.policy()
    G = len(rule.max_n)
    a = np.zeros((n, G), dtype=int)
    b = np.zeros((n, G), dtype=int)
    cost = np.zeros(n)
    stride = rule.states.stride
    active = np.ones(n, dtype=bool)
    while active.any():
        m = a + b
        s = ((m * (m + 1) // 2 + a) * stride).sum(axis=1)
        who = np.where(active, act[s], -1)
        active &= who >= 0
        for member in range(G):
            sel = who == member
            vote1 = g.random(sel.sum()) < q[sel, member]
            a[sel, member] += vote1
            b[sel, member] += ~vote1
            cost[sel] += rule.prices[member]
    m = a + b
    s = ((m * (m + 1) // 2 + a) * stride).sum(axis=1)
    return _decided(rule.two_choices, a, b, win[s]), cost


def _decided(two_choices: bool, a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """P(deciding answer 1) at the final counts: the likelier answer (a coin on a tie); but
    with more than two answers (not two fixed choices) the other of a lone answer has no name:
    when only one answer has been seen, that one."""
    d = np.where(w > 0.5, 1.0, np.where(w < 0.5, 0.0, 0.5))
    if not two_choices:
        seen1, seen2 = a.sum(axis=1) > 0, b.sum(axis=1) > 0
        d = np.where(seen1 & ~seen2, 1.0, np.where(seen2 & ~seen1, 0.0, d))
    return d


# most questions are traps: the cheap member's votes agree on an answer the dear one rejects
TRAP_NODES = np.array([[0.9, 0.97], [0.9, 0.05], [0.55, 0.75]])
TRAP_WEIGHTS = np.array([0.35, 0.5, 0.15])


@pytest.mark.parametrize("two_choices", [True, False])
@pytest.mark.parametrize("value, traps", [(3.0, False), (12.0, False), (40.0, False),
                                          (2.5, True)])
def test_expected_accuracy_and_cost_match_simulation(value, traps, two_choices):
    nodes, weights = (TRAP_NODES, TRAP_WEIGHTS) if traps else (NODES, WEIGHTS)
    rule = CostRule(prior=JointPrior.of(nodes, weights), prices=PRICES, max_n=[8, 3],
                    lams=LAMS, value_usd=value, two_choices=two_choices)
    right, cost = _simulate(rule, 40_000, seed=int(value), nodes=nodes, weights=weights)
    se_acc = right.std() / np.sqrt(right.size)
    se_cost = cost.std() / np.sqrt(cost.size)
    assert abs(right.mean() - rule.summary.accuracy) < 4 * se_acc + 1e-9
    assert abs(cost.mean() - rule.summary.mean_cost_usd) < 4 * se_cost + 1e-9
    assert rule.summary.mean_cost_usd == pytest.approx(
        np.dot(rule.summary.mean_samples, PRICES))


def test_fitted_joint_prior_recovers_a_planted_one():
    g = np.random.default_rng(3)
    q, _ = _questions(6000, g)
    n = np.array([12, 8])
    a = g.binomial(n, q)
    fit = fit_joint_prior(a, n - a)
    fq, fw = fit.nodes()
    # label each node by the expensive member's favourite (the reference) and compare the
    # mixture's moments with the planted ones
    up = fq[:, 1] > 0.5
    qc = np.where(up, fq[:, 0], 1 - fq[:, 0])
    qe = np.where(up, fq[:, 1], 1 - fq[:, 1])
    assert fw @ qc == pytest.approx(WEIGHTS @ NODES[:, 0], abs=0.02)
    assert fw @ qe == pytest.approx(WEIGHTS @ NODES[:, 1], abs=0.02)
    assert fw @ (qc < 0.5) == pytest.approx(0.2, abs=0.03)  # the traps
    # what the rule expects under the fitted prior is close to under the planted one
    kw = dict(prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=12.0)
    fitted, planted = CostRule(prior=fit, **kw), CostRule(prior=PLANTED, **kw)
    assert fitted.summary.accuracy == pytest.approx(planted.summary.accuracy, abs=0.01)


def test_a_split_cheap_vote_calls_the_expensive_member():
    rule = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=4.0)
    assert rule.next_member([0, 0], [0, 0]) == 0           # start cheap
    assert rule.next_member([1, 0], [1, 0]) == 1           # cheap split: ask the dear one
    assert rule.next_member([2, 0], [0, 0]) is None        # cheap agree: decide
    # worth more, a right decision buys the dear vote even after two agreeing cheap ones
    dearer = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=12.0)
    assert dearer.next_member([2, 0], [0, 0]) == 1
    assert rule.next_member([1, 0], [1, 0], [True, False]) in (0, None)  # no budget left
    # a dear vote outweighs cheap ones: the trap says the cheap majority may be wrong
    assert rule.decide([2, 0], [1, 1]) == 2
    # the same prior with a cheap member as dear as the other: never worth asking first
    flat = CostRule(prior=PLANTED, prices=[1.0, 1.0], max_n=[8, 3], lams=LAMS, value_usd=12.0)
    assert flat.next_member([0, 0], [0, 0]) == 1


def test_with_more_than_two_answers_it_does_not_stop_on_an_answer_it_believes_wrong():
    kw = dict(prior=JointPrior.of(TRAP_NODES, TRAP_WEIGHTS), prices=PRICES, max_n=[8, 3],
              lams=LAMS, value_usd=2.5)
    two, more = CostRule(**kw), CostRule(**kw, two_choices=False)
    for k in (1, 2, 3):  # the cheap member's k votes agree: the prior says "a trap", w < 1/2
        assert two.win([k, 0], [0, 0]) < 0.5
        # two fixed choices: the other one is decided, with posterior 1 − w > 1/2
        assert two.next_member([k, 0], [0, 0]) is None and two.decide([k, 0], [0, 0]) == 2
        # more answers: the other has no name; deciding the one seen is worth w: ask the dear
        # member instead
        assert more.next_member([k, 0], [0, 0]) == 1 and more.decide([k, 0], [0, 0]) == 1
    # wherever it stops with budget left, it believes its decision (worth w or 1 − w >= 1/2)
    act, win = more.policy()
    picks, st = more.picks(), more.states
    stops = np.nonzero((act < 0) & (st.up >= 0).any(axis=1))[0]
    stops = stops[stops > 0]
    assert stops.size and (picks[stops] * win[stops] + (1 - picks[stops])
                           * (1 - win[stops]) >= 0.5 - 1e-12).all()
    assert more.summary.accuracy > two.summary.accuracy + 0.3  # here it pays for the dear vote
    # with both answers seen, both rules decide alike
    assert more.decide([1, 1], [1, 0]) == two.decide([1, 1], [1, 0])


def test_target_loss_is_met_under_the_prior():
    rule = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, target_loss=0.005)
    assert rule.summary.loss <= 0.005 + 1e-12
    assert rule.summary.reference_accuracy == pytest.approx(PLANTED.accuracy_alone(1, LAMS))
    fixed = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, target_loss=0.01,
                     reference="fixed")
    assert fixed.summary.loss <= 0.01 + 1e-12
    assert fixed.summary.reference_accuracy > rule.summary.reference_accuracy


def test_member_counts_label_the_leaders_by_weighted_votes():
    a, b, leaders = member_counts([["x", "x", "y", None], ["y"]], [1.0, 6.0])
    assert leaders == ("y", "x") and a == [1, 1] and b == [2, 0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(prices=[1.0], max_n=[3, 3], value_usd=1.0), "one price"),
    (dict(prices=[1.0, 1.0], max_n=[3], value_usd=1.0), "most votes"),
    (dict(prices=[1.0, 1.0], max_n=[3, 3]), "value_usd"),
    (dict(prices=[1.0, 1.0], max_n=[3, 3], value_usd=1.0, target_loss=0.1), "value_usd"),
    (dict(prices=[1.0, 1.0], max_n=[3, 3], value_usd=-1.0), "value_usd"),
    (dict(prices=[1.0, 1.0], max_n=[3, 3], value_usd=1.0, reference="x"), "reference"),
    (dict(prices=[1.0, 1.0], max_n=[200, 200], value_usd=1.0), "states"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(InputError, match=match):
        CostRule(prior=PLANTED, **kwargs)


def test_a_decision_rests_on_at_least_one_vote():
    # votes worth far less than their price: the rule still asks once, the cheapest member
    rule = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=0.01)
    assert rule.next_member([0, 0], [0, 0]) == 0
    assert rule.next_member([1, 0], [0, 0]) is None
    assert sum(rule.summary.mean_samples) == pytest.approx(1.0)


# -- credit: what a decision earns ------------------------------------------------------------
def _psi(p, lam):
    return 1 / (1 + np.exp(2 * lam * (1 - 2 * np.asarray(p))))


P_QR = np.array([0.98, 0.8, 0.6, 0.52])  # questions' P(answer 1 is right): easy to a coin flip
W_QR = np.array([0.55, 0.2, 0.15, 0.1])
QR_NODES = np.stack([_psi(P_QR, LAMS[0]), _psi(P_QR, LAMS[1])], axis=1)


def _simulate_credit(rule: CostRule, p: np.ndarray, q: np.ndarray, w: np.ndarray, n: int,
                     seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rule's policy on n questions drawn from nodes (q, w) with planted P(answer 1 is
    right) p (labels flipped at random), vote by vote: (credit per question, dollars)."""
    g = np.random.default_rng(seed)
    k = g.choice(len(w), p=w / w.sum(), size=n)
    flip = g.random(n) < 0.5
    qq = np.where(flip[:, None], 1 - q[k], q[k])
    pp = np.where(flip, 1 - p[k], p[k])
    d1, cost = _play(rule, qq, g)
    return d1 * pp + (1 - d1) * (1 - pp), cost


def test_qr_credit_expects_what_a_quantal_response_simulation_earns():
    prior = JointPrior.of(QR_NODES, W_QR)
    rule = CostRule(prior=prior, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=12.0,
                    credit="qr")
    # the nodes' P(right) read back through ψ_λ is the planted p
    assert np.sort(prior.truth(LAMS)) == pytest.approx(np.sort(np.r_[P_QR, 1 - P_QR]), abs=1e-6)
    credit, cost = _simulate_credit(rule, P_QR, QR_NODES, W_QR, 40_000, seed=5)
    se_credit, se_cost = (x.std() / np.sqrt(x.size) + 1e-9 for x in (credit, cost))
    assert abs(credit.mean() - rule.summary.accuracy) < 4 * se_credit
    assert abs(cost.mean() - rule.summary.mean_cost_usd) < 4 * se_cost
    # its reference, the strongest member's one vote, scored alike
    assert rule.summary.reference_accuracy == pytest.approx(
        W_QR @ (P_QR * QR_NODES[:, 1] + (1 - P_QR) * (1 - QR_NODES[:, 1])))
    assert rule.summary.credit == "qr"


def test_qr_credit_does_not_buy_votes_to_resolve_a_coin_flip():
    # questions are easy (p = 0.98) or a near coin flip (p = 0.52) that the expensive member
    # still calls one way (q = 0.62): agreeing with it is worth buying, being right is not
    p = np.array([0.98, 0.52])
    nodes = np.stack([_psi(p, LAMS[0]), _psi(p, LAMS[1])], axis=1)
    prior = JointPrior.of(nodes, [0.5, 0.5])
    kw = dict(prior=prior, prices=PRICES, max_n=[2, 3], lams=LAMS, value_usd=8.0)
    ref, qr = CostRule(**kw), CostRule(**kw, credit="qr")
    assert ref.next_member([1, 0], [1, 0]) == 1      # cheap split: ask the dear one
    assert qr.next_member([1, 0], [1, 0]) is None    # cheap split: p is near 1/2, stop
    assert qr.summary.mean_cost_usd < ref.summary.mean_cost_usd
    # scored as a task scored by P(right) pays (exactly, on the planted p), the qr rule earns
    # more per dollar
    truth = JointPrior.of(nodes, [0.5, 0.5], p)
    e_ref, e_qr = ref.evaluate(truth), qr.evaluate(truth)
    assert e_qr.accuracy == pytest.approx(qr.summary.accuracy)
    assert (e_qr.accuracy - e_qr.mean_cost_usd / 8.0) > (e_ref.accuracy
                                                         - e_ref.mean_cost_usd / 8.0) + 1e-4


def test_planted_credit_and_evaluate_on_a_planted_truth():
    p = np.array([1.0, 0.0, 0.7])  # the trap node's answer 1 (the cheap favourite) is wrong
    planted = JointPrior.of(NODES, WEIGHTS, p)
    mirror = JointPrior.of(1 - NODES, WEIGHTS, 1 - p)
    assert planted == mirror  # symmetric: the node 1 − q carries 1 − p
    rule = CostRule(prior=planted, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=12.0,
                    credit="planted")
    ev = rule.evaluate(planted)  # the rule on its own prior: what it expects of itself
    assert ev.accuracy == pytest.approx(rule.summary.accuracy)
    assert ev.mean_cost_usd == pytest.approx(rule.summary.mean_cost_usd)
    assert ev.reference_accuracy == pytest.approx(rule.summary.reference_accuracy)
    # a rule fitted on the reference prior, scored exactly on the planted truth: a simulation
    other = CostRule(prior=PLANTED, prices=PRICES, max_n=[8, 3], lams=LAMS, value_usd=4.0)
    ev = other.evaluate(planted)
    credit, cost = _simulate_credit(other, p, NODES, WEIGHTS, 40_000, seed=9)
    assert abs(credit.mean() - ev.accuracy) < 4 * credit.std() / np.sqrt(credit.size) + 1e-9
    assert abs(cost.mean() - ev.mean_cost_usd) < 4 * cost.std() / np.sqrt(cost.size) + 1e-9
    assert ev.accuracy <= rule.summary.accuracy + 1e-12 or \
        ev.mean_cost_usd > rule.summary.mean_cost_usd  # the planted rule is the optimum


@pytest.mark.parametrize("two_choices", [True, False])
def test_evaluate_on_a_planted_truth_decides_as_the_rule_does(two_choices):
    p = np.array([1.0, 0.0, 0.7])  # the trap node's answer 1 (the cheap favourite) is wrong
    rule = CostRule(prior=JointPrior.of(TRAP_NODES, TRAP_WEIGHTS), prices=PRICES,
                    max_n=[8, 3], lams=LAMS, value_usd=2.5, two_choices=two_choices)
    ev = rule.evaluate(JointPrior.of(TRAP_NODES, TRAP_WEIGHTS, p))
    credit, cost = _simulate_credit(rule, p, TRAP_NODES, TRAP_WEIGHTS, 40_000, seed=11)
    assert abs(credit.mean() - ev.accuracy) < 4 * credit.std() / np.sqrt(credit.size) + 1e-9
    assert abs(cost.mean() - ev.mean_cost_usd) < 4 * cost.std() / np.sqrt(cost.size) + 1e-9


@pytest.mark.parametrize("kwargs, match", [
    (dict(credit="x"), "credit"),
    (dict(credit="qr", lams=None), "lams"),
    (dict(credit="planted"), "carries p"),
])
def test_bad_credit(kwargs, match):
    base = dict(prices=PRICES, max_n=[3, 3], lams=LAMS, value_usd=1.0)
    with pytest.raises(InputError, match=match):
        CostRule(prior=PLANTED, **{**base, **kwargs})
    with pytest.raises(InputError, match="planted p"):
        JointPrior.of(NODES, WEIGHTS, [0.5, 2.0, 0.1])


def test_cost_spec_carries_the_credit():
    from ensemble.cost.spec import CostSpec

    prior = JointPrior.of(QR_NODES, W_QR)
    rule = CostSpec(value_usd=12.0, credit="qr", prior=prior).build(
        a=None, b=None, prices=PRICES, max_n=[8, 3], lams=LAMS, two_choices=True)
    assert rule.credit == "qr" and rule.summary.credit == "qr" and rule.two_choices
    other = CostSpec(prior=prior).build(a=None, b=None, prices=PRICES, max_n=[8, 3], lams=LAMS,
                                        two_choices=False)
    assert other.credit == "reference" and not other.two_choices
    with pytest.raises(InputError, match="credit"):
        CostSpec(credit="planted")


def test_the_cost_rule_as_a_policy_and_its_spec_as_a_plan():
    """The stop-rule interface: the rule answers `next(drawn)` with one vote of the member it
    would ask (none with its budget spent); its spec pilots the first `pilot_questions`
    questions, fits on them and on the memory's counts and prices, and remembers each
    decision's counts and what its later votes cost."""
    from ensemble.cost.spec import CostMemory, CostSpec
    from ensemble.stopping import Drawn, FitContext, Observation, StopMemory

    spec = CostSpec(value_usd=0.01, pilot=(2, 1), pilot_questions=3)
    memory = StopMemory()
    assert spec.budgets([6, 2]) == (6, 2)
    assert [spec.pilot_draw(i, (6, 2), memory) for i in range(5)] == [(2, 1)] * 3 + [(0, 0)] * 2
    assert CostSpec(prior=JointPrior.of([[0.9, 0.9]])).pilot_draw(0, (6, 2), memory) == (0, 0)

    def priced(keys, costs=(1e-5, 2e-4)):
        return Drawn(tuple(tuple(Observation(k, cost_usd=c) for k in row)
                           for row, c in zip(keys, costs, strict=True)), budgets=(6, 2))

    pilots = [priced([["A", "A"], ["A"]]), priced([["A", "B"], ["B"]]),
              priced([["B", "B"], ["B"]]), priced([[], []])]
    rule = spec.fit(pilots, memory, FitContext(budgets=(6, 2), lams=(1.5, 6.0),
                                               two_choices=True))
    mem = memory.get("cost")
    assert isinstance(mem, CostMemory) and mem.rule is rule
    assert rule.prices == pytest.approx((1e-5, 2e-4)) and rule.two_choices
    assert rule.prior_used.source == "fitted" and rule.prior_used.questions == 3
    for d in pilots:
        ask = rule.next(d)
        assert sum(ask) <= 1 and all(k <= m for k, m in zip(ask, d.left(), strict=True))
        if sum(ask):
            g = ask.index(1)
            a, b, _ = d.member_counts(rule.lams)
            assert rule.next_member(a, b, [m > 0 for m in d.left()]) == g
    assert rule.next(priced([["A"] * 6, ["A", "A"]])) == (0, 0)  # every budget spent
    spec.remember(memory, pilots[0], priced([["A", "A", "A"], ["A"]]))
    assert mem.counts[-1] == ((3, 1), (0, 0)) and mem.votes == [7, 3]
    assert mem.spent == pytest.approx([7e-5, 6e-4])
