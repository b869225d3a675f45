"""Shared fixtures. Paths to ../shared are relative to the project root, never absolute."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
MATHQA_TEST = SHARED / "data" / "mathqa" / "test.json"
SMOLLM2_GGUF = SHARED / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


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
