"""The store's schema versions, migrations and leases."""

import sqlite3
import subprocess
import sys

import pytest

from ensemble.errors import StoreError
from ensemble.sampling.store import SCHEMA_VERSION, SampleStore, new_holder
from ensemble.sampling.types import Sample

V1 = """
CREATE TABLE samples (key TEXT NOT NULL, idx INTEGER NOT NULL, model TEXT NOT NULL, text TEXT,
    finish_reason TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, cost_usd REAL,
    latency_s REAL, logprobs TEXT, created REAL NOT NULL, PRIMARY KEY (key, idx));
CREATE TABLE prompts (key TEXT PRIMARY KEY, model TEXT NOT NULL, request TEXT NOT NULL);
INSERT INTO samples VALUES ('k', 0, 'm', '<answer>L</answer>', 'stop', 3, 2, NULL, 0.1, NULL, 1);
"""


def test_a_version_1_store_is_migrated_with_its_samples(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as c:
        c.executescript(V1)
    store = SampleStore(path)
    assert store.schema_version == SCHEMA_VERSION
    got = store.get("k", [0])
    assert got[0].text == "<answer>L</answer>" and got[0].source == "online"
    store.close()


def test_a_store_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    with sqlite3.connect(path) as c:
        c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer ensemble"):
        SampleStore(path)


def test_leases_make_a_second_holder_wait_and_writes_release_them(tmp_path):
    store = SampleStore(tmp_path / "s.sqlite")
    a, b = new_holder(), new_holder()
    assert store.claim([("k", [0, 1, 2])], holder=a, ttl=30)[0].claimed == [0, 1, 2]
    c = store.claim([("k", [0, 1, 2, 3])], holder=b, ttl=30)[0]
    assert c.busy == [0, 1, 2] and c.claimed == [3]
    store.put_many([Sample(key="k", index=0, text="x")], model="m", holder=a)
    c = store.claim([("k", [0, 1])], holder=b, ttl=30)[0]
    assert c.done == [0] and c.busy == [1]
    assert ("k", 0) not in {(k, i) for k, i, _, _ in store.leases()}


def test_expired_and_dead_holders_are_taken_over(tmp_path):
    store = SampleStore(tmp_path / "s.sqlite")
    store.claim([("k", [0])], holder=new_holder(), ttl=-1)  # already expired
    assert store.claim([("k", [0])], holder=new_holder(), ttl=30)[0].claimed == [0]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    host = new_holder().split(":")[0]
    store.claim([("k", [1])], holder=f"{host}:{dead}:deadbeef", ttl=3600)
    assert store.claim([("k", [1])], holder=new_holder(), ttl=30)[0].claimed == [1]


def test_a_migration_does_not_add_a_column_the_store_already_has(tmp_path):
    """A store whose version says 4 but that already has schema 5's column (written by a
    build between the two) migrates instead of failing on a duplicate column."""
    path = tmp_path / "s.sqlite"
    with SampleStore(path) as st:
        st.put(Sample(key="k", index=0, text="x"), model="m")
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA user_version = 4")
    with SampleStore(path) as st:
        assert st.schema_version == SCHEMA_VERSION and st.get("k", [0])[0].text == "x"
