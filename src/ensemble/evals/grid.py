"""The cells of one model at k temperatures (a run plan with n at the top): each temperature
scored alone at each group size n under the task's vote and random-follow, the paired
differences between temperatures and between n and one expert, the `--aggregator` rules beside
the main vote, and the `--adaptive` stopping rules replayed on the drawn samples. Scoring only,
from the plan (`evals.plan.RunPlan`): no request (`evals.runner` draws, `evals.mixed` scores
members voting together)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ensemble.rules import baseline, is_baseline
from ensemble.tasks import Question

from .plan import RunPlan
from .schemas import AdaptiveRow, ContrastRow, InvalidByT, Population, Tables
from .scoring import (
    ESTIMATOR,
    INVALID_WARN,
    METRIC,
    answer_codes,
    box_answer_counts,
    box_layout,
    item_cells,
    lam_at,
    option_codes,
    run_rows,
)

__all__ = ["adaptive_rows", "analyse", "extra_rules", "option_shares", "rule_cells",
           "weighed_scores"]


def analyse(plan: RunPlan, questions: list[Question], answers: np.ndarray) -> Tables:
    """The result grid from answers[t, q, k] (None = invalid); no requests.

    The task's items (questions; scenarios for boxball) are `plan.population`, of which these
    are a random subset when `--limit` binds. Every value is an exact, unbiased estimate from
    the samples (`evals.analysis`);
    `ci` is the 95% interval for the task, `ci_questions` the one for these questions only
    (`evals.intervals`). Contrasts: each temperature minus the lowest (kind "temperature")
    and each group size minus one expert at the same temperature (kind "ensemble").
    """
    temps = [float(t) for t in plan.temperatures]
    ns = list(plan.ns)
    layout = plan.layout
    box = layout.utility
    rule = layout.vote_rule
    invalid = np.array([[a is None for a in answers[ti].ravel()]
                        for ti in range(answers.shape[0])], dtype=float)
    # n = 1 is always computed: the ensemble contrasts compare each n with one expert
    cells = item_cells(layout, questions, answers, sorted(set(ns) | {1}))
    items = cells[0][rule, ns[0]].items
    total = max(plan.population, items)
    unit = layout.unit
    keys = [(rule, n) for n in ns] + [(baseline(), 1)]
    row = run_rows(layout, items=items, total=total, seed=plan.seed, bootstrap=plan.bootstrap)

    results = [row.result(cells[ti][key], t=t, n=key[1], aggregator=key[0])
               for ti, t in enumerate(temps) for key in keys]
    contrasts: list[ContrastRow] = []
    base = min(range(len(temps)), key=lambda i: temps[i])
    for ti, t in enumerate(temps):
        if ti != base:
            contrasts += [row.contrast(cells[ti][key].minus(cells[base][key], same_answers=False),
                                       kind="temperature", t=t, vs_t=temps[base], n=key[1],
                                       vs_n=key[1], aggregator=key[0]) for key in keys]
    for ti, t in enumerate(temps):
        contrasts += [row.contrast(cells[ti][rule, n].minus(cells[ti][rule, 1], same_answers=True),
                                   kind="ensemble", t=t, vs_t=t, n=n, vs_n=1, aggregator=rule)
                      for n in ns if n > 1]
    by_t = [float(invalid[ti].mean()) for ti in range(len(temps))]
    warnings = []
    asked = {layout.item(q) for q in questions}
    if len(asked) > items:
        gone = len(asked) - items
        one = unit[:-1] if unit.endswith("s") else unit
        warnings.append(f"{gone} {one if gone == 1 else unit} left out: the question "
                        "of a colour it can show is missing (a vote's utility needs both)")
    high = [f"t = {t:g}: {r:.0%}" for t, r in zip(temps, by_t, strict=True) if r > INVALID_WARN]
    if high:
        warnings.append(f"over {INVALID_WARN:.0%} of the replies are invalid ("
                        + "; ".join(high) + "); invalid answers abstain and a group without a "
                        "valid answer counts as wrong, so the numbers measure the answer format "
                        "as much as the answers: check the prompt, the parser or --max-tokens")
    some = f"these {items} of the task's {total} {unit}, drawn at random (--limit)"
    return Tables(
        metric=METRIC[box], estimator=ESTIMATOR[box], temperatures=temps, ns=ns,
        samples_per_question=plan.samples,
        population=Population(items=items, total=total, unit=unit, limit=plan.limit,
                              fraction=items / total),
        intervals={
            "ci": "95% interval for the task: the mean over all " + f"{total} {unit}"
                  + (f"; {some}, so it includes the variation between {unit}"
                     if items < total else " (all were run)")
                  + f"; bootstrap over {unit} with the finite-population correction",
            "ci_questions": f"95% interval for these {items} {unit} only: the sampling noise "
                            "of the answers (jackknife); where a cell has as many samples per "
                            "question as its group size this noise cannot be separated, and "
                            "the task's interval without the finite-population correction "
                            "(wider) is shown",
        },
        results=results,
        contrasts=contrasts,
        invalid_rate=float(invalid.mean()),
        invalid_rate_by_t=[InvalidByT(t=t, invalid_rate=r)
                           for t, r in zip(temps, by_t, strict=True)],
        invalid_policy="invalid answers abstain from the vote; a group with no valid answer "
                       "counts as wrong; random-follow counts an invalid answer as wrong",
        warnings=warnings,
    )


def extra_rules(plan: RunPlan, questions: list[Any], answers: np.ndarray,
                tables: Tables, rows: list[list[Any]] | None = None) -> None:
    """Add the plan's rules beyond the main vote (`--aggregator`) to a single-model summary:
    rows at each (t, n) and their paired difference from the main vote (kind "aggregator",
    the same samples). λ = λ₁ / t (ψ_λ units; ∞ at t = 0); one model is one group, so
    lam-weighted is the main vote. A rule that weighs its samples by their logprobs is scored
    from `rows` (the samples behind `answers`, `Drawn.rows`: `evals.weighed`), its weighing's
    notes added to the tables'."""
    from .weighed import model_cells, weighed_rules

    layout = plan.layout
    main, extra = plan.rules[0], list(plan.rules[1:])
    if not extra:
        return
    temps = [float(t) for t in plan.temperatures]
    ns = list(plan.ns)
    cells = item_cells(layout, questions, answers, ns)
    items = cells[0][main, ns[0]].items
    # the main table's resamples and noise draws (its seed): a rule whose votes are the main
    # vote's (any rule at n = 1) gets the main row's interval, not one of its own
    row = run_rows(layout, items=items, total=tables.population.total, seed=plan.seed,
                   bootstrap=plan.bootstrap)
    weighed = weighed_rules(extra)
    got = rule_cells(layout, questions, answers, temps=temps, ns=ns,
                     rules=[r for r in extra if r not in weighed], lam1=plan.lam1)
    pair = {(ti, n): cells[ti][main, n] for ti in range(len(temps)) for n in ns}
    pair_soft: dict[tuple[int, int], Any] = {}
    if weighed:
        soft, pair_soft, notes = model_cells(layout, questions, answers, rows or [],
                                             temps=temps, ns=ns, rules=weighed, seed=plan.seed)
        got.update(soft)
        tables.notes.extend(notes)
    for ti, t in enumerate(temps):
        for n in ns:
            for r in extra:
                vs = pair_soft[ti, n] if r in weighed else pair[ti, n]
                tables.results.append(row.result(got[ti, n, r], t=t, n=n, aggregator=r))
                tables.contrasts.append(row.contrast(
                    got[ti, n, r].minus(vs, same_answers=True),
                    kind="aggregator", t=t, vs_t=t, n=n, vs_n=n, aggregator=r,
                    vs_aggregator=main))
    tables.results.sort(key=lambda r: (r.t or 0.0, is_baseline(r.aggregator)))


def rule_cells(layout: Any, questions: list[Any], answers: np.ndarray, *, temps: list[float],
               ns: list[int], rules: list[str], lam1: float | None
               ) -> dict[tuple[int, int, str], Any]:
    """One model's per-item values under each rule beside the main vote, at each temperature
    (its index) and n: (ti, n, rule) -> ItemValues, λ = λ₁ / t (`eval --aggregator`, and
    `compare` of two such runs)."""
    from .groups import box_group_values, group_rule, vote_group_values

    box = layout.utility
    if box:
        scen, joint, loc = box_layout(questions)
    else:
        choices, idx, correct = option_codes(questions)
    out: dict[tuple[int, int, str], Any] = {}
    for ti, t in enumerate(temps):
        lam = lam_at(lam1, t)
        for n in ns:
            if box:
                counts = box_answer_counts(answers[ti], loc, len(scen))[None]
                got = box_group_values(counts, joint, [n], {r: group_rule(r, [lam])
                                                            for r in rules})
            else:
                got = vote_group_values([answer_codes(answers[ti], idx)], correct, [n],
                                        {r: [lam] for r in rules}, n_options=len(choices))
            for r in rules:
                out[ti, n, r] = got[r]
    return out


def adaptive_rows(plan: RunPlan, questions: list[Any], answers: np.ndarray, *,
                  costs: np.ndarray | None = None, rows: list[list[Any]] | None = None,
                  tokens: np.ndarray | None = None, notes: list[str] | None = None
                  ) -> list[AdaptiveRow]:
    """Rows for each stopping rule of `plan.stopping` beside fixed n, per temperature, replayed
    on the drawn samples (`evals.adaptive`): the same random orders of each question's samples
    for the adaptive and the fixed rows, so the two are comparable and their difference paired.

    Multiple choice: accuracy of the plurality of the samples the rule used; and for each
    rule of the plan that weighs its samples (soft votes, from `rows`: `evals.weighed`), a
    row of that rule's vote of the same samples (`aggregator` its name). Box-ball: per
    question P(ω = decision | colour), weighted by P(scenario, colour) (each expert here sees the
    question's own ball: this is not the eval's exact-utility table, which lets each expert draw
    its own ball); the fixed rows beside it are scored the same way. With `costs` (T, Q, K:
    each drawn sample's dollars, `Drawn.costs`), each row's `mean_cost_usd` is the dollars of
    the samples it used; with `tokens` (T, Q, K: each drawn sample's completion tokens,
    `Drawn.tokens`), its `mean_tokens` theirs, and a rule that counts tokens reads them.
    """
    from ensemble.stopping import plan_for, stop_rules

    from .adaptive import adaptive_eval, boxball_inputs, question_codes
    from .weighed import weighed_rules

    stopping = plan.stopping
    if stopping is None:
        return []
    layout = plan.layout
    box = layout.utility
    max_n = stopping.max_n
    if box:
        values, weights, groups = boxball_inputs(questions)
        codes, _, _ = question_codes(questions, answers, options=("L", "R"))
        kw: dict[str, Any] = {"values": values, "weights": weights, "groups": groups}
    else:
        codes, correct, n_options = question_codes(questions, answers)
        kw = {"correct": correct, "n_options": n_options}
    fixed_ns = sorted({n for n in plan.ns if n <= max_n} | {max_n})
    if costs is not None:
        kw["costs"] = np.asarray(costs, dtype=float)[:, :, :max_n]
    if tokens is not None:
        kw["tokens"] = np.asarray(tokens, dtype=float)[:, :, :max_n]
    votes: list[tuple[str, dict[str, Any]]] = [(layout.vote_rule, {})]
    votes += [(r, weighed_scores(plan, questions, answers, rows or [], r, max_n))
              for r in weighed_rules(plan.rules)]
    out: list[AdaptiveRow] = []
    shares: Any = None
    for stop in stopping.rules:
        # the plan the rule's name stands for, as Ensemble(stop=...) draws by
        cls = stop_rules.get(stop)
        takes_cost = "cost" in getattr(cls, "params", ())
        rule = plan_for(stop, max_n=max_n,
                        **({"cost": stopping.cost} if takes_cost and stopping.cost else {}))
        soft: dict[str, Any] = {}
        if getattr(getattr(cls, "requests", None), "logprobs", False):
            # a rule that stops on soft evidence sees each sample's own P(option)
            if shares is None:
                shares = option_shares(plan, questions, answers, rows or [], max_n)
            soft = {"shares": shares}
        for vote, scored in votes:
            results = adaptive_eval(codes[:, :, :max_n], rule, fixed_ns=fixed_ns,
                                    reps=plan.bootstrap, rng=plan.seed, **kw, **scored, **soft)
            for t, res in zip(plan.temperatures, results, strict=True):
                if notes is not None and vote == layout.vote_rule:
                    notes.extend((f"t = {t:g}: " if len(results) > 1 else "") + x
                                 for x in res.notes)
                row = res.row(t=float(t), aggregator=vote)
                row["fixed"] = [{"n": n, "accuracy": e.value, "sem": e.sem, "ci": list(e.ci)}
                                for n, e in sorted(res.fixed.items())]
                row["scored"] = (("P(ω = decision | colour), weighted by P(scenario, colour)"
                                  if box else "accuracy of the plurality of the samples used")
                                 if not scored else
                                 f"{'P(ω = decision | colour)' if box else 'accuracy'} of the "
                                 f"{vote} vote of the samples used")
                out.append(AdaptiveRow.model_validate(row))
    return out


def option_shares(plan: RunPlan, questions: list[Any], answers: np.ndarray,
                  rows: list[list[Any]], max_n: int) -> np.ndarray:
    """(T, Q, max_n, O) each sample's own P(option) at its answer position, the options coded
    as the replay codes them (`adaptive.question_codes`; NaN: a sample without them, e.g. an
    open answer's): the soft evidence a stopping rule that reads it stops on."""
    from .weighed import evidence_table

    nq = len(questions)
    options = ([["L", "R"]] * nq if plan.layout.utility else
               [list(dict.fromkeys([*q.choices, str(q.correct)])) for q in questions])
    got = [evidence_table(questions, rows[ti * nq:(ti + 1) * nq], answers[ti], options)
           for ti in range(answers.shape[0])]
    return np.stack(got)[:, :, :max_n]


def weighed_scores(plan: RunPlan, questions: list[Any], answers: np.ndarray,
                   rows: list[list[Any]], rule: str, max_n: int) -> dict[str, Any]:
    """`adaptive_eval`'s keywords for a rule that weighs its samples: each temperature's
    samples' scores (the first max_n of each question) and DeepConf's filter."""
    from .weighed import run_scores

    nq = len(questions)
    options = ([["L", "R"]] * nq if plan.layout.utility else
               [list(dict.fromkeys([*q.choices, str(q.correct)])) for q in questions])
    got = [run_scores(rule, questions, rows[ti * nq:(ti + 1) * nq], answers[ti],
                      options=options) for ti in range(answers.shape[0])]
    width = max(g.values.shape[2] for g in got)
    scores = np.stack([np.pad(g.values, ((0, 0), (0, 0), (0, width - g.values.shape[2])))
                       for g in got])[:, :, :max_n]
    ranked = [g for g in got if g.rank is not None]
    rank = (np.stack([g.rank if g.rank is not None else np.zeros(g.values.shape[:2])
                      for g in got])[:, :, :max_n] if ranked else None)
    return {"scores": scores, "rank": rank, "keep": ranked[0].keep if ranked else 1.0}
