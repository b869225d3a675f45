"""inspect_ai votes natively: `--model ensemble/<model>` is a model API registered through
inspect's entry-point group (`ensemble.integrations.inspect_registry`), run by inspect itself
(its Python `eval()` and its own `inspect eval` CLI) against the simulated expert.

Each sample's output is checked against what the upstream served for that prompt: the votes in
`output.metadata["ensemble"]` are the upstream's samples parsed, the decision their plurality,
and the completion inspect scored is one of those samples that voted for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from importlib.util import find_spec
from pathlib import Path

import pytest

# inspect_ai is imported by the tests that use it, not at collection: every xdist worker
# collects this module, and the import costs ~1.5 s
if find_spec("inspect_ai") is None:
    pytest.skip("inspect_ai is not installed (pip install -e '.[dev]')", allow_module_level=True)

from ensemble.sampling.parsing import choice_parser  # noqa: E402
from ensemble.tasks import get_task  # noqa: E402
from ensemble.testing import SimulatedServer, ToolPlan, answer_key_from_questions  # noqa: E402

TASK = Path(__file__).with_name("inspect_mathqa.py")
CHOICES = list("ABCDE")
PARSE = choice_parser(CHOICES)
LIMIT = 4


@pytest.fixture(scope="module")
def upstream(mathqa_path):
    questions = get_task("mathqa", data=mathqa_path, limit=LIMIT, seed=3).questions()
    mp = pytest.MonkeyPatch()
    mp.setenv("ENSEMBLE_TEST_MATHQA", str(mathqa_path))
    mp.setenv("ENSEMBLE_TEST_LIMIT", str(LIMIT))
    mp.setenv("OPENAI_API_KEY", "sk-sim-not-a-real-key-000000")
    with SimulatedServer(answer_key=answer_key_from_questions(questions), seed=11, lam1=1.0,
                         keep_replies=True, tools=ToolPlan(accuracy=0.7)) as up:
        yield up
    mp.undo()


def _check_samples(log, up, n: int, t: float) -> None:
    assert log.status == "success", log.error
    assert log.samples and len(log.samples) == LIMIT
    for s in log.samples:
        prompt = s.input if isinstance(s.input, str) else s.input[-1].text
        reps = [r for r in up.stats.replies if r.prompt == prompt and r.temperature == t]
        texts = [x for r in reps for x in r.texts]
        ens = s.output.metadata["ensemble"]
        votes = Counter(a for a in map(PARSE, texts) if a is not None)
        assert ens["samples"] == len(texts) == n
        assert ens["votes"] == dict(votes)
        assert votes[ens["decision"]] == max(votes.values())  # the plurality
        assert s.output.completion in texts and PARSE(s.output.completion) == ens["decision"]
        assert s.output.usage.output_tokens == sum(
            r.completion_tokens for r in reps)


def test_inspect_eval_votes_through_the_registered_model_api(upstream, tmp_path, monkeypatch):
    from inspect_ai import eval as inspect_eval

    monkeypatch.chdir(TASK.parent)  # inspect resolves a task file relative to the cwd
    logs = inspect_eval(TASK.name, model="ensemble/openai/sim-expert",
                        model_base_url=upstream.base_url,
                        model_args={"n": 5, "choices": "A,B,C,D,E"}, temperature=1.0,
                        log_dir=str(tmp_path), display="none")
    _check_samples(logs[0], upstream, 5, 1.0)


def test_inspect_cli_runs_the_ensemble_model(upstream, tmp_path):
    # inspect's own CLI finds the model API through the entry point, as a user's run would
    from inspect_ai.log import read_eval_log

    env = {**os.environ, "INSPECT_DISPLAY": "none", "INSPECT_LOG_FORMAT": "json"}
    r = subprocess.run([sys.executable, "-m", "inspect_ai", "eval", TASK.name,
                        "--model", "ensemble/openai/sim-expert",
                        "--model-base-url", upstream.base_url, "-M", "n=3",
                        "-M", "choices=A,B,C,D,E", "--temperature", "0.7",
                        "--log-dir", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300, cwd=TASK.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    logs = sorted(tmp_path.glob("*.json"))
    assert len(logs) == 1, (r.stdout[-1000:], r.stderr[-1000:])
    _check_samples(read_eval_log(str(logs[0])), upstream, 3, 0.7)


def test_use_tools_votes_the_tool_call_natively(upstream, tmp_path, monkeypatch):
    # inspect runs the voted call and sends its result back as a tool message: the whole
    # agent loop through the model API, the call checked against what the upstream served
    from inspect_ai import eval as inspect_eval

    monkeypatch.chdir(TASK.parent)
    (log,) = inspect_eval("inspect_tools.py", model="ensemble/openai/sim-expert",
                          model_base_url=upstream.base_url, model_args={"n": 5},
                          temperature=0.9, log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    (s,) = log.samples
    calls = [c for m in s.messages if m.role == "assistant" and m.tool_calls
             for c in m.tool_calls]
    assert len(calls) == 1 and [m.role for m in s.messages].count("tool") == 1
    reps = [r for r in upstream.stats.replies if r.prompt == s.input and r.temperature == 0.9]
    served = [c[0]["function"] for r in reps for c in r.tool_calls if c]
    names = Counter(f["name"] for f in served)
    assert sum(len(r.texts) for r in reps) == 5
    assert names[calls[0].function] == max(names.values())
    chose = [json.loads(f["arguments"]) for f in served if f["name"] == calls[0].function]
    for key, value in calls[0].arguments.items():
        counts = Counter(a.get(key) for a in chose)
        assert counts[value] == max(counts.values()), (key, counts, value)
    votes = s.output.metadata["ensemble"]
    assert "ANSWER:" in s.output.completion and votes["samples"] == 5
