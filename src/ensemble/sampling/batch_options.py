"""Batch mode's vocabulary: its options, the `custom_id` of a line, the Batch API a provider
declares, and the error of a failed line (by the one translation table)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InputError, ProviderError, ServerError
from ..providers.base import Provider
from ..providers.batch import BatchAPI
from ..providers.translate import Where, classify, failure_of_line

__all__ = ["BatchOptions", "batch_api_for", "custom_id", "line_error", "parse_custom_id"]


def custom_id(key: str, start: int, count: int) -> str:
    """The custom_id of a batch line: the store key and the sample indices it covers."""
    return f"{key}:{start}:{count}"


def parse_custom_id(text: str) -> tuple[str, int, int] | None:
    """(key, first sample index, count) of a custom_id made by `custom_id`, else None."""
    parts = str(text).rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return parts[0], int(parts[1]), int(parts[2])


@dataclass(frozen=True)
class BatchOptions:
    """How batch mode submits and waits.

    detach:          submit and return at once (raises `BatchesSubmitted` naming the batches);
                     a rerun of the same command collects.
    max_lines, max_bytes: per input file (OpenAI: 50,000 lines, 200 MB).
    max_submissions: submissions of one line in one run (the first and the resubmissions of
                     failed, expired or cancelled lines).
    poll_initial, poll_factor, poll_max: seconds between status checks: poll_initial at first,
                     growing by poll_factor up to poll_max.
    """

    detach: bool = False
    max_lines: int = 50_000
    max_bytes: int = 200 * 1024 * 1024
    max_submissions: int = 3
    poll_initial: float = 2.0
    poll_factor: float = 1.5
    poll_max: float = 300.0
    completion_window: str = "24h"

    def __post_init__(self) -> None:
        for name in ("max_lines", "max_bytes", "max_submissions"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"batch option {name} must be an integer >= 1, got {v!r}")
        for name in ("poll_initial", "poll_max"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v < float("inf")):
                raise InputError(f"batch option {name} must be a number of seconds > 0, "
                                 f"got {v!r}")
        if not (isinstance(self.poll_factor, (int, float)) and self.poll_factor >= 1):
            raise InputError(f"batch option poll_factor must be >= 1, got {self.poll_factor!r}")


def batch_api_for(provider: Provider) -> BatchAPI:
    """The Batch API the provider declares (`Capabilities.batch_api`); InputError if none."""
    make = provider.capabilities.batch_api
    if make is None:
        raise InputError(f"batch mode needs a provider with a Batch API; "
                         f"{type(provider).__name__} has none: run without --batch")
    api: BatchAPI = make()
    return api


def line_error(status: int | None, error: Any, *, model: str, api_base: str | None,
               batch_status: str = "") -> ProviderError:
    """The `ProviderError` of a failed batch line: by the one translation table
    (`ensemble.providers.translate`) when the line has a reply; a line the batch never ran
    (expired, cancelled, failed) is resubmittable."""
    if status is not None:
        return classify(failure_of_line(status, error),
                        Where(model=model, api_base=api_base, key_source="explicit"))
    err = error if isinstance(error, Mapping) else {}
    if isinstance(err.get("error"), Mapping):
        err = err["error"]
    what = {"batch_expired": "expired", "batch_cancelled": "cancelled"}.get(
        str(err.get("code") or ""), batch_status or "not run")
    exc: ProviderError = ServerError(f"{model}: the batch {what} before this request ran",
                                     reason=f"batch {what}", model=model, status=None,
                                     api_base=api_base)
    exc.retryable = True
    return exc
