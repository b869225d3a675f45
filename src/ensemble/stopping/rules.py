"""The fixed rule and Adaptive-Consistency's Beta rule."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from ..errors import InputError
from .registry import register_stop_rule
from .table import StoppingRule, lookahead, validate_max_n

__all__ = ["DEFAULT_THRESHOLD", "BetaRule", "FixedRule"]

DEFAULT_THRESHOLD = 0.95


@register_stop_rule
class FixedRule(StoppingRule):
    """Draw up to max_n samples, all at once."""

    name = "fixed"
    about = "draw up to max_n samples per question, all at once"

    def __init__(self, *, max_n: int) -> None:
        M = validate_max_n(max_n)
        k = np.broadcast_to((M - np.arange(M + 1)).astype(np.int16)[:, None, None],
                            (M + 1, M + 1, M + 1))
        super().__init__(M, k)


@lru_cache(maxsize=64)
def _beta_table(max_n: int, threshold: float) -> NDArray[np.int16]:
    from scipy.special import betainc

    M = max_n
    A = np.arange(M + 1)[:, None].astype(float)
    B = np.arange(M + 1)[None, :].astype(float)
    # P(x > 1/2), x ~ Beta(A + 1, B + 1), = I_{1/2}(B + 1, A + 1)
    prob = betainc(B + 1, A + 1, 0.5)
    S = np.broadcast_to(prob >= threshold, (M + 1, M + 1, M + 1)).copy()
    S[M] = True
    table = lookahead(S)
    table.setflags(write=False)
    return table


@register_stop_rule
class BetaRule(StoppingRule):
    """Adaptive-Consistency's Beta stopping rule (`BetaStoppingCriteria(threshold)`), capped at
    max_n. `count_invalid=True` counts None as an answer, as the package does."""

    name = "beta"
    about = ("Adaptive-Consistency: stop once P(leader's share > 1/2) >= threshold "
               "(default 0.95)")
    params = ("threshold", "count_invalid")

    def __init__(self, *, max_n: int, threshold: float = DEFAULT_THRESHOLD,
                 count_invalid: bool = False) -> None:
        M = validate_max_n(max_n)
        th = float(threshold)
        if not 0.5 < th <= 1.0:
            raise InputError(f"the beta rule's threshold must lie in (0.5, 1], got {threshold!r}")
        self.threshold = th
        super().__init__(M, _beta_table(M, th), count_invalid=count_invalid)

    def probability(self, *, top: int, second: int) -> float:
        """P(x > 1/2) for x ~ Beta(top + 1, second + 1): the package's `prob`."""
        from scipy.special import betainc

        return float(betainc(second + 1, top + 1, 0.5))

    def __repr__(self) -> str:
        return f"BetaRule(max_n={self.max_n}, threshold={self.threshold})"

