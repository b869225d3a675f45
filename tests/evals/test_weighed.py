"""Soft votes in evals (issue 37): `ensemble eval` scores a rule that weighs each sample by its
logprobs (soft, confidence, ...) at every n, beside the main vote, paired, on one model (a
vote's accuracy and the box-ball utility) and on a mixed ensemble; every number equals a
brute-force recount of the run's own samples.jsonl (each sample's compact logprobs, every
n-subset enumerated); a run drawn without logprobs says what redrawing them costs; a run
drawn with them is rescored with no request, whatever its rules; compare rescores them."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
from collections import defaultdict

import pytest

from ensemble.decision import evidence_of
from ensemble.evals.compare import compare_runs
from ensemble.evals.records import read_questions, read_samples
from ensemble.evals.rundir import read_run
from ensemble.evals.runner import RunOptions, run_eval
from ensemble.evals.schemas import dump
from ensemble.evals.spec import one_model
from ensemble.providers.options import ProviderOptions
from ensemble.sampling.types import Sample
from ensemble.testing import SimulatedServer, answer_key_from_questions

LETTERS = "ABCDE"


def _questions(tmp_path, count=40, seed=0):
    import random

    rng = random.Random(seed)
    rows = [{"id": f"q{i}", "question": f"Which box holds marble {i}?",
             "choices": "|".join(LETTERS), "answer": rng.choice(LETTERS)} for i in range(count)]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _server(data, **kw):
    from ensemble.tasks import get_task

    key = answer_key_from_questions(get_task("jsonl", data=str(data)).questions())
    return SimulatedServer(lam1=1.0, seed=kw.pop("seed", 3), answer_key=key, **kw)


def _run(srv, out, data=None, task="jsonl", *, ns=(1, 3, 5), samples=6, rules=(), **kw):
    spec = one_model(task, "openai/sim-expert", kw.pop("t", (1.0,)), ns, api_base=srv.base_url,
                     samples=samples, bootstrap=100, aggregators=list(rules) or None,
                     **({"data": str(data)} if data else {}), **kw)
    opts = RunOptions(provider=ProviderOptions(api_base=srv.base_url, transport=srv.transport()),
                      out=str(out))
    return dump(asyncio.run(run_eval(spec, opts)))


def _row(summary, n, rule, t=1.0):
    return next(r for r in summary["results"]
                if r["n"] == n and r["aggregator"] == rule and r["t"] == t)


def _stored(run):
    """Per (t or member, question id): the stored samples by index, as scored."""
    out: dict = defaultdict(dict)
    for s in read_samples(run):
        out[s.member if s.member else s.t, s.id][s.sample] = Sample(
            key="", index=s.sample, text=s.text, answer=s.answer if s.valid else None,
            answer_lp=s.lp)
    return out


def _scores(sample, choices, rule, temperature):
    """What one sample adds to each option under `rule` (recounted from its logprobs)."""
    if sample.answer is None:
        return {}
    ev = evidence_of(sample, options=list(choices))
    if rule == "soft":
        return {o: math.exp(v) for o, v in (ev.options or {}).items()}
    if rule == "confidence":  # softmax(log P(answer) / T): the max cancels in a comparison
        return {sample.answer: math.exp(ev.logprob / temperature)}
    return {sample.answer: 1.0}


def _credit(totals, right):
    best = max(totals.values(), default=0.0)
    if best <= 0:
        return 0.0
    top = [a for a, v in totals.items() if v >= best - 1e-12 * max(1.0, best)]
    return (right in top) / len(top)


def recount(run, rule, n, temperature=1.0, t=1.0):
    """Mean over questions of the mean credit over every n-subset of its stored samples."""
    stored = _stored(run)
    qs = list(read_questions(run))
    total = 0.0
    for q in qs:
        row = [stored[t, q.id][i] for i in sorted(stored[t, q.id])]
        per = [_scores(s, q.choices, rule, temperature) for s in row]
        credits = []
        for pick in itertools.combinations(range(len(row)), n):
            totals: dict = defaultdict(float)
            for i in pick:
                for a, v in per[i].items():
                    totals[a] += v
            credits.append(_credit(totals, q.correct))
        total += sum(credits) / len(credits)
    return total / len(qs)


def test_soft_rules_score_at_every_n_as_a_brute_force_recount(tmp_path):
    data = _questions(tmp_path)
    srv = _server(data)
    s = _run(srv, tmp_path / "run", data, rules=("soft", "confidence"), ns=(1, 3, 5, 6),
             adaptive=["beta"])
    assert s["requests"] == 40  # one request of n = 6 per question, logprobs drawn with it
    notes = " ".join(s["notes"])
    assert "soft: weighed by the logprobs" in notes and "confidence: weighed" in notes
    temp = float(re.search(r"confidence: T = ([0-9.e-]+)", notes).group(1))
    for n in (1, 3, 5):
        for rule in ("soft", "confidence", "plurality"):
            want = recount(tmp_path / "run", rule, n, temperature=temp)
            assert _row(s, n, rule)["accuracy"] == pytest.approx(want, abs=1e-12), (rule, n)
        c = next(c for c in s["contrasts"] if c["kind"] == "aggregator" and c["n"] == n
                 and c["aggregator"] == "soft")
        assert c["difference"] == pytest.approx(
            _row(s, n, "soft")["accuracy"] - _row(s, n, "plurality")["accuracy"], abs=1e-12)
        assert c["ci_questions"][0] <= c["difference"] <= c["ci_questions"][1]
    # adaptive rows: the stopping rule's samples voted by each rule, fixed n = 6 its n = 6 cell
    rows = {r["aggregator"]: r for r in s["adaptive"]}
    assert rows["soft"]["mean_samples"] == rows["plurality"]["mean_samples"]
    for rule in ("soft", "confidence", "plurality"):
        assert rows[rule]["vs_fixed"]["accuracy"] == pytest.approx(
            _row(s, 6, rule)["accuracy"], abs=1e-12)
    # compare rescores the soft rows from samples.jsonl: a run against a copy drawn anew
    other = _run(_server(data, seed=9), tmp_path / "other", data, rules=("soft", "confidence"))
    got = compare_runs(read_run(tmp_path / "run"), read_run(tmp_path / "other"), reps=100)
    cells = [c for c in got["results"] if c["aggregator"] in ("soft", "confidence")]
    assert len(cells) == 6
    for cell in cells:
        rule, n = cell["aggregator"], cell["n"]
        assert cell["a"] == pytest.approx(_row(s, n, rule)["accuracy"], abs=1e-12)
        assert cell["b"] == pytest.approx(_row(other, n, rule)["accuracy"], abs=1e-12)

    # a run drawn with logprobs is rescored with no request, by any rules
    again = _run(srv, tmp_path / "run", data, rules=("soft",))
    hard = _run(srv, tmp_path / "run", data)
    assert again["requests"] == 0 and hard["requests"] == 0
    assert _row(again, 3, "soft") == _row(s, 3, "soft")

def test_a_run_drawn_without_logprobs_says_what_a_redraw_costs(tmp_path):
    data = _questions(tmp_path, count=12)
    srv = _server(data)
    lines: list[str] = []
    spec = one_model("jsonl", "openai/sim-expert", (1.0,), (1, 3), api_base=srv.base_url,
                     samples=4, bootstrap=100, data=str(data))
    opts = RunOptions(provider=ProviderOptions(api_base=srv.base_url, transport=srv.transport(),
                                               price_per_1k=(1.0, 2.0)),
                      out=str(tmp_path / "run"), on_status=lines.append)
    first = dump(asyncio.run(run_eval(spec, opts)))
    soft = dump(asyncio.run(run_eval(spec.model_copy(update={"aggregators": ["soft"]}), opts)))
    said = [x for x in lines if "without logprobs" in x]
    assert len(said) == 1 and said[0].startswith("48 of the samples asked for are stored "
                                                 "without logprobs")
    assert f"their first draw cost ${first['cost_usd']:.4g} for " in said[0]
    assert soft["requests"] == 12 and _row(soft, 3, "soft")["accuracy"] >= 0
    assert any("without logprobs" in x for x in soft["notes"])


def test_soft_is_refused_in_one_line_when_the_replies_carry_no_logprobs(tmp_path, capsys):
    from ensemble.cli import main

    rec = tmp_path / "rec.jsonl"  # a recording without logprobs: replay refuses to invent them
    data = _questions(tmp_path, count=3)
    from ensemble.tasks import get_task

    qs = get_task("jsonl", data=str(data)).questions()
    rec.write_text("".join(json.dumps({"prompt": q.prompt, "t": 1.0, "samples": [
        f"<answer>{q.correct}</answer>"] * 3}) + "\n" for q in qs))
    code = main(["eval", "jsonl", "--data", str(data), "--model", f"replay/{rec}", "--t", "1",
                 "--n", "1", "--samples", "3", "--aggregator", "soft", "--out",
                 str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "logprobs" in err


def _box_recount(run, n, rule):
    """Box-ball utility by brute force: per scenario and state, m of the n experts see red
    (binomially), every m-subset of the red question's samples with every (n − m)-subset of
    the blue one's, scored +1 right, −1 wrong or no score, 0 on a tie; mean over scenarios."""
    stored = _stored(run)
    qs = list(read_questions(run))
    by_scen: dict = defaultdict(dict)
    for q in qs:
        by_scen[q.meta["scenario"]][q.meta["colour"]] = q
    total = 0.0
    for cols in by_scen.values():
        m0 = next(iter(cols.values())).meta
        mu, a, b = float(m0["prior_left"]), float(m0["red_left"]), float(m0["red_right"])
        per = {c: [_scores(stored[1.0, q.id][i], ("L", "R"), rule, 1.0)
                   for i in sorted(stored[1.0, q.id])] for c, q in cols.items()}
        u = 0.0
        for omega, p_state, p_red in ((1, mu, a), (0, 1 - mu, b)):
            for m in range(n + 1):
                pr = math.comb(n, m) * p_red ** m * (1 - p_red) ** (n - m)
                if pr == 0:
                    continue
                vals = []
                for red in itertools.combinations(range(len(per.get("red", []))), m):
                    for blue in itertools.combinations(range(len(per.get("blue", []))), n - m):
                        totals: dict = defaultdict(float)
                        for c, pick in (("red", red), ("blue", blue)):
                            for i in pick:
                                for x, v in per[c][i].items():
                                    totals[x] += v
                        best = max(totals.values(), default=0.0)
                        tl, tr = totals.get("L", 0.0), totals.get("R", 0.0)
                        if best <= 0:
                            vals.append(-1.0)
                        elif abs(tl - tr) <= 1e-12 * max(1.0, best):
                            vals.append(0.0)
                        else:
                            vals.append(1.0 if (tl > tr) == (omega == 1) else -1.0)
                u += p_state * pr * sum(vals) / len(vals)
        total += u
    return total / len(by_scen)


def test_soft_on_box_ball_scores_the_utility_of_experts_each_drawing_a_ball(tmp_path):
    srv = SimulatedServer(lam1=1.0, seed=5)
    s = _run(srv, tmp_path / "run", task="boxball", ns=(1, 3), samples=4, limit=15,
             rules=("soft",))
    assert "soft: weighed by the logprobs" in " ".join(s["notes"])
    for n in (1, 3):
        for rule in ("soft", "majority"):
            got = _row(s, n, rule)["utility"]
            assert got == pytest.approx(_box_recount(tmp_path / "run", n, rule), abs=1e-12)


def test_soft_over_a_mixed_ensemble_is_a_brute_force_recount(tmp_path):
    from ensemble.evals.spec import load_spec

    data = _questions(tmp_path)
    srv = _server(data)
    members = [{"label": "cool", "model": "openai/sim-expert", "api_base": srv.base_url,
                "temperature": 0.7, "n": 2, "samples": 3},
               {"label": "warm", "model": "openai/sim-expert", "api_base": srv.base_url,
                "temperature": 1.0, "n": 1, "samples": 3}]
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"task": "jsonl", "data": str(data), "members": members,
                                "aggregators": ["plurality", "soft"], "bootstrap": 100}))
    opts = RunOptions(provider=ProviderOptions(transport=srv.transport()),
                      out=str(tmp_path / "run"))
    s = dump(asyncio.run(run_eval(load_spec(path), opts)))
    assert "soft: weighed by the logprobs" in " ".join(s["notes"])
    stored = _stored(tmp_path / "run")
    qs = list(read_questions(tmp_path / "run"))

    def recount(rule):
        total = 0.0
        for q in qs:
            per = [[_scores(stored[lb, q.id][i], q.choices, rule, 1.0)
                    for i in sorted(stored[lb, q.id])] for lb in ("cool", "warm")]
            credits = []
            for a in itertools.combinations(range(3), 2):
                for b in itertools.combinations(range(3), 1):
                    totals: dict = defaultdict(float)
                    for g, pick in ((0, a), (1, b)):
                        for i in pick:
                            for x, v in per[g][i].items():
                                totals[x] += v
                    credits.append(_credit(totals, q.correct))
            total += sum(credits) / len(credits)
        return total / len(qs)

    row = {r["aggregator"]: r for r in s["results"] if r["member"] == "ensemble"}
    for rule in ("soft", "plurality"):
        assert row[rule]["accuracy"] == pytest.approx(recount(rule), abs=1e-12)
    kinds = {(c["kind"], c["aggregator"]) for c in s["contrasts"]}
    assert {("aggregator", "soft"), ("vs-best-member", "soft")} <= kinds


def test_past_the_exact_count_random_subsets_estimate_the_same_value(monkeypatch):
    """Above EXACT subsets the estimate is a mean over SUBSETS random ones: unbiased, so on
    many questions it agrees with every subset's mean within its Monte-Carlo error, and its
    jackknife is the exact one's within that noise."""
    import numpy as np

    from ensemble.evals import weighed

    rng = np.random.default_rng(0)
    values = rng.dirichlet(np.ones(4), size=(300, 10))  # (Q, K, J) soft shares
    values[rng.random((300, 10)) < 0.1] = 0.0  # some invalid samples
    correct = rng.integers(0, 4, 300)
    sc = weighed.Scores(values, None, 1.0, ())
    exact = weighed.subset_values([sc], correct, [4], rng=np.random.default_rng(1))
    monkeypatch.setattr(weighed, "EXACT", 10)
    sampled = weighed.subset_values([sc], correct, [4], rng=np.random.default_rng(1))
    err = np.abs(sampled.values - exact.values)
    assert err.mean() < 0.02 and abs(sampled.values.mean() - exact.values.mean()) < 0.003
    ratio = sampled.cond_var().sum() / exact.cond_var().sum()
    assert 0.9 < ratio < 1.2


def test_a_run_whose_replies_lack_logprobs_is_refused_in_one_line_counting_them():
    from ensemble.aggregators import get_aggregator
    from ensemble.errors import InputError
    from ensemble.rules import Evidence

    good = Evidence(logprob=-0.1, options={"A": -0.1, "B": -2.5})
    with pytest.raises(InputError, match=r"^soft weighs each vote by .* and 3 of 8 replies came "
                                         r"without it: draw with a provider that returns"):
        get_aggregator("soft").weigh_many([["A"] * 4, ["B"] * 4],
                                          [[good, None, good, None], [good, good, None, good]])
