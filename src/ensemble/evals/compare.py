"""Compare two eval runs on the questions they share: each run's number and the difference.

`ensemble compare RUN_A RUN_B` reads both run folders (`evals.rundir.read_run`: summary.json,
questions.jsonl, samples.jsonl) and, for every cell both runs have, computes on the shared
items (questions; box-ball: scenarios) the same per-item estimates as `ensemble eval`
(`evals.scoring`, `evals.grid`), so on identical question sets `a` and `b` are the runs' own
numbers and `diff = b − a` their difference. Cells: every (t, n, rule) of a single model both
runs scored (the main vote, random-follow, and each `--aggregator` rule, at each run's own
λ₁); a mixed ensemble's ensemble under each rule (`member` "ensemble") and each member alone
at its n (matched by label). A single model and a mixed ensemble share no cell.

Intervals follow `evals.intervals`, paired over the shared items: `ci` for the task (the
runs' answers are independent, so their noise adds; a random subset of the task adds the
variation between items, with the finite-population correction), `ci_questions` for the
shared items only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.errors import InputError
from ensemble.rules import baseline, is_baseline
from ensemble.tasks import TaskLayout, layout_of

from .analysis import ItemValues
from .intervals import bootstrap_counts, check_bootstrap, sampled_row, summarise
from .records import QuestionRecord
from .rundir import RunFolder

__all__ = ["MemberCell", "RunData", "compare_runs", "run_data"]



@dataclass(frozen=True)
class MemberCell:
    """A member of a mixed ensemble's run: its label, temperature, votes n and λ (or None)."""

    label: str
    t: float
    n: int
    lam: float | None


@dataclass(frozen=True)
class RunData:
    """One eval run, read back: its questions and the answers counted for them.

    `answers` maps (t, question id) -> the answers by sample index for a single model, and
    (member label, question id) for a mixed ensemble (`members` its members); `rules` the
    rules it scored (the main vote first), `lam1` one model's λ₁ for them. `created`
    identifies the run: when it was written and into which folder (a copy of a folder is the
    same run; two runs written in one second are not)."""

    path: Path
    task: str
    model: str
    temperatures: tuple[float, ...]
    ns: tuple[int, ...]
    samples: int
    population: int | None
    questions: tuple[QuestionRecord, ...]
    answers: dict[tuple[Any, str], list[str | None]]
    members: tuple[MemberCell, ...] = ()
    rules: tuple[str, ...] = ()
    created: str | None = None
    layout: TaskLayout | None = None
    lam1: float | None = None
    answer: str | None = None  # the open answer kind the run read (number, math, text)
    title: str = ""  # the task as people name it (`RunFolder.title`: a task file's name)
    # the samples behind the answers, keyed as `answers` (text, answer, compact logprobs):
    # what a rule that weighs its samples reads (`evals.weighed`)
    drawn: dict[tuple[Any, str], list[Any]] | None = None

    @property
    def mixed(self) -> bool:
        return bool(self.members)

    def task_layout(self) -> TaskLayout:
        return self.layout if self.layout is not None else layout_of(self.task)


def run_data(run: RunFolder) -> RunData:
    """An eval run folder (`evals.rundir.read_run`) as compare scores it: the answers of each
    sample by (t or member, question); InputError naming the fix for a run without rows."""
    if run.kind != "eval":
        raise InputError(f"{run.path} is a calibration, not an eval run: give folders written "
                         "by `ensemble eval`")
    doc, p = run.summary, run.path
    ens = doc.ensemble
    members = tuple(MemberCell(m.label, float(m.temperature), int(m.n),
                               None if m.lam is None else float(m.lam))
                    for m in (ens.members if ens else []))
    if ens is not None and not members:
        raise InputError(f"{p / 'summary.json'} is a mixed-ensemble run without members; "
                         "rerun `ensemble eval --ensemble` on it")
    temps = tuple(float(t) for t in doc.temperatures)
    ns = tuple(int(n) for n in doc.ns)
    if not ns or not doc.results:
        raise InputError(f"{p / 'summary.json'} has no result rows to compare (was the run "
                         "stopped before any question finished?); rerun `ensemble eval` on it")
    from ensemble.sampling.types import Sample

    k = int(doc.samples_per_question)
    answers: dict[tuple[Any, str], list[str | None]] = {}
    samples: dict[tuple[Any, str], list[Any]] = {}
    for s in run.samples:
        key = (s.member if members else float(s.t), s.id)
        row = answers.setdefault(key, [None] * k)
        kept = samples.setdefault(key, [None] * k)
        if 0 <= s.sample < k:
            row[s.sample] = s.answer if s.valid else None
            kept[s.sample] = Sample(key="", index=s.sample, text=s.text, answer=row[s.sample],
                                    answer_lp=s.lp)
    return RunData(p, run.task, run.model, temps, ns, k, doc.population.total, run.questions,
                   answers, members, tuple(doc.aggregators), f"{doc.created} {doc.run_dir}",
                   run.layout, doc.lam1, doc.data.answer, run.title, samples)


def _shared(a: RunData, b: RunData, keys_a: list[Any], keys_b: list[Any],
            layout: TaskLayout) -> list[QuestionRecord]:
    """The questions both runs answered for every compared member, whole items only."""
    from .openanswers import is_open, join_options

    ids_b = {q.id: q for q in b.questions}
    shared = [q for q in a.questions if q.id in ids_b]
    for q in shared:
        if q.correct != ids_b[q.id].correct or (q.choices != ids_b[q.id].choices
                                                 and not is_open(q)):
            raise InputError(f"question {q.id!r} differs between the runs (choices or answer): "
                             "compare runs of the same task data")
    shared = join_options(shared, ids_b)  # open questions: the answers either run gave
    shared = [q for q in shared if all((m, q.id) in a.answers for m in keys_a)
              and all((m, q.id) in b.answers for m in keys_b)]
    if layout.group is not None:  # items are whole groups (box-ball: scenarios)
        size: dict[str, int] = {}
        for q in a.questions:
            size[layout.item(q)] = size.get(layout.item(q), 0) + 1
        have: dict[str, int] = {}
        for q in shared:
            have[layout.item(q)] = have.get(layout.item(q), 0) + 1
        shared = [q for q in shared if have[layout.item(q)] == size[layout.item(q)]]
    if not shared:
        raise InputError(f"the runs have no question in common ({a.path}: {len(a.questions)}, "
                         f"{b.path}: {len(b.questions)}): compare runs over the same questions "
                         "(same --limit and --seed, or no --limit)")
    return shared


def _check(a: RunData, b: RunData, reps: int) -> None:
    check_bootstrap(reps)
    if a.path.resolve() == b.path.resolve() or (a.created is not None
                                                and a.created == b.created
                                                and a.model == b.model):
        raise InputError(f"{a.path} and {b.path} are the same run: compare two different "
                         "runs (a run against itself has no independent difference)")
    if (a.task, a.title) != (b.task, b.title):
        raise InputError(f"the runs are of different tasks ({a.title or a.task} in {a.path}, "
                         f"{b.title or b.task} in {b.path}): compare two runs of one task")
    if a.answer != b.answer:
        def kind(r: RunData) -> str:
            return f"--answer {r.answer}" if r.answer else "the task's own answers"

        raise InputError(f"the runs read answers differently ({kind(a)} in {a.path}, {kind(b)} "
                         f"in {b.path}), so their answer keys differ: compare two runs read "
                         "the same way")
    if a.mixed != b.mixed:
        mixed, single = (a, b) if a.mixed else (b, a)
        raise InputError(f"{mixed.path} is a mixed-ensemble run and {single.path} a single "
                         "model's: they share no cell; compare two runs of one kind (a single "
                         "model is a one-member ensemble: give it as an --ensemble spec)")


Cells = dict[tuple[Any, ...], tuple[ItemValues, ItemValues, dict[str, Any]]]


def _model_cells(a: RunData, b: RunData, layout: TaskLayout) -> tuple[Cells, int]:
    """(t, n, rule) cells of two single-model runs, on their shared items."""
    from .scoring import item_cells

    temps = [t for t in a.temperatures if t in set(b.temperatures)]
    ns = sorted(set(a.ns) & set(b.ns))
    if not temps or not ns:
        raise InputError("the runs share no temperature and group size (A: t "
                         f"{list(a.temperatures)}, n {list(a.ns)}; B: t {list(b.temperatures)}, "
                         f"n {list(b.ns)}): compare runs with a common --t and --n")
    shared = _shared(a, b, temps, temps, layout)

    def cells(r: RunData) -> list[Any]:
        ans = np.empty((len(temps), len(shared), r.samples), dtype=object)
        for ti, t in enumerate(temps):
            for qi, q in enumerate(shared):
                ans[ti, qi] = r.answers[t, q.id]
        return item_cells(layout, shared, ans, ns)

    ca, cb = cells(a), cells(b)
    rule = layout.vote_rule
    # the rules beside the main vote that both runs scored, each at its run's own λ₁
    extra = [r for r in a.rules if r in b.rules and r != rule and not is_baseline(r)]
    if extra:
        from .grid import rule_cells
        from .weighed import model_cells, weighed_rules

        weighed = weighed_rules(extra)

        def more(r: RunData) -> dict[tuple[int, int, str], ItemValues]:
            ans = np.empty((len(temps), len(shared), r.samples), dtype=object)
            for ti, t in enumerate(temps):
                for qi, q in enumerate(shared):
                    ans[ti, qi] = r.answers[t, q.id]
            got = rule_cells(layout, shared, ans, temps=temps, ns=ns,
                             rules=[x for x in extra if x not in weighed], lam1=r.lam1)
            if weighed:  # from each sample's compact logprobs in samples.jsonl
                rows = [(r.drawn or {}).get((t, q.id)) or [] for t in temps for q in shared]
                got.update(model_cells(layout, shared, ans, rows, temps=temps, ns=ns,
                                       rules=weighed, seed=0)[0])
            return got

        xa, xb = more(a), more(b)
    out: Cells = {}
    for ti, t in enumerate(temps):
        for key in [(rule, n) for n in ns]:
            out[(t, key[0], key[1])] = (ca[ti][key], cb[ti][key], {"t": t, "n": key[1],
                                                        "aggregator": key[0]})
        for r in extra:
            for n in ns:
                out[(t, r, n)] = (xa[ti, n, r], xb[ti, n, r], {"t": t, "n": n, "aggregator": r})
        key = (baseline(), 1)
        out[(t, key[0], key[1])] = (ca[ti][key], cb[ti][key], {"t": t, "n": 1,
                                                    "aggregator": key[0]})
    return out, ca[0][rule, ns[0]].items


def _ensemble_cells(a: RunData, b: RunData, layout: TaskLayout) -> tuple[Cells, int]:
    """Two mixed ensembles' cells on their shared items: the ensemble under each rule both
    scored, and each member (by label, at the same n) alone."""
    from .scoring import ensemble_cells

    rules = [r for r in a.rules if r in b.rules]
    labels_b = {m.label: m for m in b.members}
    alone = [m.label for m in a.members
             if m.label in labels_b and labels_b[m.label].n == m.n]
    if not rules and not alone:
        raise InputError("the mixed ensembles share no rule and no member (A: rules "
                         f"{list(a.rules)}; B: rules {list(b.rules)}): compare ensembles "
                         "scored under a common rule")
    shared = _shared(a, b, [m.label for m in a.members], [m.label for m in b.members], layout)

    def score(r: RunData) -> tuple[dict[str, ItemValues], dict[str, ItemValues]]:
        answers = []
        for m in r.members:
            arr = np.empty((len(shared), r.samples), dtype=object)
            for qi, q in enumerate(shared):
                arr[qi] = r.answers[m.label, q.id]
            answers.append(arr)
        from .weighed import ensemble_cells as weighed_cells, weighed_rules

        weighed = weighed_rules(r.rules)
        ns = [m.n for m in r.members]
        got, each = ensemble_cells(layout, shared, answers, ns=ns,
                                   lams=[m.lam for m in r.members],
                                   rules=[x for x in r.rules if x not in weighed])
        if weighed:  # from each sample's compact logprobs in samples.jsonl
            rows = [(r.drawn or {}).get((m.label, q.id)) or [] for m in r.members
                    for q in shared]
            got.update(weighed_cells(shared, answers, rows, ns=ns, rules=weighed,
                                     base=got[r.rules[0]], alone=each, seed=0)[0])
        return got, {m.label: v for m, v in zip(r.members, each, strict=True)}

    (ea, ma), (eb, mb) = score(a), score(b)
    na, nb = sum(m.n for m in a.members), sum(m.n for m in b.members)
    out: Cells = {}
    for r in rules:
        head = {"member": "ensemble", "t": None, "n": na, "aggregator": r}
        if nb != na:
            head["n_b"] = nb
        out["ensemble", r] = (ea[r], eb[r], head)
    by_a = {m.label: m for m in a.members}
    for lb in alone:
        out[(lb,)] = (ma[lb], mb[lb], {"member": lb, "t": by_a[lb].t, "n": by_a[lb].n,
                                    "aggregator": a.rules[0] if a.rules else
                                    layout.vote_rule})
    first = next(iter(out.values()))[0]
    return out, first.items


def compare_runs(run_a: RunFolder | RunData, run_b: RunFolder | RunData, *, reps: int = 1000,
                 seed: int = 0) -> dict[str, Any]:
    """Each shared cell of two eval runs (their folders, `evals.rundir.read_run`, or their
    answers as `RunData`): a, b, diff = b − a (accuracy; box-ball also in utility, ±1 units)
    with paired intervals over the shared items."""
    a = run_a if isinstance(run_a, RunData) else run_data(run_a)
    b = run_b if isinstance(run_b, RunData) else run_data(run_b)
    _check(a, b, reps)
    layout = a.task_layout()
    box = layout.utility
    cells, items = (_ensemble_cells if a.mixed else _model_cells)(a, b, layout)
    pops = [p for p in (a.population, b.population) if p is not None]
    # unknown task size: no finite-population correction (conservative)
    total = max(max(pops) if pops else 10**12, items)
    g = np.random.default_rng(seed)
    resamples = bootstrap_counts(items, reps, g)
    row = _row_maker(box, total, resamples, g, g.standard_normal(reps))
    results = [row(va, vb, head) for va, vb, head in cells.values()]
    unit = layout.unit
    return {
        "task": a.title or a.task, "a": {"run": str(a.path), "model": a.model},
        "b": {"run": str(b.path), "model": b.model},
        "metric": "accuracy (a, b, diff = b − a)" + ("; utility_* in ±1 units" if box else ""),
        "shared": {"items": items, "unit": unit, "of_a": _count(a, layout),
                   "of_b": _count(b, layout), "total": None if total == 10**12 else total},
        "intervals": {
            "ci": "95% interval for the difference over the whole task"
                  + ("" if not math.isfinite(total) or items >= total else
                     f" ({total} {unit}; the {items} shared ones are treated as a random subset)")
                  + ": paired bootstrap over the shared " + unit
                  + " with the finite-population correction, plus both runs' answer noise",
            "ci_questions": f"95% interval for the difference on these {items} {unit} only: "
                            "both runs' answer noise (jackknife)",
        },
        "bootstrap": reps, "seed": seed, "mixed": a.mixed,
        "results": results,
    }


def _row_maker(box: bool, total: int, resamples: Any, g: np.random.Generator, normals: Any
               ) -> Callable[[ItemValues, ItemValues, dict[str, Any]], dict[str, Any]]:
    half = 0.5 if box else 1.0  # box-ball: accuracy = (1 + utility) / 2
    span = 2.0 if box else 1.0

    def row(va: ItemValues, vb: ItemValues, head: dict[str, Any]) -> dict[str, Any]:
        d = vb.minus(va, same_answers=False)
        s = summarise(d, population=total, counts=resamples, normals=normals, rng=g,
                      bounds=(-span, span), sampled=sampled_row(head), level=False)
        out: dict[str, Any] = {
            **head,
            "a": float(half * va.values.mean() + (0.5 if box else 0.0)),
            "b": float(half * vb.values.mean() + (0.5 if box else 0.0)),
            "diff": half * s.value, "sem": half * s.sem, "ci": [half * c for c in s.ci],
            "sem_questions": half * s.sem_questions,
            "ci_questions": [half * c for c in s.ci_questions],
            "items": va.items, "questions_exact": s.questions_exact,
        }
        if box:
            out.update({"utility_a": float(va.values.mean()),
                        "utility_b": float(vb.values.mean()),
                        "utility_diff": s.value, "utility_sem": s.sem,
                        "utility_ci": list(s.ci), "utility_ci_questions": list(s.ci_questions)})
        return out

    return row


def _count(r: RunData, layout: TaskLayout) -> int:
    return len({layout.item(q) for q in r.questions})
