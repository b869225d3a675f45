"""What every provider is asked with: the sampling parameters of one request.

`Provider.complete(messages, params, ...)` takes a `SamplingParams`; the sampler builds them,
the store hashes them into its keys (`ensemble.sampling.types.request_key`), and every provider
turns them into its own request. They live here, with the provider seam, so that the providers
never import the sampling engine above them; `ensemble.sampling.types` re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SamplingParams"]


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters for one request, validated here and nowhere else.

    temperature: >= 0 (0 is greedy decoding). top_p: in (0, 1]. max_tokens: >= 1.
    seed: the provider's sampling seed (where it has one). stop: stop strings.
    logprobs / top_logprobs (0..20): ask for token log-probabilities.
    extra: provider-specific parameters, passed through as given (e.g. ("extra_body", {...})).
    """

    temperature: float
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int | None = None
    extra: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        import math

        from ..errors import InputError

        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) \
                or t < 0:
            raise InputError(f"temperature must be a finite number >= 0, got {t!r}")
        if self.top_p is not None and not (isinstance(self.top_p, (int, float))
                                           and 0 < self.top_p <= 1):
            raise InputError(f"top_p must lie in (0, 1], got {self.top_p!r}")
        mt = self.max_tokens
        if mt is not None and (isinstance(mt, bool) or not isinstance(mt, int) or mt < 1):
            raise InputError(f"max_tokens must be an integer >= 1, got {mt!r}")
        if self.seed is not None and (isinstance(self.seed, bool)
                                      or not isinstance(self.seed, int)):
            raise InputError(f"seed must be an integer, got {self.seed!r}")
        if any(not isinstance(x, str) or not x for x in self.stop):
            raise InputError(f"stop must be non-empty strings, got {list(self.stop)!r}")
        tl = self.top_logprobs
        if tl is not None and (isinstance(tl, bool) or not isinstance(tl, int)
                               or not 0 <= tl <= 20):
            raise InputError(f"top_logprobs must be an integer in 0..20, got {tl!r}")

    def as_dict(self) -> dict[str, Any]:
        """The parameters that are set, as litellm keyword arguments (sorted, JSON-able)."""
        out: dict[str, Any] = {"temperature": self.temperature}
        if self.top_p is not None:
            out["top_p"] = self.top_p
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        if self.seed is not None:
            out["seed"] = self.seed
        if self.stop:
            out["stop"] = list(self.stop)
        if self.logprobs:
            out["logprobs"] = True
            if self.top_logprobs is not None:
                out["top_logprobs"] = self.top_logprobs
        for k, v in self.extra:
            out[k] = v
        return dict(sorted(out.items()))

    @classmethod
    def make(cls, temperature: float, *, extra: Mapping[str, Any] | None = None,
             stop: Sequence[str] | str | None = None, **kwargs: Any) -> SamplingParams:
        """Build from plain keyword arguments (a dict for `extra`, a list or str for `stop`)."""
        from ..errors import InputError
        from .options import check_keywords

        check_keywords(kwargs, ("top_p", "max_tokens", "seed", "logprobs", "top_logprobs"),
                       what="sampling parameter")
        stop_t: tuple[str, ...] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        extra_t = tuple(sorted((extra or {}).items()))
        try:
            t = float(temperature)
        except (TypeError, ValueError):
            raise InputError(f"temperature must be a number >= 0, got {temperature!r}") from None
        return cls(temperature=t, stop=stop_t, extra=extra_t, **kwargs)
