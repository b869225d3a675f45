"""Each provider declares whether it returns token logprobs (`Capabilities.logprobs`, and the
most alternatives per token, `top_logprobs`), and a draw that reads them from a provider that
cannot is refused before its first request, in one line: the Python API, the evals' draw and
`ensemble serve` at start (issue 37's "a one-line refusal where a provider cannot")."""

from __future__ import annotations

import asyncio
import json

import pytest

from ensemble import Ensemble
from ensemble.errors import InputError
from ensemble.providers.litellm import LiteLLMProvider
from ensemble.providers.openai import OpenAIProvider
from ensemble.providers.options import ProviderOptions
from ensemble.providers.replay import ReplayProvider
from ensemble.testing import FakeExpertProvider, SimulatedServer


def _started(provider):
    asyncio.run(provider.start())
    return provider.capabilities


def test_each_provider_declares_its_logprobs():
    opts = ProviderOptions(api_base="http://127.0.0.1:9/v1", api_key="sk-x")
    openai = OpenAIProvider("openai/x", opts).capabilities
    assert (openai.logprobs, openai.top_logprobs) == (None, 20)  # a server may not
    gpt = _started(LiteLLMProvider("openai/gpt-4o-mini", ProviderOptions(api_key="sk-x")))
    assert (gpt.logprobs, gpt.top_logprobs) == (True, 20)
    claude = _started(LiteLLMProvider("anthropic/claude-3-5-haiku-latest",
                                      ProviderOptions(api_key="sk-x")))
    assert claude.logprobs is False and "litellm" in claude.refuses()
    assert FakeExpertProvider(lam1=3.0).capabilities.logprobs is True


def _recording(tmp_path, lp):
    rec = tmp_path / "rec.jsonl"
    sample = {"text": "yes", "tokens": 1, "lp": lp}
    rec.write_text(json.dumps({"prompt": "Is 3 odd? Answer yes or no.", "t": 1.0,
                               "samples": [sample] * 4}) + "\n")
    return rec


def test_a_recording_declares_what_it_holds(tmp_path):
    lp = {"s": "yes", "at": 0, "lp": [-0.1], "top": [["yes", -0.1], ["no", -2.4]]}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert ReplayProvider(f"replay/{_recording(tmp_path / 'a', lp)}").capabilities.logprobs
    bare = ReplayProvider(f"replay/{_recording(tmp_path / 'b', None)}").capabilities
    assert bare.logprobs is False and "holds none" in bare.refuses()


def test_a_rule_that_reads_logprobs_is_refused_before_the_first_request(monkeypatch):
    """litellm says ollama's models take no logprobs: the soft rule is refused in one line,
    and the server never sees a request (it was refused when the replies came back)."""
    monkeypatch.setenv("ENSEMBLE_PROVIDER", "litellm")
    with SimulatedServer(lam1=3.0) as srv:
        with Ensemble("ollama/llama3", api_base=srv.base_url, n=3, aggregator="soft",
                      choices=["yes", "no"]) as ens:
            with pytest.raises(InputError) as caught:
                ens.decide("Is 3 odd? Answer yes or no.")
        assert srv.stats.requests == 0
    text = str(caught.value)
    assert "\n" not in text and "cannot return token logprobs" in text
    assert "litellm's supported parameters for ollama" in text and "plurality" in text


def test_serve_refuses_such_a_served_model_at_start(tmp_path):
    from ensemble.serve.config import parse_config
    from ensemble.serve.ensembles import ServedEnsembles

    rec = _recording(tmp_path, None)
    cfg = parse_config({"models": {"vote": {"model": f"replay/{rec}", "n": 3,
                                            "aggregator": "soft", "choices": ["yes", "no"]}}})
    with pytest.raises(InputError, match=r"served model 'vote': aggregator soft .* reads token "
                                         r"logprobs, and replay/.* cannot return token logprobs"):
        ServedEnsembles(cfg)
