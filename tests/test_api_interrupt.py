"""The Python API under Ctrl-C (issue 41 item 5): a cancelled `adecide_many` (what Ctrl-C in
`decide` does to it) sends nothing more, and the Ensemble's close stores the replies of the
requests it had already sent, so none is paid for twice."""

from __future__ import annotations

import asyncio
import time

import pytest

from ensemble import Ensemble
from ensemble.sampling.store import SampleStore
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

PROMPTS = [q.prompt for q in get_task("boxball").questions()[:12]]


async def _until(ready, what: str) -> None:
    deadline = time.monotonic() + 120  # generous: a loaded machine
    while not ready():
        assert time.monotonic() < deadline, f"not {what} within 120 s"
        await asyncio.sleep(0.01)


async def test_a_cancelled_decide_stores_its_replies_in_flight_when_the_ensemble_closes(
        tmp_path):
    store = tmp_path / "samples.sqlite"
    with SimulatedServer(lam1=3.0, latency=1.0) as srv:
        ens = Ensemble(model="openai/sim-expert", api_base=srv.base_url, n=3, temperature=1.0,
                       choices=["L", "R"], store=store, max_concurrency=4)
        task = asyncio.ensure_future(ens.adecide_many(PROMPTS))
        # every one of the 4 slots filled at the server: no request is on the wire, so the
        # requests counted at the cancel are all the Ensemble sent before it (with only some
        # in flight, one sent just before the cancel could reach the server after `asked` is
        # read: this failed once under load 15)
        await _until(lambda: srv.stats.completions >= 3 and srv.stats.in_flight == 4,
                     "3 replies with every slot in flight")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        asked = srv.stats.requests
        await ens.aclose()  # waits for the replies of the requests sent
        # the server answers (and counts as served: paid) every request it received, the
        # client gone or not
        await _until(lambda: srv.stats.in_flight == 0, "every request answered")
        assert srv.stats.requests == asked  # nothing sent after the cancel
        served = sum(srv.stats.served.values())
    kept = SampleStore(store)
    try:
        stored = kept.count()
    finally:
        kept.close()
    assert 0 < served < 3 * len(PROMPTS)  # interrupted: not every sample drawn
    assert stored == served  # every reply paid for is stored: a rerun asks none of them again
