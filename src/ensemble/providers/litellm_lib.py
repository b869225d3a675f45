"""litellm itself, imported on first use (it takes ~4 s to import: `ensemble --help` and
`ensemble theory` must not pay that), with the local price table and no parameter dropped;
shared by the litellm provider and its Batch API."""

from __future__ import annotations

import os
import warnings
from typing import Any

__all__ = ["HTTPX_DEFAULT_POOL", "LOCAL_PLACEHOLDER_KEY", "litellm", "pool_capacity"]

_litellm: Any = None
LOCAL_PLACEHOLDER_KEY = "sk-no-key-required"


def litellm() -> Any:
    """The litellm module, imported on first use with the local price table (no network)."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm as _ll

        _ll.suppress_debug_info = True
        import logging

        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
            logging.getLogger(name).setLevel(logging.ERROR)  # its warnings are not ours to show
        # litellm's success-logging worker is one process-wide asyncio queue bound to the first
        # event loop that used it; sync calls from several threads (each its own loop) make it
        # fail on every other loop with "LoggingWorker error" tracebacks. It only runs litellm's
        # own callbacks, which ensemble does not use (costs are read from the reply): drop
        # exactly those records, through the logging module's public filters.
        logging.getLogger("LiteLLM").addFilter(_drop_logging_worker_noise)
        logging.getLogger("asyncio").addFilter(_drop_logging_worker_noise)
        _ll.drop_params = False  # never drop a parameter (e.g. n) behind the user's back
        _litellm = _ll
        # litellm creates a coroutine in a worker thread and awaits it later; when our request
        # is cancelled (Ctrl-C, a run stopped, a timeout) the coroutine is never awaited and
        # Python warns at garbage collection. Nothing is lost: silence exactly that warning.
        warnings.filterwarnings("ignore", category=RuntimeWarning,
                                message=r"coroutine '[\w.]*acompletion' was never awaited")
    return _litellm


def _drop_logging_worker_noise(record: Any) -> bool:
    """False for the log records of litellm's LoggingWorker used across event loops."""
    text = str(record.msg)
    if "LoggingWorker" in text:
        return False
    if record.args or "Task exception was never retrieved" in text:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot format is not ours to judge
            return True
        if "LoggingWorker" in text or "logging_worker" in text:
            return False
    ctx = getattr(record, "exc_info", None)
    return not (ctx and "logging_worker" in repr(ctx[1]))


HTTPX_DEFAULT_POOL = 100  # httpx's documented default: 100 connections per client


def pool_capacity() -> int | None:
    """Connections per host litellm's async transport may open (None: unknown).

    Read, never changed: litellm's pool is its own business (its aiohttp transport allows
    AIOHTTP_CONNECTOR_LIMIT / _PER_HOST connections, 1000 / 500 by default, set in the
    environment; with DISABLE_AIOHTTP_TRANSPORT=True it uses httpx's default pool). Only public
    names are read; a litellm that moved them gives None.
    """
    litellm()
    try:
        from litellm import constants
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

        if not AsyncHTTPHandler.should_use_aiohttp_transport():
            return HTTPX_DEFAULT_POOL
        caps = [v for v in (getattr(constants, "AIOHTTP_CONNECTOR_LIMIT", None),
                            getattr(constants, "AIOHTTP_CONNECTOR_LIMIT_PER_HOST", None))
                if isinstance(v, int) and v > 0]
        return min(caps) if caps else HTTPX_DEFAULT_POOL
    except Exception:  # noqa: BLE001 - another litellm layout: unknown
        return None
