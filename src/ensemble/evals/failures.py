"""The failure policy of a run (eval or calibration): what happens when questions fail for good.

A question fails when a request for one of its samples fails for good (refused by the provider,
retries used up) at any temperature. The sampler has already drawn and stored every other
sample. Then:

- the failures are written to RUN/failures.jsonl (one line per failed request,
  `records.FailureRecord`: question id, temperature, sample indices, error, status, reason,
  message), and the file is removed when a rerun has none;
- without `--fail-on-error`, or when more questions failed than it accepts, the run exits
  non-zero with one line naming the count, the reasons and the fix;
- with `--fail-on-error F` (a share below 1, or a count from 1 up) and few enough failures, the
  run goes on without the failed questions, and says so in its outputs;
- a systemic failure (credentials, endpoint, a run of failures in a row, the cost cap) stops the
  run whatever `F` is.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ensemble.errors import RunStopped, SamplingFailed
from ensemble.sampling.results import SampleResult
from ensemble.wording import counted

from .records import RECORDS_VERSION, JsonlWriter

__all__ = ["FAILURES_FILE", "FailedQuestions", "apply_failure_policy", "without_failed"]

FAILURES_FILE = "failures.jsonl"


@dataclass(frozen=True)
class FailedQuestions:
    """The questions left out of a run's estimates, and why."""

    ids: tuple[str, ...]
    reasons: dict[str, int]  # reason -> failed requests
    total_questions: int

    @property
    def count(self) -> int:
        return len(self.ids)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "of": self.total_questions, "ids": list(self.ids),
                "reasons": dict(self.reasons), "file": FAILURES_FILE if self.ids else None}


def apply_failure_policy(result: SampleResult, *, question_ids: Sequence[str],
                         temperatures: Sequence[float], out: Path,
                         fail_on_error: float | None, samples_total: int,
                         unstored: int = 0) -> FailedQuestions:
    """Write failures.jsonl; raise when the run must stop; else return what to leave out.

    `result.rows` are in (temperature, question) order: row i is question i % Q at
    temperature i // Q. `unstored`: samples drawn that the store could not take (a full
    disk).
    """
    q = len(question_ids)
    path = out / FAILURES_FILE
    failed_ids: list[str] = []
    seen: set[str] = set()
    if result.failures:
        with JsonlWriter(path, version=RECORDS_VERSION) as w:
            for f in result.failures:
                ti, qi = divmod(f.request, q)
                qid = question_ids[qi]
                if qid not in seen:
                    seen.add(qid)
                    failed_ids.append(qid)
                w.write({"id": qid, "t": float(temperatures[ti]), "indices": list(f.indices),
                         "error": f.error, "status": f.status, "reason": f.reason,
                         "message": f.message})
    else:
        path.unlink(missing_ok=True)
    reasons = Counter(f.reason for f in result.failures)
    failed = FailedQuestions(ids=tuple(failed_ids), reasons=dict(reasons), total_questions=q)
    why = ", ".join(f"{c} x {r}" for r, c in reasons.most_common(3))
    listed = f"listed in {path}" if failed.count else "none failed"
    if result.stopped is not None:
        drawn = sum(1 for row in result.rows for s in row if s is not None)
        lost = f" ({counted(failed.count, 'question')} failed, {listed})" if failed.count else ""
        nxt = ("" if "cost cap" in str(result.stopped) else
               "; fix the cause and rerun the same command to continue")
        kept = (f"{drawn} of {samples_total} samples drawn and stored" if not unstored else
                f"{drawn - unstored} of {samples_total} samples stored")
        raise RunStopped(f"{result.stopped}; {kept}{lost}{nxt}", failures=list(result.failures),
                         cause=result.stopped.cause)
    if not failed.count:
        return failed
    share = failed.count / max(1, q)
    allowed = _allowed(fail_on_error, q)
    if failed.count > allowed:
        suggest = math.ceil(share * 100) / 100
        hint = (f"or pass --fail-on-error {suggest:g} to accept up to that share"
                if suggest < 1 else "the provider failed on every question: check the first "
                                    "message in the file")
        first = result.failures[0].message
        raise SamplingFailed(f"{failed.count} of {q} questions failed ({why}; first: {first}): "
                             f"{listed}; rerun to retry them, {hint}",
                             failures=list(result.failures))
    return failed


def _allowed(fail_on_error: float | None, questions: int) -> int:
    if fail_on_error is None:
        return 0
    if fail_on_error >= 1:
        return int(fail_on_error)
    return int(math.floor(fail_on_error * questions + 1e-9))


def without_failed(rows: list[Any], questions: list[Any], n_temperatures: int,
                   failed: FailedQuestions, *, whole: str | None = None
                   ) -> tuple[list[Any], list[Any]]:
    """The rows and questions without the failed questions (rows in (temperature, question)
    order). `whole` names a `meta` key whose questions are scored together (box-ball's
    "scenario"): one failed question drops its whole group. InputError if nothing is left."""
    from ensemble.errors import InputError

    if not failed.count:
        return rows, questions
    drop = set(failed.ids)
    if whole is not None:
        lost = {q.meta[whole] for q in questions if q.id in drop}
        drop |= {q.id for q in questions if q.meta[whole] in lost}
    keep = [qi for qi, q in enumerate(questions) if q.id not in drop]
    if not keep:
        raise InputError(f"every question failed; see {FAILURES_FILE}")
    q = len(questions)
    return ([rows[ti * q + qi] for ti in range(n_temperatures) for qi in keep],
            [questions[qi] for qi in keep])
