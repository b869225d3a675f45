"""Benchmarks' servers: the simulated expert in its own process (so its CPU does not compete
with the client's), read back through its /stats route."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def server_process(*args: str) -> Iterator[str]:
    """`ensemble testing serve ARGS` in a child process; yields its base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "ensemble", "testing", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"server did not start: {proc.stderr.read() if proc.stderr else ''}")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def server_stats(url: str) -> dict:
    """The counts the server keeps (requests, statuses, 429s, accepted, served pairs)."""
    base = url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{base}/stats", timeout=10) as r:
        return json.load(r)
