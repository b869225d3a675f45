"""The draw loop's one-decision step (`ensemble.drawing`): one prompt at fixed n without a
store, what `ensemble serve` decides per request, is drawn in one step (the sampler's `draw`,
no run's work queue, no reading of samples nobody reads); it keeps what a run does."""

from __future__ import annotations

import logging

import pytest

from ensemble import Ensemble
from ensemble.errors import AuthenticationError
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

PROMPT = get_task("boxball").questions()[0].prompt


async def test_one_decision_says_what_it_waits_for(monkeypatch, caplog):
    # a run says "waiting: ..." when no sample came for status_every s; one decision too
    monkeypatch.setenv("ENSEMBLE_STATUS_EVERY", "0.1")
    srv = SimulatedServer(lam1=3.0, latency=0.5)
    with caplog.at_level(logging.INFO, logger="ensemble.sampling"):
        async with Ensemble("openai/sim-expert", api_base=srv.base_url,
                            transport=srv.transport(), n=3, temperature=1.0,
                            choices=["L", "R"]) as ens:
            d = await ens.adecide(PROMPT)
    assert d.n_samples == 3 and srv.stats.requests == 1  # n = 3 in one request
    assert any("waiting" in r.getMessage() for r in caplog.records), caplog.text


async def test_one_decision_raises_what_stopped_it():
    # a systemic failure (a refused key) is the provider's error, as a run's is
    srv = SimulatedServer(lam1=3.0, require_api_key="sk-the-right-one")
    async with Ensemble("openai/sim-expert", api_base=srv.base_url, transport=srv.transport(),
                        api_key="sk-a-wrong-one", n=5, temperature=1.0,
                        choices=["L", "R"]) as ens:
        with pytest.raises(AuthenticationError):
            await ens.adecide(PROMPT)
    assert srv.stats.requests == 1
