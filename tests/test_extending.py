"""A rule and a stopping rule registered here, outside the package, work everywhere a built-in
does: the Python API, `ensemble eval` (flags and spec files), `ensemble compare`, `ensemble
serve` (its flags, config and a request's options) and the CLI's choices; unknown names are
one line listing the known ones; plug-ins come through the entry-point groups too; `ensemble
batches` reaches the Batch API a registered provider declares."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections import Counter

import numpy as np
import openai
import pytest

from ensemble import Ensemble, InputError, RuleBase, register_rule, register_stop_rule
from ensemble.cli import build_parser, main
from ensemble.registry import Registry
from ensemble.stopping import StoppingRule, StopSpec, lookahead
from ensemble.testing import FakeExpertProvider, SimulatedServer

RULE, STOP = "supermajority", "lead"


def super_credit(counts, correct, lams):
    """Credit of the 2/3 rule over options: the right option with at least 2/3 of the votes
    decides (1), an answer short of 2/3 is a tie among every option voted for (1/k each)."""
    pooled = np.asarray(counts, dtype=float).sum(axis=-2)
    total = pooled.sum(axis=-1)
    right = np.take_along_axis(pooled, np.asarray(correct)[..., None], axis=-1)[..., 0]
    won = 3 * pooled.max(axis=-1) >= 2 * total
    k = (pooled > 0).sum(axis=-1)
    tie = np.where(right > 0, 1.0 / np.maximum(k, 1), 0.0)
    return np.where(total == 0, 0.0, np.where(won, (3 * right >= 2 * total) * 1.0, tie))


def super_groups(groups):
    """f[x_1, ..., x_G]: the first option with 2/3 of all votes, the second with 2/3, else ½."""
    x = sum(np.indices([g.n + 1 for g in groups]))
    n = sum(g.n for g in groups)
    return np.where(3 * x >= 2 * n, 1.0, np.where(3 * (n - x) >= 2 * n, 0.0, 0.5))


@register_rule(summary="an answer with at least 2/3 of the valid votes, else a tie",
               credit=super_credit, group_f=super_groups)
class Supermajority(RuleBase):
    name = RULE

    def aggregate(self, answers, *, choices, weights, groups):
        valid, n, n_invalid = self.prepare(answers)
        counts = Counter(valid)
        top = [a for a, c in counts.items() if 3 * c >= 2 * len(valid)]
        return self.finish(counts, top or sorted(counts), n, len(valid), n_invalid)


@register_stop_rule
class Lead(StoppingRule):
    name = STOP
    about = "stop once the leader is `by` votes ahead of the runner-up"
    params = ("by",)

    def __init__(self, *, max_n, by=2):
        top = np.arange(max_n + 1)[None, :, None]
        second = np.arange(max_n + 1)[None, None, :]
        stop = np.broadcast_to(top - second >= by, (max_n + 1,) * 3).copy()
        stop[max_n] = True
        self.by = by
        super().__init__(max_n, lookahead(stop))


def test_the_registries_list_them_and_the_parsers_offer_them():
    from ensemble import aggregator_info, aggregator_names, stop_rule_names

    assert RULE in aggregator_names() and STOP in stop_rule_names()
    info = aggregator_info(RULE)
    assert info.scorable_on(True) and info.scorable_on(False) and not info.binary
    parser = build_parser()
    args = parser.parse_args(["serve", "--model", "m", "--aggregator", RULE, "--stop", STOP])
    assert (args.aggregator, args.stop) == (RULE, STOP)
    args = parser.parse_args(["eval", "boxball", "--aggregator", RULE, "--adaptive", STOP])
    assert list(args.aggregator) == [RULE] and list(args.adaptive) == [STOP]
    args = parser.parse_args(["theory", "regret", "--aggregator", RULE, "--n", "3",
                              "--lam", "2"])
    assert args.aggregator == RULE


def test_unknown_names_are_one_line_listing_the_known_ones():
    with pytest.raises(InputError, match=r"unknown aggregator 'nope'; choose from .*"
                                         rf"{RULE}") as e:
        Ensemble("openai/m", aggregator="nope")
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match=rf"unknown stopping rule 'nope'; choose from .*{STOP}"):
        StopSpec("nope", max_n=5)
    with pytest.raises(InputError, match=r"the lead rule has no option 'k' \(it takes by\)"):
        StopSpec(STOP, max_n=5, options={"k": 2})


def test_the_python_api_votes_and_stops_with_them():
    from ensemble.tasks import get_task

    fake = FakeExpertProvider(lam1=1.0, seed=3)
    prompt = get_task("boxball").questions()[0].prompt
    with Ensemble("fake", provider=fake, n=9, aggregator=RULE, stop=STOP,
                  choices=["L", "R"], seed=1) as ens:
        d = ens.decide(prompt)
    counts = [d.votes.get("L", 0), d.votes.get("R", 0)]
    assert d.aggregator == RULE and d.stop == STOP
    # the lead rule stopped at the first lead of 2, or at the budget of 9
    assert d.n_samples == 9 or abs(counts[0] - counts[1]) == 2
    top = max(counts)
    if 3 * top >= 2 * sum(counts):
        assert d.decision == ("L" if counts[0] == top else "R") and not d.tie
    else:
        assert d.tie
    # a StopSpec with the plug-in's own option
    with Ensemble("fake", provider=fake, n=9, aggregator=RULE,
                  stop=StopSpec(STOP, max_n=9, options={"by": 9}), choices=["L", "R"]) as ens:
        assert ens.decide(prompt).n_samples == 9  # a lead of 9 needs all 9


def _eval(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def test_ensemble_eval_scores_them_beside_the_main_vote(tmp_path):
    with SimulatedServer(lam1=2.0, seed=4) as srv:
        rc, text = _eval(["eval", "boxball", "--model", "openai/sim", "--api-base",
                          srv.base_url, "--t", "1", "--n", "1", "5", "--samples", "6",
                          "--limit", "6", "--bootstrap", "200", "--aggregator", RULE,
                          "--adaptive", STOP, "--out", str(tmp_path / "run")])
    assert rc == 0, text
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    rows = {(r["n"], r["aggregator"]): r for r in s["results"] if r["t"] == 1.0}
    assert s["aggregators"] == ["majority", RULE]
    # one vote has 2/3 of itself: at n = 1 the rule is majority, on the same samples
    assert rows[1, RULE]["utility"] == pytest.approx(rows[1, "majority"]["utility"], abs=1e-12)
    # at n = 5 a 3-2 split decides for majority and is a coin for 2/3: another rule's numbers
    assert rows[5, RULE]["utility"] != pytest.approx(rows[5, "majority"]["utility"], abs=1e-9)
    assert [r["stop"] for r in s["adaptive"]] == [STOP]
    assert 1 <= s["adaptive"][0]["mean_samples"] <= 6
    assert RULE in text


def test_a_spec_file_names_them_and_unknown_names_are_refused(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"task": "boxball", "n": [1], "aggregators": ["nope"],
                                "members": [{"model": "openai/sim", "temperature": 1.0}]}))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["eval", "--spec", str(spec), "--out", str(tmp_path / "r")])
    lines = err.getvalue().strip().splitlines()
    assert rc != 0 and len(lines) == 1
    assert "aggregators.0: unknown rule 'nope'; choose from" in lines[0] and RULE in lines[0]


def _mixed(tmp_path, name, url_a, url_b):
    spec = tmp_path / f"{name}.json"
    spec.write_text(json.dumps({"task": "boxball", "limit": 5, "samples": 3, "bootstrap": 200,
                                "aggregators": [RULE], "members": [
                                    {"model": "openai/sim-a", "api_base": url_a, "n": 2,
                                     "temperature": 1.0, "label": "a"},
                                    {"model": "openai/sim-b", "api_base": url_b, "n": 1,
                                     "temperature": 1.0, "label": "b"}]}))
    rc, text = _eval(["eval", "--spec", str(spec), "--out", str(tmp_path / name)])
    assert rc == 0, text
    return json.loads((tmp_path / name / "summary.json").read_text())


def test_ensemble_compare_pairs_two_mixed_runs_under_it(tmp_path):
    with SimulatedServer(lam1=2.0, seed=1) as a, SimulatedServer(lam1=8.0, seed=2) as b, \
            SimulatedServer(lam1=1.0, seed=5) as c:
        sa = _mixed(tmp_path, "A", a.base_url, b.base_url)
        sb = _mixed(tmp_path, "B", a.base_url, c.base_url)
    for s in (sa, sb):
        assert [r["aggregator"] for r in s["results"] if r["member"] == "ensemble"] == [
            "majority", RULE]
    rc, text = _eval(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--json",
                      "--bootstrap", "200"])
    assert rc == 0, text
    doc = json.loads(text)
    mine = [r for r in doc["results"] if r["aggregator"] == RULE]
    assert len(mine) == 1
    ens_a = next(r for r in sa["results"] if r["member"] == "ensemble" and
                 r["aggregator"] == RULE)
    ens_b = next(r for r in sb["results"] if r["member"] == "ensemble" and
                 r["aggregator"] == RULE)
    assert mine[0]["a"] == pytest.approx(ens_a["accuracy"], abs=1e-12)
    assert mine[0]["b"] == pytest.approx(ens_b["accuracy"], abs=1e-12)


def test_ensemble_serve_config_and_request_options(monkeypatch):
    from ensemble.serve import VotingServer, parse_config

    with SimulatedServer(lam1=3.0, seed=2) as up:
        cfg = parse_config({"port": 0, "models": {"v": {
            "model": "openai/sim", "api_base": up.base_url, "n": 7, "temperature": 1.0,
            "choices": ["L", "R"], "aggregator": RULE, "stop": STOP}}})
        with VotingServer(cfg) as srv:
            c = openai.OpenAI(base_url=srv.base_url, api_key="unused-local-key")
            msg = [{"role": "user", "content": "Red or blue? <answer>L</answer> or R"}]
            r = c.chat.completions.create(model="v", messages=msg)
            ens = r.model_extra["ensemble"]
            assert ens["aggregator"] == RULE and ens["stop"] == STOP
            votes = ens["votes"]
            assert abs(votes.get("L", 0) - votes.get("R", 0)) >= 2 or ens["samples"] == 7
            # a request turns the plug-in rule off, and asks for it by name
            r = c.chat.completions.create(model="v", messages=msg,
                                          extra_body={"ensemble": {"stop": None, "n": 3}})
            assert r.model_extra["ensemble"]["samples"] == 3
            r = c.chat.completions.create(model="v", messages=msg,
                                          extra_body={"ensemble": {"stop": STOP}})
            assert r.model_extra["ensemble"]["stop"] == STOP
            with pytest.raises(openai.BadRequestError, match="ensemble.stop must be one of"):
                c.chat.completions.create(model="v", messages=msg,
                                          extra_body={"ensemble": {"stop": "nope"}})
    with pytest.raises(InputError, match="unknown aggregator 'nope'"):
        VotingServer(parse_config({"port": 0, "models": {"v": {
            "model": "openai/sim", "aggregator": "nope"}}}))


def test_entry_point_groups_register_plug_ins(tmp_path, monkeypatch, caplog):
    """A distribution on sys.path declaring the group: its module is imported on the first
    look-up (once), and an entry point naming an object registers it under its name, in its
    package's namespace (the short name finds it while nothing else has it)."""
    (tmp_path / "plugin_rules.py").write_text(
        "from ensemble.registry import Registry\n"
        "LOADS = []\n"
        "def factory():\n    return 'made'\n")
    dist = tmp_path / "plugin_rules-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-rules\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[test.ensemble.things]\nmade = plugin_rules:factory\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry = Registry("thing", "test.ensemble.things")
    assert reg.names() == ["plugin_rules/made"] and reg.get("made")() == "made"
    assert "plugin_rules" in sys.modules
    broken = tmp_path / "broken-0.1.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (broken / "entry_points.txt").write_text("[test.ensemble.broken]\nx = no_such_module_x\n"
                                             "y = plugin_rules:factory\n")
    # a broken plug-in is left out with one warning line; the others load
    with caplog.at_level("WARNING", logger="ensemble.plugins"):
        reg = Registry("thing", "test.ensemble.broken")
        assert reg.names() == ["plugin_rules/y"]
        assert reg.names() == ["plugin_rules/y"]  # read once: one warning, not one per look-up
    assert [r.getMessage() for r in caplog.records] == [
        "ensemble: warning: skipped the plug-in of broken 0.1 (entry point "
        "test.ensemble.broken: x = no_such_module_x): No module named 'no_such_module_x'; "
        "fix or uninstall it"]
    with pytest.raises(InputError, match=r"unknown thing 'x'; choose from plugin_rules/y \(a "
                                         r"plug-in named "
                                         r"'x' was left out: No module named"):
        reg.get("x")


class _LedgerBatchAPI:
    """A provider's own Batch API, as `Capabilities.batch_api` makes it: it records the calls."""

    calls: list[tuple[str, str]] = []

    async def retrieve(self, batch_id):
        from ensemble.providers.batch import BatchInfo

        self.calls.append(("retrieve", batch_id))
        return BatchInfo(id=batch_id, status="completed", counts={"completed": 2, "total": 2})

    async def cancel(self, batch_id):
        from ensemble.providers.batch import BatchInfo

        self.calls.append(("cancel", batch_id))
        return BatchInfo(id=batch_id, status="cancelling", counts={"total": 2})


class _LedgerProvider:
    name = "ledger"

    def __init__(self, model, options):
        from ensemble.providers import Capabilities

        self.model, self.api_base, self.identity = model, None, None
        self.endpoint = ("ledger", "ledger", "-")
        self.capabilities = Capabilities(batch_api=_LedgerBatchAPI)

    async def aclose(self):
        pass


def test_ensemble_batches_reach_the_batch_api_the_provider_declares(tmp_path):
    """`ensemble batches list|cancel` ask the provider registry for the record's model and use
    the Batch API that provider declares (not litellm's whatever the provider)."""
    import time

    from ensemble.providers import register_provider
    from ensemble.sampling.store import BatchRecord, SampleStore

    register_provider("ledger", _LedgerProvider, replace=True)
    path = tmp_path / "samples.sqlite"
    store = SampleStore(path)
    now = time.time()
    for rid, bid in (("r1", "batch_1"), ("r2", "batch_2")):
        store.add_batch(BatchRecord(id=rid, provider="ledger", endpoint="ledger",
                                    model="ledger/x", status="in_progress", lines=0, samples=2,
                                    created=now, updated=now), [], holder="test")
        store.update_batch(rid, batch_id=bid)
    store.close()
    rc, text = _eval(["batches", "list", "--out", str(tmp_path), "--json"])
    assert rc == 0, text
    assert sorted(_LedgerBatchAPI.calls) == [("retrieve", "batch_1"), ("retrieve", "batch_2")]
    assert {b["status"] for b in json.loads(text)["batches"]} == {"completed"}
    store = SampleStore(path)
    store.update_batch("r2", status="in_progress")
    store.close()
    rc, text = _eval(["batches", "cancel", "--out", str(tmp_path), "--json"])
    assert rc == 0 and json.loads(text)["cancelled"] == ["batch_2"], text
    assert _LedgerBatchAPI.calls[-1] == ("cancel", "batch_2")


def test_the_ensemble_serve_command_serves_them():
    """`ensemble serve --aggregator RULE --stop STOP` as a process (the command's own main, with
    this module imported first: how a user's plug-in module is loaded without an entry point),
    answering with the plug-in rule under the plug-in stopping rule; SIGINT ends it."""
    import signal
    import subprocess
    from pathlib import Path

    from ensemble.tasks import get_task

    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_extending; "
            "from ensemble.cli import main; sys.exit(main(sys.argv[2:]))")
    prompt = get_task("boxball").questions()[0].prompt
    with SimulatedServer(lam1=3.0, seed=2) as up:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(Path(__file__).parent), "serve", "--model",
             "openai/sim", "--api-base", up.base_url, "--n", "7", "--choices", "L,R",
             "--aggregator", RULE, "--stop", STOP, "--port", "0", "--name", "v"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
            c = openai.OpenAI(base_url=url, api_key="unused-local-key")
            r = c.chat.completions.create(model="v", messages=[{"role": "user",
                                                                 "content": prompt}])
            ens = r.model_extra["ensemble"]
            assert ens["aggregator"] == RULE and ens["stop"] == STOP
            votes = ens["votes"]
            assert abs(votes.get("L", 0) - votes.get("R", 0)) == 2 or ens["samples"] == 7
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
    assert proc.returncode == 0
