"""Mixed ensembles: the unbiased group estimators against planted truth, the spec, and
`ensemble eval --ensemble` / `--aggregator` end to end against simulated servers."""

import asyncio
import json
import subprocess
import sys

import numpy as np
import pytest

from ensemble.errors import InputError
from ensemble.evals.groups import (
    box_group_exact,
    box_group_values,
    group_rule,
    vote_group_values,
)
from ensemble.evals.runner import RunOptions, run_eval
from ensemble.evals.schemas import dump
from ensemble.evals.scoring import box_layout
from ensemble.evals.spec import load_spec, one_model
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer


@pytest.fixture(scope="module")
def box():
    qs = list(get_task("boxball").questions())
    scen, joint, _ = box_layout(qs)
    return joint


def test_box_group_estimate_is_unbiased_against_planted_probabilities(box):
    # 40 scenarios, two members (2 at λ=2, 1 at λ=8 as rule weights), answers with invalid
    # ones; the mean of the estimate over 400 simulated sample sets must match the exact
    # utility for the planted probabilities (tolerance: 4 standard errors of that mean)
    joint = box[:40]
    rng = np.random.default_rng(3)
    probs = rng.dirichlet([4, 3, 0.6], size=(2, 40, 2))
    ns, ks, lams = [2, 1], [3, 2], [2.0, 8.0]
    rules = {r: group_rule(r, lams) for r in ("majority", "lam-weighted", "robust")}
    exact = {r: box_group_exact(probs, joint, ns, f).mean() for r, f in rules.items()}
    draws = {r: [] for r in rules}
    for _ in range(400):
        counts = np.stack([np.array([[rng.multinomial(ks[g], probs[g, s, c]) for c in range(2)]
                                     for s in range(40)]) for g in range(2)])
        got = box_group_values(counts, joint, ns, rules)
        for r in rules:
            draws[r].append(got[r].values.mean())
    for r in rules:
        d = np.array(draws[r])
        assert abs(d.mean() - exact[r]) < 4 * d.std(ddof=1) / np.sqrt(len(d)), r
    # the exact target is the aggregators module's group utility (independent code)
    from ensemble.credit import group_utility_with_invalid
    from ensemble.evals.analysis import state_weights

    mu, w0, w1 = state_weights(joint)
    q = [np.einsum("sc,gsc->sg", w, probs[..., i]) for w in (w0, w1) for i in (0, 1)]
    ref = group_utility_with_invalid("robust", ns, lams, mu, *q)
    assert np.allclose(box_group_exact(probs, joint, ns, rules["robust"]), ref, atol=1e-12)


def test_vote_group_estimate_is_unbiased():
    rng = np.random.default_rng(5)
    p = [np.array([0.4, 0.3, 0.2, 0.05, 0.05]), np.array([0.6, 0.1, 0.1, 0.1, 0.1])]
    ns, ks = [2, 1], [3, 2]
    rules = {"plurality": None, "lam-weighted": [0.5, 4.0]}
    # exact: enumerate i.i.d. answers (option 0 right, option 4 = invalid)
    import itertools

    ex = dict.fromkeys(rules, 0.0)
    for a in itertools.product(range(5), repeat=3):
        pr = p[0][a[0]] * p[0][a[1]] * p[1][a[2]]
        codes = [np.array([[x if x < 4 else -1 for x in a[:2]]]), np.array([[a[2] if a[2] < 4
                                                                               else -1]])]
        v = vote_group_values(codes, np.array([0]), [2, 1], rules, n_options=4)
        for r in rules:
            ex[r] += pr * v[r].values[0]
    codes = [np.where((c := rng.choice(5, p=p[g], size=(4000, ks[g]))) == 4, -1, c)
             for g in range(2)]
    got = vote_group_values(codes, np.zeros(4000, dtype=int), ns, rules, n_options=4)
    for r in rules:
        v = got[r].values
        assert abs(v.mean() - ex[r]) < 4 * v.std(ddof=1) / np.sqrt(len(v)), r


def test_bad_spec_is_one_line_naming_the_field(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"members": [{"model": "openai/a", "n": 0, "temperature": 1}]}))
    with pytest.raises(InputError, match=r"members\.0\.n: .*fix: an integer >= 1"):
        load_spec(str(p))
    p.write_text(json.dumps({"members": [{"model": "openai/a", "n": 1, "temperature": 1,
                                          "lamb": 2}]}))
    with pytest.raises(InputError, match=r"members\.0\.lamb: .*fix: remove it"):
        load_spec(str(p))
    p.write_text("{")
    with pytest.raises(InputError, match="not JSON"):
        load_spec(str(p))


def _mixed(spec, tmp_path, **kw):
    """Run a mixed ensemble's spec in tmp_path/run (its task and sizes from `kw`)."""
    fields = dict(task="boxball", samples=3, limit=6, bootstrap=200)
    fields.update(kw)
    return dump(asyncio.run(run_eval(spec.model_copy(update=fields),
                                RunOptions(out=str(tmp_path / "run")))))


def test_mixed_boxball_end_to_end(tmp_path):
    with SimulatedServer(lam1=2.0, seed=1) as a, SimulatedServer(lam1=8.0, seed=2) as b:
        spec = load_spec(_write(tmp_path, {"members": [
            {"model": "openai/sim-a", "api_base": a.base_url, "n": 2, "temperature": 1.0,
             "lam": 2.0},
            {"model": "openai/sim-b", "api_base": b.base_url, "n": 1, "temperature": 1.0,
             "lam": 8.0, "label": "strong"}]}))
        s = _mixed(spec, tmp_path)
        assert a.stats.completions == 12 * 3 and b.stats.completions == 12 * 3
        # a rerun against the same endpoints makes no request and gives the same numbers (a
        # server restarted on another port is another endpoint: its samples are its own)
        served = (a.stats.requests, b.stats.requests)
        s2 = _mixed(spec, tmp_path)
        assert (a.stats.requests, b.stats.requests) == served
    assert s["ensemble"]["aggregators"] == ["majority", "lam-weighted", "robust"]
    ens = [r for r in s["results"] if r["member"] == "ensemble"]
    assert [r["aggregator"] for r in ens] == ["majority", "lam-weighted", "robust"]
    assert all(r["n"] == 3 and r["t"] is None and r["utility_ci"][0] <= r["utility"]
               <= r["utility_ci"][1] for r in ens)
    alone = [r for r in s["results"] if r["member"] != "ensemble"]
    assert [(r["member"], r["n"]) for r in alone] == [("openai/sim-a@t=1", 2), ("strong", 1)]
    kinds = {(c["kind"], c["aggregator"], c["vs_aggregator"]) for c in s["contrasts"]
             if c["kind"] == "aggregator"}
    assert kinds == {("aggregator", "lam-weighted", "majority"),
                     ("aggregator", "robust", "majority")}
    assert s2["results"][0]["utility"] == s["results"][0]["utility"]
    _check_records(tmp_path / "run", s, ["openai/sim-a@t=1", "strong"], [2, 1], [3, 3])


def _check_records(run, s, labels, ns, ks):
    """samples.jsonl, votes.jsonl and accuracy.png of a mixed run, and the vs-best-member
    contrasts of its summary."""
    from collections import Counter

    from ensemble.evals.records import read_questions, read_samples, read_votes

    qs = list(read_questions(run))
    samples = list(read_samples(run))
    assert Counter(s.member for s in samples) == {lb: k * len(qs)
                                                 for lb, k in zip(labels, ks, strict=True)}
    assert all(s.model and s.t == 1.0 and s.source in ("cache", "online")
               for s in samples)
    votes = list(read_votes(run))
    rules = s["ensemble"]["aggregators"]
    assert Counter(v.member for v in votes) == {**{lb: len(qs) for lb in labels},
                                               "ensemble": len(qs) * len(rules)}
    first = {(x.id, x.member): x.answer for x in samples if x.sample == 0}
    for v in votes:
        if v.member != "ensemble":
            continue
        assert v.t is None and v.n == sum(ns) and list(v.by_member) == labels
        assert sum(v.counts.values()) == sum(sum(c.values()) for c in v.by_member.values())
        valid = [a for a in v.votes if a is not None]
        if v.aggregator in ("majority", "plurality") and valid:
            top = Counter(valid).most_common()
            if len(top) == 1 or top[0][1] > top[1][1]:
                assert v.decision == top[0][0]
        if v.aggregator == "lam-weighted" and first[v.id, labels[-1]] is not None \
                and ns[-1] == 1 and s["ensemble"]["members"][-1]["lam"] > 2 * sum(
                    m["lam"] * m["n"] for m in s["ensemble"]["members"][:-1]):
            assert v.decision == first[v.id, labels[-1]]  # the strong member decides
    assert (run / "accuracy.png").stat().st_size > 1000
    best = [c for c in s["contrasts"] if c["kind"] == "vs-best-member"]
    assert [c["aggregator"] for c in best] == rules
    ens = {r["aggregator"]: r for r in s["results"] if r["member"] == "ensemble"}
    alone = {r["member"]: r for r in s["results"] if r["member"] != "ensemble"}
    key = "utility" if s["task"] == "boxball" else "accuracy"
    top = max(alone.values(), key=lambda r: r[key])
    for c in best:
        assert c["vs_member"] == top["member"] and c["vs_n"] == top["n"]
        diff = c["utility_difference"] if key == "utility" else c["difference"]
        assert diff == pytest.approx(ens[c["aggregator"]][key] - top[key], abs=1e-9)
        ci = c["utility_ci"] if key == "utility" else c["ci"]
        assert ci[0] <= diff + 1e-9 and diff - 1e-9 <= ci[1]


def test_widened_member_has_the_ensembles_layout():
    # member g alone, in the ensemble's jackknife layout: its weights are the ensemble's
    # block for g, so the paired difference's variance counts its samples once
    from ensemble.evals.analysis import vote_values
    from ensemble.evals.scoring import widen as _widen

    rng = np.random.default_rng(0)
    codes = [rng.integers(-1, 3, size=(20, 4)), rng.integers(-1, 3, size=(20, 3))]
    correct = np.zeros(20, dtype=int)
    ens = vote_group_values(codes, correct, [2, 1], {"plurality": None}, n_options=3)[
        "plurality"]
    for g, n in ((0, 2), (1, 1)):
        alone = vote_values(codes[g], correct, [n], n_options=3)["plurality", n]
        v = alone.jack.shape[1]
        assert np.allclose(ens.weight[:, g * v:(g + 1) * v], alone.weight)
        w = _widen(alone, g, ens)
        assert np.allclose(w.cond_var(), alone.cond_var())


def _write(tmp_path, doc):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(doc))
    return str(p)


def test_rules_that_do_not_apply_are_refused_before_any_request(tmp_path, mathqa_path):
    with SimulatedServer(lam1=2.0) as srv:
        opts = RunOptions(out=str(tmp_path / "r"))
        cfg = one_model("mathqa", "openai/sim", (1.0,), (1,), api_base=srv.base_url, limit=3,
                        data=str(mathqa_path), aggregators=["robust"], lam1=2.0)
        with pytest.raises(InputError, match="two options"):
            asyncio.run(run_eval(cfg, opts))
        cfg = one_model("boxball", "openai/sim", (1.0,), (1,), api_base=srv.base_url, limit=3,
                        aggregators=["robust"])
        with pytest.raises(InputError, match="needs every member's λ"):
            asyncio.run(run_eval(cfg, opts))
        spec = load_spec(_write(tmp_path, {"members": [
            {"model": "openai/a", "api_base": srv.base_url, "n": 1, "temperature": 1.0,
             "lam": 1.0}], "aggregators": ["robust"]}))
        with pytest.raises(InputError, match="two options"):
            asyncio.run(run_eval(spec.model_copy(update=dict(
                task="mathqa", limit=3, data=str(mathqa_path))),
                RunOptions(out=str(tmp_path / "m"))))
        # the baseline is scored in every run, not as a rule: refused, never scored as another
        follow = load_spec(_write(tmp_path, {"members": [
            {"model": "openai/a", "api_base": srv.base_url, "n": 1, "temperature": 1.0,
             "lam": 1.0}], "aggregators": ["random-follow"]}))
        with pytest.raises(InputError, match="random-follow cannot be scored for the box-ball"):
            asyncio.run(run_eval(follow.model_copy(update=dict(task="boxball", limit=3)),
                                 RunOptions(out=str(tmp_path / "f"))))
        assert srv.stats.requests == 0


def test_single_model_aggregator_rows_and_contrasts(tmp_path):
    with SimulatedServer(lam1=2.0) as srv:
        cfg = one_model("boxball", "openai/sim", (0.5, 1.0), (1, 3), api_base=srv.base_url,
                        samples=4, limit=5, bootstrap=200, aggregators=["robust", "lam-weighted"],
                        lam1=2.0)
        s = dump(asyncio.run(run_eval(cfg, RunOptions(out=str(tmp_path / "r")))))
    assert s["aggregators"] == ["majority", "robust", "lam-weighted"]
    rows = {(r["t"], r["n"], r["aggregator"]): r for r in s["results"]}
    for t in (0.5, 1.0):
        for n in (1, 3):
            # one group: lam-weighted is majority, on the same samples
            assert rows[t, n, "lam-weighted"]["utility"] == pytest.approx(
                rows[t, n, "majority"]["utility"], abs=1e-12)
            assert (t, n, "robust") in rows
    ag = [c for c in s["contrasts"] if c["kind"] == "aggregator"]
    assert len(ag) == 8 and all(c["vs_aggregator"] == "majority" for c in ag)


def test_cli_ensemble_errors_and_schema(tmp_path):
    run = [sys.executable, "-m", "ensemble", "eval", "boxball"]
    r = subprocess.run([*run, "--ensemble-schema"], capture_output=True, text=True)
    assert r.returncode == 0 and "members" in json.loads(r.stdout)["properties"]
    p = _write(tmp_path, {"members": [{"model": "openai/a", "n": 1, "temperature": -1}]})
    r = subprocess.run([*run, "--ensemble", p], capture_output=True, text=True)
    assert r.returncode != 0 and "members.0.temperature" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    r = subprocess.run([*run, "--ensemble", p, "--model", "x"], capture_output=True, text=True)
    assert r.returncode != 0 and "drop --model" in r.stderr


def test_mixed_mathqa_end_to_end(tmp_path, mathqa_path):
    from ensemble.testing import answer_key_from_questions

    key = answer_key_from_questions(get_task("mathqa", data=mathqa_path).questions())
    with SimulatedServer(lam1=0.5, seed=1, answer_key=key) as a, \
            SimulatedServer(lam1=3.0, seed=2, answer_key=key) as b:
        spec = load_spec(_write(tmp_path, {"members": [
            {"model": "openai/sim-a", "api_base": a.base_url, "n": 2, "temperature": 1.0,
             "lam": 0.5},
            {"model": "openai/sim-b", "api_base": b.base_url, "n": 1, "temperature": 1.0,
             "lam": 3.0}]}))
        s = _mixed(spec, tmp_path, task="mathqa", data=str(mathqa_path), limit=8)
    assert s["ensemble"]["aggregators"] == ["plurality", "lam-weighted"]
    assert [(r["member"], r["aggregator"]) for r in s["results"]] == [
        ("ensemble", "plurality"), ("ensemble", "lam-weighted"),
        ("openai/sim-a@t=1", "plurality"), ("openai/sim-b@t=1", "plurality")]
    assert all(0 <= r["accuracy"] <= 1 for r in s["results"])
    assert s["contrasts"][0]["vs_aggregator"] == "plurality"
    _check_records(tmp_path / "run", s, ["openai/sim-a@t=1", "openai/sim-b@t=1"], [2, 1],
                   [3, 3])
