"""The one draw loop of the Python API: fixed n, adaptive stopping and the cost rule alike.

`draw_all(...)` draws every prompt's samples from every member under a stopping rule's plan
(`ensemble.stopping.plan`; fixed n is the plan that asks for every member's n at once):

1. **Pilots.** Each question's first samples, `plan.pilot_draw(i, budgets, memory)` per
   member (fixed n: all of them; bayes: 2 pooled votes; beta: its first lossless batch; the
   cost rule: every member's pilot on its first `pilot_questions` questions): one
   `Sampler.run` per member over every question, members concurrently, each within its
   endpoint's limits, through the provider's `n`.
2. **Fit.** `plan.fit(pilots, memory, context)`: the policy, from the pilots (`Drawn`) and what
   the Ensemble's memory kept of earlier calls.
3. **Draw on.** Every open question concurrently: `policy.next(drawn)` says how many more
   samples each member gives (all zeros: stop); they are drawn (`Sampler.draw`: member g's i-th
   sample is its stored sample i, whatever the rule, so a rerun over a store asks nothing),
   and the question's `Drawn` is rebuilt from all its samples (`observe`: the answer keys as
   the Decision counts them, open answers merged; weights; tokens and dollars), keyed by its
   messages (`Drawn.question`: a rule randomised per question runs the same policy on it
   every time).
4. **Remember.** `plan.remember(memory, pilot, drawn)` for every question drawn to the end.

A question that fails for good (a refusal, a run stopped by a systemic failure or the cost
cap) stops drawing; its member rows end with None, as a fixed run's failed samples are.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .members import Member
from .providers.base import Provider
from .providers.params import SamplingParams
from .sampling.results import SampleFailure, SampleResult
from .sampling.sampler import Sampler
from .sampling.store import SampleStore
from .sampling.types import Sample, SampleRequest
from .stopping.drawn import Drawn, Observation
from .stopping.plan import FitContext, StopMemory, StopPlan, StopPolicy, check_next

__all__ = ["Drawing", "draw_all", "question_key"]

#: Builds a question's observations from its samples, member by member.
Observe = Callable[[Sequence[Sequence[Sample]]], tuple[tuple[Observation, ...], ...]]


@dataclass(frozen=True)
class Drawing:
    """What `draw_all` drew: one `SampleResult` per member (rows per prompt, the samples drawn
    in index order; a failed prompt's row ends with None) and the policy that decided when
    to stop (the one that decides with them, for a rule that decides: the cost rule)."""

    results: list[SampleResult]
    policy: StopPolicy


async def draw_all(members: Sequence[Member], params: Sequence[SamplingParams],
                   messages: Sequence[tuple[dict[str, str], ...]], plan: StopPlan, *,
                   observe: Observe, memory: StopMemory, context: FitContext,
                   parser: Callable[[str], Any], store: SampleStore | None,
                   provider_for: Callable[[Member], Provider],
                   use_n: list[bool | None],
                   in_flight: set[asyncio.Task[Any]] | None = None) -> Drawing:
    """Draw every prompt's samples under `plan` (see the module docstring). `use_n[g]`: what
    the Ensemble learned of whether member g's provider honours `n` (updated here);
    `in_flight`: where the requests that outlive a cancelled draw are held (the Ensemble's)."""
    P = len(messages)
    budgets = context.budgets
    async with contextlib.AsyncExitStack() as stack:
        samplers = [await stack.enter_async_context(Sampler(
            m.model, options=m.options, provider=provider_for(m), store=store,
            use_n="auto" if use_n[g] is None else bool(use_n[g]), in_flight=in_flight))
            for g, m in enumerate(members)]
        try:
            loop = _Loop(samplers, params, messages, budgets, observe, parser)
            heads = [plan.pilot_draw(i, budgets, memory) for i in range(P)]
            await loop.pilots(heads, one=P == 1 and store is None)
            if getattr(plan, "at_once", False):  # every sample drawn: nothing reads them
                return Drawing(loop.results(), plan.fit([None] * P, memory, context))
            pilots = [None if p in loop.failed else loop.drawn(p).head(heads[p])
                      for p in range(P)]
            policy = plan.fit(pilots, memory, context)
            await asyncio.gather(*(loop.finish(p, policy, plan.stop) for p in range(P)))
        finally:
            for g, smp in enumerate(samplers):
                if smp.run_state.n_ok is not None:
                    use_n[g] = smp.run_state.n_ok
        for p in range(P):
            pilot = pilots[p]
            if p not in loop.failed and pilot is not None:
                plan.remember(memory, pilot, loop.drawn(p))
        return Drawing(loop.results(), policy)


def question_key(messages: Sequence[dict[str, str]]) -> str:
    """A question's key (`Drawn.question`): the digest of its messages."""
    text = json.dumps(list(messages), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _Loop:
    """The samples drawn so far, per question and member, and the two ways to draw more."""

    def __init__(self, samplers: Sequence[Sampler], params: Sequence[SamplingParams],
                 messages: Sequence[tuple[dict[str, str], ...]], budgets: Sequence[int],
                 observe: Observe, parser: Callable[[str], Any]) -> None:
        self.samplers, self.params, self.messages = samplers, params, messages
        self.budgets = tuple(budgets)
        self.observe, self.parser = observe, parser
        G, P = len(samplers), len(messages)
        self.rows: list[list[list[Sample]]] = [[[] for _ in range(G)] for _ in range(P)]
        self.failures: list[list[SampleFailure]] = [[] for _ in range(G)]
        self.failed: set[int] = set()
        self._seen: dict[int, tuple[tuple[int, ...], Drawn]] = {}
        self._keys: dict[int, str] = {}  # question_key, made when a rule first reads p

    def drawn(self, p: int) -> Drawn:
        """Question p's samples as its rule reads them (rebuilt only when some were added:
        open answers are merged over all of them)."""
        counts = tuple(len(r) for r in self.rows[p])
        kept = self._seen.get(p)
        if kept is None or kept[0] != counts:
            key = self._keys.get(p) or self._keys.setdefault(p, question_key(self.messages[p]))
            kept = self._seen[p] = (counts, Drawn(self.observe(self.rows[p]), self.budgets, key))
        return kept[1]

    async def pilots(self, heads: Sequence[Sequence[int]], *, one: bool = False) -> None:
        """Every question's pilot: one run per member over the questions that have one
        (`one`: a single question without a store, drawn as the adaptive steps are, without
        a run's work queue: `ensemble serve`'s request)."""

        async def member(g: int) -> None:
            asked = [p for p in range(len(self.messages)) if heads[p][g] > 0]
            if not asked:
                return
            if one:
                req = SampleRequest(self.messages[0], self.params[g], heads[0][g])
                got, failures = await self.samplers[g].draw(req, 0, heads[0][g],
                                                            parser=self.parser, watch=True)
                self.rows[0][g] = [s for s in got if s is not None]
                if len(self.rows[0][g]) < len(got):
                    self.failed.add(0)
                self.failures[g] += failures
                stopped = self.samplers[g].run_state.stop
                if stopped is not None:  # as a run's stop names its failures
                    stopped.failures = list(failures)
                return
            reqs = [SampleRequest(self.messages[p], self.params[g], heads[p][g]) for p in asked]
            res = await self.samplers[g].run(reqs, parser=self.parser)
            for ri, p in enumerate(asked):
                row = res.rows[ri]
                self.rows[p][g] = [s for s in row if s is not None]
                if any(s is None for s in row):
                    self.failed.add(p)
            self.failures[g] += [replace(f, request=asked[f.request]) for f in res.failures]

        await asyncio.gather(*(member(g) for g in range(len(self.samplers))))

    async def finish(self, p: int, policy: StopPolicy, rule: str) -> None:
        """Draw question p on while the policy asks for more."""
        while p not in self.failed:
            drawn = self.drawn(p)
            ask = check_next(policy.next(drawn), drawn, rule)
            if not any(ask):
                return
            await asyncio.gather(*(self._more(p, g, k) for g, k in enumerate(ask) if k))

    async def _more(self, p: int, g: int, k: int) -> None:
        have = self.rows[p][g]
        req = SampleRequest(self.messages[p], self.params[g], len(have) + k)
        got, failures = await self.samplers[g].draw(req, len(have), k, request=p,
                                                    parser=self.parser)
        have.extend(s for s in got if s is not None)
        self.failures[g] += failures
        if any(s is None for s in got):
            self.failed.add(p)

    def results(self) -> list[SampleResult]:
        out = []
        for g, smp in enumerate(self.samplers):
            # a failed question's rows end with None, as a fixed run's missing samples do
            rows: list[list[Sample | None]] = [
                [*self.rows[p][g], *([None] if p in self.failed else [])]
                for p in range(len(self.messages))]
            out.append(SampleResult(rows=rows, failures=self.failures[g],
                                    stopped=smp.run_state.stop))
        return out
