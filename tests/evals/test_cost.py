"""Cost before it is spent: --dry-run sends nothing; --max-cost stops before the cap."""

from ensemble.jsonio import loads
from ensemble.testing import SimulatedServer

PRICE = ("--price-per-1k-tokens", "0.5,1.5")


def boxball(url, out, *extra):
    return ("eval", "boxball", "--model", "openai/sim-expert", "--api-base", url, "--t", "1",
            "--n", "1", "--samples", "3", "--limit", "10", "--out", str(out), *PRICE, *extra)


def test_dry_run_counts_without_a_request(tmp_path, cli):
    with SimulatedServer(lam1=3.0) as srv:
        r = cli(*boxball(srv.base_url, tmp_path / "run", "--dry-run", "--json"))
        assert r.returncode == 0, r.stderr
        doc = loads(r.stdout)
        assert srv.stats.requests == 0 and not (tmp_path / "run").exists()
        assert doc["dry_run"] and doc["samples_missing"] == 60 and doc["requests"] == 20
        assert doc["cost_usd_max"] > 0 and "price-per-1k" in doc["price"]
        # after a real run, the dry run counts nothing left to do
        assert cli(*boxball(srv.base_url, tmp_path / "run", "--json")).returncode == 0
        again = loads(cli(*boxball(srv.base_url, tmp_path / "run", "--dry-run",
                                   "--json")).stdout)
        assert again["samples_missing"] == 0 and again["requests"] == 0
        assert again["cost_usd_max"] == 0.0


def test_dry_run_says_when_the_price_is_unknown(tmp_path, cli):
    r = cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
            "http://127.0.0.1:9/v1", "--t", "1", "--n", "1", "--limit", "2", "--out",
            str(tmp_path / "x"), "--dry-run")
    assert r.returncode == 0 and "unknown" in r.stdout and "--price-per-1k-tokens" in r.stdout


def test_max_cost_stops_before_passing_the_cap_by_more_than_one_request(tmp_path, cli):
    with SimulatedServer(lam1=3.0) as srv:
        full = loads(cli(*boxball(srv.base_url, tmp_path / "full", "--json")).stdout)
        per_request = full["cost_usd"] / full["requests"]
        cap = 5 * per_request
        r = cli(*boxball(srv.base_url, tmp_path / "capped", "--max-cost", f"{cap:.6f}"))
        assert r.returncode == 1 and "cost cap" in r.stderr and "Traceback" not in r.stderr
        capped_requests = srv.stats.requests - full["requests"]
        # priced at the server's usage: what was spent is requests x their cost
        assert capped_requests * per_request <= cap + 1.5 * per_request
        assert capped_requests >= 3
        # a rerun with a higher cap continues from the store
        done = loads(cli(*boxball(srv.base_url, tmp_path / "capped", "--max-cost", "100",
                                  "--json")).stdout)
        assert done["samples"]["from_store"] >= 3 * 3
        assert done["cost"]["stored_samples_usd"] > 0


def test_a_request_that_alone_passes_what_is_left_is_not_sent(tmp_path, capsys):
    """Issue 32 item 7: at $1 per 1k tokens one box-ball request's prompt alone costs more
    than --max-cost 0.05; it is estimated before sending (as --dry-run counts) and refused."""
    from ensemble.cli import main

    with SimulatedServer(lam1=3.0) as srv:
        rc = main(["eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                   srv.base_url, "--t", "1", "--n", "1", "--samples", "3", "--limit", "10",
                   "--out", str(tmp_path / "run"), "--price-per-1k-tokens", "1,1",
                   "--max-cost", "0.05"])
        sent = srv.stats.requests
    err = capsys.readouterr().err
    assert rc == 1 and sent == 0, err
    assert "the next request alone would cost about $" in err and "prompt tokens" in err
    assert "left of the --max-cost $0.05" in err and "Traceback" not in err
