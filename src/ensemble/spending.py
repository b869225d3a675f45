"""Drawing and deciding by the cost rule: whom to ask next, one vote at a time, and the answer
(`Ensemble(stop="cost")`).

Per prompt, member g's i-th vote is its stored sample i (as in a fixed run), so deciding again
over a store costs nothing. The first questions (until `CostSpec.pilot_questions` have been
seen, across this call and the Ensemble's earlier ones) get a full pilot of every member's
`pilot` votes; the joint prior is fitted from all counts seen so far (pilots and earlier
decisions alike: the likelihood does not depend on whom the rule chose to ask) once that many
are in, the spec's default prior until then (`CostSpec.prior_for`), each member's
price per vote is the mean cost of its samples drawn so far (its token usage times its price),
and then each prompt is asked by the rule, one vote at a time, until it stops or every member's
budget (its n) is spent.

The Decision is the rule's own (`CostVote`, through `ensemble.cost.choice.cost_choice`): the
answer more likely to be the reference given every vote drawn, the members weighed through the
prior by which that same rule chose whom to ask (`draw_by_cost` returns it with the samples, so
a concurrent call that refits the rule cannot change what this one decides by).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .aggregators import RuleBase, Vote
from .answers import AnswerKind, member_keys
from .cost.choice import CostChoice, cost_choice
from .cost.rule import CostRule, member_counts
from .cost.spec import CostSpec, two_fixed_choices
from .errors import InputError
from .members import Member
from .providers.base import Provider
from .sampling.results import SampleFailure, SampleResult
from .sampling.sampler import Sampler
from .sampling.store import SampleStore
from .sampling.types import Sample, SampleRequest

__all__ = ["CostDraw", "CostMemory", "CostVote", "draw_by_cost"]


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
        the induction on every call would cost ~0.1 s each), or, on its default prior,
        until enough decisions are in to fit one."""
        rule = self.rule
        if rule is None or decisions > 1.1 * self.fitted_on:
            return False
        used = rule.prior_used  # the default prior gives way to a fit once enough are seen
        if used is not None and used.source == "default" and decisions >= used.needed:
            return False
        return all(abs(p - q) <= 0.05 * max(q, 1e-300) for p, q in zip(prices, rule.prices,
                                                                      strict=True))


@dataclass(frozen=True)
class CostDraw:
    """What `draw_by_cost` drew (one `SampleResult` per member) and the rule that chose it,
    which is the rule that decides over it (`CostVote`)."""

    results: list[SampleResult]
    rule: CostRule


class CostVote(RuleBase):
    """The cost rule's decision as a `Vote` (rule "cost"): `cost_choice` over each member's
    votes (`groups`: the member of each vote; None for a one-member ensemble). Its ties (the
    answers the rule cannot tell apart) are broken by the Ensemble's tie rule ("random": a
    seeded coin among them; "fractional": each gets 1/k of the credit), invalid replies follow
    its invalid policy ("fail" raises; otherwise they vote for no answer, as in the rule's
    state). One object per decision: `made` keeps each call's `CostChoice` (the first is
    the whole answer's; an answer voted part by part adds one per part)."""

    name = "cost"

    def __init__(self, rule: CostRule, *, tie: str = "random", invalid: str = "ignore",
                 rng: Any = None, open: bool = False) -> None:
        super().__init__(tie=tie, invalid=invalid, rng=rng, open=open)
        self.rule = rule
        self.made: list[tuple[CostChoice, Vote]] = []

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                  weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        valid, n, n_inv = self.prepare(answers)
        G = len(self.rule.max_n)
        per: list[list[str | None]] = [[] for _ in range(G)]
        for i, x in enumerate(answers):
            per[groups[i] if groups is not None else 0].append(x)
        choice = cost_choice(self.rule, per, options=choices)
        vote = self.finish(Counter(valid), list(choice.candidates), n, len(valid), n_inv)
        self.made.append((choice, vote))
        return vote


async def draw_by_cost(members: Sequence[Member], params: Sequence[Any],
                       messages: Sequence[Any], spec: CostSpec, *, parser: Callable[[str], Any],
                       kind: AnswerKind, choices: Sequence[str] | None,
                       memory: CostMemory, store: SampleStore | None,
                       provider_for: Callable[[Member], Provider]) -> CostDraw:
    """Draw every prompt's votes under the cost rule: one `SampleResult` per member, and the
    rule. Without a store, an in-memory one keeps the call's samples (vote i is sample i).
    `kind`, `choices`: the Ensemble's answer kind and choices: the rule's state counts the
    answers as the Decision will (open answers merged, `member_keys`), and it knows whether
    they are two fixed choices (`two_fixed_choices`)."""
    async with contextlib.AsyncExitStack() as stack:
        if store is None:
            store = stack.enter_context(contextlib.closing(SampleStore(":memory:")))
        samplers = [await stack.enter_async_context(Sampler(
            m.model, options=m.options, provider=provider_for(m), store=store))
            for m in members]
        return await _draw(samplers, params, [m.n for m in members],
                           [m.lam for m in members], messages, spec, parser, kind,
                           two_fixed_choices(choices, is_open=kind.is_open), memory)


async def _draw(samplers: Sequence[Sampler], params: Sequence[Any], budgets: Sequence[int],
                lams: Sequence[float | None], messages: Sequence[Any], spec: CostSpec,
                parser: Callable[[str], Any], kind: AnswerKind, two_choices: bool,
                memory: CostMemory) -> CostDraw:
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

    def counts(p: int, lw: Sequence[float] | None = None) -> tuple[list[int], list[int]]:
        """The rule's state: each member's votes for the two leaders, ranked by `lw` (the
        rule's λ, which are its prices when some λ is unknown; pilots before the rule
        exists: λ, or equal weights), over the answers as the Decision counts them."""
        keys = member_keys(kind, [[s.answer for s in rows[p][g]] for g in range(G)])
        a, b, _ = member_counts(keys, lw or weights or [1.0] * G)
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
    rule = memory.rule if memory.still_fits(len(data), prices) else None
    if rule is None:
        rule = spec.build(a=[d[0] for d in data] if data else None,
                          b=[d[1] for d in data] if data else None,
                          prices=prices, max_n=budgets, lams=weights,
                          two_choices=two_choices)
        memory.rule, memory.fitted_on = rule, len(data)

    async def finish(p: int) -> None:
        while p not in failed:
            a, b = counts(p, rule.lams)
            avail = [len(rows[p][g]) < budgets[g] for g in range(G)]
            g = rule.next_member(a, b, avail)
            if g is None:
                break
            await draw(p, g)

    await asyncio.gather(*(finish(p) for p in range(P)))
    for p in range(P):  # every decision's counts: the next call's prior is fitted on them
        if p not in failed:
            a, b = counts(p, rule.lams)
            memory.counts.append((tuple(a), tuple(b)))
    return CostDraw([SampleResult(rows=[list(rows[p][g]) for p in range(P)],
                                  failures=failures[g]) for g in range(G)], rule)

