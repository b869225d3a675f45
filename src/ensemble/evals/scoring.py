"""The scoring step: per-item estimates of every cell of a run, and their table rows.

A cell maps members to votes: one member at its temperature with n votes (a single model at
t1..tk is k members), or the ensemble of every member under a rule. `member_cells` scores each
member alone with the fast single-member kernels (`evals.analysis`), `ensemble_cells` the
ensemble under each rule (`evals.groups`); the group estimators reproduce the single-member
ones exactly for one member. How a task is scored comes from its declared `TaskLayout`
(accuracy of a vote, or the box-and-ball expected utility in ±1 units), never its name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.aggregators import get_aggregator
from ensemble.errors import InputError
from ensemble.qr import lam_at_temperature
from ensemble.rules import default_rules, main_vote
from ensemble.tasks import TaskLayout

from .analysis import Cell, ItemValues, box_values, vote_values
from .intervals import Summary, bootstrap_counts, sampled_row, summarise
from .schemas import ContrastRow, ResultRow

__all__ = [
    "ESTIMATOR",
    "INVALID_WARN",
    "METRIC",
    "answer_codes",
    "box_answer_counts",
    "box_layout",
    "check_aggregators",
    "default_aggregators",
    "ensemble_cells",
    "ensemble_rules",
    "fields",
    "item_cells",
    "lam_at",
    "one_model_rules",
    "option_codes",
    "Rows",
    "run_rows",
    "widen",
]

INVALID_WARN = 0.2
METRIC = {
    True: "expected utility of the vote in ±1 units (each expert draws its own ball; "
          "accuracy = (1 + utility) / 2)",
    False: "accuracy of the vote (plurality, ties broken by a fair coin; invalid answers "
           "abstain, a group with no valid answer is wrong)",
}
ESTIMATOR = {
    True: "exact and unbiased for every n up to the samples drawn: per scenario, the majority's "
          "utility with each colour's answers drawn without replacement from its samples",
    False: "exact and unbiased: per question, the average over all n-subsets of its samples "
           "(the paper's bootstrap over subsets, without its Monte-Carlo noise)",
}



def run_rows(layout: TaskLayout, *, items: int, total: int, seed: int,
             bootstrap: int) -> Rows:
    """The row builder of one table of a run: `bootstrap` resamples of its `items` drawn once
    from `seed` and shared by every row (see `Rows`)."""
    g = np.random.default_rng(seed)
    resamples = bootstrap_counts(items, bootstrap, g)
    return Rows(box=layout.utility, total=total, unit=layout.unit, items=items,
                resamples=resamples, rng=g, normals=g.standard_normal(bootstrap))


class Rows:
    """Table rows of one run from per-item values, with the bootstrap resamples (and the
    draws of the answers' noise) shared by every row (so differences between rows are paired,
    and rows of the same values have the same interval): `result(values, **head)` a results
    row, `contrast(values, **head)` a paired difference (head: the row's t, n, aggregator,
    ...; then the estimate, its intervals and what they cover). Box-ball values are
    utilities in ±1 units (differences in [-2, 2]); other tasks' are accuracies in [0, 1]. The
    answers count as sampled (`summarise`) unless the row's temperatures (`t`, `vs_t`) are all
    0; a mixed ensemble's row (t None) counts as sampled."""

    def __init__(self, *, box: bool, total: int, unit: str, items: int, resamples: Any,
                 rng: np.random.Generator, normals: Any = None) -> None:
        self.box, self.total, self.resamples, self.rng = box, total, resamples, rng
        self.normals = normals  # the answers' noise draws, shared like the resamples
        self.covers = {"ci": f"the task ({total} {unit})", "ci_questions": f"these {items} {unit}"}

    def _fields(self, iv: ItemValues, diff: bool, head: dict[str, Any]) -> dict[str, Any]:
        span = 2.0 if self.box else 1.0
        lo, hi = (-span, span) if diff else ((-1.0, 1.0) if self.box else (0.0, 1.0))
        s = summarise(iv, population=self.total, counts=self.resamples, rng=self.rng,
                      normals=self.normals, bounds=(lo, hi), sampled=sampled_row(head),
                      level=not diff)
        return {**head, **fields(s, box=self.box, diff=diff), "covers": self.covers}

    def result(self, iv: ItemValues, **head: Any) -> ResultRow:
        return ResultRow(**self._fields(iv, False, head))

    def contrast(self, iv: ItemValues, **head: Any) -> ContrastRow:
        return ContrastRow(**self._fields(iv, True, head))


def fields(s: Summary, *, box: bool, diff: bool) -> dict[str, Any]:
    """A summary as JSON fields: accuracy units (box-ball: also utility in ±1 units)."""
    name = "difference" if diff else "accuracy"
    # box-ball: accuracy = (1 + utility)/2, so a difference of accuracies is half of utility's
    a, b = (0.5, 0.0 if diff else 0.5) if box else (1.0, 0.0)
    out: dict[str, Any] = {
        name: a * s.value + b, "sem": a * s.sem, "ci": [a * c + b for c in s.ci],
        "sem_questions": a * s.sem_questions, "ci_questions": [a * c + b for c in s.ci_questions],
        "items": s.items,
    }
    if box:
        u = "utility_difference" if diff else "utility"
        out.update({u: s.value, "utility_sem": s.sem, "utility_ci": list(s.ci),
                    "utility_sem_questions": s.sem_questions,
                    "utility_ci_questions": list(s.ci_questions)})
    out["identical"] = s.identical
    out["questions_exact"] = s.questions_exact
    return out



def item_cells(layout: TaskLayout, questions: list[Any], answers: np.ndarray, ns: list[int]
               ) -> list[dict[Cell, ItemValues]]:
    """Per temperature, the per-item estimates of every (aggregator, n) cell, from
    answers[t, q, k] (None = invalid). Items are questions, or for boxball the scenarios
    (sorted by id). `questions` may be `Question`s or run records (`QuestionRecord`)."""
    if layout.utility:
        scen, joint, loc = box_layout(questions)
        return [box_values(box_answer_counts(answers[ti], loc, len(scen)), joint, ns)
                for ti in range(answers.shape[0])]
    from .adaptive import question_codes

    # coded per question (its own options): the estimators' cost grows with one question's
    # options, not the task's; task-wide codes of open answers (hundreds of distinct ones) made
    # the delete-one variants (options² × questions) take 21 GB at 500 questions x 40 samples
    codes, correct, n_options = question_codes(questions, answers)
    return [vote_values(codes[ti], np.asarray(correct), ns, n_options=n_options)
            for ti in range(answers.shape[0])]


def option_codes(questions: list[Any]) -> tuple[list[str], dict[str, int], Any]:
    """The options of multiple-choice questions in first-seen order, answer -> code, and each
    question's right answer as a code (for the vectorised vote estimators)."""
    choices: list[str] = []
    for q in questions:
        choices.extend(c for c in q.choices if c not in choices)
    idx = {c: i for i, c in enumerate(choices)}
    return choices, idx, np.array([idx[str(q.correct)] for q in questions])


def box_layout(questions: list[Any]
               ) -> tuple[list[str], NDArray[np.float64], list[tuple[int, int]]]:
    """Scenario ids (sorted), joint (S, 2, 2) P(colour, ω) and each question's (scenario,
    colour) position, from box-ball questions (or their records: `meta` with scenario, colour,
    prior_left, red_left, red_right). A scenario missing the question of a colour it can show
    (e.g. a question the provider refused) is left out: its utility needs both; its questions
    get position (−1, −1)."""
    rows: dict[str, NDArray[np.float64]] = {}
    asked: dict[str, set[int]] = {}
    for q in questions:
        m = q.meta
        mu, a, b = float(m["prior_left"]), float(m["red_left"]), float(m["red_right"])
        rows[m["scenario"]] = np.array([[(1 - mu) * b, mu * a],
                                        [(1 - mu) * (1 - b), mu * (1 - a)]])
        asked.setdefault(m["scenario"], set()).add(0 if m["colour"] == "red" else 1)
    scen = sorted(s for s, j in rows.items()
                  if all(c in asked[s] for c in (0, 1) if j[c].sum() > 0))
    si = {s: i for i, s in enumerate(scen)}
    joint = np.array([rows[s] for s in scen]).reshape(len(scen), 2, 2)
    loc = [(si[q.meta["scenario"]], 0 if q.meta["colour"] == "red" else 1)
           if q.meta["scenario"] in si else (-1, -1) for q in questions]
    return scen, joint, loc


def box_answer_counts(answers_t: Any, loc: list[tuple[int, int]], scenarios: int
                      ) -> NDArray[np.int64]:
    """(S, 2, 3) counts of "L", "R" and invalid per scenario and colour."""
    counts = np.zeros((scenarios, 2, 3), dtype=np.int64)
    for qi, (s, c) in enumerate(loc):
        if s < 0:
            continue
        a = list(answers_t[qi])
        nl, nr = a.count("L"), a.count("R")
        counts[s, c] = (nl, nr, len(a) - nl - nr)
    return counts



def default_aggregators(lams: list[float | None], binary: bool) -> list[str]:
    """The task's main vote (majority on binary box-ball, plurality otherwise) and the rules
    declared to be scored by default where they apply (`RuleInfo.default`: with every λ known,
    lam-weighted, and robust on binary tasks)."""
    return [main_vote(binary), *default_rules(binary=binary,
                                              lams_known=all(x is not None for x in lams))]


def check_aggregators(names: list[str], *, binary: bool, n_options: int,
                      lams: list[float | None], where: str, utility: bool | None = None,
                      open_kind: str | None = None, ensemble: bool = False) -> list[str]:
    """The rules to score, the main vote first, each asked of the registry and refused (one
    line) before any request when it cannot apply: unknown, not scorable in evals, binary on
    more options or on open answers (`open_kind`: the answer kind's name), without the form the
    task is scored with (`utility`: the group form for the box-ball utility, else the credit
    over options; None: binary box-ball), or needing a λ not known."""
    from ensemble.rules import aggregator_info, aggregator_names

    utility = binary if utility is None else utility
    base = main_vote(binary)
    out: list[str] = []
    for name in names:
        info = aggregator_info(name)
        if open_kind is not None and not info.vote and (info.binary or not info.open):
            ok = [n for n in aggregator_names(scorable=True)
                  if (i := aggregator_info(n)).open and not i.binary and i.scorable_on(utility)]
            raise InputError(f"{where}: {name} decides between two fixed options, and answer "
                             f"{open_kind!r} is open (each question's options are the answers "
                             f"given): drop it (rules that score open answers: "
                             f"{', '.join(ok)})")
        if info.binary and not binary:
            get_aggregator(name, n_options=n_options)  # raises: says why
        if info.vote:
            name = base  # one main vote: plurality over options, majority over two
        elif info.weighs_samples and utility and ensemble:
            raise InputError(f"{where}: {name} weighs each sample by its logprobs, and the "
                             "box-ball utility of members voting together is estimated from "
                             "their answer counts: score it on one model (--aggregator), or "
                             "drop it here")
        elif not info.scorable_on(utility):
            ok = [n for n in aggregator_names(scorable=True)
                  if aggregator_info(n).scorable_on(utility)]
            what, form = (("the box-ball utility", "group form") if utility
                          else ("a vote's accuracy", "credit over options"))
            raise InputError(f"{where}: {name} cannot be scored for {what}: it declares no "
                             f"{form} (rules that can: {', '.join(ok)})")
        if info.needs_lam and any(x is None for x in lams):
            raise InputError(f"{where}: {name} needs every member's λ: give lam or "
                             "calibration per member, or a calibration list (or drop it)")
        if name not in out:
            out.append(name)
    if base in out:
        out.remove(base)
    return [base, *out]



def one_model_rules(names: list[str], layout: TaskLayout, questions: Sequence[Any],
                    lam1: float | None, *, open_kind: str | None = None) -> list[str]:
    """The rules one model's run scores, the main vote first as its cells name it (a
    two-choice task's majority is its plurality), refused in one line before any request when
    one cannot apply to these questions (`check_aggregators`; `open_kind`: the name of an open
    answer kind)."""
    box = layout.utility
    checked = check_aggregators(names, binary=box or all(len(q.choices) == 2 for q in questions),
                                n_options=max(len(q.choices) for q in questions), lams=[lam1],
                                where="--aggregator", utility=box, open_kind=open_kind)
    return [layout.vote_rule, *checked[1:]]


def ensemble_rules(names: list[str] | None, layout: TaskLayout, questions: Sequence[Any],
                   lams: list[float | None], *, open_kind: str | None = None) -> list[str]:
    """The rules a mixed ensemble's run scores (default: `default_aggregators`), refused before
    any request when one cannot apply (`open_kind`: the name of an open answer kind, whose
    questions' options are the answers given: two-option rules such as robust are refused)."""
    binary = open_kind is None and all(len(q.choices) == 2 for q in questions)
    n_options = max(len(q.choices) for q in questions)
    box = layout.utility
    return check_aggregators(names or default_aggregators(lams, binary and box),
                             binary=binary, n_options=n_options, lams=lams,
                             where="--ensemble", utility=box, open_kind=open_kind,
                             ensemble=True)


def widen(alone: Any, g: int, like: Any) -> Any:
    """Member g's values alone in the jackknife layout of the ensemble `like` (its variants
    are member g's block there; the other members' answers do not move it)."""
    v = alone.jack.shape[1]
    jack = np.zeros_like(like.jack)
    jack[:, g * v:(g + 1) * v] = alone.jack
    return ItemValues(alone.values, jack, like.weight, alone.jackknife, alone.identical)




def answer_codes(answers: Any, idx: dict[str, int]) -> NDArray[np.int64]:
    """(Q, K) option codes of answers (−1: invalid) for the vectorised vote estimators."""
    return np.array([[idx.get(a, -1) if a is not None else -1 for a in row] for row in answers],
                    dtype=np.int64)


def lam_at(lam1: float | None, t: float) -> float | None:
    """λ at temperature t from λ₁ (None when unknown): `ensemble.qr.lam_at_temperature`."""
    return None if lam1 is None else lam_at_temperature(lam1, t)


def ensemble_cells(layout: TaskLayout, questions: list[Any], answers: Sequence[np.ndarray], *,
                   ns: list[int], lams: list[float | None], rules: list[str]
                   ) -> tuple[dict[str, ItemValues], list[ItemValues]]:
    """The ensemble of members (answers[g]: (Q, K_g), None = invalid; n_g votes each) under
    each rule, and each member alone at its own n under the main vote."""
    from .groups import box_group_values, group_rule, vote_group_values

    if layout.utility:
        scen, joint, loc = box_layout(questions)
        counts = np.stack([box_answer_counts(a, loc, len(scen)) for a in answers])
        cells = box_group_values(counts, joint, ns, {r: group_rule(r, lams) for r in rules})
        alone = [box_values(counts[g], joint, [ns[g]])[main_vote(True), ns[g]]
                 for g in range(len(answers))]
        return cells, alone
    from .adaptive import question_codes

    # coded per question (its own options, as `item_cells`): open answers' task-wide codes
    # (every distinct answer of the run) would make each question's estimate grow with them
    coded = [question_codes(questions, np.asarray(a, dtype=object)[None]) for a in answers]
    codes = [c[0][0] for c in coded]
    correct = np.asarray(coded[0][1])
    width = max(c[2] for c in coded)
    cells = vote_group_values(codes, correct, ns, {r: lams for r in rules}, n_options=width)
    alone = [vote_values(codes[g], correct, [ns[g]], n_options=width)[main_vote(False), ns[g]]
             for g in range(len(answers))]
    return cells, alone
