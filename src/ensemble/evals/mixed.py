"""Score a mixed ensemble: members (a model at a temperature, n votes each, behind its own
endpoint) voting together under each rule, from the samples `evals.runner` drew for them.

The run's plan (`evals.plan.RunPlan`, resolved from its spec) names the members and the rules
to score; each member draws at least n samples per question (more: the estimates average over
n-subsets and get intervals for the questions run). The report gives the ensemble under each
rule, each member alone at its own n (majority / plurality), and each rule minus majority /
plurality on the same samples (kind "aggregator"), all with 95% intervals.

λ is in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units, at the member's temperature; utility in ±1 units.
The theory behind the rules treats the members as groups of experts with one shared signal
structure: exact for one model at several temperatures, an approximation across models
(docs/ensembles.md).

    {"members": [{"model": "openai/a", "api_base": "http://127.0.0.1:8001/v1", "n": 1,
                  "temperature": 1.0, "lam": 2.0},
                 {"model": "openai/b", "n": 1, "temperature": 1.0, "calibration": "runs/cal-b"}],
     "calibration": ["runs/calibrate-a"]}

(with "aggregators": a list of registered rules' names, `ensemble.aggregator_names()`)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ensemble.errors import InputError

from .plan import RunPlan
from .schemas import InvalidByT, Population, Tables

__all__ = ["analyse_mixed", "ensemble_vote"]


def ensemble_vote(rules: list[str], lams: list[float | None]) -> Any:
    """The ensemble's decision under each rule for votes.jsonl (`records.EnsembleVote`), from
    each member's first n_g answers; invalid answers abstain, a tie is left open.

    Binary questions: the group form of each rule (`evals.analysis.group_rule`, as the tables
    use), deciding choices[0] with probability f (robust may randomise: the likelier choice
    is written, f as `p_first`). More options: plurality of the pooled votes, or lam-weighted
    (votes weighted by 2λ_g)."""
    from ensemble.rules import aggregator_info

    from .groups import group_rule

    # a rule that weighs its samples reads their logprobs, which a vote's record does not
    # carry: its decisions are in the tables only
    infos = {r: i for r in rules if not (i := aggregator_info(r)).weighs_samples}
    rules = list(infos)
    binary_rules = {r: group_rule(r, lams) for r in rules if infos[r].group_f is not None}
    every_lam = [None if x is None else float(x) for x in lams]

    def decide(q: Any, votes: list[list[str | None]]
               ) -> list[tuple[str, str | None, bool, float | None]]:
        choices = list(q.choices)
        out: list[tuple[str, str | None, bool, float | None]] = []
        if len(choices) == 2 and len(binary_rules) == len(rules):
            x = [sum(a == choices[0] for a in v) for v in votes]
            valid = [sum(a is not None for a in v) for v in votes]
            present = tuple(g for g, k in enumerate(valid) if k > 0)
            for r in rules:
                if not present:
                    out.append((r, None, False, None))
                    continue
                f = float(binary_rules[r](present, tuple(valid[g] for g in present))[
                    tuple(x[g] for g in present)])
                dec = choices[0] if f > 0.5 else choices[1] if f < 0.5 else None
                out.append((r, dec, dec is None, f))
            return out
        idx = {c: i for i, c in enumerate(choices)}
        counts = np.zeros((len(votes), len(choices)))
        for g, v in enumerate(votes):
            for a in v:
                if a in idx:
                    counts[g, idx[a]] += 1
        every = np.arange(len(choices))
        for r in rules:
            credit_of = infos[r].credit
            if credit_of is None:  # checked before the run: a rule is scored by a form it has
                raise InputError(f"{r} has no credit over options to decide a question of "
                                 f"{len(choices)} choices")
            credit = credit_of(np.repeat(counts[None], len(choices), 0), every, every_lam)
            top = [choices[i] for i in every if credit[i] > 0]
            out.append((r, top[0] if len(top) == 1 else None, len(top) > 1, None))
        return out

    return decide


def analyse_mixed(plan: RunPlan, questions: list[Any], answers: list[np.ndarray],
                  rows: list[list[Any]] | None = None) -> Tables:
    """The mixed ensemble's tables from answers[g] (Q, K_g) per member (None = invalid):
    the ensemble under each rule and each member alone (`scoring.ensemble_cells`; a rule that
    weighs its samples from `rows`, the samples behind the answers: `evals.weighed`), each
    rule minus the main vote, and the ensemble under each rule minus its best member alone."""
    from .scoring import ensemble_cells, run_rows, widen
    from .weighed import ensemble_cells as weighed_cells, weighed_rules

    layout, members, aggregators = plan.layout, plan.members, list(plan.rules)
    labels = [m.label or "" for m in members]
    ns = [m.n or 1 for m in members]
    base = aggregators[0]
    weighed = weighed_rules(aggregators)
    cells, alone = ensemble_cells(layout, questions, answers, ns=ns,
                                  lams=[m.lam for m in members],
                                  rules=[r for r in aggregators if r not in weighed])
    notes: list[str] = []
    pairs: dict[str, Any] = {r: cells[base] for r in cells}
    if weighed:
        got, base_each, alone_each, notes = weighed_cells(
            questions, answers, rows or [], ns=ns, rules=weighed, base=cells[base],
            alone=alone, seed=plan.seed)
        cells.update(got)
        pairs.update({r: base_each for r in weighed})
    items = cells[base].items
    total = max(plan.population, items)
    row = run_rows(layout, items=items, total=total, seed=plan.seed, bootstrap=plan.bootstrap)

    big = sum(ns)
    results = [row.result(cells[r], member="ensemble", t=None, n=big, aggregator=r)
               for r in aggregators]
    results += [row.result(alone[i], member=labels[i], t=members[i].temperature, n=ns[i],
                           aggregator=base) for i in range(len(members))]
    contrasts = [row.contrast(cells[r].minus(pairs[r], same_answers=True),
                              kind="aggregator", member="ensemble", t=None, vs_t=None, n=big,
                              vs_n=big, aggregator=r, vs_aggregator=base)
                 for r in aggregators[1:]]
    # the ensemble under each rule minus its best member alone (the highest estimate here),
    # paired: the ensemble's estimate uses that member's samples too
    best = max(range(len(members)), key=lambda i: float(alone[i].values.mean()))
    contrasts += [row.contrast(cells[r].minus(alone_each[best] if r in weighed else
                                              widen(alone[best], best, cells[r]),
                                              same_answers=True),
                               kind="vs-best-member", member="ensemble", t=None,
                               vs_t=members[best].temperature, n=big, vs_n=ns[best],
                               aggregator=r, vs_aggregator=base, vs_member=labels[best])
                  for r in aggregators]
    inv = [float(np.mean([x is None for x in a.ravel()])) for a in answers]
    return Tables(**_mixed_head(plan, items=items, total=total), results=results,
                  contrasts=contrasts, **_invalid(members, labels, inv), notes=notes)


def _invalid(members: Any, labels: list[str], inv: list[float]) -> dict[str, Any]:
    warnings = []
    high = [f"{lb}: {r:.0%}" for lb, r in zip(labels, inv, strict=True) if r > 0.2]
    if high:
        warnings.append("over 20% of the replies are invalid (" + "; ".join(high) + "): "
                        "check the prompt, the parser or --max-tokens")
    return {
        "invalid_rate": float(np.mean(inv)),
        "invalid_rate_by_t": [InvalidByT(t=float(m.temperature), member=float(i),
                                         invalid_rate=r)
                              for i, (m, r) in enumerate(zip(members, inv, strict=True))],
        "invalid_policy": "invalid answers drop out of the vote (the rule for the valid "
                          "counts); no valid answer at all counts as wrong",
        "warnings": warnings,
    }


def _mixed_head(plan: RunPlan, *, items: int, total: int) -> dict[str, Any]:
    """What a mixed ensemble's tables say about themselves: metric, estimator, cells,
    population and intervals."""
    from .scoring import ESTIMATOR, METRIC

    layout, members = plan.layout, plan.members
    box, unit, base = layout.utility, layout.unit, plan.rules[0]
    return {
        "metric": METRIC[box].replace("of the vote", "of each rule's vote")
        if not box else METRIC[box],
        "estimator": ("exact and unbiased: per item, each member's n_g answers drawn without "
                      "replacement from its samples (per colour for box-ball, each expert "
                      "drawing its own ball), so the utility / accuracy polynomial in the "
                      "members' answer probabilities is estimated without bias; members alone: "
                      + ESTIMATOR[box]),
        "temperatures": [float(m.temperature) for m in members], "ns": [m.n for m in members],
        "samples_per_question": plan.samples,
        "population": Population(items=items, total=total, unit=unit, limit=plan.limit,
                                 fraction=items / total),
        "intervals": {
            "ci": f"95% interval for the task ({total} {unit}): bootstrap over {unit} with the "
                  "finite-population correction (as for one model)",
            "ci_questions": f"95% interval for these {items} {unit} only (jackknife over "
                            "each member's samples)",
            "contrasts": "paired: each rule minus " + base + " on the same samples "
                         "(kind aggregator); the ensemble under each rule minus its best "
                         "member alone, the member with the highest estimate here, on the same "
                         "questions and that member's same samples (kind vs-best-member; "
                         "choosing the best on these samples favours the member a little)",
        },
    }
