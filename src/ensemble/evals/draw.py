"""The draw step: the answers of every member to every question (the only interface between
sampling and scoring).

A member is a model at one temperature with k samples per question, behind an endpoint (its
`ProviderOptions`). A single model at t1..tk is k members on one endpoint; a mixed ensemble
names its members. Members on one endpoint share one `Sampler` (one limiter, one run: their
requests are one batch for the Batch API); members on different endpoints are drawn
concurrently, each through its own. Every sample goes into the run folder's one store, so a
rerun draws only what is missing. The failure policy is applied per sampler (`failures.jsonl`
in the run folder, or `member-G/` per endpoint group of a mixed ensemble), and the questions a
provider refused for good are left out (with the whole item of the task's layout). `eval` and
`calibrate` both draw here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.providers.options import ProviderOptions
from ensemble.sampling.batch_options import BatchOptions
from ensemble.sampling.types import SampleRequest
from ensemble.tasks import Question, Task

from .failures import FailedQuestions

__all__ = ["LOGPROB_INSTRUCTION", "Build", "DrawMember", "DrawPolicy", "Drawn",
           "calibration_requests", "draw", "estimate", "requests_of"]


@dataclass(frozen=True)
class DrawMember:
    """One member to draw for: `model` at `temperature`, `samples` per question, through the
    endpoint of `options` (the key hidden in its repr)."""

    model: str
    temperature: float
    samples: int
    options: ProviderOptions = field(default_factory=ProviderOptions)


@dataclass(frozen=True)
class DrawPolicy:
    """How to draw: the failure policy and spending cap (evals/failures.py), progress and
    "waiting: ..." lines, and the way to the provider (its Batch API, or a Router config)."""

    fail_on_error: float | None = None
    max_cost: float | None = None
    progress: bool = False
    on_status: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    batch: BatchOptions | None = None
    router: str | None = None


@dataclass(frozen=True)
class Drawn:
    """What a draw returns: the questions kept (a failed question's whole item left out),
    rows[g * Q + q] the samples of member g for question q, answers[g] a (Q, k_g) array of
    what each counts as (None: invalid, or not one of the question's choices), the samplers'
    stats, the failed questions, the wall time of sampling, and per member the endpoint its
    samples came from (the store key's endpoint identity; None: the provider's public one) and
    the provider that drew them (`Sampler.provider_name`: "openai" for the SDK, "litellm", ...)."""

    questions: list[Question]
    rows: list[list[Any]]
    answers: list[np.ndarray]
    stats: list[Any]
    failed: FailedQuestions
    wall_s: float
    endpoints: list[str | None]
    served_by: list[str]

    def costs(self, g: int, k: int, price: Callable[[int, int], float | None] | None = None
              ) -> NDArray[np.float64]:
        """(Q, k) the dollars of member g's first k samples of each question, by sample index
        (NaN: a price unknown, or no such sample). `price`: the member's price now, for the
        samples stored without a cost (drawn before it was given): their tokens at it, the
        question's prompt tokens shared evenly over its samples (a reply counts them once)."""
        nq = len(self.questions)
        out = np.full((nq, k), np.nan)
        for qi in range(nq):
            row = [s for s in self.rows[g * nq + qi] or () if s is not None]
            prompt = (sum(s.prompt_tokens or 0 for s in row) / len(row)) if row else 0.0
            for s in row:
                if s.index >= k:
                    continue
                if s.cost_usd is not None:
                    out[qi, s.index] = s.cost_usd
                elif price is not None and s.completion_tokens is not None:
                    usd = price(round(prompt), s.completion_tokens)
                    out[qi, s.index] = np.nan if usd is None else usd
        return out


    def tokens(self, g: int, k: int) -> NDArray[np.float64]:
        """(Q, k) the completion tokens of member g's first k samples of each question, by
        sample index (NaN: not reported, or no such sample)."""
        nq = len(self.questions)
        out = np.full((nq, k), np.nan)
        for qi in range(nq):
            for s in self.rows[g * nq + qi] or ():
                if s is not None and s.index < k and s.completion_tokens is not None:
                    out[qi, s.index] = s.completion_tokens
        return out


Build = Callable[[Question, float, int], SampleRequest]


def requests_of(task: Task, *, max_tokens: int | None = None,
                extra: dict[str, Any] | None = None) -> Build:
    """Requests for k samples of a question at t: the task's prompt and completion budget,
    and `extra` sampling parameters (what the rules read from each sample beyond its hard
    answer: `Requests.sampling()`)."""
    budget = max_tokens or task.max_tokens
    params = {**({} if budget is None else {"max_tokens": budget}), **(extra or {})}

    def build(q: Question, t: float, k: int) -> SampleRequest:
        return SampleRequest.of(q.prompt, temperature=t, k=k, tag=q.id, **params)

    return build


# a calibration in logprob mode asks one one-token reply and reads P(L) from its top logprobs
LOGPROB_INSTRUCTION = ("\n\nDo not explain. Reply with exactly one uppercase letter: L for the "
                       "Left Box or R for the Right Box.")


def calibration_requests(task: Task, *, mode: str, max_tokens: int | None = None) -> Build:
    """A calibration's requests: k samples of a question at t (the task's prompt and budget),
    or in logprob mode one one-token reply with its top 5 logprobs (`LOGPROB_INSTRUCTION`).
    They carry no tag: a calibration's stored samples are keyed as they always were."""
    budget = max_tokens or task.max_tokens

    def build(q: Question, t: float, k: int) -> SampleRequest:
        if mode == "logprob":
            return SampleRequest.of(q.prompt + LOGPROB_INSTRUCTION, temperature=t, k=1,
                                    max_tokens=1, logprobs=True, top_logprobs=5)
        return SampleRequest.of(q.prompt, temperature=t, k=k, max_tokens=budget)

    return build


def _groups(members: Sequence[DrawMember], separate: bool) -> list[list[int]]:
    """Members sharing a model and an endpoint share a sampler (unless `separate`)."""
    if separate:
        return [[g] for g in range(len(members))]
    out: dict[tuple[str, str], list[int]] = {}
    for g, m in enumerate(members):
        out.setdefault((m.model, repr(m.options.public())), []).append(g)
    return list(out.values())


def estimate(task: Task, questions: Sequence[Question], members: Sequence[DrawMember], *,
             out: Path, build: Build | None = None, separate: bool = False
             ) -> list[dict[str, Any]]:
    """What drawing would request and cost, per sampler (as `draw` groups the members), from
    the store a run would resume; nothing is sent and nothing is written (a missing store
    stays missing)."""
    from ensemble.sampling.sampler import Sampler

    build = build or requests_of(task)
    store = out / "samples.sqlite"
    docs = []
    for group in _groups(members, separate):
        m = members[group[0]]
        sampler = Sampler(m.model, options=m.options, store=store if store.exists() else None)
        try:
            est = sampler.estimate([build(q, members[g].temperature, members[g].samples)
                                    for g in group for q in questions])
        finally:
            if sampler.store is not None:
                sampler.store.close()
        docs.append({"model": m.model, "run_dir": str(out), **est.to_dict()})
    return docs


async def draw(task: Task, questions: Sequence[Question], members: Sequence[DrawMember], *,
               out: Path, policy: DrawPolicy, build: Build | None = None,
               separate: bool = False, whole: str | None = None) -> Drawn:
    """Draw what is missing for every member into `out/samples.sqlite`; apply the failure
    policy; return the answers per member. `build` makes each request (default: the task's
    prompt and budget); `separate` gives each member its own sampler (a mixed ensemble's
    members each at their own endpoint's limits); `whole` names the `meta` key whose
    questions are left out together when one fails (default: none)."""
    from ensemble.providers.router import sampler_mode
    from ensemble.sampling.sampler import Sampler

    from .failures import apply_failure_policy, without_failed

    build = build or requests_of(task)
    qs = list(questions)
    groups = _groups(members, separate)
    results: list[Any] = [None] * len(groups)
    stats: list[Any] = [None] * len(groups)
    identity: list[Any] = [None] * len(groups)
    names: list[str] = [""] * len(groups)

    async def one(i: int) -> None:
        first = members[groups[i][0]]
        reqs = [build(q, members[g].temperature, members[g].samples)
                for g in groups[i] for q in qs]
        async with Sampler(first.model, options=first.options, store=out / "samples.sqlite",
                           progress=policy.progress, max_cost=policy.max_cost,
                           on_status=policy.on_status,
                           **sampler_mode(model=first.model, options=first.options,
                                          batch=policy.batch, router=policy.router)) as s:
            # each reply read by its own question's parser where questions differ in kind
            # (what the scoring does: answers_of), so the live bar counts what is scored
            parsers = ([partial(task.parse_for, q) for g in groups[i] for q in qs]
                       if task.layout.per_question_choices else None)
            results[i] = await s.run(reqs, parser=task.parse, parsers=parsers)
            stats[i] = s.stats
            identity[i] = s.provider.identity
            names[i] = s.provider_name

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(len(groups))))
    wall = time.perf_counter() - t0
    ids: list[str] = []
    reasons: dict[str, int] = {}
    rows: list[list[Any]] = [[] for _ in range(len(members) * len(qs))]
    for i, (group, res, st) in enumerate(zip(groups, results, stats, strict=True)):
        where = out if len(groups) == 1 else out / f"member-{i}"
        where.mkdir(exist_ok=True)
        f = apply_failure_policy(res, question_ids=[q.id for q in qs],
                                 temperatures=[members[g].temperature for g in group],
                                 out=where, fail_on_error=policy.fail_on_error,
                                 samples_total=st.samples_total, unstored=st.unstored)
        ids += [x for x in f.ids if x not in ids]
        for r, c in f.reasons.items():
            reasons[r] = reasons.get(r, 0) + c
        for j, g in enumerate(group):
            rows[g * len(qs):(g + 1) * len(qs)] = res.rows[j * len(qs):(j + 1) * len(qs)]
    failed = FailedQuestions(ids=tuple(ids), reasons=reasons, total_questions=len(qs))
    rows, qs = without_failed(rows, qs, len(members), failed, whole=whole)
    endpoints: list[str | None] = [None] * len(members)
    served_by = [""] * len(members)
    for i, group in enumerate(groups):
        for g in group:
            endpoints[g], served_by[g] = identity[i], names[i]
    qs, answers = answers_of(task, qs, rows, len(members))
    return Drawn(qs, rows, answers, stats, failed, wall, endpoints, served_by)


def answers_of(task: Task, questions: list[Question], rows: list[list[Any]], members: int
               ) -> tuple[list[Question], list[np.ndarray]]:
    """What each sample counts as: the stored parse, or the task's per-question parser when
    its layout says so; an answer that is not one of the question's choices is invalid. Open
    answers (`evals.openanswers`) get their options from the answers first."""
    from .openanswers import score_open

    per_question = task.layout.per_question_choices
    nq = len(questions)
    got: dict[tuple[int, int], list[Any]] = {}
    for i, row in enumerate(rows):
        g, qi = divmod(i, nq)
        got[g, qi] = [None if s is None else
                      task.parse_for(questions[qi], s.text) if per_question else s.answer
                      for s in (row or ())]
    questions = score_open(task, questions, rows, got, members)
    out = []
    for g in range(members):
        k = max((len(got[g, qi]) for qi in range(nq)), default=0)
        a = np.full((nq, k), None, dtype=object)
        for qi, q in enumerate(questions):
            for j, key in enumerate(got[g, qi]):
                a[qi, j] = key if key in q.choices else None
        out.append(a)
    return questions, out
