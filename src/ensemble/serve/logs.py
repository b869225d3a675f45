"""One line per request: method, path, model, status, samples drawn, decision, margin, time.

Plain text by default, one JSON object per line with `--log-json`. Every line passes through
`ensemble.secrets.redact`: no key reaches the log, whatever an upstream error message held.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ..secrets import redact
from ..wording import escaped

__all__ = ["Outcome", "RequestLog", "RequestRecord", "http_logger"]


@dataclass(frozen=True)
class RequestRecord:
    """What one request did."""

    method: str
    path: str
    status: int
    seconds: float
    model: str | None = None
    samples: int | None = None
    decision: object = None  # the decision as a JSON value
    margin: int | None = None
    stream: bool = False
    error: str | None = None
    note: str | None = None  # e.g. the sampling parameters of the request that were ignored

    def line(self) -> str:
        parts = [self.method, self.path, str(self.status)]
        if self.model is not None:
            parts.append(f"model={self.model}")
        if self.samples is not None:
            shown = self.decision if isinstance(self.decision, str) or self.decision is None \
                else json.dumps(self.decision, ensure_ascii=False)
            parts += [f"samples={self.samples}", f"decision={shown}",
                      f"margin={self.margin}"]
        if self.stream:
            parts.append("stream")
        parts.append(f"{self.seconds * 1000:.1f}ms")
        if self.note:
            parts.append(self.note)
        if self.error:
            parts.append(f"error={' '.join(self.error.split())}")
        # a client's model or path, a model's decision: escaped, never acting on the terminal
        return escaped(" ".join(parts))

    def json_line(self) -> str:
        doc = {k: v for k, v in asdict(self).items() if v is not None}
        doc["ms"] = round(doc.pop("seconds") * 1000, 1)
        text = json.dumps(doc, ensure_ascii=False)  # escapes C0 controls, not C1 or bidi ones
        return text if text.isprintable() else json.dumps(doc)  # then all as \\uXXXX


@dataclass
class Outcome:
    """A request's record while it is served: filled in as the request goes."""

    method: str
    path: str
    status: int = 500
    model: str | None = None
    samples: int | None = None
    decision: object = None
    margin: int | None = None
    stream: bool = False
    error: str | None = None
    note: str | None = None
    deciding: bool = False  # admitted and deciding (samples may be in flight)

    def record(self, seconds: float) -> RequestRecord:
        return RequestRecord(self.method, self.path, self.status, seconds, model=self.model,
                             samples=self.samples, decision=self.decision,
                             margin=self.margin, stream=self.stream, error=self.error,
                             note=self.note)


class RequestLog:
    """Writes one redacted line per request to `sink` (default: stderr)."""

    def __init__(self, *, json_lines: bool = False,
                 sink: Callable[[str], None] | None = None) -> None:
        self.json_lines = json_lines
        self._sink = sink
        self._lock = threading.Lock()

    def write(self, rec: RequestRecord) -> None:
        text = redact(rec.json_line() if self.json_lines else rec.line())
        with self._lock:
            if self._sink is not None:
                self._sink(text)
            else:
                print(text, file=sys.stderr, flush=True)


class _ClientErrors(logging.Filter):
    """aiohttp's own records about a client's unreadable request, without their tracebacks:
    after serve answers a body it cannot decode (400 `unreadable_body`, serve's one line),
    aiohttp drains the rest of it, meets the same error again and logged it as "Unhandled
    exception" with a traceback; that record is dropped. A request aiohttp answers itself
    before serve sees it (e.g. a Content-Encoding it cannot decode) keeps its record as one
    line naming the problem."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        from aiohttp import web
        from aiohttp.http import HttpProcessingError

        if isinstance(exc, web.RequestPayloadError):
            return False  # answered (400) and logged by serve
        if isinstance(exc, HttpProcessingError) and 400 <= exc.code < 500:
            record.msg = redact(f"{record.getMessage()}: {' '.join(str(exc).split())}")
            record.args, record.exc_info, record.exc_text = (), None, None
        return True


def http_logger() -> logging.Logger:
    """The logger serve's aiohttp server writes to (`ensemble.serve.http`): client errors in
    one line each, no traceback (`_ClientErrors`)."""
    logger = logging.getLogger("ensemble.serve.http")
    if not any(isinstance(f, _ClientErrors) for f in logger.filters):
        logger.addFilter(_ClientErrors())
    return logger
