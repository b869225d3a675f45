"""The online path's units of work: contiguous sample indices of one request (the provider's
`n`), handed to the sampler's workers from a lazy queue (no task per request created up
front), with the units another process is drawing deferred until their next check."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .types import Sample

__all__ = ["RowView", "Unit", "UnitQueue"]


@dataclass
class Unit:
    """Contiguous sample indices of one request, requested together (the provider's `n`)."""

    ri: int
    key: str
    indices: list[int]
    not_before: float = 0.0  # monotonic time before which a busy unit is not re-checked


class RowView:
    """A stand-in for the run's list of rows that holds one row (at its request index)."""

    def __init__(self, ri: int, row: list[Sample | None]) -> None:
        self._ri = ri
        self._row = row

    def __getitem__(self, i: int) -> list[Sample | None]:
        if i != self._ri:  # pragma: no cover - internal misuse
            raise IndexError(i)
        return self._row


class UnitQueue:
    """Units to request, handed to workers one at a time; units whose samples another process
    is drawing wait in `deferred` until their next check."""

    def __init__(self, units: list[Unit]) -> None:
        self._units: Iterator[Unit] = iter(units)
        self._left = len(units)
        self.pending = len(units)
        self._deferred: collections.deque[Unit] = collections.deque()
        self._active = 0

    async def next(self) -> Unit | None:
        while True:
            if self._deferred and self._deferred[0].not_before <= time.monotonic():
                self._active += 1
                return self._deferred.popleft()
            if self._left:
                self._left -= 1
                self._active += 1
                return next(self._units)
            if not self._deferred:
                return None
            await asyncio.sleep(max(0.0, self._deferred[0].not_before - time.monotonic()))

    def defer(self, unit: Unit) -> None:
        self._deferred.append(unit)

    def first_deferred(self) -> Unit | None:
        return self._deferred[0] if self._deferred else None

    def done(self, unit: Unit) -> None:
        self._active -= 1
