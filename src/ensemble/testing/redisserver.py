"""A throwaway `redis-server` on a free loopback port, for tests of a fleet of replicas.

    from ensemble.testing.redisserver import RedisServer, redis_server_path
    with RedisServer() as redis:          # redis.url == "redis://127.0.0.1:PORT/0"
        ...
        redis.stop()                      # an outage
        redis.start()                     # back on the same port, empty

It runs the machine's `redis-server` (Debian's package `redis-server`) with no persistence, in
its own process; `redis_server_path()` is None where it is not installed (tests skip, naming
why).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

from ..errors import EnsembleError

__all__ = ["RedisServer", "redis_server_path"]


def redis_server_path() -> str | None:
    """The `redis-server` executable, or None."""
    return shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """`redis-server` on 127.0.0.1:`port` (0: a free one), without persistence."""

    def __init__(self, port: int = 0, *, password: str | None = None) -> None:
        exe = redis_server_path()
        if exe is None:
            raise EnsembleError("redis-server is not installed (apt-get install redis-server)")
        self.exe = exe
        self.port = port or _free_port()
        self.password = password
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        if self.proc is not None and self.proc.poll() is None:
            return self
        args = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = (self.proc.stderr.read() if self.proc.stderr else b"").decode()[-300:]
                raise EnsembleError(f"redis-server exited at start: {err.strip()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64):
                        return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise EnsembleError(f"redis-server did not answer on port {self.port} within "
                            f"{timeout:g} s")

    def stop(self) -> None:
        """Kill it (an outage: clients see refused connections until `start`)."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
