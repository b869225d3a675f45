"""The openai provider's aiohttp sessions are closed on every path that ends them: an Ensemble
closed, collected without being closed, used from loops of `asyncio.run` that have ended, a
provider dropped while its loop runs on, `ensemble eval`, and the voting endpoint's shutdown.
Each runs against the simulated server over 127.0.0.1, and a closed Ensemble and ended loops
in this process as well (`server.transport()`: the same aiohttp session on a Unix socket of
the caller's loop, whose server must close with the loop too; the collected cases close it by
the same `PerLoop` finalisers), and must leave no "Unclosed client session", "Unclosed
connector" or "Task was destroyed but it is pending" behind."""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ensemble import Ensemble
from ensemble.serve import VotingServer, parse_config
from ensemble.testing import SimulatedServer

PROMPT = "Is 3 odd? Answer yes or no."


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=10.0, seed=0) as srv:
        yield srv


@pytest.fixture(params=["tcp", "in-process"])
def via(request):
    return request.param


def _ensemble(server, via="tcp") -> Ensemble:
    transport = server.transport() if via == "in-process" else None
    return Ensemble("openai/sim-expert", api_base=server.base_url, n=3, choices=["yes", "no"],
                    transport=transport)


@contextmanager
def no_leaks(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail if what runs inside leaves an unclosed aiohttp session or connector, or a pending
    task destroyed: aiohttp warns (ResourceWarning) and tells the loop's exception handler
    (logged by asyncio) when it collects one left open; asyncio logs a destroyed task. What
    earlier tests of the process left for the collector is collected first, outside: it is
    not this block's leak."""
    gc.collect()
    with warnings.catch_warnings(record=True) as seen, caplog.at_level(logging.ERROR, "asyncio"):
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    leaks = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    leaks += [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert not leaks, leaks


def test_a_closed_ensemble_closes_its_session(server, via, caplog):
    with no_leaks(caplog):
        ens = _ensemble(server, via)
        assert ens.decide(PROMPT).decision in ("yes", "no")
        ens.close()


def test_an_ensemble_collected_without_close_closes_its_session(server, caplog):
    with no_leaks(caplog):
        ens = _ensemble(server)
        ens.decide(PROMPT)
        del ens  # its finaliser ends the loop of its sync calls (and waits for it)


def test_sessions_of_ended_asyncio_run_loops_are_closed(server, via, caplog):
    with no_leaks(caplog):
        ens = _ensemble(server, via)
        asyncio.run(ens.adecide(PROMPT))  # one session in this loop, which then ends
        asyncio.run(ens.adecide("Is 5 odd? Answer yes or no."))  # another in another
        ens.close()  # from no loop: a third loop, in which neither session lives


async def test_a_provider_dropped_while_its_loop_runs_on_is_closed(server, caplog):
    with no_leaks(caplog):
        ens = _ensemble(server)
        await ens.adecide(PROMPT)
        del ens
        gc.collect()
        for _ in range(5):  # the loop closes it as it finalises the session's guard
            await asyncio.sleep(0)


def test_ensemble_eval_closes_its_sessions(server, caplog, run_cli, tmp_path):
    with no_leaks(caplog):
        r = run_cli("eval", "tasks/mammals.yaml", "--model", "openai/sim-expert", "--api-base",
                    server.base_url, "--t", "1", "--n", "1", "3", "--samples", "3", "--limit",
                    "2", "--out", tmp_path / "run")
        assert r.returncode == 0, r.stderr


def test_the_voting_endpoint_closes_its_sessions_at_shutdown(server, caplog):
    import openai

    cfg = parse_config({"port": 0, "models": {"vote": {
        "model": "openai/sim-expert", "api_base": server.base_url, "n": 3,
        "choices": ["yes", "no"]}}})
    with no_leaks(caplog):
        with VotingServer(cfg) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="none", max_retries=0)
            reply = client.chat.completions.create(
                model="vote", messages=[{"role": "user", "content": PROMPT}])
            client.close()
            assert reply.choices[0].message.content
