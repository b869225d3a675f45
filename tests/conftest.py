"""Shared fixtures. Paths to ../shared are relative to the project root, never absolute."""

from __future__ import annotations

import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
MATHQA_TEST = SHARED / "data" / "mathqa" / "test.json"
SMOLLM2_GGUF = SHARED / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

# litellm fetches its price map over the network when imported without this (up to ~45 s of
# retries where the network hangs); ensemble's own import of it sets it
# (providers.litellm_lib), and the tests that import litellm directly or through dspy do so
# under tests/serve/test_clients.py's fixture. Set once for the session, at import, so that
# no test, worker or subprocess depends on which of those ran first. An explicit value is kept.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The xdist workers share the machine's cores as the embedded llama.cpp servers of one process
# do (`ensemble.local.cores`): each worker's servers get its share (ENSEMBLE_LOCAL_THREADS,
# read when ensemble.local is imported, so set before any test module imports it). Two
# workers' 2-thread servers on 2 cores, or one beside the other worker's tests, wait on a
# descheduled thread at every step: the real-model tests took 3-10 times longer than with one
# thread each. An explicit ENSEMBLE_LOCAL_THREADS is kept.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
if _WORKERS > 1:
    os.environ.setdefault("ENSEMBLE_LOCAL_THREADS", str(max(1, (os.cpu_count() or 2) // _WORKERS)))


# `python -m ensemble ARGS` as a terminal starts a foreground job: with SIGINT's default action
# (KeyboardInterrupt). A non-interactive shell starts a background job (`pytest ... &`, as a
# script or an agent's tool does) with SIGINT ignored, and an ignored signal stays ignored in
# every process started below it: a test's Ctrl-C would then be ignored as that shell asked, and
# the interrupted run would finish and exit 0 (the Ctrl-C tests failed so on main's full runs).
_FOREGROUND = ("import runpy, signal, sys; "
               "signal.signal(signal.SIGINT, signal.default_int_handler); "
               "runpy.run_module('ensemble', run_name='__main__', alter_sys=True)")


@pytest.fixture
def interruptible():
    """`interruptible(*args) -> argv`: the argv of a real `ensemble ARGS` process that a test
    interrupts with SIGINT, started with SIGINT's default action whatever this test process
    inherited (`python -m ensemble` keeps an inherited "ignore", as every program does)."""

    def argv(*args: object) -> list[str]:
        return [sys.executable, "-c", _FOREGROUND, *(str(a) for a in args)]

    return argv


@pytest.fixture(scope="session")
def mathqa_path() -> Path:
    if not MATHQA_TEST.exists():
        pytest.skip(f"MathQA test split not found at {MATHQA_TEST} (it lives in ../shared)")
    return MATHQA_TEST


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    if not SMOLLM2_GGUF.exists():
        pytest.skip(f"SmolLM2 GGUF not found at {SMOLLM2_GGUF} (it lives in ../shared)")
    return SMOLLM2_GGUF


@pytest.fixture(scope="session")
def box_questions():
    """The 400 box-and-ball questions."""
    from ensemble.tasks import get_task

    return get_task("boxball").questions()


@pytest.fixture(scope="session")
def box_parse():
    """The box-and-ball answer parser."""
    from ensemble.tasks import get_task

    return get_task("boxball").parse


@pytest.fixture(scope="module")
def cheap_and_dear():
    """Two simulated members over one question set (the same difficulties), each behind its own
    server: a cheap, weak one (λ₁ 1.5, three options' prior 3:2) and a dear, strong one (λ₁ 6),
    as the cost rule's tests price them."""
    from ensemble.testing import SimulatedServer
    from ensemble.testing.expert import MCModel, SimulatedExpert

    cheap = SimulatedExpert(lam1=1.5, mc_model=MCModel(3, 2), seed=1, difficulty_seed=7)
    dear = SimulatedExpert(lam1=6.0, mc_model=MCModel(12, 1), seed=2, difficulty_seed=7)
    with SimulatedServer(expert=cheap) as s1, SimulatedServer(expert=dear) as s2:
        yield s1, s2


@pytest.fixture(scope="module")
def serve_app():
    """`serve_app(app, **runner_options) -> port`: an aiohttp app served on 127.0.0.1 from its
    own event-loop thread (`ensemble._sync.LoopThread`, as the servers use), stopped when the
    module's tests end."""
    from aiohttp import web

    from ensemble._sync import LoopThread

    started = []

    def serve(app, **options) -> int:
        thread, runner = LoopThread("test-app"), web.AppRunner(app, **options)

        async def startup():
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()

        thread.start(startup)
        started.append((thread, runner))
        return int(runner.addresses[0][1])

    yield serve
    for thread, runner in started:
        thread.stop(runner.cleanup)


@dataclass(frozen=True)
class CliRun:
    """What `run_cli` saw: the shape of `subprocess.CompletedProcess` (args, returncode,
    stdout, stderr), so a test reads the same fields whichever way it ran the command."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def refusal(self) -> str:
        """The one stderr line of a refused command, asserting the house rule for bad input:
        a non-zero exit, one line, no traceback."""
        lines = self.stderr.strip().splitlines()
        assert self.returncode != 0 and len(lines) == 1 and "Traceback" not in self.stderr, \
            self.stderr
        return lines[0]


@pytest.fixture
def run_cli(capfd):
    """`run_cli(*args, env=None, cwd=None, input=None) -> CliRun`: `ensemble ARGS` in this
    process, through `ensemble.cli.main(argv)` as `python -m ensemble` calls it, without
    paying a Python and import start-up per call.

    stdout and stderr are captured at the file descriptors (capfd: output of C code and of
    logging handlers included); argparse's exits become the exit code, as in a subprocess.
    `env` replaces the environment for the call (as subprocess's `env=`), `cwd` the working
    directory and `input` standard input; all are restored afterwards. An uncaught exception
    is not turned into an exit code: it fails the test with its traceback (a subprocess test
    asserted "no Traceback on stderr" for the same thing). Tests of what only a process shows
    (start-up imports, signals, two processes on one store, the shell's view of exit codes)
    keep a real subprocess.
    """
    from ensemble.cli import main

    def run(*args, env=None, cwd=None, input=None, timeout=None) -> CliRun:  # noqa: ARG001
        argv = tuple(str(a) for a in args)
        saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
        capfd.readouterr()  # what the test printed before is not the command's
        try:
            if env is not None:
                os.environ.clear()
                os.environ.update({str(k): str(v) for k, v in env.items()})
            if cwd is not None:
                os.chdir(cwd)
            if input is not None:
                sys.stdin = io.TextIOWrapper(io.BytesIO(input.encode()), encoding="utf-8")
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse: usage errors (2), --help / --version (0)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            sys.stdin = saved_stdin
            os.chdir(saved_cwd)
            if env is not None:
                os.environ.clear()
                os.environ.update(saved_env)
        captured = capfd.readouterr()
        return CliRun(argv, int(code or 0), captured.out, captured.err)

    return run


@pytest.fixture
def redis_server():
    """A throwaway redis-server on a free loopback port (tests of a fleet of replicas); skips,
    naming why, where redis-server or the `redis` client (the `fleet` extra) is missing."""
    pytest.importorskip("redis", reason="the redis client is not installed (pip install -e "
                                        "'.[dev]' brings the fleet extra)")
    from ensemble.testing.redisserver import RedisServer, redis_server_path

    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run "
                    "installs it)")
    with RedisServer() as srv:
        yield srv
