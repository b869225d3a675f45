"""The simulated server's Files and Batch API, in OpenAI's formats, for batch mode offline.

Routes (mounted by `SimulatedServer`): `POST /v1/files` (multipart upload, purpose "batch"),
`GET /v1/files`, `GET /v1/files/{id}`, `GET /v1/files/{id}/content`, `DELETE /v1/files/{id}`;
`POST /v1/batches`, `GET /v1/batches` (newest first, `limit`, `after`),
`GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`.

A batch goes validating -> in_progress -> finalizing -> completed over `BatchPlan.delay`
seconds; its request counts grow linearly meanwhile. Each line is answered by the server's own
chat logic (`SimulatedServer.completion`: the planted expert, refusals, the model and `n`
checks), with the first sample index taken from the line's `custom_id`
(`ensemble.sampling.batch.parse_custom_id`), since batch lines carry no headers: the batch
draw of sample i equals the online draw of sample i. Lines never reach the chat route, so
`stats.requests` (chat requests) stays 0 for a batch-only run.

Misbehaviour on demand (`BatchPlan`): a share of lines failing with 500 on every submission
(`fail_rate`) or only the first time their custom_id is seen (`fail_first`); the first K
batches expire with half their lines done (`expire_first`); the limits on lines and bytes per
input file (a batch over them fails validation, as OpenAI's does). Failed and unexecuted lines
go to the error file (unexecuted ones with code `batch_expired` / `batch_cancelled`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from .seeds import stable_uniform
from .wire import ChatServer, error_doc, error_response

__all__ = ["BatchPlan", "SimulatedBatchAPI"]

_ENDPOINTS = ("/v1/chat/completions",)


@dataclass(frozen=True)
class BatchPlan:
    """How the simulated Batch API behaves.

    delay:        seconds from creation to completion (request counts grow linearly).
    fail_rate:    share of lines that fail (500) on every submission, chosen by hash.
    fail_first:   share of lines that fail (500) the first time their custom_id is submitted.
    expire_first: the first K batches expire at the end of `delay` with half their lines done.
    max_lines, max_bytes: per input file; a batch over them fails validation.
    """

    delay: float = 1.0
    fail_rate: float = 0.0
    fail_first: float = 0.0
    expire_first: int = 0
    max_lines: int = 50_000
    max_bytes: int = 200 * 1024 * 1024
    seed: int = 0

    def __post_init__(self) -> None:
        from ..errors import InputError

        if not self.delay >= 0:
            raise InputError(f"batch delay must be >= 0 seconds, got {self.delay!r}")
        for name in ("fail_rate", "fail_first"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise InputError(f"batch {name} must lie in [0, 1], got {v!r}")
        if self.expire_first < 0 or self.max_lines < 1 or self.max_bytes < 1:
            raise InputError("expire_first must be >= 0 and the file limits >= 1")

    def _u(self, *parts: Any) -> float:
        return stable_uniform(self.seed, *parts)


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def doc(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.data),
                "created_at": self.created_at, "filename": self.filename,
                "purpose": self.purpose, "status": "processed", "status_details": None,
                "expires_at": None}


@dataclass
class _Line:
    number: int
    custom_id: str
    body: dict[str, Any]
    fails: bool  # injected 500


@dataclass
class _Batch:
    id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    metadata: dict[str, Any] | None
    created_at: int
    lines: list[_Line]
    expire: bool
    status: str = "validating"
    errors: list[dict[str, Any]] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    times: dict[str, int | None] = field(default_factory=dict)
    started: float | None = None  # monotonic time in_progress began
    done: int = 0  # lines executed (after the end)
    failed: int = 0
    cancel: asyncio.Event | None = None
    auth: str = ""  # the Authorization header of the create call (for the server's echo_key)

    def counts(self, delay: float) -> dict[str, int]:
        total = len(self.lines)
        if self.status in ("completed", "expired", "cancelled", "failed"):
            return {"total": total, "completed": self.done - self.failed, "failed": self.failed}
        if self.started is None:
            return {"total": total, "completed": 0, "failed": 0}
        frac = 1.0 if delay <= 0 else min(1.0, (time.monotonic() - self.started) / delay)
        upto = int(total * frac)
        failed = sum(1 for ln in self.lines[:upto] if ln.fails)
        return {"total": total, "completed": upto - failed, "failed": failed}

    def doc(self, delay: float) -> dict[str, Any]:
        t = self.times
        return {"id": self.id, "object": "batch", "endpoint": self.endpoint,
                "errors": None if not self.errors else {"object": "list", "data": self.errors},
                "input_file_id": self.input_file_id,
                "completion_window": self.completion_window, "status": self.status,
                "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
                "created_at": self.created_at, "in_progress_at": t.get("in_progress_at"),
                "expires_at": self.created_at + 24 * 3600,
                "finalizing_at": t.get("finalizing_at"), "completed_at": t.get("completed_at"),
                "failed_at": t.get("failed_at"), "expired_at": t.get("expired_at"),
                "cancelling_at": t.get("cancelling_at"), "cancelled_at": t.get("cancelled_at"),
                "request_counts": self.counts(delay), "metadata": self.metadata}


class SimulatedBatchAPI:
    """Files and batches of one `SimulatedServer` (kept in memory; see the module doc)."""

    def __init__(self, server: ChatServer, plan: BatchPlan) -> None:
        self.server = server
        self.plan = plan
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self._seen: set[str] = set()  # custom_ids submitted before (for fail_first)
        self._ids = itertools.count(1)
        self._created = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        """Cancel the batches still running and wait for them (the server is shutting down)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def routes(self) -> list[tuple[str, str, Any]]:
        """(method, path, handler) of the Files and Batch API routes (paths as aiohttp
        writes them: `{id}` is one path segment)."""
        return [("POST", "/v1/files", self._upload), ("GET", "/v1/files", self._list_files),
                ("GET", "/v1/files/{id}", self._file),
                ("GET", "/v1/files/{id}/content", self._file_content),
                ("DELETE", "/v1/files/{id}", self._delete_file),
                ("POST", "/v1/batches", self._create), ("GET", "/v1/batches", self._list),
                ("GET", "/v1/batches/{id}", self._retrieve),
                ("POST", "/v1/batches/{id}/cancel", self._cancel)]

    # -- helpers -----------------------------------------------------------------------------
    def _count(self, route: str) -> None:
        with self.server.lock:
            self.server.stats.batch_calls[route] += 1

    def _guard(self, request: Any, route: str) -> Any:
        self._count(route)
        return self.server.check_key(request)

    def _not_found(self, what: str, id_: str) -> Any:
        return error_response(404, f"No such {what}: '{id_}'",
                                           "invalid_request_error", param="id")

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    # -- files -------------------------------------------------------------------------------
    async def _upload(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "files.create")
        if denied is not None:
            return denied
        try:
            form = await request.post()
        except Exception:
            return error_response(400, "expected a multipart/form-data upload",
                                               "invalid_request_error")
        purpose = str(form.get("purpose", ""))
        upload = form.get("file")
        if purpose not in ("batch", "assistants", "fine-tune"):
            return error_response(400, f"invalid purpose {purpose!r}",
                                               "invalid_request_error", param="purpose")
        if upload is None or not hasattr(upload, "file"):
            return error_response(400, "no file in the upload",
                                               "invalid_request_error", param="file")
        data = upload.file.read()
        f = _File(self._new_id("file-sim"), str(upload.filename or "upload.jsonl"), purpose,
                  data, int(time.time()))
        self.files[f.id] = f
        with self.server.lock:
            self.server.stats.files_uploaded += 1
        return web.json_response(f.doc())

    async def _list_files(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "files.list")
        if denied is not None:
            return denied
        return web.json_response({"object": "list", "data": [f.doc() for f in
                                                             self.files.values()]})

    async def _file(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "files.retrieve")
        if denied is not None:
            return denied
        f = self.files.get(request.match_info["id"])
        if f is None:
            return self._not_found("file", request.match_info["id"])
        return web.json_response(f.doc())

    async def _file_content(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "files.content")
        if denied is not None:
            return denied
        f = self.files.get(request.match_info["id"])
        if f is None:
            return self._not_found("file", request.match_info["id"])
        return web.Response(body=f.data, content_type="application/octet-stream")

    async def _delete_file(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "files.delete")
        if denied is not None:
            return denied
        f = self.files.pop(request.match_info["id"], None)
        if f is None:
            return self._not_found("file", request.match_info["id"])
        return web.json_response({"id": f.id, "object": "file", "deleted": True})

    # -- batches -----------------------------------------------------------------------------
    async def _create(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "batches.create")
        if denied is not None:
            return denied
        try:
            body = await request.json()
        except Exception:
            return error_response(400, "request body is not valid JSON",
                                               "invalid_request_error")
        endpoint = str(body.get("endpoint", ""))
        if endpoint not in _ENDPOINTS:
            return error_response(
                400, f"endpoint must be one of {', '.join(_ENDPOINTS)}, got {endpoint!r}",
                "invalid_request_error", param="endpoint")
        window = str(body.get("completion_window", ""))
        if window != "24h":
            return error_response(400, "completion_window must be '24h'",
                                               "invalid_request_error",
                                               param="completion_window")
        fid = str(body.get("input_file_id", ""))
        f = self.files.get(fid)
        if f is None:
            return self._not_found("file", fid)
        meta = body.get("metadata")
        self._created += 1
        b = _Batch(id=self._new_id("batch_sim"), endpoint=endpoint, input_file_id=fid,
                   completion_window=window, metadata=meta if isinstance(meta, dict) else None,
                   created_at=int(time.time()), lines=[],
                   expire=self._created <= self.plan.expire_first, cancel=asyncio.Event(),
                   auth=request.headers.get("Authorization", ""))
        errors = self._parse_lines(f, b)
        if errors:
            b.status, b.errors = "failed", errors
            b.times["failed_at"] = int(time.time())
        self.batches[b.id] = b
        with self.server.lock:
            self.server.stats.batches_created += 1
        if b.status != "failed":
            task = asyncio.ensure_future(self._run(b))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return web.json_response(b.doc(self.plan.delay))

    def _parse_lines(self, f: _File, b: _Batch) -> list[dict[str, Any]]:
        """Validate the input file into the batch's lines; the errors that fail the batch."""
        plan = self.plan
        if len(f.data) > plan.max_bytes:
            return [{"code": "file_too_large", "message": f"the input file has {len(f.data)} "
                     f"bytes, more than the limit of {plan.max_bytes}", "param": None,
                     "line": None}]
        raw = [x for x in f.data.splitlines() if x.strip()]
        if len(raw) > plan.max_lines:
            return [{"code": "too_many_requests", "message": f"the input file has {len(raw)} "
                     f"requests, more than the limit of {plan.max_lines}", "param": None,
                     "line": None}]
        seen: set[str] = set()
        for number, text in enumerate(raw, 1):
            try:
                doc = json.loads(text)
            except ValueError:
                return [{"code": "invalid_json_line", "message": "this line is not valid JSON",
                         "param": None, "line": number}]
            cid = doc.get("custom_id") if isinstance(doc, dict) else None
            if not isinstance(cid, str) or not cid:
                return [{"code": "missing_required_parameter", "message": "each line needs a "
                         "custom_id", "param": "custom_id", "line": number}]
            if cid in seen:
                return [{"code": "duplicate_custom_id", "message": f"the custom_id {cid!r} "
                         "appears twice", "param": "custom_id", "line": number}]
            seen.add(cid)
            if doc.get("method") != "POST" or doc.get("url") != b.endpoint \
                    or not isinstance(doc.get("body"), dict):
                return [{"code": "invalid_request", "message": "each line needs method POST, "
                         f"url {b.endpoint} and a body object", "param": None, "line": number}]
            first = cid not in self._seen
            fails = (plan.fail_rate > 0 and plan._u("fail", cid) < plan.fail_rate) or (
                first and plan.fail_first > 0 and plan._u("first", cid) < plan.fail_first)
            b.lines.append(_Line(number, cid, doc["body"], fails))
        self._seen.update(seen)
        return []

    async def _run(self, b: _Batch) -> None:
        delay = self.plan.delay
        assert b.cancel is not None
        await asyncio.sleep(min(0.05, delay / 10))
        if b.status == "validating":
            b.status = "in_progress"
            b.times["in_progress_at"] = int(time.time())
            b.started = time.monotonic()
        try:
            await asyncio.wait_for(b.cancel.wait(), timeout=delay)
            cancelled = True
        except asyncio.TimeoutError:
            cancelled = False
        total = len(b.lines)
        if cancelled:
            frac = (0.0 if b.started is None else 1.0 if delay <= 0
                    else min(1.0, (time.monotonic() - b.started) / delay))
            upto, end, code = int(total * frac), "cancelled", "batch_cancelled"
            await asyncio.sleep(0.05)
        elif b.expire:
            upto, end, code = total // 2, "expired", "batch_expired"
        else:
            b.status = "finalizing"
            b.times["finalizing_at"] = int(time.time())
            await asyncio.sleep(min(0.05, delay / 10))
            upto, end, code = total, "completed", ""
        out: list[dict[str, Any]] = []
        err: list[dict[str, Any]] = []
        for j, ln in enumerate(b.lines[:upto]):
            if j % 500 == 499:
                await asyncio.sleep(0)  # a big batch must not stall the other routes
            status, doc = self._execute(ln)
            if status == 200:
                self.server.misreport(doc, b.auth)
            row = {"id": f"batch_req_{b.id}_{ln.number}", "custom_id": ln.custom_id,
                   "response": {"status_code": status, "request_id": f"req_{ln.number}",
                                "body": doc}, "error": None}
            (out if status == 200 else err).append(row)
        for ln in b.lines[upto:]:
            what = "the completion window expired" if end == "expired" else "it was cancelled"
            err.append({"id": f"batch_req_{b.id}_{ln.number}", "custom_id": ln.custom_id,
                        "response": None, "error": {"code": code, "message": "This request "
                                                    f"could not be executed before {what}."}})
        b.done, b.failed = upto, sum(1 for r in err if r["response"] is not None)
        if out:
            b.output_file_id = self._store_output(b, out, "output")
        if err:
            b.error_file_id = self._store_output(b, err, "error")
        with self.server.lock:
            self.server.stats.batch_lines += upto
        b.status = end
        b.times[f"{end}_at"] = int(time.time())

    def _execute(self, ln: _Line) -> tuple[int, dict[str, Any]]:
        """One line through the server's chat logic (or the injected 500)."""
        if ln.fails:
            with self.server.lock:
                self.server.stats.batch_line_faults += 1
            return 500, error_doc("The server had an error while processing your "
                                               "request.", "server_error")
        bad = self.server.check_body(ln.body)
        if bad is not None:
            return bad[0], {"error": bad[1]}
        from ..sampling.batch_options import parse_custom_id

        parsed = parse_custom_id(ln.custom_id)
        start = parsed[1] if parsed is not None else None
        return self.server.completion(ln.body, start=start, number=ln.number)

    def _store_output(self, b: _Batch, rows: list[dict[str, Any]], kind: str) -> str:
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        f = _File(self._new_id("file-sim"), f"{b.id}_{kind}.jsonl", f"batch_{kind}", data,
                  int(time.time()))
        self.files[f.id] = f
        return f.id

    async def _retrieve(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "batches.retrieve")
        if denied is not None:
            return denied
        b = self.batches.get(request.match_info["id"])
        if b is None:
            return self._not_found("batch", request.match_info["id"])
        return web.json_response(b.doc(self.plan.delay))

    async def _cancel(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "batches.cancel")
        if denied is not None:
            return denied
        b = self.batches.get(request.match_info["id"])
        if b is None:
            return self._not_found("batch", request.match_info["id"])
        if b.status in ("validating", "in_progress", "finalizing"):
            b.status = "cancelling"
            b.times["cancelling_at"] = int(time.time())
            assert b.cancel is not None
            b.cancel.set()
        elif b.status != "cancelling":
            return error_response(
                400, f"Cannot cancel a batch with status '{b.status}'.",
                "invalid_request_error")
        return web.json_response(b.doc(self.plan.delay))

    async def _list(self, request: Any) -> Any:
        from aiohttp import web

        denied = self._guard(request, "batches.list")
        if denied is not None:
            return denied
        try:
            limit = max(1, min(100, int(request.query.get("limit", 20))))
        except ValueError:
            return error_response(400, "limit must be an integer",
                                               "invalid_request_error", param="limit")
        newest = list(reversed(self.batches.values()))
        after = request.query.get("after")
        if after:
            ids = [b.id for b in newest]
            newest = newest[ids.index(after) + 1:] if after in ids else []
        page = newest[:limit]
        return web.json_response({
            "object": "list", "data": [b.doc(self.plan.delay) for b in page],
            "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None,
            "has_more": len(newest) > limit})
