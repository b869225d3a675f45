"""Batch mode against the simulated Files + Batch API over real HTTP (127.0.0.1), counting at
the server: the issue's eval with lines failing on their first submission, rerun and detach,
kill -9 and re-attach, resubmission and its bound, permanent failures through the failure
policy, an online run waiting for a live batch, splitting, cost, `ensemble batches`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ensemble.cli import main
from ensemble.errors import BatchesSubmitted, InputError
from ensemble.jsonio import loads
from ensemble.providers.litellm import LiteLLMProvider
from ensemble.providers.litellm_batch import LiteLLMBatchAPI
from ensemble.sampling.batch_options import BatchOptions, parse_custom_id
from ensemble.sampling.sampler import Sampler
from ensemble.sampling.store import SCHEMA_VERSION, SampleStore
from ensemble.sampling.types import Sample, SampleRequest
from ensemble.tasks import get_task
from ensemble.testing import BatchPlan, SimulatedServer

MODEL = "openai/x"
TASK = get_task("boxball")
QS = TASK.questions()
FAST = BatchOptions(poll_initial=0.05, poll_factor=1.5, poll_max=0.3)


def cli(capsys, *argv):
    """`ensemble ARGV` in this process: (exit code, stdout, stderr)."""
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def eval_args(url, out, *extra):
    return ("eval", "boxball", "--model", MODEL, "--api-base", url, "--t", "1", "--n", "1", "3",
            "--samples", "3", "--limit", "40", "--out", out, "--json", *extra)


def reqs(n=10, k=3, t=1.0):
    return [SampleRequest.of(q.prompt, temperature=t, k=k, tag=q.id, max_tokens=512)
            for q in QS[:n]]


def answers(rows):
    return [[s.answer for s in r] for r in rows]


def sources(store):
    with sqlite3.connect(store) as c:
        return dict(c.execute("SELECT source, COUNT(*) FROM samples GROUP BY source"))


def test_the_issues_eval_in_batch_mode_equals_the_online_run(tmp_path, capsys):
    # a fifth of the lines fail (500) on their first submission; they are resubmitted once.
    # The online run goes first on the same server: batch lines must name their sample
    # indices (custom_id), or the server would number them after the online ones.
    plan = BatchPlan(delay=0.3, fail_first=0.2, seed=4)
    with SimulatedServer(lam1=3.0, seed=7, batch=plan) as srv:
        rc, out, err = cli(capsys, *eval_args(srv.base_url, tmp_path / "o"))
        assert rc == 0, err
        online = loads(out)
        chat = srv.stats.requests
        assert chat > 0 and srv.stats.batches_created == 0
        t0 = time.monotonic()
        rc, out, err = cli(capsys, *eval_args(srv.base_url, tmp_path / "b", "--batch",
                                             "--batch-poll", "0.1"))
        wall = time.monotonic() - t0
        assert rc == 0, err
        st = srv.stats
        assert st.requests == chat  # nothing more through /v1/chat/completions
        assert st.batch_line_faults > 0  # some lines did fail first
        assert 2 <= st.batches_created <= 3
        assert len(st.served) == 219 and set(st.served.values()) == {2}  # once each way
    batch = loads(out)
    assert sources(tmp_path / "b" / "samples.sqlite") == {"batch": 219}
    assert batch["samples"] == {"total": 219, "from_store": 0, "from_batches": 219,
                                "shared": 0}
    assert batch["failed"]["count"] == 0
    assert "batch mode: " in " ".join(batch["notes"])
    assert sorted(batch) == sorted(online)  # the same --json keys
    assert batch["results"] == online["results"]  # the same rows, the same numbers
    assert batch["contrasts"] == online["contrasts"]
    assert wall < 60


def test_rerunning_the_same_command_collects_in_the_same_default_folder(tmp_path, capsys,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=1.0)) as srv:
        args = ("eval", "boxball", "--model", MODEL, "--api-base", srv.base_url, "--t", "1",
                "--n", "1", "--limit", "5", "--batch", "--batch-poll", "0.1")
        rc, out, err = cli(capsys, *args, "--detach")
        assert rc == 0, err
        assert "batch_sim" in out and "rerun the same command to collect" in out
        rc, out, err = cli(capsys, *args, "--json")
        assert rc == 0, err
        assert srv.stats.batches_created == 1 and srv.stats.requests == 0
    runs = list((tmp_path / "runs").iterdir())
    port = srv.base_url.split(":")[-1].split("/")[0]
    name = f"boxball-openai-x@127.0.0.1-{port}-v1"  # the endpoint, no date in the name
    assert [p.name for p in runs] == [name]
    doc = loads(out)
    assert doc["run_dir"] == str(Path("runs") / name)
    assert doc["samples"]["total"] == sources(runs[0] / "samples.sqlite")["batch"]


def _batch_ids(store):
    try:
        with sqlite3.connect(store, timeout=10) as c:
            return [r[0] for r in c.execute("SELECT batch_id FROM batches") if r[0]]
    except sqlite3.Error:
        return []


def test_detach_kill_and_rerun_collect_the_same_batch_and_no_key_is_written(tmp_path):
    key = "sk-simtest-" + os.urandom(12).hex()
    env = {**os.environ, "OPENAI_API_KEY": key, "PYTHONPATH": os.getcwd()}
    plan = BatchPlan(delay=3.0)
    with SimulatedServer(lam1=3.0, require_api_key=key, batch=plan) as srv:
        base = ("eval", "boxball", "--model", MODEL, "--api-base", srv.base_url, "--t", "1",
                "--n", "1", "3", "--samples", "3", "--limit", "40", "--batch",
                "--batch-poll", "0.2")

        def run(out, *extra, **kw):
            return subprocess.Popen([sys.executable, "-m", "ensemble", *base, "--out", str(out),
                                     *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=env, **kw)

        # --detach: returns at once, naming the batch
        t0 = time.monotonic()
        p = run(tmp_path / "d", "--detach")
        out, err = p.communicate(timeout=120)
        detach_s = time.monotonic() - t0
        assert p.returncode == 0, err
        assert _batch_ids(tmp_path / "d" / "samples.sqlite")[0] in out
        assert detach_s < 30  # ~4 s here, most of it importing litellm
        # a waiting run killed with -9 once its batch is recorded, then rerun
        p = run(tmp_path / "k")
        deadline = time.time() + 60
        while not _batch_ids(tmp_path / "k" / "samples.sqlite") and time.time() < deadline:
            time.sleep(0.05)
        assert p.poll() is None
        os.kill(p.pid, signal.SIGKILL)
        p.communicate()  # waits, and closes its pipes
        before = srv.stats.batches_created
        assert before == 2
        p = run(tmp_path / "k", "--json")
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert srv.stats.batches_created == before  # re-attached: no new batch
        assert srv.stats.requests == 0
        assert loads(out)["samples"]["total"] == 219
        assert _batch_ids(tmp_path / "k" / "samples.sqlite") == \
            [_batch_ids(tmp_path / "k" / "samples.sqlite")[0]]
    # no API key on disk: the store and every file of both run folders
    for path in list((tmp_path / "d").rglob("*")) + list((tmp_path / "k").rglob("*")):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


async def test_lines_carry_n_and_custom_ids_map_to_store_keys_and_indices(tmp_path):
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.1)) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=tmp_path / "s.sqlite",
                           mode="batch", batch=FAST, max_n=4) as s:
            res = await s.run(reqs(n=6, k=6), parser=TASK.parse)
        assert res.complete
        uploaded = [f for f in srv.batch_api.files.values() if f.purpose == "batch"]
        lines = [json.loads(x) for f in uploaded for x in f.data.splitlines()]
    # k = 6 with max_n = 4: lines of 4 and 2 samples, indices 0-3 and 4-5
    assert len(lines) == 12
    keys = {s.key for row in res.rows for s in row}
    cover = sorted((parse_custom_id(x["custom_id"]), x["body"].get("n", 1)) for x in lines)
    assert {k for (k, _, _), _ in cover} == keys
    assert {(a, c, n) for (_, a, c), n in cover} == {(0, 4, 4), (4, 2, 2)}
    assert all(x["url"] == "/v1/chat/completions" and x["body"]["model"] == "x" for x in lines)


async def test_batch_draws_equal_online_draws_and_a_run_may_mix_them(tmp_path):
    store = tmp_path / "s.sqlite"
    with SimulatedServer(lam1=0.3, seed=3, batch=BatchPlan(delay=0.1)) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=store) as s:  # online: k = 2
            await s.run(reqs(n=8, k=2), parser=TASK.parse)
        async with Sampler(MODEL, api_base=srv.base_url, store=None) as s:  # elsewhere: k = 5
            await s.run(reqs(n=8, k=5), parser=TASK.parse)
        async with Sampler(MODEL, api_base=srv.base_url, store=store, mode="batch",
                           batch=FAST) as s:  # batch: the missing 3 of k = 5
            mixed = await s.run(reqs(n=8, k=5), parser=TASK.parse)
            assert s.stats.samples_cached == 16
        assert srv.stats.batch_lines == 8
    assert sources(store) == {"online": 16, "batch": 24}
    with SimulatedServer(lam1=0.3, seed=3) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=None) as s:
            online = await s.run(reqs(n=8, k=5), parser=TASK.parse)
    assert answers(mixed.rows) == answers(online.rows)


async def test_failing_lines_are_resubmitted_at_most_three_times_then_reported(tmp_path):
    # every line of some prompts fails on every submission (500); the others complete
    plan = BatchPlan(delay=0.05, fail_rate=0.3, seed=1)
    with SimulatedServer(lam1=3.0, batch=plan) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=tmp_path / "s.sqlite",
                           mode="batch", batch=FAST) as s:
            res = await s.run(reqs(n=20), parser=TASK.parse)
        assert srv.stats.batches_created == 3  # first submission and two resubmissions
    failed = {f.request for f in res.failures}
    assert 0 < len(failed) < 20 and res.stopped is None
    assert all(f.reason == "500 server error" and "after 3 submissions" in f.message
               for f in res.failures)
    assert all(all(x is not None for x in row) for ri, row in enumerate(res.rows)
               if ri not in failed)


async def test_refused_prompts_are_not_resubmitted_and_reach_the_failure_policy(tmp_path):
    with SimulatedServer(lam1=3.0, refuse_rate=0.25, seed=2, batch=BatchPlan(delay=0.05)) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=tmp_path / "s.sqlite",
                           mode="batch", batch=FAST) as s:
            res = await s.run(reqs(n=20), parser=TASK.parse)
        refused = [q for q in QS[:20] if srv.refuses(q.prompt)]
        assert srv.stats.batches_created == 1
    assert len({f.request for f in res.failures}) == len(refused) > 0
    assert {f.error for f in res.failures} == {"ContentRefusedError"}
    assert res.stopped is None


async def test_expired_and_cancelled_batches_are_resubmitted(tmp_path, capsys):
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.2, expire_first=1)) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=tmp_path / "e.sqlite",
                           mode="batch", batch=FAST) as s:
            res = await s.run(reqs(n=10), parser=TASK.parse)
        assert res.complete and srv.stats.batches_created == 2
        assert srv.stats.batch_lines == 10  # 5 in the expired batch, 5 resubmitted
    # cancelled with `ensemble batches cancel`, then the run resubmits the rest
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=30.0)) as srv:
        store = tmp_path / "c.sqlite"
        async with Sampler(MODEL, api_base=srv.base_url, store=store, mode="batch",
                           batch=BatchOptions(detach=True)) as s:
            with pytest.raises(BatchesSubmitted) as info:
                await s.run(reqs(n=10), parser=TASK.parse)
        bid = info.value.batch_ids[0]
        rc = await asyncio.to_thread(main, ["batches", "cancel", "--out", str(store)])
        out = capsys.readouterr().out
        assert rc == 0 and bid in out
        async with Sampler(MODEL, api_base=srv.base_url, store=store, mode="batch",
                           batch=FAST) as s:
            srv.batch_api.plan = BatchPlan(delay=0.1)
            res = await s.run(reqs(n=10), parser=TASK.parse)
        assert res.complete and srv.stats.batches_created == 2
        assert SampleStore(store).batches()[0].status == "cancelled"


async def test_an_online_run_waits_for_samples_in_a_live_batch_instead_of_paying(tmp_path):
    store = tmp_path / "s.sqlite"
    with SimulatedServer(lam1=3.0, seed=5, batch=BatchPlan(delay=1.0)) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=store, mode="batch",
                           batch=BatchOptions(detach=True)) as s:
            with pytest.raises(BatchesSubmitted):
                await s.run(reqs(n=10), parser=TASK.parse)
        async with Sampler(MODEL, api_base=srv.base_url, store=store) as s:  # online
            res = await asyncio.wait_for(s.run(reqs(n=12), parser=TASK.parse), 60)
        assert res.complete
        assert srv.stats.requests == 2  # only the two prompts no batch holds
        assert sum(srv.stats.served.values()) == 36 and len(srv.stats.served) == 36
    assert sources(store) == {"batch": 30, "online": 6}


async def test_files_are_split_within_the_providers_limits(tmp_path):
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.05, max_lines=4)) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=tmp_path / "s.sqlite",
                           mode="batch", batch=BatchOptions(max_lines=4, poll_initial=0.05)
                           ) as s:
            res = await s.run(reqs(n=10), parser=TASK.parse)
        assert res.complete and srv.stats.batches_created == 3  # 4 + 4 + 2 lines
        first = next(iter(srv.batch_api.files))
        one = max(len(x) for x in srv.batch_api.files[first].data.splitlines(keepends=True))
        limit = int(2.5 * one)  # two lines per file
        async with Sampler(MODEL, api_base=srv.base_url, store=tmp_path / "t.sqlite",
                           mode="batch", batch=BatchOptions(max_bytes=limit,
                                                            poll_initial=0.05)) as s:
            res = await s.run(reqs(n=6), parser=TASK.parse)
        assert res.complete and srv.stats.batches_created == 3 + 3
        inputs = [f for f in srv.batch_api.files.values() if f.purpose == "batch"][3:]
        assert len(inputs) == 3 and all(len(f.data) <= limit for f in inputs)


class _LostReply(LiteLLMBatchAPI):
    """Batch creation succeeds at the provider, then the reply is lost (or the process dies)."""

    kill = False

    async def create(self, file_id, *, metadata):
        await super().create(file_id, metadata=metadata)
        if self.kill:
            raise asyncio.CancelledError()
        from ensemble.errors import ProviderConnectionError

        err = ProviderConnectionError("the connection dropped mid-request", reason="drop")
        err.retryable = True
        raise err


class _Provider(LiteLLMProvider):
    api_cls = _LostReply

    def batch_api(self):
        return self.api_cls(self.target, api_base=self.api_base, api_key=self._key)


@pytest.fixture
async def lost_reply():
    """A `_Provider` at the batch server's URL, made by the test; closed after it (a Sampler
    given a provider leaves it open: the caller owns it)."""
    from ensemble.providers.options import ProviderOptions

    made: list[_Provider] = []

    def make(url: str) -> _Provider:
        made.append(_Provider(MODEL, ProviderOptions(api_base=url)))
        return made[-1]

    yield make
    for prov in made:
        await prov.aclose()


async def test_a_batch_created_but_not_recorded_is_found_by_its_metadata(tmp_path, lost_reply):
    store = tmp_path / "s.sqlite"
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.1)) as srv:
        prov = lost_reply(srv.base_url)
        async with Sampler(MODEL, provider=prov, store=store, mode="batch", batch=FAST) as s:
            res = await s.run(reqs(n=5), parser=TASK.parse)  # a lost reply: looked up
        assert res.complete and srv.stats.batches_created == 1
        assert srv.stats.batch_calls["batches.list"] >= 1
        # the process "dies" right after the provider accepted the batch
        _LostReply.kill = True
        async with Sampler(MODEL, provider=prov, store=store, mode="batch", batch=FAST) as s:
            with pytest.raises(asyncio.CancelledError):
                await s.run(reqs(n=10), parser=TASK.parse)
        assert [r.status for r in SampleStore(store).batches()] == ["completed", "submitting"]
        with sqlite3.connect(store) as c:  # the dead holder's leases expire
            c.execute("UPDATE leases SET expires = 0")
        _LostReply.kill = False
        async with Sampler(MODEL, api_base=srv.base_url, store=store, mode="batch",
                           batch=FAST) as s:
            res = await s.run(reqs(n=10), parser=TASK.parse)
        assert res.complete and srv.stats.batches_created == 2  # adopted, not resubmitted
        assert srv.stats.batch_lines == 10


async def test_waiting_says_what_the_batches_do_and_polls_with_backoff(tmp_path):
    lines = []
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=2.0)) as srv:
        async with Sampler(MODEL, api_base=srv.base_url, store=tmp_path / "s.sqlite",
                           mode="batch", status_every=0.3, on_status=lines.append,
                           batch=BatchOptions(poll_initial=0.1, poll_factor=2.0,
                                              poll_max=0.4)) as s:
            res = await s.run(reqs(n=10), parser=TASK.parse)
        assert res.complete
        # polls at 0.1, 0.3, 0.7, 1.1, ... s: about 6 checks for 2 s, not 20
        assert srv.stats.batch_calls["batches.retrieve"] <= 9
    waiting = [x for x in lines if x.startswith("waiting: batch:")]
    assert len(waiting) >= 4
    assert any("in_progress" in x and "requests done" in x and "deadline" in x
               and "left at the provider's pace" in x for x in waiting)


async def test_cost_uses_litellms_batch_prices_and_unknown_stays_unknown(tmp_path):
    rq = reqs(n=6)
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.05)) as srv:
        async with Sampler("openai/gpt-4o-mini", api_base=srv.base_url,
                           store=tmp_path / "b.sqlite", mode="batch", batch=FAST) as s:
            await s.run(rq, parser=TASK.parse)
            batch = s.stats
        async with Sampler("openai/gpt-4o-mini", api_base=srv.base_url,
                           store=tmp_path / "o.sqlite") as s:
            await s.run(rq, parser=TASK.parse)
            online = s.stats
        async with Sampler(MODEL, api_base=srv.base_url, store=tmp_path / "u.sqlite",
                           mode="batch", batch=FAST) as s:
            await s.run(rq, parser=TASK.parse)
            assert s.stats.cost_usd is None
    assert batch.prompt_tokens == online.prompt_tokens > 0
    assert batch.completion_tokens == online.completion_tokens > 0
    # litellm's price map: gpt-4o-mini batch rates are half its online rates
    assert batch.cost_usd == pytest.approx(0.5 * online.cost_usd, rel=1e-9)


def test_batches_list_shows_a_runs_batches(tmp_path, capsys, monkeypatch):
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.1)) as srv:
        rc, out, err = cli(capsys, *eval_args(srv.base_url, tmp_path / "r", "--batch",
                                             "--detach"))
        assert rc == 0 and loads(out)["detached"] is True
        bid = loads(out)["batches"][0]
        time.sleep(0.5)
        rc, out, err = cli(capsys, "batches", "list", "--out", tmp_path / "r", "--json")
        assert rc == 0, err
        doc = loads(out)
    [b] = doc["batches"]
    assert b["batch_id"] == bid and b["status"] == "completed" and not b["collected"]
    assert b["counts"] == {"total": 73, "completed": 73, "failed": 0}
    assert b["lines"] == 73 and b["samples"] == 219
    # the table at 80 columns keeps the id whole: it is what `batches cancel --id` needs
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, err = cli(capsys, "batches", "list", "--out", tmp_path / "r")
    assert rc == 0 and bid in out and "…" not in out, out
    assert max(len(line) for line in out.splitlines()) <= 80
    rc, out, err = cli(capsys, "batches", "list", "--out", tmp_path / "nowhere")
    assert rc == 1 and "no sample store" in err and "Traceback" not in err


def test_bad_combinations_are_one_line_errors(tmp_path, capsys):
    rc, _, err = cli(capsys, "sample", "--model", MODEL, "--api-base", "http://127.0.0.1:9/v1",
                     "--batch", "hello")
    assert rc == 1 and "--batch needs --store" in err
    rc, _, err = cli(capsys, *eval_args("http://127.0.0.1:9/v1", tmp_path / "x", "--detach"))
    assert rc == 1 and "use it with --batch" in err
    rc, _, err = cli(capsys, *eval_args("http://127.0.0.1:9/v1", tmp_path / "x", "--batch",
                                        "--max-cost", "1"))
    assert rc == 1 and "--max-cost cannot be enforced in batch mode" in err
    with pytest.raises(InputError, match="needs a store"):
        Sampler(MODEL, mode="batch")
    with pytest.raises(InputError, match="mode must be"):
        Sampler(MODEL, mode="offline")


def test_a_version_2_store_gains_batch_records_and_they_hold_leases(tmp_path):
    from ensemble.sampling.store import BatchLine, BatchRecord, batch_holder, new_holder

    path = tmp_path / "v2.sqlite"
    with sqlite3.connect(path) as c:  # a store as schema 2 left it, with a sample and a lease
        c.executescript("""
            CREATE TABLE samples (key TEXT NOT NULL, idx INTEGER NOT NULL, model TEXT NOT NULL,
                text TEXT, finish_reason TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
                cost_usd REAL, latency_s REAL, logprobs TEXT, created REAL NOT NULL,
                source TEXT NOT NULL DEFAULT 'online', PRIMARY KEY (key, idx));
            CREATE TABLE prompts (key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL);
            CREATE TABLE leases (key TEXT NOT NULL, idx INTEGER NOT NULL, holder TEXT NOT NULL,
                expires REAL NOT NULL, PRIMARY KEY (key, idx));
            INSERT INTO samples VALUES ('k', 0, 'm', 'x', 'stop', 1, 1, NULL, 0.1, NULL, 1,
                                        'online');
            PRAGMA user_version = 2;
        """)
    store = SampleStore(path)
    assert store.schema_version == SCHEMA_VERSION and store.get("k", [0])[0].text == "x"
    me, other = new_holder(), new_holder()
    assert store.claim([("k", [1, 2, 3])], holder=me, ttl=60)[0].claimed == [1, 2, 3]
    now = time.time()
    rec = BatchRecord(id="sub1", provider="openai", endpoint="http://h/v1", model="m",
                      status="submitting", lines=1, samples=2, created=now, updated=now)
    store.add_batch(rec, [BatchLine("k:1:2", "k", 1, 2)], holder=me)
    owners = {i: h for _, i, h, _ in store.leases()}
    assert owners == {1: batch_holder("sub1"), 2: batch_holder("sub1"), 3: me}
    store.update_batch("sub1", batch_id="batch_1", status="in_progress",
                       counts={"total": 1}, lease_until=now + 86400)
    # another run finds the batch's samples busy, not free
    assert store.claim([("k", [1, 2])], holder=other, ttl=60)[0].busy == [1, 2]
    [r] = store.batches(pending=True)
    assert (r.batch_id, r.status, r.counts, r.live) == ("batch_1", "in_progress",
                                                        {"total": 1}, True)
    assert store.pending_lines() == [("sub1", "k", 1, 2)]
    store.put_many([Sample(key="k", index=1, text="y", source="batch")], model="m",
                   holder=batch_holder("sub1"))
    store.set_line_status("sub1", [("k:1:2", "partial", "1 of 2 choices")])
    store.close_batch("sub1")
    assert store.batches(pending=True) == [] and store.pending_lines() == []
    assert store.batch_lines("sub1")[0].status == "partial"
    assert {i for _, i, _, _ in store.leases()} == {3}  # the batch's leases are gone
    assert store.claim([("k", [2])], holder=other, ttl=60)[0].claimed == [2]
    assert store.get("k", [1])[1].source == "batch"
    store.close()


def test_collecting_a_detached_batch_says_where_the_samples_came_from(tmp_path, capsys):
    """Issue 32 item 10: after collecting a detached batch the line read "from store 0 of 219
    · cost now $0 (no request)" although 219 samples were just collected and stored."""
    with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.1)) as srv:
        args = [a for a in eval_args(srv.base_url, tmp_path / "r", "--batch") if a != "--json"]
        rc, out, err = cli(capsys, *args, "--detach", "--json")
        assert rc == 0 and loads(out)["detached"] is True
        time.sleep(0.5)
        rc, out, err = cli(capsys, *args)
    assert rc == 0, err
    assert "collected from batches 219" in out and "(no request)" not in out
    doc = loads((tmp_path / "r" / "summary.json").read_text())
    assert doc["samples"]["from_batches"] == 219 and doc["samples"]["from_store"] == 0
