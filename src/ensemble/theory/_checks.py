"""Argument checks shared by the theory modules, kept free of scipy so that any module can use
them without paying for its import."""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["validate_n"]


def validate_n(n: int) -> int:
    """n as a Python int >= 1 (numpy integers accepted), else InputError."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n must be an integer >= 1, got {n!r}")
    return int(n)
