"""The bayes rule counting tokens (`stop="bayes-tokens"`, issue 40.3): a question's next sample is
priced by its samples' length so far, so a long question stops sooner and a short one draws on;
with no tokens known it is the bayes rule; through the eval its rows carry mean_tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ensemble.evals.adaptive import adaptive_eval
from ensemble.stopping import BetaPrior, Drawn, Observation, StopMemory, StopSpec
from ensemble.stopping.bayes import BayesRule, bayes_table
from ensemble.stopping.plan import FitContext
from ensemble.stopping.tokens import TokenBayesRule

PRIOR = BetaPrior(0.5)


def _drawn(keys, tokens):
    return Drawn((tuple(Observation(k, tokens=t) for k, t in zip(keys, tokens, strict=True)),),
                 (20,))


def test_each_question_is_decided_at_its_own_cost():
    rule = TokenBayesRule(max_n=20, prior=PRIOR, cost=0.004, ref_tokens=100.0)
    keys = ["a", "a", "b", "a"]
    for length, level in ((100, 0.004), (400, 0.016), (25, 0.001), (141, 0.004 * 2 ** 0.5)):
        d = _drawn(keys, [length] * 4)
        assert rule.cost_for(d) == pytest.approx(level)
        want = int(bayes_table(PRIOR, 20, level, 2)[4, 3, 1])
        assert rule.next(d) == (want,)
    # a long question stops where a short one draws on
    long_, short = _drawn(keys, [800] * 4), _drawn(keys, [20] * 4)
    assert rule.next(long_) == (0,) and rule.next(short)[0] > 0
    # tokens unknown: the bayes rule at its cost
    plain = BayesRule(max_n=20, prior=PRIOR, cost=0.004)
    for keys in (["a", "a"], ["a", "b", "a"], ["a", "a", "b", "b", "a"]):
        unknown = _drawn(keys, [None] * len(keys))
        assert rule.next(unknown) == plain.next(unknown)


def test_it_counts_dollars_where_every_sample_has_them():
    """Dollars known for every sample win over tokens (members of different price, prompts of
    different length); one sample without them and tokens decide; neither: the bayes rule."""
    def drawn(tokens, usd):
        return Drawn((tuple(Observation(k, tokens=t, cost_usd=u)
                            for k, t, u in zip(["a", "a", "b", "a"], tokens, usd, strict=True)),),
                     (20,))

    pilots = [drawn([100] * 4, [1e-4] * 4), drawn([100] * 4, [3e-4] * 4)]
    rule = StopSpec("bayes-tokens", max_n=20, prior=PRIOR, cost=0.004).fit(
        pilots, StopMemory(), FitContext(budgets=(20,), lams=(None,)))
    assert rule.ref_usd == pytest.approx(2e-4) and rule.ref_tokens == pytest.approx(100)
    # same length, 4x the dollars a sample (a dear member): 4x the cost
    assert rule.cost_for(drawn([100] * 4, [8e-4] * 4)) == pytest.approx(0.016)
    # same dollars, 4x the length: dollars decide
    assert rule.cost_for(drawn([400] * 4, [2e-4] * 4)) == pytest.approx(0.004)
    # one sample's dollars unknown: its tokens decide
    assert rule.cost_for(drawn([400] * 4, [2e-4, None, 2e-4, 2e-4])) == pytest.approx(0.016)
    assert rule.cost_for(drawn([None] * 4, [None] * 4)) == pytest.approx(0.004)


def test_its_reference_length_is_the_pilots_mean():
    spec = StopSpec("bayes-tokens", max_n=10, prior=PRIOR)
    pilots = [_drawn(["a", "b"], [100, 300]), _drawn(["a", "a"], [50, 50]), None]
    rule = spec.fit(pilots, StopMemory(), FitContext(budgets=(10,), lams=(None,)))
    assert isinstance(rule, TokenBayesRule) and rule.ref_tokens == pytest.approx(125.0)
    fitted = StopSpec("bayes-tokens", max_n=10).fit(
        [_drawn(["a", "a"], [50, 50])] * 25 + [_drawn(["a", "b"], [100, 300])] * 15,
        StopMemory(), FitContext(budgets=(10,), lams=(None,)))
    assert fitted.ref_tokens == pytest.approx((25 * 50 + 15 * 200) / 40)
    assert fitted.prior_used.source == "fitted"  # the prior fitted on the same pilots
    with pytest.raises(Exception, match="ref_tokens must be a number > 0"):
        TokenBayesRule(max_n=10, prior=PRIOR, ref_tokens=0)


def test_replayed_it_spends_its_samples_on_the_short_questions():
    """Half the questions have 10x longer samples, their answers alike: the sample-counting
    rule draws as much on both halves, the token rule less on the long ones, more on the short
    ones; every row says its mean tokens."""
    rng = np.random.default_rng(3)
    Q, K = 200, 20
    q = rng.beta(2, 1, size=Q)
    codes = (rng.random((Q, K)) > q[:, None]).astype(np.int64)  # 0 right with probability q
    tokens = np.where(np.arange(Q)[:, None] % 2 == 0, 600.0, 60.0) * np.ones((1, K))
    got = {}
    for stop in ("bayes", "bayes-tokens"):
        (res,) = adaptive_eval(codes, StopSpec(stop, max_n=K, cost=0.002), correct=np.zeros(Q),
                               n_options=2, orders=20, reps=50, tokens=tokens)
        long_, short = res.question_samples[::2].mean(), res.question_samples[1::2].mean()
        assert res.mean_tokens == pytest.approx(res.question_tokens.mean())
        assert res.mean_tokens == pytest.approx(330 * res.question_samples.mean(), rel=0.25)
        got[stop] = (long_, short, res.mean_tokens)
    assert got["bayes"][0] == pytest.approx(got["bayes"][1], rel=0.2)
    assert got["bayes-tokens"][0] < got["bayes"][0] < got["bayes"][1] < got["bayes-tokens"][1]


def test_an_eval_row_of_the_token_rule_carries_mean_tokens(tmp_path, capsys):
    from ensemble.cli import main
    from ensemble.tasks import get_task

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Q{i}?", "answer": "yes"})
                            + "\n" for i in range(12)))
    prompts = [x.prompt for x in get_task("jsonl", data=str(data), answer="text").questions()]
    rec = tmp_path / "rec.jsonl"
    with rec.open("w") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"prompt": p, "samples": [
                {"text": "<answer>yes</answer>" if (i + j) % 3 else "<answer>no</answer>",
                 "tokens": 50 + 100 * (i % 2)} for j in range(8)]}) + "\n")
    capsys.readouterr()
    assert main(["eval", "jsonl", "--data", str(data), "--answer", "text", "--model",
                 f"replay/{rec}", "--t", "1", "--n", "1", "8", "--samples", "8", "--adaptive",
                 "bayes", "bayes-tokens", "--out", str(tmp_path / "run"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["adaptive"]
    assert [r["stop"] for r in rows] == ["bayes", "bayes-tokens"]
    for r in rows:
        assert 50 * r["mean_samples"] <= r["mean_tokens"] <= 150 * r["mean_samples"]
