"""Adaptive sampling over an ensemble's members: the stopping rule reads their pooled votes."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .members import Member
from .providers.base import Provider
from .providers.params import SamplingParams
from .sampling.results import SampleResult
from .sampling.sampler import Sampler
from .sampling.store import SampleStore
from .sampling.types import Sample, SampleRequest
from .stopping import PriorUsed, StopSpec, answer_counts

__all__ = ["sample_pooled"]


async def sample_pooled(members: Sequence[Member], params: Sequence[SamplingParams],
                        messages: Sequence[tuple[dict[str, str], ...]], spec: StopSpec, *,
                        parser: Callable[[str], Any], history: collections.deque[tuple[int, int]],
                        store: SampleStore | None,
                        provider_for: Callable[[Member], Provider]
                        ) -> tuple[list[SampleResult], PriorUsed | None]:
    """Adaptive sampling over members, the rule applied to the pooled votes: one result per
    member, and the prior the rule decided with (None for a rule without one).

    Per prompt, votes are drawn in rounds: one more sample from every member that has not
    reached its n. After the pilot rounds (at least `spec.first_draw()` pooled votes; the
    bayes prior is fitted from them across the prompts and the earlier decisions' pilots in
    `history`, which this extends), a new round is drawn while the rule asks for more and
    some member has budget left. Member g's i-th vote is its stored sample i (as in a fixed
    run), so a rerun on a store costs nothing; without a store, an in-memory one keeps the
    drawn samples for the call.
    """
    scratch = SampleStore(":memory:") if store is None else None
    G, P = len(members), len(messages)
    rows: list[list[list[Sample]]] = [[[] for _ in range(G)] for _ in range(P)]
    failures: list[list[Any]] = [[] for _ in range(G)]
    failed: set[int] = set()

    async with contextlib.AsyncExitStack() as stack:
        samplers = [await stack.enter_async_context(Sampler(
            m.model, options=m.options, provider=provider_for(m),
            store=store or scratch)) for m in members]

        async def draw_round(p: int) -> bool:
            """One more vote from each member with budget left; False if none had any."""
            todo = [g for g in range(G) if len(rows[p][g]) < members[g].n]
            if not todo or p in failed:
                return False

            async def one(g: int) -> None:
                req = SampleRequest(messages[p], params[g], len(rows[p][g]) + 1)
                res = await samplers[g].run([req], parser=parser)
                if res.failures or res.stopped is not None:
                    failed.add(p)
                    failures[g] += [replace(f, request=p) for f in res.failures]
                    return
                rows[p][g] = [s for s in res.rows[0] if s is not None]

            await asyncio.gather(*(one(g) for g in todo))
            return True

        def pooled(p: int) -> list[str | None]:
            return [s.answer for g in range(G) for s in rows[p][g]]

        async def pilot(p: int) -> None:
            while len(pooled(p)) < spec.first_draw() and await draw_round(p):
                pass

        await asyncio.gather(*(pilot(p) for p in range(P)))
        if spec.needs_pilot:
            counts = [answer_counts(pooled(p)) for p in range(P) if p not in failed]
            rule = spec.rule_from_counts([c[1] for c in counts] + [h[0] for h in history],
                                         [c[2] for c in counts] + [h[1] for h in history])
            history.extend((c[1], c[2]) for c in counts)
        else:
            rule = spec.rule()

        async def finish(p: int) -> None:
            while p not in failed and rule.more(pooled(p)) > 0 and await draw_round(p):
                pass

        await asyncio.gather(*(finish(p) for p in range(P)))
    if scratch is not None:
        scratch.close()
    return [SampleResult(rows=[list(rows[p][g]) for p in range(P)], failures=failures[g])
            for g in range(G)], rule.prior_used
