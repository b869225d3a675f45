"""Fault injection for the simulated server: which request fails, and how."""

from __future__ import annotations

from dataclasses import dataclass

from .seeds import stable_uniform

__all__ = ["FAULT_KINDS", "FaultPlan"]

FAULT_KINDS = ("429", "500", "503", "timeout", "slow", "malformed", "drop", "short_n")


@dataclass(frozen=True)
class FaultPlan:
    """Which requests fail and how.

    A request (numbered from 1 in arrival order) fails when it is among the `first` requests,
    when `every` divides its number, or with probability `rate` (seeded, deterministic in the
    request number). The kind is drawn from `kinds` the same way.
    `retry_after` is sent with 429s; `timeout` sleeps `hang` seconds (the client should time out
    first); `slow` sleeps `slow` seconds and then answers normally.
    """

    rate: float = 0.0
    kinds: tuple[str, ...] = ("429", "500", "503", "malformed", "drop")
    first: int = 0
    every: int = 0
    retry_after: float = 0.05
    hang: float = 30.0
    slow: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [k for k in self.kinds if k not in FAULT_KINDS]
        if bad:
            from ..errors import InputError

            raise InputError(f"unknown fault kind(s) {bad}; choose from {', '.join(FAULT_KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            from ..errors import InputError

            raise InputError(f"fault rate must lie in [0, 1], got {self.rate}")

    def _u(self, number: int, salt: str) -> float:
        return stable_uniform(self.seed, salt, number)

    def fault_for(self, number: int) -> str | None:
        """The fault injected into request `number`, or None."""
        if not self.kinds:
            return None
        hit = (number <= self.first or (self.every > 0 and number % self.every == 0)
               or (self.rate > 0 and self._u(number, "hit") < self.rate))
        if not hit:
            return None
        return self.kinds[int(self._u(number, "kind") * len(self.kinds)) % len(self.kinds)]
