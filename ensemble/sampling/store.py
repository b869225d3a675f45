"""The durable sample store: SQLite in WAL mode, one row per sample, written as it arrives.

Rows are keyed by (key, idx): `key` hashes (model, messages, sampling parameters) and `idx` is
the sample index, so k repeated samples of one prompt stay k rows, a rerun resumes where it
stopped, and a completed sample is never requested twice. WAL lets a report read while a run
writes, and two runs write one store (SQLite serialises the writers; busy_timeout waits).
API keys are never written: requests are stored as (model, messages, parameters) only.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .types import Parser, Sample

__all__ = ["SampleStore"]

_SCHEMA = """
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
                self._conn.executescript(_SCHEMA)
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
                    " latency_s, logprobs FROM samples WHERE key = ?", (key,)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the sample store {self.path}: {exc}") from None
        out = {}
        for idx, text, fr, pt, ct, cost, lat, lp in rows:
            if idx in wanted:
                out[idx] = Sample(key=key, index=idx, text=text,
                                  answer=_parse(parser, text), finish_reason=fr,
                                  prompt_tokens=pt, completion_tokens=ct, cost_usd=cost,
                                  latency_s=lat, logprobs=json.loads(lp) if lp else None,
                                  cached=True)
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
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                if request is not None:
                    self._conn.execute(
                        "INSERT OR IGNORE INTO prompts (key, model, request) VALUES (?, ?, ?)",
                        (sample.key, model, json.dumps(request, sort_keys=True)))
                self._conn.execute(
                    "INSERT OR REPLACE INTO samples (key, idx, model, text, finish_reason,"
                    " prompt_tokens, completion_tokens, cost_usd, latency_s, logprobs, created)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (sample.key, sample.index, model, sample.text, sample.finish_reason,
                     sample.prompt_tokens, sample.completion_tokens, sample.cost_usd,
                     sample.latency_s,
                     json.dumps(sample.logprobs) if sample.logprobs is not None else None,
                     time.time()))
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                raise StoreError(f"cannot write to the sample store {self.path}: {exc}") from None

    def count(self, key: str | None = None) -> int:
        with self._lock:
            if key is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
            return int(self._conn.execute("SELECT COUNT(*) FROM samples WHERE key = ?",
                                          (key,)).fetchone()[0])

    def iter_samples(self) -> Iterator[tuple[str, int, str, str | None]]:
        """(key, idx, model, text) of every stored sample."""
        with self._lock:
            rows = self._conn.execute("SELECT key, idx, model, text FROM samples").fetchall()
        yield from rows


def _parse(parser: Parser | None, text: str | None) -> str | None:
    if text is None:
        return None
    if parser is None:
        return text
    return parser(text)
