"""Real `ensemble serve` replicas for the fleet's tests and bench: processes started from a YAML
config (their first stdout line is their URL), stopped with a signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml


def write_config(path: Path, upstream: str, *, redis_url: str | None, rpm: float | None = None,
                 tpm: float | None = None, n: int = 3, max_concurrency: int = 32,
                 fleet: dict[str, Any] | None = None, **top: Any) -> Path:
    served: dict[str, Any] = {"model": "openai/sim-expert", "api_base": upstream, "n": n,
                              "temperature": 0.7, "choices": ["L", "R"],
                              "max_concurrency": max_concurrency,
                              "price_per_1k": [1.0, 1.0]}
    if rpm is not None:
        served["rpm"] = rpm
    if tpm is not None:
        served["tpm"] = tpm
    doc: dict[str, Any] = {"port": 0, "models": {"box": served}, **top}
    if redis_url is not None:
        doc["fleet"] = {"redis_url": redis_url, **(fleet or {})}
    path.write_text(yaml.safe_dump(doc))
    return path


@contextmanager
def replicas(config: Path, count: int, *, args: Sequence[str] = (),
             env: dict[str, str] | None = None) -> Iterator[list[tuple[subprocess.Popen, str]]]:
    """`count` replicas of `ensemble serve --config CONFIG`; yields (process, base URL) each;
    stops those still running with SIGTERM (their stderr is in `proc.stderr_text`)."""
    e = {k: v for k, v in os.environ.items() if k != "ENSEMBLE_SERVE_API_KEY"}
    e.update(env or {})
    procs = [subprocess.Popen([sys.executable, "-m", "ensemble", "serve", "--config",
                               str(config), *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=e)
             for _ in range(count)]
    # read each replica's log as it comes: a full pipe would block its event loop on a log line
    logs: list[list[str]] = [[] for _ in procs]
    readers = [threading.Thread(target=_drain, args=(p, lines), daemon=True)
               for p, lines in zip(procs, logs, strict=True)]
    for r in readers:
        r.start()
    out: list[tuple[subprocess.Popen, str]] = []
    try:
        for p in procs:
            assert p.stdout is not None
            url = p.stdout.readline().strip()
            if not url.startswith("http"):
                p.wait(30)
                time.sleep(0.2)
                err = "".join(logs[procs.index(p)])
                raise RuntimeError(f"serve did not start: {err[-2000:]}")
            out.append((p, url))
        yield out
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for p, r, lines in zip(procs, readers, logs, strict=True):
            r.join(10)
            p.stderr_text = "".join(lines)  # type: ignore[attr-defined]


def _drain(proc: subprocess.Popen, lines: list[str]) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)


def windows(times: Sequence[float], width: float, *, since: float | None = None) -> int:
    """The most events in any window of `width` seconds."""
    ts = sorted(t for t in times if since is None or t >= since)
    best = j = 0
    for i, t in enumerate(ts):
        while j < len(ts) and ts[j] < t + width:
            j += 1
        best = max(best, j - i)
    return best


def wait_for(pred: Any, timeout: float = 10.0, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())
