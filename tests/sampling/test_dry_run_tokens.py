"""A dry run's and --max-cost's prompt tokens for `openai/...` models: counted by tiktoken,
without importing litellm (~4-5 s of CPU), with the counts litellm's counter gave."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ensemble.providers.tokens import tiktoken_count
from ensemble.testing import SimulatedServer

# the child reports, at exit, whether litellm was imported
PROBE = textwrap.dedent("""
    import atexit, sys
    atexit.register(lambda: print("LITELLM", "litellm" in sys.modules, file=sys.stderr))
    from ensemble.cli import main
    raise SystemExit(main(sys.argv[1:]))
""")


def run(*args):
    # the parent may have imported litellm, which sets TIKTOKEN_CACHE_DIR: the child finds
    # tiktoken's files without it, as a user's shell would
    env = {k: v for k, v in os.environ.items()
           if k not in ("ENSEMBLE_PROVIDER", "TIKTOKEN_CACHE_DIR")}
    res = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True,
                         text=True, timeout=120, env=env)
    imported = res.stderr.rsplit("LITELLM ", 1)[-1].strip()
    return res, imported


def test_dry_run_of_an_openai_model_counts_by_tiktoken_without_litellm(tmp_path):
    res, imported = run("eval", "boxball", "--model", "openai/gpt-4o-mini", "--api-base",
                        "http://127.0.0.1:9/v1", "--t", "1", "--n", "1", "--samples", "3",
                        "--limit", "2", "--max-tokens", "20", "--out", tmp_path / "run",
                        "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert imported == "False"
    assert doc["prompt_tokens_by"] == "tiktoken" and doc["requests"] == 4
    assert doc["prompt_tokens"] > 4 * 200 and doc["cost_usd_max"] > 0  # boxball's long prompt


def test_max_cost_checks_the_first_request_without_litellm(tmp_path):
    with SimulatedServer(lam1=3.0) as srv:
        res, imported = run("sample", "--model", "openai/sim-expert", "--api-base",
                            srv.base_url, "--choices", "L", "R", "-k", "4", "--max-cost",
                            "0.000001", "--price-per-1k-tokens", "1,1", "--json",
                            "Is 17 prime? Answer L for yes, R for no.")
        sent = srv.stats.requests
    # the cap is below one request's prompt alone: stopped before anything was sent
    assert res.returncode == 1 and "cost cap" in res.stderr and "Traceback" not in res.stderr
    assert sent == 0
    assert imported == "False"


@pytest.mark.parametrize(("model", "tokens"), [
    # litellm 1.110's token_counter gave these (messages under its 1024-character chunks)
    ("openai/gpt-4o-mini", (8, 106, 34)), ("openai/gpt-4", (8, 107, 40)),
    ("openai/gpt-5", (8, 106, 34)), ("openai/o5", (8, 106, 34)),  # o5: a name tiktoken lacks
    ("openai/sim-expert", (8, 107, 40)),  # another server's model: cl100k_base, as litellm
])
def test_counts_are_litellms_for_openai_models(model, tokens):
    grader = "You are a careful grader. Answer with <answer>X</answer>."
    question = "Is 17 prime? Think step by step, then answer yes or no. " * 5
    prompts = [
        [{"role": "user", "content": "hi"}],
        [{"role": "system", "content": grader}, {"role": "user", "content": question}],
        [{"role": "user", "content": "Résumé: naïve café — 数学の問題を解いてください。 "
                                     "<|endoftext|> emoji 🎲🎲"}],
    ]
    assert tuple(tiktoken_count(model, p) for p in prompts) == tokens
