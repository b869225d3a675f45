"""The eval table reads without explaining: one random-follow row per t, contrasts, invalid
replies, identical samples, how many questions and why (through the real CLI and server)."""

import json
import os

import pytest

from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer, answer_key_from_questions


@pytest.fixture
def _eval(run_cli):
    """`ensemble ...` in this process (the run_cli fixture of tests/conftest.py)."""

    def run(base, out, *extra):
        env = {**os.environ, "COLUMNS": "200"}
        return run_cli("eval", "boxball", "--model",
                               "openai/sim-expert", "--api-base", base, "--t", "0", "1", "--n", "1",
                               "3", "--samples", "4", "--limit", "10", "--bootstrap", "200",
                               "--out", str(out), *extra, env=env)

    return run


def test_table_says_what_it_shows(tmp_path, _eval):
    with SimulatedServer(lam1=3.0, seed=4) as srv:
        r = _eval(srv.base_url, tmp_path / "run")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "10 of 216 scenarios (--limit 10)" in out and "4 samples each" in out
    assert "95% for the task" in out and "95% for these 10" in out
    assert "n = 3 − n = 1 at t = 1" in out and "t = 1 − t = 0 at n = 3" in out
    assert "invalid" in out and "warning" not in out
    doc = json.loads((tmp_path / "run" / "summary.json").read_text())  # what --json prints
    follow = [x for x in doc["results"] if x["aggregator"] == "random-follow"]
    assert [(x["t"], x["n"]) for x in follow] == [(0.0, 1), (1.0, 1)]
    # one random-follow row per t in the table too (plus one per t among the contrasts)
    main = out.split("Paired differences")[0]
    assert main.count("random-follow") == 2
    assert {"task", "model", "results", "invalid_rate", "requests", "cost_usd"} <= set(doc)
    assert {"t", "n", "aggregator", "accuracy", "sem", "items", "ci", "ci_questions",
            "covers"} <= set(doc["results"][0])
    assert doc["population"]["total"] == 216 and doc["population"]["items"] == 10


def test_greedy_samples_are_said_to_be_identical(tmp_path, run_cli):
    data = tmp_path / "q.jsonl"
    rows = [{"id": f"q{i}", "question": f"What is {i} + {i}?",
             "choices": [str(2 * i), str(2 * i + 1), str(2 * i + 2)], "answer": str(2 * i)}
            for i in range(12)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    key = answer_key_from_questions(get_task("jsonl", data=str(data)).questions())
    with SimulatedServer(lam1=1.0, seed=4, answer_key=key) as srv:
        t = run_cli("eval", "jsonl", "--data", str(data),
                            "--model", "openai/sim-expert", "--api-base", srv.base_url, "--t",
                            "0", "1", "--n", "1", "3", "--samples", "5", "--out",
                            str(tmp_path / "run"), env={**os.environ, "COLUMNS": "200"})
    assert t.returncode == 0, t.stderr
    doc = json.loads((tmp_path / "run" / "summary.json").read_text())
    t0 = [x for x in doc["results"] if x["t"] == 0.0]
    assert all(x["identical"] and x["sem"] == 0 and x["ci"][0] == x["ci"][1] for x in t0)
    assert not any(x["identical"] for x in doc["results"] if x["t"] == 1.0)
    assert "† t = 0: all samples of each question identical" in t.stdout
    assert "all 12 questions · 5 samples each" in t.stdout


def test_all_invalid_replies_are_a_warning_not_a_number(tmp_path, _eval):
    with SimulatedServer(lam1=3.0, seed=4, invalid_rate=1.0) as srv:
        r = _eval(srv.base_url, tmp_path / "bad")
    assert r.returncode == 0, r.stderr
    assert "warning: over 20% of the replies are invalid (t = 0: 100%; t = 1: 100%)" in r.stdout
    assert "100.0%" in r.stdout and "(no valid reply)" in r.stdout
    assert "identical" not in r.stdout


def test_help_says_what_limit_counts(run_cli):
    r = run_cli("eval", "--help", env={**os.environ, "COLUMNS": "100"})
    text = " ".join(r.stdout.split())
    assert "L questions of the task; for boxball L scenarios of its 216" in text


def test_one_sample_per_question_at_t_1_is_not_called_exact(tmp_path, capsys, monkeypatch):
    """Issue 32 item 1: at K = n = 1 the one sample of each question is trivially "identical";
    its noise is there and cannot be separated from the question's difficulty. The rule for
    samples = n applies: said (‡), a non-zero interval, never "exact"."""
    from ensemble.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    with SimulatedServer(lam1=3.0, seed=4) as srv:
        rc = main(["eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                   srv.base_url, "--t", "1", "--n", "1", "--samples", "1", "--limit", "40",
                   "--bootstrap", "200", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "exact" not in out and "identical" not in out
    assert "‡ as many samples per question (1) as the group size" in out
    doc = json.loads((tmp_path / "run" / "summary.json").read_text())
    for r in doc["results"]:
        assert not r["identical"] and not r["questions_exact"]
        assert r["sem_questions"] > 0 and r["ci_questions"][1] > r["ci_questions"][0]
        assert r["ci"][1] > r["ci"][0]


def test_sampled_answers_that_agree_are_not_taken_as_noiseless():
    """Sampled answers (t > 0) identical within every item, and every item the same value:
    neither interval has zero width (Wilson for a mean in the metric's range); greedy ones
    (t = 0) are exact."""
    import numpy as np

    from ensemble.evals.analysis import vote_values
    from ensemble.evals.intervals import summarise

    codes = np.zeros((40, 3), dtype=int)  # every answer right
    iv = vote_values(codes, np.zeros(40, dtype=int), [1], n_options=3)["plurality", 1]
    s = summarise(iv, population=216, rng=0, bounds=(0.0, 1.0))
    assert not s.identical and not s.questions_exact
    assert s.ci[1] == 1.0 and 0.85 < s.ci[0] < 0.95 and s.ci_questions == s.ci
    greedy = summarise(iv, population=216, rng=0, bounds=(0.0, 1.0), sampled=False)
    assert greedy.identical and greedy.questions_exact and greedy.ci_questions == (1.0, 1.0)
    # a difference that is 0 on every item (a rule against itself) keeps the bootstrap's 0
    same = summarise(iv.minus(iv, same_answers=True), population=216, rng=0,
                     bounds=(-1.0, 1.0), level=False)
    assert same.ci == (0.0, 0.0) and not same.questions_exact
