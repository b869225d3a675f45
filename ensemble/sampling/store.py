"""The durable sample store: SQLite in WAL mode, one row per sample, written as it arrives.

Rows are keyed by (key, idx): `key` hashes (model, messages, sampling parameters) and `idx` is
the sample index, so k repeated samples of one prompt stay k rows, a rerun resumes where it
stopped, and a completed sample is never requested twice. WAL lets a report read while a run
writes, and two runs write one store (SQLite serialises the writers; busy_timeout waits).
API keys are never written: requests are stored as (model, messages, parameters) only.

Leases: before a sample is requested its (key, idx) is claimed in the `leases` table, in the
same store, by a holder (host, pid and a random id) until an expiry the holder keeps renewing.
A second process that finds a live lease waits for the sample instead of paying for it again;
a lease whose holder died (a dead pid on this host, or an expiry passed) is taken over.

Schema versions (`PRAGMA user_version`), migrated forward on open, in one transaction each:
1 samples + prompts; 2 adds `samples.source` ("online" | "batch") and `leases`.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .types import Parser, Sample

__all__ = ["SCHEMA_VERSION", "Claim", "SampleStore", "new_holder"]

SCHEMA_VERSION = 2

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS samples (
    key TEXT NOT NULL,
    idx INTEGER NOT NULL,
    model TEXT NOT NULL,
    text TEXT,
    finish_reason TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cost_usd REAL,
    latency_s REAL,
    logprobs TEXT,
    created REAL NOT NULL,
    PRIMARY KEY (key, idx)
);
CREATE TABLE IF NOT EXISTS prompts (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL
);
"""

# version -> statements taking the store from version - 1 to version
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: (
        "ALTER TABLE samples ADD COLUMN source TEXT NOT NULL DEFAULT 'online'",
        "CREATE TABLE IF NOT EXISTS leases (key TEXT NOT NULL, idx INTEGER NOT NULL, "
        "holder TEXT NOT NULL, expires REAL NOT NULL, PRIMARY KEY (key, idx))",
        "CREATE INDEX IF NOT EXISTS leases_holder ON leases (holder)",
    ),
}

_HOST = socket.gethostname()


def new_holder() -> str:
    """A lease holder id: this host, this process, and a random part."""
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _holder_dead(holder: str) -> bool:
    """A holder on this host whose process no longer exists (killed, crashed)."""
    try:
        host, pid_text, _ = holder.split(":", 2)
        pid = int(pid_text)
    except ValueError:
        return False
    if host != _HOST or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Claim:
    """What a claim found for (key, indices): claimed now, already stored, leased elsewhere."""

    __slots__ = ("busy", "claimed", "done")

    def __init__(self) -> None:
        self.claimed: list[int] = []
        self.done: list[int] = []
        self.busy: list[int] = []


class SampleStore:
    """A SQLite store of samples. Thread-safe; safe to share between processes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder of the sample store {self.path}: "
                             f"{exc.strerror}") from None
        # Switching a new file to WAL and creating the schema take an exclusive lock that
        # SQLite does not wait for (no busy handler there): two runs opening one new store at
        # once retry here instead of failing.
        deadline = time.monotonic() + 60.0
        while True:
            try:
                self._conn = sqlite3.connect(str(self.path), timeout=60.0,
                                             isolation_level=None, check_same_thread=False)
                self._conn.execute("PRAGMA busy_timeout=60000")
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._migrate()
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise StoreError(f"cannot open the sample store {self.path}: {exc}") \
                        from None
                self._conn.close()
                time.sleep(0.05)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open the sample store {self.path}: {exc}") from None
        self._lock = threading.Lock()

    def _migrate(self) -> None:
        conn = self._conn
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(f"the sample store {self.path} was written by a newer ensemble "
                             f"(schema {version}, this one knows {SCHEMA_VERSION}); upgrade "
                             "ensemble-qr to read it")
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])  # under the lock
            if version == 0:
                for stmt in _SCHEMA_V1.split(";"):
                    if stmt.strip():
                        conn.execute(stmt)
                version = 1
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in _MIGRATIONS[v]:
                    conn.execute(stmt)
                version = v
            conn.execute(f"PRAGMA user_version = {version}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def request_of(self, key: str) -> dict[str, Any] | None:
        """The stored request metadata of `key` (model, messages, params), or None."""
        with self._lock:
            row = self._conn.execute("SELECT request FROM prompts WHERE key = ?",
                                     (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def __enter__(self) -> SampleStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str, indices: Iterable[int], *, parser: Parser | None = None
            ) -> dict[int, Sample]:
        """The stored samples of `key` among `indices` (answers parsed with `parser`)."""
        wanted = set(indices)
        with self._lock:
            try:
                rows = self._conn.execute(
                    "SELECT idx, text, finish_reason, prompt_tokens, completion_tokens, cost_usd,"
                    " latency_s, logprobs, source FROM samples WHERE key = ?", (key,)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the sample store {self.path}: {exc}") from None
        out = {}
        for idx, text, fr, pt, ct, cost, lat, lp, source in rows:
            if idx in wanted:
                out[idx] = Sample(key=key, index=idx, text=text,
                                  answer=_parse(parser, text), finish_reason=fr,
                                  prompt_tokens=pt, completion_tokens=ct, cost_usd=cost,
                                  latency_s=lat, logprobs=json.loads(lp) if lp else None,
                                  cached=True, source=source)
        return out

    def put(self, sample: Sample, *, model: str, request_json: str | dict[str, Any] | None = None,
            request: dict[str, Any] | None = None) -> None:
        """Write one sample (and, once, its request) durably. Overwrites (key, idx).

        `request_json` (or `request`, a dict) is the request's metadata: model, messages and
        sampling parameters. Never pass API keys or headers in it.
        """
        if request is None and request_json is not None:
            request = (json.loads(request_json) if isinstance(request_json, str)
                       else request_json)
        self.put_many([sample], model=model, request=request)

    def put_many(self, samples: Sequence[Sample], *, model: str,
                 request: dict[str, Any] | None = None, holder: str | None = None) -> None:
        """Write the samples of one reply in one transaction, and drop `holder`'s leases on
        them in the same transaction (a crash leaves either both or neither)."""
        if not samples:
            return
        now = time.time()
        rows = [(s.key, s.index, model, s.text, s.finish_reason, s.prompt_tokens,
                 s.completion_tokens, s.cost_usd, s.latency_s,
                 json.dumps(s.logprobs) if s.logprobs is not None else None, now, s.source)
                for s in samples]
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                if request is not None:
                    self._conn.execute(
                        "INSERT OR IGNORE INTO prompts (key, model, request) VALUES (?, ?, ?)",
                        (samples[0].key, model, json.dumps(request, sort_keys=True)))
                self._conn.executemany(
                    "INSERT OR REPLACE INTO samples (key, idx, model, text, finish_reason,"
                    " prompt_tokens, completion_tokens, cost_usd, latency_s, logprobs, created,"
                    " source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                if holder is not None:
                    self._conn.executemany(
                        "DELETE FROM leases WHERE key = ? AND idx = ? AND holder = ?",
                        [(s.key, s.index, holder) for s in samples])
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreError(f"cannot write to the sample store {self.path}: {exc}") from None

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    # -- leases ------------------------------------------------------------------------------
    def claim(self, items: Sequence[tuple[str, Sequence[int]]], *, holder: str, ttl: float
              ) -> list[Claim]:
        """Claim (key, indices) pairs for `holder` until now + ttl, in one transaction.

        For each pair: indices already stored are `done`; leased by another live holder,
        `busy`; the rest are leased to `holder` now (taking over expired or dead leases).
        """
        now = time.time()
        out: list[Claim] = []
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                for key, indices in items:
                    c = Claim()
                    stored = {r[0] for r in self._conn.execute(
                        "SELECT idx FROM samples WHERE key = ?", (key,))}
                    leased = {r[0]: (r[1], r[2]) for r in self._conn.execute(
                        "SELECT idx, holder, expires FROM leases WHERE key = ?", (key,))}
                    take = []
                    for i in indices:
                        if i in stored:
                            c.done.append(i)
                            continue
                        lease = leased.get(i)
                        if lease is not None and lease[0] != holder and lease[1] > now \
                                and not _holder_dead(lease[0]):
                            c.busy.append(i)
                            continue
                        take.append((key, i, holder, now + ttl))
                        c.claimed.append(i)
                    if take:
                        self._conn.executemany(
                            "INSERT OR REPLACE INTO leases (key, idx, holder, expires) "
                            "VALUES (?, ?, ?, ?)", take)
                    out.append(c)
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreError(f"cannot claim samples in the store {self.path}: {exc}") \
                    from None
        return out

    def renew(self, holder: str, ttl: float) -> None:
        """Push the expiry of every lease `holder` holds to now + ttl."""
        with self._lock:
            try:
                self._conn.execute("UPDATE leases SET expires = ? WHERE holder = ?",
                                   (time.time() + ttl, holder))
            except sqlite3.Error as exc:
                raise StoreError(f"cannot renew leases in the store {self.path}: {exc}") \
                    from None

    def release(self, holder: str, items: Iterable[tuple[str, int]] | None = None) -> None:
        """Drop `holder`'s leases (all of them, or the given (key, idx) pairs)."""
        with self._lock:
            try:
                if items is None:
                    self._conn.execute("DELETE FROM leases WHERE holder = ?", (holder,))
                else:
                    self._conn.executemany(
                        "DELETE FROM leases WHERE key = ? AND idx = ? AND holder = ?",
                        [(k, i, holder) for k, i in items])
            except sqlite3.Error as exc:
                raise StoreError(f"cannot release leases in the store {self.path}: {exc}") \
                    from None

    def leases(self) -> list[tuple[str, int, str, float]]:
        """Every lease: (key, idx, holder, expires)."""
        with self._lock:
            return list(self._conn.execute("SELECT key, idx, holder, expires FROM leases"))

    def count(self, key: str | None = None) -> int:
        with self._lock:
            if key is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
            return int(self._conn.execute("SELECT COUNT(*) FROM samples WHERE key = ?",
                                          (key,)).fetchone()[0])


def _parse(parser: Parser | None, text: str | None) -> str | None:
    if text is None:
        return None
    if parser is None:
        return text
    return parser(text)
