"""What a run returns: the samples (None where a request failed) and the failures, the same
for the online and the batch path; and how a failed run is raised."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProviderError, RunStopped, SamplingFailed
from .types import Sample

__all__ = ["RunEstimate", "SampleFailure", "SampleResult", "failure_of", "failure_summary",
           "raise_for_failures", "redraw_note"]


@dataclass(frozen=True)
class SampleFailure:
    """A request that failed for good: which prompt, which samples, and why."""

    request: int  # index into the requests given to `run`
    tag: str | None  # the request's tag (e.g. the question id)
    key: str
    indices: tuple[int, ...]
    error: str  # the error's class name, e.g. "ContentRefusedError"
    status: int | None
    reason: str  # a short label: "400 content policy", "timeout", ...
    message: str  # one line, redacted
    exception: ProviderError | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"request": self.request, "tag": self.tag, "indices": list(self.indices),
                "error": self.error, "status": self.status, "reason": self.reason,
                "message": self.message}


def failure_of(exc: ProviderError, *, request: int, tag: str | None, key: str,
               indices: Sequence[int], suffix: str = "") -> SampleFailure:
    """The failure record of `indices` of one request, failed with `exc`."""
    return SampleFailure(request=request, tag=tag, key=key, indices=tuple(indices),
                         error=type(exc).__name__, status=exc.status, reason=exc.reason,
                         message=" ".join(str(exc).split()) + suffix, exception=exc)


@dataclass
class SampleResult:
    """What `Sampler.run` returns: the samples (None where a request failed) and the failures.

    `stopped` is the systemic failure that stopped new requests, if one did.
    """

    rows: list[list[Sample | None]]
    failures: list[SampleFailure] = field(default_factory=list)
    stopped: RunStopped | None = None

    @property
    def complete(self) -> bool:
        return not self.failures and self.stopped is None

    def failed_requests(self) -> set[int]:
        """Indices of the requests with at least one sample missing."""
        return {i for i, row in enumerate(self.rows) if any(s is None for s in row)}


@dataclass(frozen=True)
class RunEstimate:
    """A dry run's count: what would be requested, and at most what it would cost."""

    samples_stored: int
    samples_missing: int
    requests: int
    prompt_tokens: int
    completion_tokens_max: int | None  # None: no max_tokens, no bound
    cost_usd_max: float | None  # None: unknown (see `price`)
    price: str  # where the price comes from, or why it is unknown
    prompt_tokens_by: str = "the provider's tokenizer"  # which counter counted prompt_tokens

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": True, "samples_stored": self.samples_stored,
                "samples_missing": self.samples_missing, "requests": self.requests,
                "prompt_tokens": self.prompt_tokens, "prompt_tokens_by": self.prompt_tokens_by,
                "completion_tokens_max": self.completion_tokens_max,
                "cost_usd_max": self.cost_usd_max, "price": self.price}


def raise_for_failures(result: SampleResult, n_requests: int, *, stored: bool = True) -> None:
    """Raise what `Sampler.sample` raises for a result with failures: the error that stopped
    the run (e.g. `AuthenticationError`), the one prompt's error when one prompt failed, else
    `SamplingFailed` listing them all. `stored`: whether a store keeps the samples drawn (the
    message says so only then)."""
    if result.stopped is not None:
        cause = result.stopped.cause
        if isinstance(cause, ProviderError) and cause.systemic:
            raise cause  # e.g. AuthenticationError: the type says what to fix
        raise result.stopped
    if not result.failures:
        return
    failed = {f.request for f in result.failures}
    first = result.failures[0].exception
    if len(failed) == 1 and first is not None:
        raise first
    raise SamplingFailed(failure_summary(result.failures, n_requests, stored=stored),
                         failures=list(result.failures))


def failure_summary(failures: Sequence[SampleFailure], n_requests: int, *,
                    stored: bool = True) -> str:
    """One line: "2 of 73 prompts failed (2 x 400 content policy): <first message>"."""
    reqs = {f.request for f in failures}
    reasons = collections.Counter(f.reason for f in failures)
    why = ", ".join(f"{c} x {r}" for r, c in reasons.most_common(3))
    if not stored:
        return (f"{len(reqs)} of {n_requests} prompts failed ({why}): {failures[0].message}; "
                "no store keeps the samples drawn (give one to resume where this stopped)")
    rest = "; the other samples are stored" if len(reqs) < n_requests else ""
    return (f"{len(reqs)} of {n_requests} prompts failed ({why}): {failures[0].message}{rest}; "
            "rerun to retry the failed ones")


def redraw_note(stored: Sequence[Sample]) -> str:
    """What redrawing samples stored without logprobs costs, from what their first draw did."""
    tokens = sum(s.completion_tokens or 0 for s in stored)
    usd = [s.cost_usd for s in stored]
    cost = (f"cost ${sum(u or 0.0 for u in usd):.4g} for {tokens:,} completion tokens"
            if usd and all(u is not None for u in usd)
            else f"took {tokens:,} completion tokens (its price was not stored)")
    return (f"{len(stored)} of the samples asked for are stored without logprobs; this draw "
            "reads logprobs (a rule weighs each sample by them), which are part of the store "
            f"key, so those samples are requested again, with them: their first draw {cost}, "
            "and a redraw about as much")
