"""Drawing by the cost rule: whom to ask next, one vote at a time (`Ensemble(stop="cost")`).

Per prompt, member g's i-th vote is its stored sample i (as in a fixed run), so deciding again
over a store costs nothing. The first questions (until `CostSpec.pilot_questions` have been
seen, across this call and the Ensemble's earlier ones) get a full pilot of every member's
`pilot` votes; the joint prior is fitted from all counts seen so far (pilots and earlier
decisions alike: the likelihood does not depend on whom the rule chose to ask), each member's
price per vote is the mean cost of its samples drawn so far (its token usage times its price),
and then each prompt is asked by the rule, one vote at a time, until it stops or every member's
budget (its n) is spent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .cost.rule import CostRule, member_counts
from .cost.spec import CostSpec
from .errors import InputError
from .members import Member
from .providers.base import Provider
from .sampling.results import SampleFailure, SampleResult
from .sampling.sampler import Sampler
from .sampling.store import SampleStore
from .sampling.types import Sample, SampleRequest

__all__ = ["CostMemory", "draw_by_cost"]


@dataclass
class CostMemory:
    """What an Ensemble keeps between calls for its cost rule: every decision's per-member
    counts (the prior's data) and each member's spend and votes (its price per vote)."""

    counts: deque[tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=lambda: deque(maxlen=20_000))
    spent: list[float] = field(default_factory=list)
    votes: list[int] = field(default_factory=list)
    rule: CostRule | None = None
    fitted_on: int = 0  # the decisions the rule's prior was fitted on

    def price(self, g: int) -> float | None:
        return self.spent[g] / self.votes[g] if self.votes and self.votes[g] else None

    def still_fits(self, decisions: int, prices: Sequence[float]) -> bool:
        """The rule built last time serves again until the data grew by a tenth or a price
        moved by 5% (a served Ensemble decides one prompt per call: refitting the prior and
        the induction on every call would cost ~0.1 s each)."""
        rule = self.rule
        if rule is None or decisions > 1.1 * self.fitted_on:
            return False
        return all(abs(p - q) <= 0.05 * max(q, 1e-300) for p, q in zip(prices, rule.prices,
                                                                      strict=True))


async def draw_by_cost(members: Sequence[Member], params: Sequence[Any],
                       messages: Sequence[Any], spec: CostSpec, *, parser: Callable[[str], Any],
                       memory: CostMemory, store: SampleStore | None,
                       provider_for: Callable[[Member], Provider]) -> list[SampleResult]:
    """Draw every prompt's votes under the cost rule; one `SampleResult` per member. Without
    a store, an in-memory one keeps the call's samples (vote i is sample i)."""
    async with contextlib.AsyncExitStack() as stack:
        if store is None:
            store = stack.enter_context(contextlib.closing(SampleStore(":memory:")))
        samplers = [await stack.enter_async_context(Sampler(
            m.model, options=m.options, provider=provider_for(m), store=store))
            for m in members]
        return await _draw(samplers, params, [m.n for m in members],
                           [m.lam for m in members], messages, spec, parser, memory)


async def _draw(samplers: Sequence[Sampler], params: Sequence[Any], budgets: Sequence[int],
                lams: Sequence[float | None], messages: Sequence[Any], spec: CostSpec,
                parser: Callable[[str], Any], memory: CostMemory) -> list[SampleResult]:
    G, P = len(samplers), len(messages)
    if not memory.spent:
        memory.spent, memory.votes = [0.0] * G, [0] * G
    rows: list[list[list[Sample]]] = [[[] for _ in range(G)] for _ in range(P)]
    failures: list[list[SampleFailure]] = [[] for _ in range(G)]
    failed: set[int] = set()
    weights = None if any(x is None for x in lams) else [float(x) for x in lams]  # type: ignore

    async def draw(p: int, g: int) -> None:
        req = SampleRequest(messages[p], params[g], len(rows[p][g]) + 1)
        res = await samplers[g].run([req], parser=parser)
        if res.failures or res.stopped is not None:
            failed.add(p)
            failures[g] += [replace(f, request=p) for f in res.failures]
            return
        got = [s for s in res.rows[0] if s is not None]
        new = got[len(rows[p][g]):]
        rows[p][g] = got
        costs = [s.cost_usd for s in new]
        if None not in costs:  # a stored sample tells the member's price as well as a new one
            memory.spent[g] += float(sum(c or 0.0 for c in costs))
            memory.votes[g] += len(new)

    def counts(p: int) -> tuple[list[int], list[int]]:
        a, b, _ = member_counts([[s.answer for s in rows[p][g]] for g in range(G)],
                                weights or [1.0] * G)
        return a, b

    pilot = spec.pilot_for(budgets)
    need = max(0, spec.pilot_questions - len(memory.counts)) if spec.prior is None else 0
    piloted = list(range(min(need, P)))

    async def run_pilot(p: int) -> None:
        for g in range(G):
            while len(rows[p][g]) < pilot[g] and p not in failed:
                await draw(p, g)

    await asyncio.gather(*(run_pilot(p) for p in piloted))
    data = list(memory.counts) + [tuple(map(tuple, counts(p))) for p in piloted
                                  if p not in failed]
    prices = []
    for g in range(G):
        price = memory.price(g)
        if price is None and spec.prices is None:
            raise InputError(f"the cost rule needs member {g}'s price per vote and its samples "
                             "have none: give the member price_per_1k=(in, out) USD per 1,000 "
                             "tokens, or CostSpec(prices=...)")
        prices.append(price or 0.0)
    if spec.prior is None and not data:
        raise InputError("the cost rule fits its prior from pilots: no question had a pilot "
                         "(all failed?)")
    rule = memory.rule if memory.still_fits(len(data), prices) else None
    if rule is None:
        rule = spec.build(a=[d[0] for d in data] if data else None,
                          b=[d[1] for d in data] if data else None,
                          prices=prices, max_n=budgets, lams=weights)
        memory.rule, memory.fitted_on = rule, len(data)

    async def finish(p: int) -> None:
        while p not in failed:
            a, b = counts(p)
            avail = [len(rows[p][g]) < budgets[g] for g in range(G)]
            g = rule.next_member(a, b, avail)
            if g is None:
                break
            await draw(p, g)

    await asyncio.gather(*(finish(p) for p in range(P)))
    for p in range(P):  # every decision's counts: the next call's prior is fitted on them
        if p not in failed:
            a, b = counts(p)
            memory.counts.append((tuple(a), tuple(b)))
    return [SampleResult(rows=[list(rows[p][g]) for p in range(P)], failures=failures[g])
            for g in range(G)]

