"""Issue 41 item 29: small messages that misled. Each says what was read and the fix: the CLI
in-process (`ensemble.cli.main`), the voting endpoint over real HTTP. (The fourth, a proxy's
error in a 200 reply, is tests/sampling/test_translate.py::
test_an_error_in_a_200_reply_is_quoted_not_called_malformed.)"""

from __future__ import annotations

import httpx

from ensemble.serve import VotingServer, parse_config
from ensemble.testing import SimulatedServer


def test_sample_says_what_choices_read_when_no_prompt_is_left(run_cli):
    """`sample --choices L "prompt"` said "--choices took every word after it"."""
    line = run_cli("sample", "--model", "openai/x", "--choices", "L", "prompt").refusal()
    assert "--choices read 'L', 'prompt' as the allowed answers" in line
    assert "--choices L,R \"the prompt\"" in line and "took every word" not in line


def test_sample_refuses_a_single_choice(run_cli):
    """`sample --choices L "Which box?"` drew samples to count among one answer."""
    line = run_cli("sample", "--model", "openai/x", "--choices", "L", "Which box?").refusal()
    assert "two or more allowed answers" in line and "['L']" in line


def test_eval_open_with_answer_says_open_sets_the_kind(run_cli, tmp_path):
    """`eval mathqa --open --answer number` said "takes no --answer (open answers: mathqa
    --open, ...)": the user had given --open."""
    line = run_cli("eval", "mathqa", "--open", "--answer", "number", "--model",
                   "openai/x", "--t", "1", "--n", "1", "--limit", "2",
                   "--out", tmp_path / "run").refusal()
    assert "with --open its answers are of kind 'number' already" in line
    assert "drop --answer" in line and "mathqa --open," not in line


def test_a_completions_prompt_of_token_ids_is_named_so():
    """A completions `prompt: [1, 2, 3]` (token ids) said "prompt holds 3 items"."""
    with SimulatedServer(lam1=3.0) as up:
        cfg = parse_config({"port": 0, "models": {"m": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 3}}})
        with VotingServer(cfg) as srv:
            for prompt in ([1, 2, 3], [[1, 2, 3]], [7]):
                r = httpx.post(f"{srv.base_url}/completions", timeout=30,
                               json={"model": "m", "prompt": prompt})
                msg = r.json()["error"]["message"]
                assert r.status_code == 400 and "token ids" in msg, (prompt, msg)
                assert "items" not in msg
            r = httpx.post(f"{srv.base_url}/completions", timeout=30,
                           json={"model": "m", "prompt": ["one", "two"]})
            assert r.status_code == 400 and "holds 2 items" in r.json()["error"]["message"]
        assert up.stats.requests == 0
