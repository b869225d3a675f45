"""Replay evaluation of stopping rules: hand-computed cases, a plain loop, box-and-ball scoring."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ensemble.errors import InputError
from ensemble.evals.adaptive import adaptive_eval, boxball_inputs, replay, values_from_correct
from ensemble.stopping import BayesRule, BetaPrior, BetaRule, FixedRule, StopSpec, fit_prior

ALL_ORDERS_4 = np.array(list(itertools.permutations(range(4))))


def test_replay_equals_a_hand_computed_case():
    # beta rule at 0.8: stops at 2 agreeing (P = 7/8), not at 2-1 (11/16), at 3-1 (26/32)
    rule = BetaRule(max_n=4, threshold=0.8)
    codes = np.array([[0, 0, 1, 1],     # right answer 0
                      [0, -1, 0, 0]])   # one invalid answer
    res = adaptive_eval(codes, rule, correct=[0, 0], orders=ALL_ORDERS_4, reps=200)[0]
    # question 1, over the 6 arrangements of 0011 (4 orders each): 00.. stops at 2, right;
    # 11.. stops at 2, wrong; the 4 mixed ones reach 2-2 at 4, a tie worth 1/2
    #   samples (2 + 2 + 4·4) / 6 = 10/3, accuracy (1 + 0 + 4·½) / 6 = 1/2
    # question 2: the invalid answer first or second -> 2 agreeing after 3 draws, else after
    #   2: samples (3 + 3 + 2 + 2) / 4 = 5/2, accuracy 1
    assert res.question_samples == pytest.approx([10 / 3, 5 / 2])
    assert res.question_accuracy == pytest.approx([0.5, 1.0])
    assert res.mean_samples.value == pytest.approx((10 / 3 + 5 / 2) / 2)
    assert res.accuracy.value == pytest.approx(0.75)
    # fixed 4: a 2-2 tie (1/2) and three right answers (1)
    assert res.fixed[4].value == pytest.approx(0.75)
    assert res.difference.value == pytest.approx(0.0)
    assert res.saving == pytest.approx(1 - res.mean_samples.value / 4)


def test_stored_order_replays_what_one_run_would_do():
    rule = BetaRule(max_n=6, threshold=0.9)  # first stop: 3 agreeing (P = 15/16)
    codes = np.array([[1, 0, 1, 1, 1, 0], [2, 2, 2, 0, 0, 0], [0, 1, 0, 1, 0, 1]])
    rp = replay(codes, rule, n_options=3, orders=None)
    # row 1: 1,0,1,1 -> 3-1 (P = 13/16 < 0.9), 1 -> 4-1 (P = 57/64 < 0.9), 0 -> max 6
    # row 2: 2,2,2 stops at 3; row 3 never settles: max 6 with a 3-3 tie
    assert rp.used[:, 0].tolist() == [6, 3, 6]
    assert rp.counts[:, 0].tolist() == [[2, 4, 0], [0, 0, 3], [3, 3, 0]]


def _loop_replay(codes, rule, orders, n_options):
    """A per-question, per-order loop through rule.more() (the reference)."""
    Q, R = codes.shape[0], orders.shape[1]
    used = np.empty((Q, R), dtype=int)
    counts = np.empty((Q, R, n_options), dtype=int)
    for q in range(Q):
        for r in range(R):
            seq = [None if c < 0 else "ABCDE"[c] for c in codes[q, orders[q, r]]]
            n = 0
            while True:
                k = rule.more(seq[:n])
                if k == 0:
                    break
                n += 1  # one at a time: a lossless k must not change where it stops
            used[q, r] = n
            counts[q, r] = np.bincount([c for c in codes[q, orders[q, r, :n]] if c >= 0],
                                       minlength=n_options)
    return used, counts


@pytest.mark.parametrize("rule", [
    BayesRule(max_n=10, prior=BetaPrior(0.4), cost=0.003),
    BayesRule(max_n=10, prior=BetaPrior(2.0), cost=0.001, pilot=3),
    BetaRule(max_n=10, threshold=0.95),
    BetaRule(max_n=10, threshold=0.9, count_invalid=True),
    FixedRule(max_n=10),
], ids=lambda r: f"{r.name}-{getattr(r, 'count_invalid', '')}")
def test_vectorised_replay_equals_a_plain_loop(rule):
    g = np.random.default_rng(4)
    codes = g.choice([-1, 0, 1, 2, 3], p=[0.08, 0.5, 0.25, 0.12, 0.05], size=(40, 12))
    orders = np.argsort(g.random((40, 7, 12)), axis=-1)
    rp = replay(codes, rule, n_options=4, orders=orders)
    used, counts = _loop_replay(codes, rule, orders, 4)
    assert (rp.used == used).all()
    assert (rp.counts == counts).all()


def test_pilot_fitted_prior_is_refitted_per_order():
    g = np.random.default_rng(5)
    q = g.beta(0.5, 0.5, size=60)
    codes = (g.random((60, 20)) < q[:, None]).astype(int)
    orders = np.argsort(g.random((60, 5, 20)), axis=-1)
    spec = StopSpec("bayes", max_n=20, cost=0.004)
    rp = replay(codes, spec, n_options=2, orders=orders)
    for r in range(5):
        head = np.take_along_axis(codes, orders[:, r, :2], axis=1)
        ones = head.sum(axis=1)
        prior = fit_prior(np.maximum(ones, 2 - ones), np.minimum(ones, 2 - ones))
        assert rp.rules[r].prior == prior
        alone = replay(codes, BayesRule(max_n=20, prior=prior, cost=0.004), n_options=2,
                       orders=orders[:, r : r + 1])
        assert (alone.used[:, 0] == rp.used[:, r]).all()


def test_fixed_rule_row_equals_fixed_max_n_row():
    g = np.random.default_rng(6)
    codes = g.integers(-1, 3, size=(2, 30, 8))  # (T, Q, K)
    correct = g.integers(0, 3, size=30)
    res = adaptive_eval(codes, FixedRule(max_n=8), correct=correct, n_options=3, orders=20,
                        fixed_ns=[1, 3], reps=300)
    assert len(res) == 2
    for r in res:
        assert r.accuracy.value == pytest.approx(r.fixed[8].value)
        assert r.difference.value == 0 and r.difference.ci == (0.0, 0.0)
        assert r.mean_samples.value == 8 and r.saving == 0
        assert sorted(r.fixed) == [1, 3, 8]
        lo, hi = r.accuracy.ci
        assert lo <= r.accuracy.value <= hi


def test_fixed_n_rows_are_random_subsets():
    # over all orders of 4 answers, the first n are each n-subset equally often: fixed n = 1
    # has the accuracy of one random answer
    codes = np.array([[0, 0, 0, 1], [1, 1, 2, 0]])
    res = adaptive_eval(codes, FixedRule(max_n=4), correct=[0, 0], n_options=3,
                        orders=ALL_ORDERS_4, fixed_ns=[1, 2], reps=100)[0]
    assert res.fixed[1].value == pytest.approx((3 / 4 + 1 / 4) / 2)
    # n = 2: question 1 right unless it draws {0, 1} (a tie, 1/2): 1 − (3/6)(1/2) = 3/4;
    # question 2 (of its 6 pairs): {1,1} and the two {1,2} wrong; the two {1,0} and the one
    # {2,0} a tie with 0, worth 1/2: (3/6)(1/2) = 1/4
    assert res.fixed[2].value == pytest.approx((3 / 4 + 1 / 4) / 2)


def test_boxball_value_is_posterior_of_the_decision_weighted_by_colour():
    from types import SimpleNamespace

    qs = [SimpleNamespace(posterior=0.8, meta={"scenario": "s1", "p_colour": 0.7}),
          SimpleNamespace(posterior=0.3, meta={"scenario": "s1", "p_colour": 0.3}),
          SimpleNamespace(posterior=0.6, meta={"scenario": "s2", "p_colour": 1.0})]
    values, weights, groups = boxball_inputs(qs)
    assert values == pytest.approx(np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4]]))
    assert groups.tolist() == [0, 0, 1]
    # L = 0, R = 1; stored order, fixed 3: L wins, R wins, a tie impossible -> L wins
    codes = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0]])
    res = adaptive_eval(codes, FixedRule(max_n=3), values=values, weights=weights,
                        groups=groups, orders=None, reps=200)[0]
    # per scenario Σ_c P(c | s) P(ω = decision | c), then the mean over scenarios
    assert res.accuracy.value == pytest.approx(((0.7 * 0.8 + 0.3 * 0.7) + 0.6) / 2)


def test_bootstrap_resamples_groups():
    # two scenarios of very different value: the interval spans them; a single group has none
    codes = np.zeros((4, 3), dtype=int)
    values = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    res = adaptive_eval(codes, FixedRule(max_n=3), values=values, groups=[0, 0, 1, 1],
                        orders=None, reps=2000, rng=1)[0]
    assert res.accuracy.value == pytest.approx(0.5)
    assert res.accuracy.ci == (0.0, 1.0)


def test_values_from_correct():
    assert values_from_correct([2, 0], 3).tolist() == [[0, 0, 1], [1, 0, 0]]


@pytest.mark.parametrize("kwargs, match", [
    ({"codes": np.zeros((3, 4), int), "rule": FixedRule(max_n=5), "correct": [0, 0, 0]},
     "only 4 are stored"),
    ({"codes": np.zeros((3, 4), int), "rule": FixedRule(max_n=4)}, "correct="),
    ({"codes": np.zeros((3, 4), int), "rule": FixedRule(max_n=4), "correct": [0, 0, 0],
      "orders": np.zeros((2, 4), int)}, "permutations"),
    ({"codes": np.zeros((3, 4), int), "rule": FixedRule(max_n=4), "correct": [0, 0, 0],
      "fixed_ns": [9]}, "fixed n"),
    ({"codes": np.zeros(4, int), "rule": FixedRule(max_n=4), "correct": [0]}, "shape"),
])
def test_bad_input(kwargs, match):
    codes = kwargs.pop("codes")
    rule = kwargs.pop("rule")
    with pytest.raises(InputError, match=match):
        adaptive_eval(codes, rule, **kwargs)


def test_mean_cost_is_what_the_samples_used_cost():
    rule = BetaRule(max_n=6, threshold=0.9)  # as in the stored-order case above: 6, 3, 6 used
    codes = np.array([[1, 0, 1, 1, 1, 0], [2, 2, 2, 0, 0, 0], [0, 1, 0, 1, 0, 1]])
    costs = np.arange(18, dtype=float).reshape(3, 6) / 100
    res = adaptive_eval(codes, rule, correct=[1, 2, 0], orders=None, costs=costs, reps=10)[0]
    paid = costs[0].sum() + costs[1, :3].sum() + costs[2].sum()
    assert res.mean_cost_usd == pytest.approx(paid / 3)
    assert res.row()["mean_cost_usd"] == res.mean_cost_usd
    unknown = costs.copy()
    unknown[1, 5] = np.nan  # never used: the cost is still known
    assert adaptive_eval(codes, rule, correct=[1, 2, 0], orders=None, costs=unknown,
                         reps=10)[0].mean_cost_usd == pytest.approx(paid / 3)
    unknown[1, 0] = np.nan
    assert adaptive_eval(codes, rule, correct=[1, 2, 0], orders=None, costs=unknown,
                         reps=10)[0].mean_cost_usd is None


def test_json_rows_report_cost_and_a_rerun_draws_nothing(tmp_path, capsys):
    import json

    from ensemble.cli import main
    from ensemble.testing import SimulatedServer

    args = ["eval", "boxball", "--model", "openai/sim-expert", "--t", "1", "--n", "1", "3",
            "--samples", "6", "--limit", "6", "--adaptive", "bayes", "beta", "--json", "--out",
            str(tmp_path / "run"), "--price-per-1k-tokens", "0.5,1.5"]
    with SimulatedServer(lam1=3.0) as srv:
        capsys.readouterr()
        assert main([*args, "--api-base", srv.base_url]) == 0
        first = json.loads(capsys.readouterr().out)
        sent = srv.stats.requests
        assert main([*args, "--api-base", srv.base_url]) == 0
        again = json.loads(capsys.readouterr().out)
        assert srv.stats.requests == sent and again["samples"]["from_store"] == \
            first["samples"]["total"]
    assert again["adaptive"] == first["adaptive"]
    samples = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").open()]
    questions = len({s["id"] for s in samples})
    per_sample = {s["cost_usd"] for s in samples}
    assert len(per_sample) == 1  # the simulated replies are priced alike: one cost per sample
    drawn = sum(s["cost_usd"] for s in samples) / questions  # what each question cost
    for row in first["adaptive"]:
        assert {"mean_samples", "mean_cost_usd", "accuracy"} <= set(row)
        # the samples it used, at one cost each: samples.jsonl's dollars per question x the
        # share of the 6 drawn that it used
        assert row["mean_cost_usd"] == pytest.approx(drawn * row["mean_samples"] / 6)
        assert row["mean_cost_usd"] < drawn  # it stopped early on some question


def _open_run(questions_n, k=20, per_question=6, seed=0):
    """Open-answer questions whose answers are their own (the task's distinct answers grow
    with the questions, one question's stay at `per_question`), and (1, Q, K) answers."""
    from ensemble.tasks import Question

    g = np.random.default_rng(seed)
    qs, rows = [], []
    for i in range(questions_n):
        opts = [f"{i}-{j}" for j in range(per_question)]
        qs.append(Question(id=f"q{i}", prompt=f"q{i}", choices=tuple(opts), correct=opts[0]))
        p = g.dirichlet(np.ones(per_question) * 0.5)
        rows.append([None if g.random() < 0.05 else opts[g.choice(per_question, p=p)]
                     for _ in range(k)])
    ans = np.empty((1, questions_n, k), dtype=object)
    ans[0] = rows
    return qs, ans


def test_open_answers_are_coded_per_question_and_score_as_the_task_wide_coding():
    """Issue 32 item 12: each question's answers are coded among its own options (n_options is
    one question's, not the task's 300 distinct answers), and the replay scores exactly as the
    task-wide coding did (the rules read only counts: codes are labels)."""
    from ensemble.evals.adaptive import question_codes
    from ensemble.stopping import StopSpec

    qs, ans = _open_run(50)
    codes, correct, n_opt = question_codes(qs, ans)
    assert n_opt == 6 and codes.shape == (1, 50, 20) and codes.max() < 6
    assert correct == [0] * 50 and (codes[ans == None] == -1).all()  # noqa: E711
    # the task-wide coding (every distinct answer of the task its own code)
    every = sorted({c for q in qs for c in q.choices})
    at = {c: i for i, c in enumerate(every)}
    wide = np.vectorize(lambda a: -1 if a is None else at[a], otypes=[np.int64])(ans)
    right = [at[q.correct] for q in qs]
    for stop in ("bayes", "beta"):
        spec = StopSpec(stop=stop, max_n=20)
        (a,) = adaptive_eval(codes, spec, correct=correct, n_options=n_opt, fixed_ns=[1, 5],
                             reps=50, orders=20, rng=3)
        (b,) = adaptive_eval(wide, spec, correct=right, n_options=len(every), fixed_ns=[1, 5],
                             reps=50, orders=20, rng=3)
        assert a.accuracy.value == pytest.approx(b.accuracy.value, abs=1e-12)
        assert a.mean_samples.value == pytest.approx(b.mean_samples.value, abs=1e-12)
        assert {n: e.value for n, e in a.fixed.items()} == pytest.approx(
            {n: e.value for n, e in b.fixed.items()}, abs=1e-12)


def test_the_fixed_n_cells_of_open_answers_are_coded_per_question():
    """The eval's fixed-n cells (`scoring.item_cells`) code open answers per question too: the
    delete-one variants are (options + 1)² per question, so task-wide codes (here 180 options)
    grew as questions³ (a 500 x 40 open recording took 21 GB). The estimates and their
    jackknife deviations equal the task-wide coding's (plurality reads counts: codes are
    labels)."""
    from ensemble.evals.analysis import vote_values
    from ensemble.evals.scoring import item_cells
    from ensemble.tasks import TaskLayout

    qs, ans = _open_run(30)
    (cells,) = item_cells(TaskLayout(), qs, ans, [1, 5])
    assert all(v.jack.shape == (30, 7) for v in cells.values())  # 6 options + invalid
    every = sorted({c for q in qs for c in q.choices})
    at = {c: i for i, c in enumerate(every)}
    wide = np.vectorize(lambda a: -1 if a is None else at[a], otypes=[np.int64])(ans[0])
    ref = vote_values(wide, np.array([at[q.correct] for q in qs]), [1, 5],
                      n_options=len(every))
    assert set(cells) == set(ref)
    for cell, v in cells.items():
        np.testing.assert_allclose(v.values, ref[cell].values, atol=1e-12)
        # the jackknife: per question, the same (weight, deviation) of each answer deleted
        for q in range(len(qs)):
            w, j = v.weight[q], v.jack[q]
            mine = sorted(zip(w[w > 0], j[w > 0], strict=True))
            w_ref, j_ref = ref[cell].weight[q], ref[cell].jack[q]
            theirs = sorted(zip(w_ref[w_ref > 0], j_ref[w_ref > 0], strict=True))
            np.testing.assert_allclose(mine, theirs, atol=1e-12)


class _Through:
    """A plan that is not a `StopSpec` and a rule that overrides `next`: both force the replay
    through the stop-rule interface (pilots, fit, `next` per batch) instead of the table."""

    def __init__(self, spec):
        self.spec, self.stop = spec, spec.stop

    def budgets(self, ns):
        return self.spec.budgets(ns)

    def pilot_draw(self, i, budgets, memory):
        return self.spec.pilot_draw(i, budgets, memory)

    def fit(self, pilots, memory, context):
        return self.spec.fit(pilots, memory, context)

    def remember(self, memory, pilot, drawn):
        self.spec.remember(memory, pilot, drawn)


class _Beta(BetaRule):
    def next(self, drawn):  # the same decisions, read through next: not table-only
        return super().next(drawn)


def test_any_plan_is_replayed_through_the_interface_as_the_table_would():
    """Issue 36.5: the evals' adaptive rows ask the stop-rule interface; a rule or plan that
    cannot be looked up in a table (soft evidence, tokens, a plug-in plan) is replayed through
    pilots, fit and `next` per batch, exactly where the vectorised table replay stops (a
    rule's k is lossless)."""
    g = np.random.default_rng(11)
    q = g.beta(0.4, 0.4, size=40)
    codes = np.where(g.random((40, 12)) < 0.05, -1,
                     (g.random((40, 12)) < q[:, None]).astype(int))
    codes[:5] = g.integers(-1, 3, size=(5, 12))  # a few questions with a third answer
    orders = np.argsort(g.random((40, 6, 12)), axis=-1)
    spec = StopSpec("bayes", max_n=12, cost=0.004, fit_after=10)
    for table, through in ((spec, _Through(spec)), (BetaRule(max_n=12), _Beta(max_n=12))):
        a = replay(codes, table, n_options=3, orders=orders, fixed_ns=[1, 5])
        b = replay(codes, through, n_options=3, orders=orders, fixed_ns=[1, 5])
        assert (a.used == b.used).all() and (a.counts == b.counts).all()
        assert all((a.fixed[n] == b.fixed[n]).all() for n in (1, 5))
    fitted = replay(codes, _Through(spec), n_options=3, orders=orders).rules
    assert all(r.prior_used.source == "fitted" for r in fitted)
    (row,) = adaptive_eval(codes, _Through(spec), correct=[0] * 40, n_options=3, orders=orders,
                           reps=50)
    assert row.stop == "bayes" and row.max_n == 12
