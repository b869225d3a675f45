"""The token and cost totals of an eval run agree with the samples they describe: `tokens`
are what this run's requests paid for (the store's samples drawn now), `tokens_samples` the
sum over samples.jsonl (a sample two questions with one prompt share counted for each), and
two questions with one prompt never pay twice for the samples the store keeps once."""

import json
import sqlite3

from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer, answer_key_from_questions

TASK = """\
data: q.jsonl
prompt: "Is the {animal} a mammal? Answer yes or no in <answer></answer>."
answer: choice
choices: ["yes", "no"]
target: mammal
id: id
max_tokens: 64
"""
# q1 and q2 ask the same prompt (so do q4 and q5), next to each other so that the run's
# workers pick both up at once
ROWS = [("q1", "dolphin", "yes"), ("q2", "dolphin", "yes"), ("q3", "penguin", "no"),
        ("q4", "bat", "yes"), ("q5", "bat", "yes"), ("q6", "trout", "no")]
K = 4


def _store(run) -> tuple[int, int, int]:
    with sqlite3.connect(run / "samples.sqlite") as db:
        n, pt, ct = db.execute("SELECT count(*), sum(prompt_tokens), sum(completion_tokens) "
                               "FROM samples").fetchone()
    return n, pt, ct


def _lines(run) -> list[dict]:
    return [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]


def test_a_runs_tokens_are_its_requests_and_its_samples_both_named(tmp_path, run_cli):
    task = tmp_path / "task.yaml"
    task.write_text(TASK, encoding="utf-8")
    (tmp_path / "q.jsonl").write_text("".join(
        json.dumps({"id": i, "animal": a, "mammal": m}) + "\n" for i, a, m in ROWS),
        encoding="utf-8")
    qs = get_task("taskfile", data=task).questions()
    out = tmp_path / "run"
    args = ("--t", 0.7, "--n", 1, 3, "--samples", K, "--bootstrap", 100,
            "--price-per-1k-tokens", "0.001,0.002", "--out", out, "--json")
    with SimulatedServer(lam1=2.0, answer_key=answer_key_from_questions(qs), seed=3) as srv:
        r = run_cli("eval", task, "--model", "openai/sim", "--api-base", srv.base_url, *args)
        assert r.returncode == 0, r.stderr
        first = json.loads(r.stdout)
        served = srv.stats.requests
        assert max(srv.stats.served.values()) == 1  # no sample drawn twice
        # resumed from the store: nothing paid now, the same samples behind the results
        again = run_cli("eval", task, "--model", "openai/sim", "--api-base", srv.base_url,
                        *args[:-1])
        assert again.returncode == 0, again.stderr
        assert srv.stats.requests == served
    again_summary = json.loads((out / "summary.json").read_text())

    unique = len({a for _, a, _ in ROWS})
    stored, pt, ct = _store(out)
    assert stored == unique * K  # one set of samples per prompt in the store...
    assert first["requests"] == served == unique  # ...paid for once (n = K in one request)
    assert first["tokens"] == {"prompt": pt, "completion": ct}
    lines = _lines(out)
    assert len(lines) == len(ROWS) * K
    assert first["samples"]["shared"] == (len(ROWS) - unique) * K
    used_ct = sum(s["tokens"] for s in lines)
    assert first["tokens_samples"]["completion"] == used_ct > ct
    assert abs(first["cost"]["samples_usd"] - sum(s["cost_usd"] for s in lines)) < 1e-12
    assert abs(first["cost"]["now_usd"] - (pt * 0.001 + ct * 0.002) / 1000) < 1e-12
    assert first["cost"]["samples_usd"] > first["cost"]["now_usd"]

    assert again_summary["requests"] == 0
    assert again_summary["tokens"] == {"prompt": 0, "completion": 0}
    assert again_summary["tokens_samples"] == first["tokens_samples"]
    assert again_summary["samples"]["from_store"] == len(ROWS) * K
    assert f"tokens 0 now (the samples used: {sum(first['tokens_samples'].values())})" \
        in again.stdout.replace("\n", " ")


def test_a_replay_keeps_each_recorded_samples_tokens(tmp_path, run_cli):
    """A replay answers n samples in one request with their recorded token counts, each its
    own (not the reply's total shared out evenly)."""
    task = tmp_path / "task.yaml"
    task.write_text(TASK, encoding="utf-8")
    (tmp_path / "q.jsonl").write_text("".join(
        json.dumps({"id": i, "animal": a, "mammal": m}) + "\n" for i, a, m in ROWS[2:4]),
        encoding="utf-8")
    rec = tmp_path / "rec.jsonl"
    tokens = {"q3": [3, 40, 7, 1], "q4": [12, 2, 30, 5]}
    rec.write_text("".join(json.dumps({"id": q, "t": 0.7, "samples": [
        {"text": f"<answer>{'no' if q == 'q3' else 'yes'}</answer>", "tokens": t}
        for t in ts]}) + "\n" for q, ts in tokens.items()), encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text("".join(
        json.dumps({"id": q.id, "prompt": q.prompt}) + "\n"
        for q in get_task("taskfile", data=task).questions()), encoding="utf-8")
    out = tmp_path / "replayed"
    r = run_cli("eval", task, "--model", f"replay/{rec}", "--t", 0.7, "--n", 1, "--samples", K,
                "--bootstrap", 100, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    got = {q: [s["tokens"] for s in sorted((s for s in _lines(out) if s["id"] == q),
                                           key=lambda s: s["sample"])] for q in tokens}
    assert got == tokens
    summary = json.loads(r.stdout)
    assert summary["tokens_samples"]["completion"] == 100
    assert summary["tokens"]["completion"] == 0  # a replay pays for none (issue 41 item 16)
