"""The provider registry and the declared capabilities, reached through the front door: a
model string given to `Sampler` (and `Ensemble`), served by the registered factory."""

import asyncio

import pytest

from ensemble import Ensemble
from ensemble.errors import InputError
from ensemble.providers import (
    Capabilities,
    Provider,
    ProviderOptions,
    provider_for,
    register_provider,
    registered_providers,
)
from ensemble.providers.litellm import LiteLLMProvider
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.types import SampleRequest
from ensemble.testing import FakeExpertProvider, SimulatedServer

BOX = ("Left box: 60 red, 40 blue. Right box: 20 red, 80 blue. The prior of the left box is "
       "1/2. The ball drawn is red. Which box? Answer <answer>L</answer> or <answer>R</answer>.")


def test_a_registered_prefix_serves_its_model_strings_through_the_sampler():
    made = []

    def factory(model, options):
        made.append((model, options.limits.max_concurrency))
        return FakeExpertProvider(lam1=3.0, seed=2, model=model, supports_n=False)

    register_provider("planted", factory, replace=True)
    assert "planted" in registered_providers()

    async def go():
        async with Sampler("planted/expert-a", max_concurrency=3) as s:
            rows = await s.sample([SampleRequest.of(BOX, temperature=1.0, k=4)])
            return rows, s

    rows, s = asyncio.run(go())
    assert made == [("planted/expert-a", 3)]
    assert isinstance(s.provider, FakeExpertProvider) and s.provider.requests == 4
    assert [x.index for x in rows[0]] == [0, 1, 2, 3]
    # supports_n=False is declared, not discovered: one request per sample, noted
    assert any("one sample per request" in n for n in s.stats.notes)


def test_the_fake_is_registered_by_the_testing_package_and_answers_like_the_server():
    p = provider_for("fake/sim-expert", ProviderOptions())
    assert isinstance(p, FakeExpertProvider) and isinstance(p, Provider)
    with SimulatedServer(lam1=10.0, seed=0) as srv:
        served = Ensemble("openai/sim-expert", api_base=srv.base_url, temperature=1.0, n=5,
                          choices=["L", "R"]).decide(BOX)
    local = Ensemble("fake/sim-expert", temperature=1.0, n=5, choices=["L", "R"]).decide(BOX)
    assert [x.text for x in local.samples] == [x.text for x in served.samples]  # same draws


def test_unregistered_model_strings_go_to_litellm_and_capabilities_are_declared():
    p = provider_for("anthropic/claude-3-5-haiku-latest",
                     ProviderOptions(api_key="sk-test-0123456789"))
    assert isinstance(p, LiteLLMProvider)
    caps = p.capabilities
    assert isinstance(caps, Capabilities)
    assert caps.max_concurrency is None and caps.supports_n is None
    assert caps.batch_api is not None  # litellm's Batch API, made only in batch mode
    # `openai/...` is registered: the official SDK (issue 25), batches still through litellm
    from ensemble.providers.openai import OpenAIProvider

    o = provider_for("openai/gpt-4o-mini", ProviderOptions(api_key="sk-test-0123456789"))
    assert isinstance(o, OpenAIProvider) and o.capabilities.batch_api is not None
    fake = FakeExpertProvider(supports_n=False, price_per_token=(1e-6, 2e-6))
    assert fake.capabilities.supports_n is False and fake.capabilities.batch_api is None
    assert fake.price(1000, 500) == pytest.approx(1000 * 1e-6 + 500 * 2e-6)
    assert FakeExpertProvider().price(1000, 500) is None  # unknown, not zero


def test_a_taken_prefix_needs_replace_and_bad_prefixes_are_refused():
    register_provider("planted-b", lambda m, o: FakeExpertProvider(model=m))
    with pytest.raises(InputError, match="already registered"):
        register_provider("planted-b", lambda m, o: FakeExpertProvider(model=m))
    with pytest.raises(InputError, match="provider prefix"):
        register_provider("has/slash", lambda m, o: FakeExpertProvider(model=m))


def test_batch_mode_refuses_a_provider_without_a_batch_api(tmp_path):
    async def go():
        async with Sampler("sim-expert", provider=FakeExpertProvider(), mode="batch",
                           store=tmp_path / "s.sqlite") as s:
            await s.run([SampleRequest.of(BOX, temperature=1.0, k=2)])

    with pytest.raises(InputError, match="has none: run without --batch"):
        asyncio.run(go())
