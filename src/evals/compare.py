"""Compare two eval runs on the questions they share: each run's number and the difference.

`ensemble compare RUN_A RUN_B` reads each run folder's `summary.json` (task, group sizes,
samples per question, the task's size), `questions.jsonl` and `samples.jsonl`, and for every
(t, n, aggregator) cell both runs have, computes on the shared questions (box-ball: scenarios)
the same per-item estimates as `ensemble eval` (`evals.runner.item_cells`), so on identical
question sets `a` and `b` are the runs' own numbers and `diff = b − a` their difference.

Intervals follow `evals.intervals`, paired over the shared items: `ci` for the task (the
runs' answers are independent, so their noise adds; a random subset of the task adds the
variation between items, with the finite-population correction), `ci_questions` for the
shared items only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.errors import InputError

from .intervals import bootstrap_counts, summarise
from .records import QUESTIONS_FILE, SAMPLES_FILE, QuestionRecord, read_questions, read_samples

__all__ = ["RunData", "compare_runs", "load_run"]


@dataclass(frozen=True)
class RunData:
    """One run folder, read back: its questions and the answers counted for them."""

    path: Path
    task: str
    model: str
    temperatures: tuple[float, ...]
    ns: tuple[int, ...]
    samples: int
    population: int | None
    questions: tuple[QuestionRecord, ...]
    answers: dict[tuple[float, str], list[str | None]]  # (t, question id) -> answers by index


def load_run(path: str | Path) -> RunData:
    """Read a run folder written by `ensemble eval` (InputError naming the problem if not)."""
    p = Path(path)
    if not p.is_dir():
        raise InputError(f"{p} is not a folder: give two run folders written by `ensemble eval` "
                         "(e.g. runs/boxball-MODEL)")
    for name in ("summary.json", QUESTIONS_FILE, SAMPLES_FILE):
        if not (p / name).is_file():
            raise InputError(f"{p} is not an eval run folder (no {name}): give folders written "
                             "by `ensemble eval` (rerun the eval to write them)")
    try:
        doc = json.loads((p / "summary.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {p / 'summary.json'}: {exc}") from None
    if not isinstance(doc, dict) or "task" not in doc or "results" not in doc:
        raise InputError(f"{p / 'summary.json'} is not an eval summary (a calibration run?); "
                         "give folders written by `ensemble eval`")
    if doc.get("ensemble"):
        raise InputError(f"{p} is a mixed-ensemble run (--ensemble): `ensemble compare` pairs "
                         "single-model runs by (t, n, aggregator); its own table already pairs "
                         "the ensemble with each rule and its best member (summary.json "
                         "contrasts)")
    temps = tuple(float(t) for t in doc.get("temperatures")
                  or sorted({r["t"] for r in doc["results"]}))
    ns = tuple(int(n) for n in doc.get("ns") or sorted({r["n"] for r in doc["results"]
                                                          if r["aggregator"] != "random-follow"}))
    if not ns:
        raise InputError(f"{p / 'summary.json'} has no result rows to compare (was the run "
                         "stopped before any question finished?); rerun `ensemble eval` on it")
    k = int(doc.get("samples_per_question") or max(ns))
    pop = doc.get("population", {}).get("total")
    if pop is None and doc["task"] == "boxball":
        pop = 216
    questions = tuple(read_questions(p))
    answers: dict[tuple[float, str], list[str | None]] = {}
    for s in read_samples(p):
        row = answers.setdefault((float(s.t), s.id), [None] * k)
        if 0 <= s.sample < k:
            row[s.sample] = s.answer if s.valid else None
    return RunData(p, str(doc["task"]), str(doc.get("model", "?")), temps, ns, k, pop,
                   questions, answers)


def _item_key(task: str, q: QuestionRecord) -> str:
    return str(q.meta["scenario"]) if task == "boxball" else q.id


def compare_runs(a: RunData, b: RunData, *, reps: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Each shared (t, n, aggregator) cell: a, b, diff = b − a (accuracy; box-ball also in
    utility, ±1 units) with paired intervals over the shared items."""
    from .runner import VOTE_RULE, item_cells

    if a.task != b.task:
        raise InputError(f"the runs are of different tasks ({a.task} in {a.path}, {b.task} in "
                         f"{b.path}): compare two runs of one task")
    task = a.task
    box = task == "boxball"
    temps = [t for t in a.temperatures if t in set(b.temperatures)]
    ns = sorted(set(a.ns) & set(b.ns))
    if not temps or not ns:
        raise InputError("the runs share no temperature and group size (A: t "
                         f"{list(a.temperatures)}, n {list(a.ns)}; B: t {list(b.temperatures)}, "
                         f"n {list(b.ns)}): compare runs with a common --t and --n")
    ids_b = {q.id: q for q in b.questions}
    shared = [q for q in a.questions if q.id in ids_b]
    from .openanswers import is_open, join_options

    for q in shared:
        if q.correct != ids_b[q.id].correct or (q.choices != ids_b[q.id].choices
                                                 and not is_open(q)):
            raise InputError(f"question {q.id!r} differs between the runs (choices or answer): "
                             "compare runs of the same task data")
    shared = join_options(shared, ids_b)  # open questions: the answers either run gave
    # only questions answered at every shared temperature in both runs
    shared = [q for q in shared if all((t, q.id) in r.answers for r in (a, b) for t in temps)]
    if box:  # items are whole scenarios
        colours: dict[str, int] = {}
        for q in shared:
            colours[_item_key(task, q)] = colours.get(_item_key(task, q), 0) + 1
        full = {s for s, c in colours.items()
                if c == sum(1 for q in a.questions if _item_key(task, q) == s)}
        shared = [q for q in shared if _item_key(task, q) in full]
    if not shared:
        raise InputError(f"the runs have no question in common ({a.path}: {len(a.questions)}, "
                         f"{b.path}: {len(b.questions)}): compare runs over the same questions "
                         "(same --limit and --seed, or no --limit)")
    rule = VOTE_RULE[box]

    def cells(r: RunData) -> list[Any]:
        ans = np.empty((len(temps), len(shared), r.samples), dtype=object)
        for ti, t in enumerate(temps):
            for qi, q in enumerate(shared):
                ans[ti, qi] = r.answers[t, q.id]
        return item_cells(task, shared, ans, ns)

    ca, cb = cells(a), cells(b)
    items = ca[0][rule, ns[0]].items
    pops = [p for p in (a.population, b.population) if p is not None]
    # unknown task size: no finite-population correction (conservative)
    total = max(pops) if pops else 10**12
    total = max(total, items)
    g = np.random.default_rng(seed)
    resamples = bootstrap_counts(items, reps, g)
    unit = "scenarios" if box else "questions"
    results = []
    keys = [(rule, n) for n in ns] + [("random-follow", 1)]
    for ti, t in enumerate(temps):
        for key in keys:
            va, vb = ca[ti][key], cb[ti][key]
            d = vb.minus(va, same_answers=False)
            span = 2.0 if box else 1.0
            s = summarise(d, population=total, counts=resamples, rng=g, bounds=(-span, span))
            half = 0.5 if box else 1.0  # box-ball: accuracy = (1 + utility) / 2
            row: dict[str, Any] = {
                "t": t, "n": key[1], "aggregator": key[0],
                "a": float(half * va.values.mean() + (0.5 if box else 0.0)),
                "b": float(half * vb.values.mean() + (0.5 if box else 0.0)),
                "diff": half * s.value, "sem": half * s.sem, "ci": [half * c for c in s.ci],
                "sem_questions": half * s.sem_questions,
                "ci_questions": [half * c for c in s.ci_questions],
                "items": items, "questions_exact": s.questions_exact,
            }
            if box:
                row.update({"utility_a": float(va.values.mean()),
                            "utility_b": float(vb.values.mean()),
                            "utility_diff": s.value, "utility_sem": s.sem,
                            "utility_ci": list(s.ci), "utility_ci_questions": list(s.ci_questions)})
            results.append(row)
    return {
        "task": task, "a": {"run": str(a.path), "model": a.model},
        "b": {"run": str(b.path), "model": b.model},
        "metric": "accuracy (a, b, diff = b − a)" + ("; utility_* in ±1 units" if box else ""),
        "shared": {"items": items, "unit": unit, "of_a": _count(a), "of_b": _count(b),
                   "total": None if total == 10**12 else total},
        "intervals": {
            "ci": "95% interval for the difference over the whole task"
                  + ("" if not math.isfinite(total) or items >= total else
                     f" ({total} {unit}; the {items} shared ones are treated as a random subset)")
                  + ": paired bootstrap over the shared " + unit
                  + " with the finite-population correction, plus both runs' answer noise",
            "ci_questions": f"95% interval for the difference on these {items} {unit} only: "
                            "both runs' answer noise (jackknife)",
        },
        "bootstrap": reps, "seed": seed,
        "results": results,
    }


def _count(r: RunData) -> int:
    if r.task == "boxball":
        return len({_item_key(r.task, q) for q in r.questions})
    return len(r.questions)
