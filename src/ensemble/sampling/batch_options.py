"""Batch mode's vocabulary: its options, the `custom_id` of a line and the Batch API a provider
declares (whose wire format the lines are written and read in)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from ..providers.base import Provider
from ..providers.batch import BatchAPI

__all__ = ["BatchOptions", "batch_api_for", "custom_id", "parse_custom_id"]


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
