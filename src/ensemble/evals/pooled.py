"""A per-question stopping rule replayed over a mixed run's members: what it would have drawn,
spent and decided, as `Ensemble(members=..., stop=NAME)` draws.

Over several members a stopping rule (bayes, beta, a plug-in's) reads their pooled votes and
draws in rounds of one vote from every member with budget left (each member at most its n),
its pilot too (`StopSpec.pilot_draw`); the Ensemble then decides by its rule over every vote
drawn. The replay asks the rule through the stop-rule interface exactly so (`plan.pilot_draw`,
`plan.fit` on that order's pilots, `policy.next` after each round), along R random orders of
each member's stored samples (member g's i-th vote is its i-th sample along the order), and
scores the decision as the run's main vote does: the pooled plurality of the votes drawn (two
options: their majority), a tie sharing the credit, box-and-ball by P(ω = decision | colour).
Beside it, on the same orders, the fixed ensemble: every member's n, pooled the same way.
The orders are those of the cost rule's row (`costeval.member_orders`, the same seed), so the
two rows of one run are paired.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.stopping import Drawn as SoFar, FitContext, Observation, StopMemory
from ensemble.stopping.plan import StopPlan, check_next

from .intervals import estimate

__all__ = ["PooledReplay", "mixed_adaptive_rows", "pooled_replay", "pooled_row"]

ORDERS = 20  # as the cost rule's row


class PooledReplay:
    """Per question and order: the votes drawn from each member (Q, R, G), the pooled votes
    for each option when the rule stopped (Q, R, O) and with every member's n (Q, R, O), and
    the dollars and completion tokens of the samples it used (Q, R; NaN: unknown)."""

    def __init__(self, drawn: NDArray[np.int64], counts: NDArray[np.int64],
                 fixed: NDArray[np.int64], spent: NDArray[np.float64],
                 tokens: NDArray[np.float64]) -> None:
        self.drawn, self.counts, self.fixed = drawn, counts, fixed
        self.spent, self.tokens = spent, tokens


def _labels(row: Any) -> list[str | None]:
    return [None if x < 0 else str(int(x)) for x in row]


def pooled_replay(plan: StopPlan, codes: Sequence[NDArray[np.int64]],
                  orders: Sequence[NDArray[np.int64]], budgets: Sequence[int], *,
                  options: int, lams: Sequence[float | None] = (),
                  costs: Sequence[NDArray[np.float64]] | None = None,
                  tokens: Sequence[NDArray[np.float64]] | None = None,
                  two_choices: bool = False) -> PooledReplay:
    """Replay `plan` on each member's (Q, K_g) answer codes (−1 invalid, else < `options`)
    along its (Q, R, K_g) orders, member g giving at most budgets[g] votes a question;
    `costs`/`tokens` (Q, K_g) per stored sample (NaN: unknown)."""
    G = len(codes)
    Q, R = codes[0].shape[0], orders[0].shape[1]
    bud = plan.budgets([int(b) for b in budgets])
    ctx = FitContext(budgets=bud, lams=tuple(lams) if lams else (None,) * G,
                     two_choices=two_choices)
    drawn = np.zeros((Q, R, G), dtype=np.int64)
    at_stop = np.zeros((Q, R, options), dtype=np.int64)
    fixed = np.zeros((Q, R, options), dtype=np.int64)
    spent = np.zeros((Q, R))
    used_tokens = np.zeros((Q, R))

    def observed(q: int, r: int, n: Sequence[int]) -> SoFar:
        members = []
        for g in range(G):
            pick = orders[g][q, r, :n[g]]
            members.append(tuple(
                Observation(None if x < 0 else str(int(x)),
                            tokens=None if tokens is None or np.isnan(tokens[g][q, i])
                            else int(tokens[g][q, i]),
                            cost_usd=None if costs is None or np.isnan(costs[g][q, i])
                            else float(costs[g][q, i]))
                for x, i in zip(codes[g][q, pick], pick, strict=True)))
        return SoFar(tuple(members), bud)

    for r in range(R):
        memory = StopMemory()
        heads = [tuple(min(int(k), int(b)) for k, b in zip(plan.pilot_draw(q, bud, memory),
                                                             bud, strict=True))
                 for q in range(Q)]
        policy = plan.fit([observed(q, r, heads[q]) for q in range(Q)], memory, ctx)
        for q in range(Q):
            n = list(heads[q])
            while True:
                so_far = observed(q, r, n)
                ask = check_next(policy.next(so_far), so_far, plan.stop)
                if not any(ask):
                    break
                n = [x + k for x, k in zip(n, ask, strict=True)]
            drawn[q, r] = n
            for g in range(G):
                pick = orders[g][q, r, :n[g]]
                every = orders[g][q, r, :bud[g]]
                for x in codes[g][q, pick]:
                    if x >= 0:
                        at_stop[q, r, x] += 1
                for x in codes[g][q, every]:
                    if x >= 0:
                        fixed[q, r, x] += 1
                spent[q, r] += (np.nan if costs is None
                                else float(costs[g][q, pick].sum()))
                used_tokens[q, r] += (np.nan if tokens is None
                                      else float(tokens[g][q, pick].sum()))
    return PooledReplay(drawn, at_stop, fixed, spent, used_tokens)


def _credit(counts: NDArray[np.int64], values: NDArray[np.float64]) -> NDArray[np.float64]:
    """(Q, R) credit of the pooled plurality: the mean value of the tied leaders, 0 without a
    valid vote."""
    mx = counts.max(axis=-1, keepdims=True)
    top = (counts == mx) & (mx > 0)
    k = top.sum(axis=-1)
    v = (top * values[:, None, :]).sum(axis=-1)
    return np.where(k > 0, v / np.maximum(k, 1), 0.0)


def pooled_row(plan: StopPlan, codes: Sequence[NDArray[np.int64]],
               orders: Sequence[NDArray[np.int64]], values: NDArray[np.float64],
               weights: NDArray[np.float64], groups: NDArray[np.int64], *,
               budgets: Sequence[int], lams: Sequence[float | None],
               costs: Sequence[NDArray[np.float64]] | None,
               tokens: Sequence[NDArray[np.float64]] | None, rng: np.random.Generator,
               reps: int, two_choices: bool, aggregator: str, scored: str) -> dict[str, Any]:
    """The adaptive row of `plan` over the members (`AdaptiveRow` fields), beside every
    member's n on the same orders, with bootstrap intervals over `groups` of questions."""
    rp = pooled_replay(plan, codes, orders, budgets, options=values.shape[1], lams=lams,
                       costs=costs, tokens=tokens, two_choices=two_choices)
    acc_q = _credit(rp.counts, values).mean(axis=1)
    fixed_q = _credit(rp.fixed, values).mean(axis=1)
    grp = np.unique(groups, return_inverse=True)[1].ravel()
    n_groups = int(grp.max()) + 1
    boot = rng.integers(0, n_groups, size=(reps, n_groups))

    def est(x: NDArray[np.float64], w: NDArray[np.float64]) -> Any:
        num = np.bincount(grp, weights=w * x, minlength=n_groups)[boot].sum(axis=1)
        den = np.bincount(grp, weights=w, minlength=n_groups)[boot].sum(axis=1)
        return estimate(num / np.where(den > 0, den, 1.0), float((w * x).sum() / w.sum()))

    ones = np.ones(len(acc_q))
    acc, fixed = est(acc_q, weights), est(fixed_q, weights)
    samples = est(rp.drawn.sum(axis=2).mean(axis=1).astype(float), ones)
    diff = est(acc_q - fixed_q, weights)
    total = int(sum(budgets))
    cost = float(rp.spent.mean()) if np.isfinite(rp.spent).all() else None
    toks = float(rp.tokens.mean()) if np.isfinite(rp.tokens).all() else None
    return {"t": None, "n": total, "aggregator": aggregator, "stop": plan.stop,
            "mean_samples": samples.value, "mean_samples_ci": list(samples.ci),
            "mean_cost_usd": cost, "mean_tokens": toks,
            "mean_samples_by_member": [float(x) for x in rp.drawn.mean(axis=(0, 1))],
            "accuracy": acc.value, "sem": acc.sem, "ci": list(acc.ci),
            "saving": 1 - samples.value / total,
            "vs_fixed": {"n": total, "accuracy": fixed.value, "difference": diff.value,
                         "difference_ci": list(diff.ci)},
            "fixed": [{"n": total, "accuracy": fixed.value, "sem": fixed.sem,
                       "ci": list(fixed.ci)}],
            "scored": scored}


def mixed_adaptive_rows(plan: Any, drawn: Any) -> list[Any]:
    """The adaptive rows of a mixed run (`runner.run_eval`), one per rule of
    `plan.stopping.rules` in order: the cost rule's (`costeval.mixed_cost_rows`), and every
    per-question rule replayed over the pooled members (`pooled_row`) on the cost row's orders
    (the same seed), scored by the run's main vote."""
    from ensemble.stopping import is_over_members, plan_for, stop_rules

    from .costeval import member_orders, mixed_cost_rows, mixed_inputs
    from .schemas import AdaptiveRow

    stopping = plan.stopping
    if stopping is None:
        return []
    got = mixed_inputs(plan, drawn)
    ns = [m.n or 1 for m in plan.members]
    lams = [m.lam for m in plan.members]
    box = plan.layout.utility
    rows: list[Any] = []
    for stop in stopping.rules:
        if is_over_members(stop):
            rows += mixed_cost_rows(plan, drawn)
            continue
        takes_cost = "cost" in getattr(stop_rules.get(stop), "params", ())
        rule = plan_for(stop, max_n=stopping.max_n,
                        **({"cost": stopping.cost} if takes_cost and stopping.cost else {}))
        rng = np.random.default_rng(plan.seed)
        orders = member_orders(got.codes, ORDERS, rng)
        row = pooled_row(
            rule, got.codes, orders, got.values, got.weights, got.groups, budgets=ns,
            lams=lams, costs=got.costs, tokens=got.tokens, rng=rng, reps=plan.bootstrap,
            two_choices=bool(got.two_choices), aggregator=plan.rules[0],
            scored=("P(ω = decision | colour) of the pooled votes' majority, weighted by "
                    "P(scenario, colour)" if box else
                    "accuracy of the plurality of the members' pooled votes drawn")
            + ", beside every member's n pooled the same way, on the cost rule's orders")
        rows.append(AdaptiveRow.model_validate(row))
    return rows
