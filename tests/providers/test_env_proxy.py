"""The openai provider's aiohttp path honours the environment's proxy settings (HTTP_PROXY and
NO_PROXY, as the SDK's httpx client does), read once per provider rather than on every request.
The simulated server stands in for the proxy: it answers the absolute-form requests a proxy
receives, so a reply for an upstream whose host does not resolve came through it."""

from __future__ import annotations

import pytest

from ensemble import Ensemble
from ensemble.testing import SimulatedServer

PROMPT = "Is 3 odd? Answer yes or no."
PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
              "all_proxy", "NO_PROXY", "no_proxy")


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=10.0, seed=0) as srv:
        yield srv


@pytest.fixture
def clean_env(monkeypatch):
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_requests_go_through_the_environments_proxy(server, clean_env):
    clean_env.setenv("HTTP_PROXY", server.base_url.rsplit("/v1", 1)[0])
    with Ensemble("openai/sim-expert", api_base="http://upstream.invalid/v1", n=3,
                  choices=["yes", "no"]) as ens:
        d = ens.decide(PROMPT)
    assert d.n_samples == 3 and d.decision in ("yes", "no")


@pytest.mark.parametrize("entry", ["127.0.0.1", "127.0.0.0/8", "*", "localhost,127.0.0.1:{port}"])
def test_no_proxy_sends_its_hosts_direct(server, clean_env, entry):
    clean_env.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the discard port: nothing answers
    clean_env.setenv("NO_PROXY", entry.format(port=server.base_url.split(":")[-1].split("/")[0]))
    with Ensemble("openai/sim-expert", api_base=server.base_url, n=3,
                  choices=["yes", "no"]) as ens:
        d = ens.decide(PROMPT)
    assert d.n_samples == 3 and d.decision in ("yes", "no")


@pytest.mark.parametrize("entry", ["127.0.0.2", "10.0.0.0/8", "127.0.0.1:1", "other.invalid"])
def test_no_proxy_entries_that_do_not_match_leave_the_proxy(server, clean_env, entry):
    """The proxy (the simulated server) is used for an upstream no entry matches: sent direct,
    the request would reach the discard port, where nothing answers."""
    clean_env.setenv("HTTP_PROXY", server.base_url.rsplit("/v1", 1)[0])
    clean_env.setenv("NO_PROXY", entry)
    with Ensemble("openai/sim-expert", api_base="http://127.0.0.1:9/v1", n=3, timeout=5,
                  choices=["yes", "no"]) as ens:
        d = ens.decide(PROMPT)
    assert d.n_samples == 3
