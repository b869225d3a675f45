"""The cost rule replayed on a mixed run's stored samples: what it would have spent and decided.

`replay_cost(rule, codes, orders)` runs the rule along given orders of each member's stored
samples, one vote at a time, exactly as `Ensemble(stop="cost")` asks (member g's i-th vote is
its i-th sample along the order); `cost_rows` is the eval's adaptive row of a mixed run
(`ensemble eval --spec` with `"adaptive": ["cost"]`), beside the fixed ensemble of every
member's n under the λ-weighted vote, on the same orders. Each decision is the rule's own
(`ensemble.cost.choice.cost_choice`), as the Ensemble's Decision with `stop="cost"` is.

The rule is built and asked through the stop-rule interface the Python API draws by
(`ensemble.stopping.plan`): `CostSpec.fit` on every stored sample of every question as its
"pilots" (its joint prior fitted without labels from the run's whole draw rather than from a
pilot the rule would have paid for first, once `pilot_questions` questions are in, the default
prior below that; each member's price the mean of its samples' dollars), then
`rule.next(drawn)` one vote at a time: the row says what the rule would have spent and decided
on these questions given the prior the run supports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.cost import CostRule
from ensemble.cost.choice import cost_choice
from ensemble.cost.spec import CostSpec, two_fixed_choices
from ensemble.errors import InputError
from ensemble.stopping import (
    Drawn as SoFar,  # a question's samples so far, as rules read them
    FitContext,
    Observation,
    StopMemory,
)

from .draw import Drawn
from .intervals import estimate
from .plan import RunPlan
from .schemas import AdaptiveRow

__all__ = ["CostReplay", "MixedInputs", "cost_rows", "member_orders", "mixed_cost_rows",
           "mixed_inputs", "replay_cost", "replay_credit", "replay_scored", "used_tokens"]


@dataclass(frozen=True)
class CostReplay:
    """Per question and order: the decided option (−1: none; −2: a tie, `cost_choice`'s),
    the votes drawn from each member (Q, R, G) and the dollars spent (NaN: a price unknown)."""

    decision: NDArray[np.int64]
    drawn: NDArray[np.int64]
    spent: NDArray[np.float64]


def _labels(row: Any) -> list[str | None]:
    return [None if x < 0 else str(int(x)) for x in row]


def replay_cost(rule: CostRule, codes: Sequence[NDArray[np.int64]],
                orders: Sequence[NDArray[np.int64]],
                costs: Sequence[NDArray[np.float64]] | None = None, *,
                options: int | None = None,
                questions: Sequence[str] | None = None) -> CostReplay:
    """Replay `rule` on each member's (Q, K_g) answer codes (−1 invalid) along (Q, R, K_g)
    orders; `costs` (Q, K_g) per stored sample (default: the rule's prices); `options`: how
    many answers there are (codes 0..options − 1), when fixed; `questions`: each question's
    key (its id), which picks its policy when the rule mixes two (`CostRule.mix`: the same
    policy along every order of a question, as the Ensemble runs one policy per prompt)."""
    G = len(codes)
    if len(orders) != G or G != len(rule.max_n):
        raise InputError(f"give codes and orders for each of the rule's {len(rule.max_n)} "
                         "members")
    Q, R = codes[0].shape[0], orders[0].shape[1]
    for g in range(G):
        if codes[g].shape[1] < rule.max_n[g]:
            raise InputError(f"member {g} may draw {rule.max_n[g]} votes but only "
                             f"{codes[g].shape[1]} are stored")
    labels = None if options is None else [str(i) for i in range(options)]
    decision = np.full((Q, R), -1, dtype=np.int64)
    drawn = np.zeros((Q, R, G), dtype=np.int64)
    spent = np.zeros((Q, R))
    if questions is not None and len(questions) != Q:
        raise InputError(f"give each of the {Q} questions its key, got {len(questions)}")
    for q in range(Q):
        key = None if questions is None else str(questions[q])
        for r in range(R):
            seq = [_labels(codes[g][q, orders[g][q, r]]) for g in range(G)]
            n = [0] * G
            while True:  # as the Python API's draw loop asks it: one vote at a time
                ask = rule.next(SoFar.of([seq[g][:n[g]] for g in range(G)], rule.max_n, key))
                if not any(ask):
                    break
                n = [x + k for x, k in zip(n, ask, strict=True)]
            drawn[q, r] = n
            for h in range(G):
                used = orders[h][q, r, :n[h]]
                spent[q, r] += (n[h] * rule.prices[h] if costs is None
                                else float(costs[h][q, used].sum()))
            choice = cost_choice(rule, [seq[g][:n[g]] for g in range(G)], options=labels)
            if choice.decision is not None:
                decision[q, r] = int(choice.decision)
            elif choice.tied:
                decision[q, r] = -2
    return CostReplay(decision, drawn, spent)


def replay_credit(rp: CostReplay, codes: Sequence[NDArray[np.int64]],
           orders: Sequence[NDArray[np.int64]], rule: CostRule,
           values: NDArray[np.float64]) -> NDArray[np.float64]:
    """(Q, R) credit of each decision; a tie is worth the mean of the tied answers."""
    Q, R = rp.decision.shape
    labels = [str(i) for i in range(values.shape[1])]
    out = np.zeros((Q, R))
    for q in range(Q):
        for r in range(R):
            d = rp.decision[q, r]
            if d >= 0:
                out[q, r] = values[q, d]
            elif d == -2:
                n = rp.drawn[q, r]
                seq = [_labels(codes[g][q, orders[g][q, r, :n[g]]]) for g in range(len(codes))]
                tied = cost_choice(rule, seq, options=labels).tied
                out[q, r] = float(np.mean([values[q, int(x)] for x in tied]))
    return out


def replay_scored(rule: CostRule, codes: Sequence[NDArray[np.int64]],
                  orders: Sequence[NDArray[np.int64]], values: NDArray[np.float64],
                  costs: Sequence[NDArray[np.float64]] | None = None,
                  questions: Sequence[str] | None = None
                  ) -> tuple[CostReplay, NDArray[np.float64]]:
    """`replay_cost` over the options of `values` (Q, O), each decision scored by them
    (`replay_credit`): (the replay, (Q, R) credit). The eval's row (`cost_rows`) and the bench
    (tests/bench/bench_cost.py) both replay the rule through this."""
    rp = replay_cost(rule, codes, orders, costs, options=values.shape[1], questions=questions)
    return rp, replay_credit(rp, codes, orders, rule, values)


def member_orders(codes: Sequence[NDArray[np.int64]], orders: int, rng: np.random.Generator
                  ) -> list[NDArray[np.int64]]:
    """R random orders of each member's stored samples, (Q, R, K_g) per member g: the orders
    the cost rule's row replays along (and, drawn from the same seed, the other stopping
    rules' rows of a mixed run: `evals.pooled`)."""
    return [np.argsort(rng.random((c.shape[0], orders, c.shape[1])), axis=-1) for c in codes]


def cost_rows(codes: Sequence[NDArray[np.int64]], costs: Sequence[NDArray[np.float64]],
              values: NDArray[np.float64], weights: NDArray[np.float64], *,
              budgets: Sequence[int], lams: Sequence[float | None], spec: CostSpec,
              orders: int = 20, reps: int = 1000, seed: int = 0,
              two_choices: bool | None = None,
              tokens: Sequence[NDArray[np.float64]] | None = None,
              questions: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The adaptive row of the cost rule on a mixed run's samples (see the module docstring).

    codes[g], costs[g]: (Q, K_g) answer codes and dollars of member g's stored samples; values
    (Q, O) the credit of deciding each option; budgets: each member's most votes (its n);
    two_choices: the answers are two fixed choices (the rule's `two_choices`; None: O = 2; open
    answers are not, whatever O: an answer nobody gave cannot be decided); tokens[g]: (Q, K_g)
    completion tokens of each stored sample (NaN: unknown), for the row's `mean_tokens`;
    questions: each question's key (its id: which policy it runs when the rule mixes two)."""
    options = [str(i) for i in range(values.shape[1])]
    G = len(codes)
    g_rng = np.random.default_rng(seed)
    Q = codes[0].shape[0]
    for g in range(G):
        if not np.isfinite(np.asarray(costs[g], dtype=float)).all():
            raise InputError(f"the cost rule needs every sample's price, and member {g}'s "
                             "stored samples have neither a cost nor token counts to price: "
                             "draw them again, priced, into a new --out")
    # every stored sample of each question, as the plan's pilots: the rule is fitted on them
    stored = [SoFar(tuple(tuple(Observation(None if x < 0 else str(int(x)), cost_usd=float(c))
                                for x, c in zip(codes[g][q], costs[g][q], strict=True))
                          for g in range(G)), tuple(budgets)) for q in range(Q)]
    two = two_fixed_choices(options) if two_choices is None else two_choices
    rule = spec.fit(stored, StopMemory(), FitContext(
        budgets=tuple(budgets), lams=tuple(lams), two_choices=two))
    lw = list(rule.lams)
    ords = member_orders(codes, orders, g_rng)
    rp, credit = replay_scored(rule, codes, ords, values, costs, questions)
    acc_q = credit.mean(axis=1)
    # the fixed ensemble on the same orders: every member's n, votes weighed by 2λ (or price)
    n_opt = values.shape[1]
    votes = np.zeros((Q, orders, n_opt))
    for g in range(G):
        picked = np.take_along_axis(codes[g][:, None, :], ords[g][..., :budgets[g]], axis=2)
        votes += 2 * lw[g] * (picked[..., None] == np.arange(n_opt)).sum(axis=2)
    mx = votes.max(axis=-1, keepdims=True)
    top = (votes == mx) & (mx > 0)
    fixed_q = ((top * values[:, None, :]).sum(-1) / np.maximum(top.sum(-1), 1)).mean(axis=1)
    w = np.asarray(weights, dtype=float)
    boot = g_rng.integers(0, Q, size=(reps, Q))

    def est(x: NDArray[np.float64], wt: NDArray[np.float64]) -> Any:
        num = (wt * x)[boot].sum(axis=1)
        den = wt[boot].sum(axis=1)
        return estimate(num / np.where(den > 0, den, 1.0), float((wt * x).sum() / wt.sum()))

    ones = np.ones(Q)
    acc, fixed = est(acc_q, w), est(fixed_q, w)
    samples = est(rp.drawn.sum(axis=2).mean(axis=1).astype(float), ones)
    diff = est(acc_q - fixed_q, w)
    total = sum(budgets)
    return [{"t": None, "n": total, "aggregator": "cost rule", "stop": "cost",
             "mean_samples": samples.value, "mean_samples_ci": list(samples.ci),
             "mean_cost_usd": float(rp.spent.mean()),
             "mean_tokens": None if tokens is None else used_tokens(rp.drawn, ords, tokens),
             "mean_samples_by_member": [float(x) for x in rp.drawn.mean(axis=(0, 1))],
             "accuracy": acc.value, "sem": acc.sem, "ci": list(acc.ci),
             "saving": 1 - samples.value / total, "value_usd": rule.value_usd,
             "credit": rule.credit,
             "vs_fixed": {"n": total, "accuracy": fixed.value, "difference": diff.value,
                          "difference_ci": list(diff.ci)},
             "fixed": [{"n": total, "accuracy": fixed.value, "sem": fixed.sem,
                        "ci": list(fixed.ci)}],
             "scored": "the cost rule replayed on the stored samples (prior fitted on them), "
                       "beside every member's n under the λ-weighted vote"}]


def used_tokens(drawn: NDArray[np.int64], orders: Sequence[NDArray[np.int64]],
                tokens: Sequence[NDArray[np.float64]]) -> float | None:
    """Mean completion tokens per question of the samples a replay used: member g's first
    drawn[q, r, g] along orders[g][q, r] (None: some sample's tokens are unknown)."""
    Q, R, G = drawn.shape
    total = np.zeros((Q, R))
    for g in range(G):
        along = np.take_along_axis(np.asarray(tokens[g], dtype=float)[:, None, :], orders[g],
                                   axis=2)
        first = np.arange(along.shape[2])[None, None, :] < drawn[:, :, g, None]
        total += np.where(first, along, 0.0).sum(axis=2)
        if np.isnan(np.where(first, along, 0.0)).any():
            return None
    return float(total.mean())


@dataclass(frozen=True)
class MixedInputs:
    """A mixed run's stored samples as the adaptive rows replay them: per member (Q, K_g)
    answer codes (each question's among its own options; box-ball L = 0, R = 1), dollars and
    completion tokens (NaN: unknown); values (Q, O) the credit of deciding each option; the
    questions' weights and the groups resampled together (a box-ball scenario's colours);
    whether the answers are two fixed choices (open answers never are)."""

    codes: list[NDArray[np.int64]]
    costs: list[NDArray[np.float64]]
    tokens: list[NDArray[np.float64]]
    values: NDArray[np.float64]
    weights: NDArray[np.float64]
    groups: NDArray[np.int64]
    two_choices: bool | None


def mixed_inputs(plan: RunPlan, drawn: Drawn) -> MixedInputs:
    """The inputs of a mixed run's adaptive rows (`MixedInputs`), scored as the run's tables
    score them (box-ball: P(ω = decision | colour) weighted by P(scenario, colour); otherwise
    the right answer)."""
    from .adaptive import boxball_inputs, question_codes
    from .prices import price_of

    questions = drawn.questions
    Q = len(questions)
    box = plan.layout.utility
    if box:
        values, weights, groups = boxball_inputs(questions)
    else:  # each question's answers coded among its own options (open answers: those given)
        weights, groups = np.ones(Q), np.arange(Q)
    codes, costs, tokens = [], [], []
    for g, m in enumerate(plan.members):
        k = m.samples
        coded, correct, width = question_codes(
            questions, np.asarray(drawn.answers[g], dtype=object)[None, :, :k],
            options=("L", "R") if box else None)
        codes.append(coded[0])
        costs.append(drawn.costs(g, k, price=price_of(m.model, m.options)))
        tokens.append(drawn.tokens(g, k))
    if not box:
        values = np.zeros((Q, width))
        values[np.arange(Q), correct] = 1.0
    kind = plan.task.answer_kind
    return MixedInputs(codes, costs, tokens, values, np.asarray(weights, dtype=float),
                       np.asarray(groups), False if kind is not None and kind.is_open else None)


def mixed_cost_rows(plan: RunPlan, drawn: Drawn) -> list[AdaptiveRow]:
    """`cost_rows` for a mixed run (`runner.run_eval`): the members' drawn answers and the
    dollars of each stored sample (`mixed_inputs`)."""
    got = mixed_inputs(plan, drawn)
    stopping = plan.stopping
    cost = CostSpec(value_usd=stopping.value_usd if stopping else None,
                    credit=stopping.credit if stopping else "reference")
    rows = cost_rows(got.codes, got.costs, got.values, got.weights,
                     budgets=[m.n or 1 for m in plan.members],
                     lams=[m.lam for m in plan.members], spec=cost, reps=plan.bootstrap,
                     seed=plan.seed, two_choices=got.two_choices, tokens=got.tokens,
                     questions=[q.id for q in drawn.questions])
    return [AdaptiveRow.model_validate(r) for r in rows]
