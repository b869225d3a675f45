"""The durable sample store: SQLite in WAL mode, one row per sample, written as it arrives.

Rows are keyed by (key, idx): `key` hashes (endpoint, model, messages, sampling parameters)
(see `ensemble.sampling.types.request_key`) and `idx` is the sample index, so k repeated
samples of one prompt stay k rows, a rerun resumes where it stopped, and a completed sample is
never requested twice. WAL lets a report read while a run writes, and two runs write one store
(SQLite serialises the writers; busy_timeout waits).
API keys are never written: requests are stored as (model, messages, parameters) only.

Leases: before a sample is requested its (key, idx) is claimed in the `leases` table, in the
same store, by a holder (host, pid and a random id) until an expiry the holder keeps renewing.
A second process that finds a live lease waits for the sample instead of paying for it again;
a lease whose holder died (a dead pid on this host, or an expiry passed) is taken over.

Batch records (`batches`, `batch_lines`): a provider Batch API job per row, written before the
process waits for it (our submission id, the provider's batch id and input file id, provider,
endpoint, model, status, request counts, times; never the key) and what each of its lines covers
(store key, first sample index, count). A rerun re-attaches to them instead of submitting again;
`ensemble batches list|cancel` reads them. While a batch is live its samples are leased to the
holder `batch:<submission id>` until the batch's expiry, so an online run on the same store
waits for them instead of paying for them twice (see `ensemble.sampling.batch`).

Schema versions (`PRAGMA user_version`), migrated forward on open, in one transaction each:
1 samples + prompts; 2 adds `samples.source` ("online" | "batch") and `leases`; 3 adds
`batches` and `batch_lines`; 4 adds `prompts.endpoint`, the identity of the endpoint the samples
of a key come from (the key hashes it too). Keys written before 4 carry no endpoint: they are
read only by runs against a provider's own public endpoint (no api_base), whose keys have none
either; a run against an api_base or a local model has keys of its own, so it never reads
another server's samples (it draws its own); 5 adds `samples.answer_lp` (compact logprobs,
`ensemble.sampling.logprobs`; compacted on reading for older rows). No column is added twice.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .logprobs import compact as compact_logprobs
from .types import Parser, Sample

__all__ = ["BATCH_LIVE", "SCHEMA_VERSION", "BatchLine", "BatchRecord", "Claim", "SampleStore",
           "batch_holder", "is_sample_store", "new_holder"]

SCHEMA_VERSION = 5

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
    3: (
        "CREATE TABLE IF NOT EXISTS batches (id TEXT PRIMARY KEY, batch_id TEXT, "
        "input_file_id TEXT, provider TEXT NOT NULL, endpoint TEXT NOT NULL, model TEXT NOT NULL,"
        " status TEXT NOT NULL, collected INTEGER NOT NULL DEFAULT 0, lines INTEGER NOT NULL, "
        "samples INTEGER NOT NULL, counts TEXT, output_file_id TEXT, error_file_id TEXT, "
        "expires REAL, info TEXT, created REAL NOT NULL, updated REAL NOT NULL)",
        "CREATE TABLE IF NOT EXISTS batch_lines (batch TEXT NOT NULL, custom_id TEXT NOT NULL, "
        "key TEXT NOT NULL, start INTEGER NOT NULL, count INTEGER NOT NULL, "
        "status TEXT NOT NULL DEFAULT 'pending', error TEXT, PRIMARY KEY (batch, custom_id))",
        "CREATE INDEX IF NOT EXISTS batch_lines_key ON batch_lines (key)",
    ),
    4: (
        "ALTER TABLE prompts ADD COLUMN endpoint TEXT",
    ),
    5: (
        "ALTER TABLE samples ADD COLUMN answer_lp TEXT",
    ),
}

# states in which a batch may still produce samples ("submitting": ours, before the reply)
BATCH_LIVE = ("submitting", "validating", "in_progress", "finalizing", "cancelling")


def batch_holder(submission: str) -> str:
    """The lease holder of a batch's samples: not a process, so never "dead"; its leases
    last until the batch's expiry."""
    return f"batch:{submission}"


@dataclass(frozen=True)
class BatchLine:
    """One line of a batch input file: the samples (key, start .. start + count - 1)."""

    custom_id: str
    key: str
    start: int
    count: int
    status: str = "pending"  # pending | done | partial | failed
    error: str | None = None

    @property
    def indices(self) -> range:
        return range(self.start, self.start + self.count)


@dataclass(frozen=True)
class BatchRecord:
    """A batch as the store knows it. `id` is ours (written before the provider knows the
    batch), `batch_id` the provider's; `endpoint` the api_base or the provider's name."""

    id: str
    provider: str
    endpoint: str
    model: str
    status: str
    lines: int
    samples: int
    created: float
    updated: float
    batch_id: str | None = None
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    collected: bool = False
    expires: float | None = None
    counts: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.status in BATCH_LIVE

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "batch_id": self.batch_id, "status": self.status,
                "provider": self.provider, "endpoint": self.endpoint, "model": self.model,
                "lines": self.lines, "samples": self.samples, "counts": dict(self.counts),
                "input_file_id": self.input_file_id, "output_file_id": self.output_file_id,
                "error_file_id": self.error_file_id, "collected": self.collected,
                "created": self.created, "updated": self.updated, "expires": self.expires,
                "info": dict(self.info)}


_BATCH_COLS = ("id, provider, endpoint, model, status, lines, samples, created, updated, "
               "batch_id, input_file_id, output_file_id, error_file_id, collected, expires, "
               "counts, info")


def _batch_record(row: Sequence[Any]) -> BatchRecord:
    (id_, provider, endpoint, model, status, lines, samples, created, updated, batch_id,
     input_file_id, output_file_id, error_file_id, collected, expires, counts, info) = row
    return BatchRecord(id=id_, provider=provider, endpoint=endpoint, model=model, status=status,
                       lines=lines, samples=samples, created=created, updated=updated,
                       batch_id=batch_id, input_file_id=input_file_id,
                       output_file_id=output_file_id, error_file_id=error_file_id,
                       collected=bool(collected), expires=expires,
                       counts=json.loads(counts) if counts else {},
                       info=json.loads(info) if info else {})

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


def is_sample_store(path: str | os.PathLike[str], *, wait: float = 0.0) -> bool:
    """Whether `path` is a sample store (a SQLite file with this module's tables), read without
    writing to it: how a run folder is told from a folder of someone else's files. `wait`:
    seconds to wait for a file that may be a store being made this moment by another process
    (empty, locked, or a database without tables yet); a database with other tables is not
    waited for."""
    p = Path(path)
    deadline = time.monotonic() + wait
    while True:
        state = _store_state(p)
        if state != "making" or time.monotonic() >= deadline:
            return state == "store"
        time.sleep(0.05)


def _store_state(p: Path) -> str:
    """"store", "other" (no file, not a database, other tables) or "making" (empty, locked,
    or no tables yet)."""
    if not p.is_file():
        return "other"
    try:
        conn = sqlite3.connect(f"{p.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return "other"
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError as exc:  # locked while another process makes it
        return "making" if "locked" in str(exc) else "other"
    except sqlite3.Error:  # not a database
        return "other"
    finally:
        conn.close()
    if version >= 1 and {"samples", "prompts"} <= tables:
        return "store"
    return "making" if not tables else "other"


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
                    if not _has_column(conn, stmt):  # a column already there is not re-added
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

    def endpoints(self) -> dict[str | None, int]:
        """Endpoint identity -> number of prompts stored from it (None: written before schema 4,
        or from a provider's own public endpoint)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT endpoint, COUNT(*) FROM prompts GROUP BY endpoint").fetchall()
        return {e: int(c) for e, c in rows}

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
                    " latency_s, logprobs, source, answer_lp FROM samples WHERE key = ?",
                    (key,)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the sample store {self.path}: {exc}") from None
        out = {}
        for idx, text, fr, pt, ct, cost, lat, lp, source, alp in rows:
            if idx in wanted:
                answer, full = _parse(parser, text), json.loads(lp) if lp else None
                # the few finish reasons and sources shared, not one string per sample; a row
                # stored before schema 5 with its full logprobs is compacted on reading
                out[idx] = Sample(key=key, index=idx, text=text, answer=answer,
                                  finish_reason=_shared(fr), prompt_tokens=pt,
                                  completion_tokens=ct, cost_usd=cost, latency_s=lat,
                                  logprobs=full, cached=True, source=_shared(source),
                                  answer_lp=json.loads(alp) if alp else None if full is None
                                  else compact_logprobs(full, answer, parser))
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
                 request: dict[str, Any] | None = None, holder: str | None = None,
                 requests: Mapping[str, dict[str, Any]] | None = None) -> None:
        """Write the samples of one reply in one transaction, and drop `holder`'s leases on
        them in the same transaction (a crash leaves either both or neither).

        `requests` (key -> request metadata) writes the prompts of samples of several keys at
        once (a batch's output file).
        """
        if not samples:
            return
        now = time.time()
        rows = [(s.key, s.index, model, s.text, s.finish_reason, s.prompt_tokens,
                 s.completion_tokens, s.cost_usd, s.latency_s,
                 json.dumps(s.logprobs) if s.logprobs is not None else None, now, s.source,
                 None if s.answer_lp is None else json.dumps(s.answer_lp, separators=(",", ":")))
                for s in samples]
        with self._lock:
            for retry in (False, True):
                try:
                    self._put_rows(rows, samples, model=model, request=request, holder=holder,
                                   requests=requests)
                    return
                except sqlite3.Error as exc:
                    self._rollback()
                    if not retry and self._shrink_log(exc):
                        continue
                    raise StoreError(f"cannot write to the sample store {self.path}: {exc}"
                                     ) from None

    def _put_rows(self, rows: list[tuple[Any, ...]], samples: Sequence[Sample], *, model: str,
                  request: dict[str, Any] | None, holder: str | None,
                  requests: Mapping[str, dict[str, Any]] | None) -> None:
        """put_many's transaction (under the lock)."""
        self._conn.execute("BEGIN IMMEDIATE")
        prompts = dict(requests or {})
        if request is not None:
            prompts[samples[0].key] = request
        if prompts:
            self._conn.executemany(
                "INSERT OR IGNORE INTO prompts (key, model, request, endpoint) "
                "VALUES (?, ?, ?, ?)",
                [(k, model, json.dumps(r, sort_keys=True), r.get("endpoint"))
                 for k, r in prompts.items()])
        self._conn.executemany(
            "INSERT OR REPLACE INTO samples (key, idx, model, text, finish_reason,"
            " prompt_tokens, completion_tokens, cost_usd, latency_s, logprobs, created,"
            " source, answer_lp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        if holder is not None:
            self._conn.executemany(
                "DELETE FROM leases WHERE key = ? AND idx = ? AND holder = ?",
                [(s.key, s.index, holder) for s in samples])
        self._conn.execute("COMMIT")

    def _shrink_log(self, exc: sqlite3.Error) -> bool:
        """After a write failed for want of space (a full disk, a file-size limit): fold the
        write-ahead log into the database and truncate it, which frees most of it (the log
        holds a copy of each page per transaction; on a small disk it is most of the store).
        True when that was worth a second try."""
        if not any(w in str(exc).lower() for w in ("full", "i/o error")):
            return False
        try:
            busy = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.Error:
            return False
        return not busy

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
        with self._lock:
            for retry in (False, True):
                try:
                    return self._claim_rows(items, holder=holder, ttl=ttl)
                except sqlite3.Error as exc:
                    self._rollback()
                    if not retry and self._shrink_log(exc):
                        continue
                    raise StoreError(f"cannot claim samples in the store {self.path}: {exc}"
                                     ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _claim_rows(self, items: Sequence[tuple[str, Sequence[int]]], *, holder: str,
                    ttl: float) -> list[Claim]:
        """claim's transaction (under the lock)."""
        now = time.time()
        out: list[Claim] = []
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

    # -- batch records -----------------------------------------------------------------------
    def add_batch(self, record: BatchRecord, lines: Sequence[BatchLine], *, holder: str
                  ) -> None:
        """Record a batch about to be submitted, with its lines, and hand `holder`'s leases on
        the lines' samples to the batch (`batch_holder(record.id)`), in one transaction: from
        here on a rerun knows of it, whatever happens to this process."""
        owner = batch_holder(record.id)
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.execute(
                    f"INSERT INTO batches ({_BATCH_COLS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (record.id, record.provider, record.endpoint, record.model, record.status,
                     record.lines, record.samples, record.created, record.updated,
                     record.batch_id, record.input_file_id, record.output_file_id,
                     record.error_file_id, int(record.collected), record.expires,
                     json.dumps(record.counts), json.dumps(record.info)))
                self._conn.executemany(
                    "INSERT INTO batch_lines (batch, custom_id, key, start, count, status, error)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(record.id, ln.custom_id, ln.key, ln.start, ln.count, ln.status, ln.error)
                     for ln in lines])
                self._conn.executemany(
                    "UPDATE leases SET holder = ? WHERE key = ? AND idx = ? AND holder = ?",
                    [(owner, ln.key, i, holder) for ln in lines for i in ln.indices])
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreError(f"cannot record a batch in the store {self.path}: {exc}") \
                    from None

    _BATCH_FIELDS = ("batch_id", "input_file_id", "status", "counts", "output_file_id",
                     "error_file_id", "expires", "info", "collected")

    def update_batch(self, id: str, *, lease_until: float | None = None, **fields: Any) -> None:
        """Update a batch record's fields (status, batch_id, counts, ...); `lease_until`
        moves the expiry of the batch's leases (to the batch's own expiry once created)."""
        bad = [k for k in fields if k not in self._BATCH_FIELDS]
        if bad:
            raise StoreError(f"unknown batch record field(s) {bad}")
        values = {k: (json.dumps(v) if k in ("counts", "info") else
                      int(v) if k == "collected" else v) for k, v in fields.items()}
        values["updated"] = time.time()
        sets = ", ".join(f"{k} = ?" for k in values)
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.execute(f"UPDATE batches SET {sets} WHERE id = ?",
                                   (*values.values(), id))
                if lease_until is not None:
                    self._conn.execute("UPDATE leases SET expires = ? WHERE holder = ?",
                                       (lease_until, batch_holder(id)))
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreError(f"cannot update a batch record in the store {self.path}: "
                                 f"{exc}") from None

    def batches(self, *, pending: bool | None = None) -> list[BatchRecord]:
        """The batch records, oldest first; `pending=True`: those not yet collected (their
        samples may still arrive), False: the collected ones."""
        where = "" if pending is None else f" WHERE collected = {0 if pending else 1}"
        with self._lock:
            try:
                rows = self._conn.execute(
                    f"SELECT {_BATCH_COLS} FROM batches{where} ORDER BY created, id").fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the sample store {self.path}: {exc}") from None
        return [_batch_record(r) for r in rows]

    def batch_lines(self, id: str) -> list[BatchLine]:
        """The lines of one batch, in file order."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT custom_id, key, start, count, status, error FROM batch_lines "
                "WHERE batch = ? ORDER BY rowid", (id,)).fetchall()
        return [BatchLine(*r) for r in rows]

    def pending_lines(self) -> list[tuple[str, str, int, int]]:
        """(batch, key, start, count) of every line of a batch not yet collected: samples a
        rerun must not request again."""
        with self._lock:
            return list(self._conn.execute(
                "SELECT l.batch, l.key, l.start, l.count FROM batch_lines l "
                "JOIN batches b ON l.batch = b.id WHERE b.collected = 0"))

    def set_line_status(self, id: str, updates: Sequence[tuple[str, str, str | None]]) -> None:
        """(custom_id, status, error) for lines of batch `id`."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(
                    "UPDATE batch_lines SET status = ?, error = ? "
                    "WHERE batch = ? AND custom_id = ?",
                    [(st, err, id, cid) for cid, st, err in updates])
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreError(f"cannot update batch lines in the store {self.path}: {exc}") \
                    from None

    def close_batch(self, id: str, *, status: str | None = None) -> None:
        """Mark a batch collected (its samples are stored, its failed lines known) and drop
        the leases it still holds, in one transaction."""
        now = time.time()
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                if status is None:
                    self._conn.execute("UPDATE batches SET collected = 1, updated = ? "
                                       "WHERE id = ?", (now, id))
                else:
                    self._conn.execute("UPDATE batches SET collected = 1, status = ?, "
                                       "updated = ? WHERE id = ?", (status, now, id))
                self._conn.execute("DELETE FROM leases WHERE holder = ?", (batch_holder(id),))
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StoreError(f"cannot close a batch in the store {self.path}: {exc}") \
                    from None

    def live_holders(self, now: float) -> set[str]:
        """The holders of leases that expire after `now` (one row each, however many
        samples they hold)."""
        with self._lock:
            return {h for (h,) in self._conn.execute(
                "SELECT DISTINCT holder FROM leases WHERE expires > ?", (now,))}

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


def _has_column(conn: sqlite3.Connection, stmt: str) -> bool:
    """Whether an `ALTER TABLE t ADD COLUMN c ...` statement's column already exists."""
    w = stmt.split()
    return len(w) > 5 and " ".join(w[3:5]).upper() == "ADD COLUMN" and w[5] in {
        r[1] for r in conn.execute(f"PRAGMA table_info({w[2]})")}


def _shared(word: Any) -> Any:
    """One string object for every copy of a short word ("stop", "batch")."""
    return sys.intern(word) if type(word) is str and len(word) <= 32 else word


def _parse(parser: Parser | None, text: str | None) -> str | None:
    if text is None:
        return None
    if parser is None:
        return text
    return parser(text)
