"""Open answers in evals: `ensemble eval mathqa --open` and jsonl rows without choices, against
the simulated server writing each number in varied equivalent forms (real HTTP)."""

import asyncio
import itertools
import json
import math

import numpy as np
import pytest

from ensemble.evals.compare import compare_runs
from ensemble.evals.rundir import read_run as load_run
from ensemble.evals.runner import RunOptions, run_eval
from ensemble.evals.schemas import dump
from ensemble.evals.spec import one_model
from ensemble.tasks import get_task
from ensemble.testing import OpenAnswers, SimulatedServer
from ensemble.testing.openexpert import open_question_text


def exact_plurality(rho: float, m: int, n: int) -> float:
    """P(the plurality of n samples is right) when a sample is right with probability rho
    and otherwise one of m wrong numbers, each equally likely; a k-way tie that holds the
    right number earns 1/k (a fair coin), as the eval scores it. By enumeration."""
    probs = [rho] + [(1 - rho) / m] * m
    total = 0.0
    for counts in itertools.product(range(n + 1), repeat=m + 1):
        if sum(counts) != n:
            continue
        p = math.factorial(n)
        for c, q in zip(counts, probs, strict=True):
            p = p / math.factorial(c) * q ** c
        top = max(counts)
        if counts[0] == top:
            total += p / sum(1 for c in counts if c == top)
    return total


def res(summary, t, n, agg):
    return next(r for r in summary["results"]
                if r["t"] == t and r["n"] == n and r["aggregator"] == agg)


@pytest.fixture(scope="module")
def open_run(tmp_path_factory, mathqa_path):
    q = 60
    task = get_task("mathqa", data=mathqa_path, limit=q, seed=0, open_answers=True)
    questions = task.questions()
    plan = OpenAnswers({open_question_text(x.prompt): float(x.correct) for x in questions},
                       a=3.0, b=2.0, wrong=2)
    out = tmp_path_factory.mktemp("open") / "run"
    with SimulatedServer(seed=4, open_answers=plan) as srv:
        cfg = one_model("mathqa", "openai/sim-expert", (0.7,), (1, 5), open=True,
                        api_base=srv.base_url, samples=10, limit=q, data=str(mathqa_path),
                        bootstrap=300)
        summary = dump(asyncio.run(run_eval(cfg, RunOptions(out=str(out)))))
        requests = srv.stats.requests
    truths = [plan.truth(open_question_text(x.prompt), seed=4) for x in questions]
    return summary, truths, out, requests, questions


def test_open_mathqa_accuracy_matches_the_planted_truth(open_run):
    s, truths, out, requests, questions = open_run
    assert requests == len(questions)  # one request of n = 10 per question
    assert s["data"]["answer"] == "number"
    assert s["data"]["not_numeric"] > 1000  # of the 2,985: right options that are not numbers
    assert s["invalid_rate"] == 0
    for n in (1, 5):
        exact = float(np.mean([exact_plurality(rho, len(w), n) for _, rho, w in truths]))
        r = res(s, 0.7, n, "plurality")
        # the forms count as one answer: the eval's estimate agrees with the exact plurality
        # accuracy of the planted answers on these questions, within its standard error
        # (2 SEM: a 95% check; the z printed for the record)
        z = (r["accuracy"] - exact) / r["sem_questions"]
        print(f"n = {n}: eval {r['accuracy']:.4f}, exact {exact:.4f}, "
              f"sem {r['sem_questions']:.4f}, z = {z:+.2f}")
        assert abs(z) < 2, (n, r, exact)
    # had the spellings split the vote, n = 5 would score far below the exact value
    assert res(s, 0.7, 5, "plurality")["accuracy"] > res(s, 0.7, 1, "plurality")["accuracy"]


def test_open_run_records_spellings_and_options(open_run):
    s, truths, out, _, questions = open_run
    recs = [json.loads(x) for x in (out / "questions.jsonl").read_text().splitlines()]
    assert all(r["meta"]["open"] and r["choices"][0] == r["correct"] for r in recs)
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    # several raw spellings, one canonical answer each
    right = [x for x in samples if x["answer"] is not None and any(
        x["answer"] == r["correct"] and x["id"] == r["id"] for r in recs)]
    forms = {x["text"].split("<answer>")[1].split("</answer>")[0] for x in right}
    assert any("," in f for f in forms) and any("boxed" in f for f in forms)
    assert any(f.startswith("$") for f in forms)
    # each question records each canonical answer with the spellings that voted for it
    spelled = recs[0]["meta"]["spellings"]
    assert set(spelled) <= set(recs[0]["choices"]) and sum(
        sum(v.values()) for v in spelled.values()) == 10
    # and the viewer shows them
    from ensemble.evals.view import build_view

    page = build_view([out]).path.read_text()
    some = next(iter(spelled[recs[0]["correct"]]))
    assert json.dumps(some)[1:-1] in page and "answers (as written)" in page


def test_compare_two_open_runs(open_run, tmp_path, mathqa_path):
    s, truths, out, _, questions = open_run
    plan = OpenAnswers({open_question_text(x.prompt): float(x.correct) for x in questions},
                       accuracy=0.95, wrong=2)
    with SimulatedServer(seed=9, open_answers=plan) as srv:
        cfg = one_model("mathqa", "openai/sim-expert", (0.7,), (1, 5), open=True,
                        api_base=srv.base_url, samples=10, limit=len(questions),
                        data=str(mathqa_path), bootstrap=200, adaptive=["beta"])
        b = dump(asyncio.run(run_eval(cfg, RunOptions(out=str(tmp_path / "b")))))
    assert b["adaptive"]
    c = compare_runs(load_run(out), load_run(tmp_path / "b"), reps=200)
    row = next(r for r in c["results"] if r["n"] == 5)
    assert row["b"] > row["a"] and row["diff"] > 0


def test_jsonl_open_rows(tmp_path):
    data = tmp_path / "q.jsonl"
    rows = [{"id": f"q{i}", "question": f"### Question:\nHow many legs have {i} spiders?",
             "answer": f"{8 * i:,}"} for i in range(1, 9)]
    rows.append({"id": "mc", "question": "Pick A", "choices": ["A", "B"], "answer": "A"})
    data.write_text("\n".join(json.dumps(r) for r in rows[:-1]) + "\n")
    task = get_task("jsonl", data=str(data), answer="number")
    qs = task.questions()
    assert all(q.choices == () for q in qs) and qs[-1].correct == "64"
    plan = OpenAnswers({f"How many legs have {i} spiders?": 8.0 * i for i in range(1, 9)},
                       accuracy=0.9)
    with SimulatedServer(seed=2, open_answers=plan) as srv:
        cfg = one_model("jsonl", "openai/sim-expert", (0.5,), (1, 3), answer="number",
                        api_base=srv.base_url, samples=6, data=str(data), bootstrap=100)
        s = dump(asyncio.run(run_eval(cfg, RunOptions(out=str(tmp_path / "run")))))
    assert res(s, 0.5, 3, "plurality")["accuracy"] > 0.8
    from ensemble.errors import InputError

    with pytest.raises(InputError, match="takes no --open"):
        asyncio.run(run_eval(one_model("boxball", "m", (1.0,), (1,), open=True)))


def test_compare_names_different_answer_kinds_not_different_questions(tmp_path):
    """Issue 32 item 10: a --answer number run against a --answer math run of the same data
    was refused as "question ... differs between the runs"; it names the answer kinds."""
    from ensemble.errors import InputError

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"### Question:\nHow many "
                                        f"legs have {i} spiders?", "answer": f"{8 * i}"}) + "\n"
                            for i in range(1, 5)))
    plan = OpenAnswers({f"How many legs have {i} spiders?": 8.0 * i for i in range(1, 5)},
                       accuracy=0.9)
    with SimulatedServer(seed=2, open_answers=plan) as srv:
        for kind in ("number", "math"):
            asyncio.run(run_eval(one_model(
                "jsonl", "openai/sim-expert", (0.5,), (1,), answer=kind, api_base=srv.base_url,
                samples=2, data=str(data), bootstrap=100), RunOptions(out=str(tmp_path / kind))))
    with pytest.raises(InputError, match="read answers differently") as e:
        compare_runs(load_run(tmp_path / "number"), load_run(tmp_path / "math"))
    assert "--answer number" in str(e.value) and "--answer math" in str(e.value)
