"""`--price-per-1k-tokens` prices Batch API lines as it prices online replies (one rule:
`CostPolicy.cost`, no batch discount applied to a given price), on both providers of
`openai/...`: the same eval online and in batch mode against the simulated server (real HTTP on
127.0.0.1, its Files + Batch API) costs the same, line by line in the store too."""

from __future__ import annotations

import json
import sqlite3

import pytest

from ensemble.testing import BatchPlan, SimulatedServer

pytestmark = pytest.mark.usefixtures("each_provider")

PRICE = (0.5, 1.5)  # USD per 1,000 prompt / completion tokens


def _costs(store) -> list[tuple[str, int, int, float | None]]:
    with sqlite3.connect(store) as c:
        return sorted(c.execute("SELECT source, prompt_tokens, completion_tokens, cost_usd "
                                "FROM samples"))


def test_a_given_price_prices_batch_lines_as_it_prices_online_replies(run_cli, tmp_path):
    docs = {}
    with SimulatedServer(lam1=3.0, seed=5, batch=BatchPlan(delay=0.05)) as srv:
        for mode, extra in (("online", ()), ("batch", ("--batch", "--batch-poll", "0.05"))):
            r = run_cli("eval", "tasks/mammals.yaml", "--model", "openai/sim-expert",
                        "--api-base", srv.base_url, "--t", "1", "--n", "1", "3", "--samples",
                        "3", "--limit", "3", "--price-per-1k-tokens", "{},{}".format(*PRICE),
                        "--out", tmp_path / mode, "--json", *extra)
            assert r.returncode == 0, r.stderr
            docs[mode] = json.loads(r.stdout)
    online, batch = docs["online"], docs["batch"]
    assert batch["samples"]["from_batches"] == online["samples"]["total"] == 9
    assert batch["tokens"] == online["tokens"]
    tokens = online["tokens"]
    expected = (tokens["prompt"] * PRICE[0] + tokens["completion"] * PRICE[1]) / 1000
    assert online["cost_usd"] == pytest.approx(expected, rel=1e-9)
    assert batch["cost_usd"] == pytest.approx(expected, rel=1e-9)  # was None: unpriced
    rows = _costs(tmp_path / "batch" / "samples.sqlite")
    assert {s for s, *_ in rows} == {"batch"}
    assert [r[1:] for r in rows] == [r[1:] for r in _costs(tmp_path / "online" / "samples.sqlite")]
