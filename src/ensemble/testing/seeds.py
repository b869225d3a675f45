"""Stable draws from names: the simulator's one way to turn parts (a seed, a salt, a prompt, a
request number) into a number, so that the same parts plant the same values in every process.

`hash()` is salted per process; SHA-256 of the parts joined by ":" is not. The values it gives
are pinned by tests (the planted answers, faults, refusals and batch outcomes): changing the
joining or the bytes taken changes every simulated run.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

__all__ = ["seeded_rng", "stable_u64", "stable_uniform"]


def stable_u64(*parts: Any) -> int:
    """A 64-bit integer fixed by `parts` (their `str`, joined by ":")."""
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big")


def stable_uniform(*parts: Any) -> float:
    """A number in [0, 1) fixed by `parts`."""
    return stable_u64(*parts) / 2**64


def seeded_rng(*parts: Any) -> np.random.Generator:
    """A generator seeded by `parts`."""
    return np.random.default_rng(stable_u64(*parts))
