"""Mixed members on open answers (issue 40.1): `ensemble eval --spec` with two members and
`"answer": "number" | "text" | "math"` scores the ensemble under plurality and lam-weighted,
each member alone, and the cost rule, on planted answers from the simulated servers and on
replayed recordings; every fixed-n row equals a brute-force recount of the stored samples
(every n_g-subset of each member's samples, enumerated); robust is refused in one line."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import pytest

from ensemble.cli import main
from ensemble.evals.records import read_questions, read_samples
from ensemble.testing import OpenAnswers, SimulatedServer
from ensemble.testing.openexpert import open_question_text

QUESTIONS = [f"How many legs have {i} spiders?" for i in range(1, 13)]


def _data(tmp_path, rows):
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _spec(tmp_path, data, members, answer, **extra):
    path = tmp_path / f"spec-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps({"task": "jsonl", "data": data, "answer": answer,
                                "members": members, "bootstrap": 200, **extra}))
    return str(path)


def _run(capsys, spec, out, code=0):
    capsys.readouterr()
    assert main(["eval", "--spec", spec, "--out", str(out), "--json"]) == code
    got = capsys.readouterr()
    return json.loads(got.out) if code == 0 else got.err


def recount(run, weights, ns):
    """The accuracy of a weighted vote over the run's members, by brute force: for each
    question, every n_g-subset of each member's stored samples (samples.jsonl, as scored), the
    answers' scores (member g's vote weighs weights[g]), and credit 1/k when the right answer
    is one of the k top answers (0 without a valid vote); averaged over subsets, then over
    questions."""
    right = {q.id: q.correct for q in read_questions(run)}
    stored: dict[tuple[str, str], dict[int, str | None]] = defaultdict(dict)
    for s in read_samples(run):
        stored[s.id, s.member][s.sample] = s.answer
    labels = list(ns)
    total = 0.0
    for qid, correct in right.items():
        per = [[stored[qid, lb][i] for i in sorted(stored[qid, lb])] for lb in labels]
        combos = [list(itertools.combinations(row, ns[lb]))
                  for row, lb in zip(per, labels, strict=True)]
        credit, count = 0.0, 0
        for pick in itertools.product(*combos):
            score: dict[str, float] = defaultdict(float)
            for lb, votes in zip(labels, pick, strict=True):
                for a in votes:
                    if a is not None:
                        score[a] += weights[lb]
            count += 1
            if not score:
                continue
            best = max(score.values())
            top = [a for a, v in score.items() if abs(v - best) <= 1e-9 * best]
            credit += (correct in top) / len(top)
        total += credit / count
    return total / len(right)


def _row(summary, member, rule):
    return next(r for r in summary["results"]
                if r["member"] == member and r["aggregator"] == rule)


def _check_recount(run, summary, members):
    """Every fixed-n row of the summary against `recount`."""
    ns = {m["label"]: m["n"] for m in members}
    lams = {m["label"]: 2 * m["lam"] for m in members}
    for rule, weights in (("plurality", dict.fromkeys(ns, 1.0)), ("lam-weighted", lams)):
        assert _row(summary, "ensemble", rule)["accuracy"] == pytest.approx(
            recount(run, weights, ns), abs=1e-12), rule
    for lb, n in ns.items():
        assert _row(summary, lb, "plurality")["accuracy"] == pytest.approx(
            recount(run, {lb: 1.0}, {lb: n}), abs=1e-12), lb


def test_mixed_members_on_open_numbers_planted_and_replayed(tmp_path, capsys):
    data = _data(tmp_path, [{"id": f"q{i}", "question": f"### Question:\n{q}", "answer": 8 * i}
                            for i, q in enumerate(QUESTIONS, 1)])
    truth = {q: 8.0 * i for i, q in enumerate(QUESTIONS, 1)}
    cheap = OpenAnswers(truth, accuracy=0.45, wrong=3)
    dear = OpenAnswers(truth, accuracy=0.9, wrong=2)
    members = [{"model": "openai/cheap", "n": 3, "samples": 5, "temperature": 1.0, "lam": 0.6,
                "price_per_1k": [0.0, 0.0002], "label": "cheap"},
               {"model": "openai/dear", "n": 1, "samples": 2, "temperature": 1.0, "lam": 2.5,
                "price_per_1k": [0.0, 0.004], "label": "dear"}]
    run = tmp_path / "run"
    with SimulatedServer(seed=3, open_answers=cheap) as a, \
            SimulatedServer(seed=4, open_answers=dear) as b:
        urls = [{**members[0], "api_base": a.base_url}, {**members[1], "api_base": b.base_url}]
        # robust decides between two fixed options: one line, before any request
        err = _run(capsys, _spec(tmp_path, data, urls, "number",
                                 aggregators=["plurality", "robust"]), tmp_path / "no", code=1)
        assert err.count("\n") == 1 and "robust decides between two fixed options" in err
        assert "answer 'number' is open" in err and "Traceback" not in err
        assert a.stats.requests == b.stats.requests == 0 and not (tmp_path / "no").exists()
        spec = _spec(tmp_path, data, urls, "number", adaptive=["cost"], value_usd=0.002)
        s = _run(capsys, spec, run)
        sent = a.stats.requests + b.stats.requests
        again = _run(capsys, spec, run)
        assert a.stats.requests + b.stats.requests == sent  # a rerun asks nothing
    assert again["results"] == s["results"] and again["adaptive"] == s["adaptive"]
    assert s["data"]["answer"] == "number" and s["ensemble"]["aggregators"] == [
        "plurality", "lam-weighted"]
    assert [(r["member"], r["aggregator"]) for r in s["results"]] == [
        ("ensemble", "plurality"), ("ensemble", "lam-weighted"), ("cheap", "plurality"),
        ("dear", "plurality")]
    _check_recount(run, s, members)
    # the spellings merged: every counted answer is a planted number, the right one first
    for q in read_questions(run):
        text = open_question_text(q.prompt)
        planted = {dear.truth(text)[0], *cheap.truth(text)[2], *dear.truth(text)[2]}
        assert q.choices[0] == q.correct and {float(c) for c in q.choices} <= planted
    spelled = [x for q in read_questions(run) for x in q.meta["spellings"].values()]
    assert any(len(forms) > 1 for forms in spelled)  # several spellings voted as one answer
    (cost,) = s["adaptive"]
    assert cost["stop"] == "cost" and cost["t"] is None and cost["n"] == 4
    assert cost["mean_cost_usd"] > 0 and 0 < cost["mean_samples"] <= 4
    assert sum(cost["mean_samples_by_member"]) == pytest.approx(cost["mean_samples"])
    # the same run from its recording: the same rows, no server at all
    replay = [{**m, "model": f"replay/{run}#{m['label']}"} for m in members]
    r = _run(capsys, _spec(tmp_path, data, replay, "number", adaptive=["cost"],
                           value_usd=0.002), tmp_path / "replayed")
    assert r["results"] == s["results"] and r["adaptive"] == s["adaptive"]


def _recording(path, prompts, rows, tokens):
    with path.open("w") as f:
        for prompt, texts in zip(prompts, rows, strict=True):
            f.write(json.dumps({"prompt": prompt, "samples": [
                {"text": t, "tokens": tokens, "cost_usd": tokens * 1e-6} for t in texts]})
                + "\n")


@pytest.mark.parametrize(("answer", "right", "wrong", "forms"), [
    ("text", "Paris", "Lyon", ("Paris", "paris.", " PARIS ")),
    ("math", "1/2", "1/3", ("1/2", "\\frac{1}{2}", "0.5")),
])
def test_mixed_members_on_open_text_and_math_from_recordings(tmp_path, capsys, answer, right,
                                                             wrong, forms):
    """Two members replayed from hand-written recordings (their answers planted: the right
    answer in several spellings of the kind, a wrong one, an unreadable reply)."""
    import random

    from ensemble.tasks import get_task

    data = _data(tmp_path, [{"id": f"q{i}", "question": f"Question {i}?", "answer": right}
                            for i in range(8)])
    prompts = [q.prompt for q in get_task("jsonl", data=data, answer=answer).questions()]
    rng = random.Random(5)

    def replies(p_right, k):
        return [[f"<answer>{rng.choice(forms)}</answer>" if rng.random() < p_right else
                 "<answer></answer>" if rng.random() < 0.1 else f"<answer>{wrong}</answer>"
                 for _ in range(k)] for _ in prompts]

    _recording(tmp_path / "cheap.jsonl", prompts, replies(0.5, 6), tokens=40)
    _recording(tmp_path / "dear.jsonl", prompts, replies(0.85, 3), tokens=90)
    members = [{"model": f"replay/{tmp_path / 'cheap.jsonl'}", "n": 3, "samples": 6,
                "temperature": 1.0, "lam": 0.5, "label": "cheap", "price_per_1k": [0, 0.001]},
               {"model": f"replay/{tmp_path / 'dear.jsonl'}", "n": 2, "samples": 3,
                "temperature": 1.0, "lam": 2.0, "label": "dear", "price_per_1k": [0, 0.001]}]
    run = tmp_path / "run"
    s = _run(capsys, _spec(tmp_path, data, members, answer, adaptive=["cost"]), run)
    assert s["data"]["answer"] == answer
    _check_recount(run, s, members)
    questions = list(read_questions(run))
    assert all(q.choices[0] == q.correct for q in questions)
    # the kind's spellings of the right answer count as one answer
    assert any(sum(q.meta["spellings"].get(q.correct, {}).values()) > 1 and
               len(q.meta["spellings"][q.correct]) > 1 for q in questions)
    (cost,) = s["adaptive"]
    # each sample's dollars are the recording's own: 40 and 90 tokens at $1 per 1M
    by = cost["mean_samples_by_member"]
    assert cost["mean_cost_usd"] == pytest.approx(by[0] * 40e-6 + by[1] * 90e-6)


def test_weighted_vote_recursion_equals_brute_force():
    """`weightedvotes.weighted_vote_value` (the recursion over options, which the group
    estimator uses for plurality and lam-weighted) against every subset enumerated, on 300
    random questions: 1-3 members, 1-6 options with invalid replies, n_g <= K_g, ties, equal
    and unequal weights."""
    import numpy as np

    from ensemble.evals.weightedvotes import weighted_vote_value

    rng = np.random.default_rng(0)
    for _ in range(300):
        G, opts = int(rng.integers(1, 4)), int(rng.integers(1, 7))
        ks = rng.integers(1, 7, size=G)
        ns = [int(rng.integers(1, k + 1)) for k in ks]
        counts = np.array([rng.multinomial(k, rng.dirichlet(np.full(opts + 1, 0.7))) for k in ks])
        right = int(rng.integers(0, opts))  # option opts: an invalid reply
        samples = [[o for o in range(opts + 1) for _ in range(c[o])] for c in counts]
        for w in (np.ones(G), rng.choice([1.0, 2.0, 4.6, 6.6], size=G)):
            credit, count = 0.0, 0
            for pick in itertools.product(*(itertools.combinations(row, n)
                                            for row, n in zip(samples, ns, strict=True))):
                score = np.zeros(opts)
                for g, votes in enumerate(pick):
                    for o in votes:
                        if o < opts:
                            score[o] += w[g]
                count += 1
                if score.max() > 0:
                    top = np.flatnonzero(score == score.max())
                    credit += (right in top) / len(top)
            assert weighted_vote_value(counts, ns, w, right) == pytest.approx(credit / count,
                                                                              abs=1e-12)


def _text_recordings(tmp_path, questions=8):
    """Two members' recordings of text answers (cheap: 6 samples of 40 tokens, right half the
    time; dear: 3 samples of 90 tokens, right 85%), the jsonl data and the prompts."""
    import random

    from ensemble.tasks import get_task

    data = _data(tmp_path, [{"id": f"q{i}", "question": f"Question {i}?", "answer": "Paris"}
                            for i in range(questions)])
    prompts = [q.prompt for q in get_task("jsonl", data=data, answer="text").questions()]
    rng = random.Random(5)
    forms = ("Paris", "paris.", " PARIS ")

    def replies(p_right, k):
        return [[f"<answer>{rng.choice(forms)}</answer>" if rng.random() < p_right else
                 "<answer></answer>" if rng.random() < 0.1 else "<answer>Lyon</answer>"
                 for _ in range(k)] for _ in prompts]

    rows = {"cheap": replies(0.5, 6), "dear": replies(0.85, 3)}
    _recording(tmp_path / "cheap.jsonl", prompts, rows["cheap"], tokens=40)
    _recording(tmp_path / "dear.jsonl", prompts, rows["dear"], tokens=90)
    return data, prompts, rows


def test_pooled_stopping_rules_replay_as_the_ensemble_draws(tmp_path):
    """`evals.pooled.pooled_replay` (a per-question rule over a mixed run's members) asks the
    rule as `Ensemble(members=..., stop=...)` does: along the stored order it draws, question
    by question, the same votes from each member as the Ensemble drew from the same
    recordings (beta; bayes with a given prior)."""
    import numpy as np

    from ensemble import Ensemble, Member
    from ensemble.evals.pooled import pooled_replay
    from ensemble.stopping import UNIFORM, StopSpec

    _, prompts, rows = _text_recordings(tmp_path)

    def code(text):  # Paris in any spelling 0, Lyon 1, an empty answer invalid
        word = text.split("<answer>")[1].split("</answer>")[0].strip(" .").lower()
        return {"paris": 0, "lyon": 1}.get(word, -1)

    codes = [np.array([[code(t) for t in row] for row in rows[m]]) for m in ("cheap", "dear")]
    orders = [np.broadcast_to(np.arange(c.shape[1]), (len(prompts), 1, c.shape[1]))
              for c in codes]
    for plan in (StopSpec("beta", max_n=5), StopSpec("bayes", max_n=5, prior=UNIFORM)):
        members = [Member(f"replay/{tmp_path / 'cheap.jsonl'}", n=3, temperature=1.0),
                   Member(f"replay/{tmp_path / 'dear.jsonl'}", n=2, temperature=1.0)]
        with Ensemble(members=members, answer="text", stop=plan,
                      store=str(tmp_path / f"{plan.stop}.sqlite")) as ens:
            decisions = ens.decide_many(prompts)
        drew = [(sum(s.completion_tokens == 40 for s in d.samples),
                 sum(s.completion_tokens == 90 for s in d.samples)) for d in decisions]
        rp = pooled_replay(plan, codes, orders, (3, 2), options=2)
        assert [tuple(int(x) for x in r) for r in rp.drawn[:, 0]] == drew, plan.stop
        assert len(set(drew)) > 1  # the rule stopped at different points


def test_mixed_run_adaptive_rows_of_pooled_rules_and_mean_tokens(tmp_path, capsys):
    """A mixed spec's "adaptive": bayes and beta over the pooled members beside the cost rule,
    each with mean_tokens (the recordings' own counts); a summary of format 2 (no mean_tokens)
    still reads."""
    from ensemble.evals.rundir import read_run

    data, _, _ = _text_recordings(tmp_path)
    members = [{"model": f"replay/{tmp_path / 'cheap.jsonl'}", "n": 3, "samples": 6,
                "temperature": 1.0, "lam": 0.5, "label": "cheap", "price_per_1k": [0, 0.001]},
               {"model": f"replay/{tmp_path / 'dear.jsonl'}", "n": 2, "samples": 3,
                "temperature": 1.0, "lam": 2.0, "label": "dear", "price_per_1k": [0, 0.001]}]
    run = tmp_path / "run"
    s = _run(capsys, _spec(tmp_path, data, members, "text",
                           adaptive=["bayes", "beta", "cost"]), run)
    assert s["schema_version"] == 3
    assert [(r["stop"], r["aggregator"]) for r in s["adaptive"]] == [
        ("bayes", "plurality"), ("beta", "plurality"), ("cost", "cost rule")]
    for row in s["adaptive"]:
        by = row["mean_samples_by_member"]
        assert row["mean_tokens"] == pytest.approx(by[0] * 40 + by[1] * 90)
        assert row["mean_cost_usd"] == pytest.approx(row["mean_tokens"] * 1e-6)
        assert 0 < row["mean_samples"] <= 5 and row["n"] == 5
    bayes, beta, _ = s["adaptive"]
    # every member's n pooled, on the same orders, is the fixed row of both
    assert bayes["vs_fixed"]["accuracy"] == beta["vs_fixed"]["accuracy"]
    # format 2: the same document without mean_tokens reads, mean_tokens unknown
    doc = json.loads((run / "summary.json").read_text())
    doc["schema_version"] = 2
    for row in doc["adaptive"]:
        del row["mean_tokens"]
    (run / "summary.json").write_text(json.dumps(doc))
    assert [r.mean_tokens for r in read_run(run).summary.adaptive] == [None] * 3
    # one model's adaptive rows carry them too
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"task": "jsonl", "data": data, "answer": "text", "n": [1, 3],
                               "samples": 6, "bootstrap": 200, "adaptive": ["bayes", "beta"],
                               "members": [{"model": members[0]["model"],
                                            "temperature": 1.0}]}))
    for row in _run(capsys, str(one), tmp_path / "one")["adaptive"]:
        assert row["mean_tokens"] == pytest.approx(row["mean_samples"] * 40)
