"""Run an eval: sample a (question × temperature) grid once, then analyse it.

Samples live in the run directory's store (`samples.sqlite`); rerunning the same command on a
finished run makes no request and only recomputes. Outputs: summary.json (the `--json`
document of docs/evals.md: results with `ci` and `ci_questions`, contrasts, tokens, cost, wall
time), grid.csv, accuracy.png and the run records (evals/records.py).
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.errors import InputError
from ensemble.sampling.batch import BatchOptions
from ensemble.sampling.options import ProviderOptions
from ensemble.sampling.types import SampleRequest
from tasks import Question, Task, get_task

from .analysis import Cell, ItemValues, box_values, vote_values
from .intervals import Summary, bootstrap_counts, summarise
from .openanswers import build_task, score_open

__all__ = [
    "EvalConfig",
    "analyse",
    "box_answer_counts",
    "box_layout",
    "item_cells",
    "load_task",
    "run_dir",
    "run_eval",
    "select_questions",
]


@dataclass(frozen=True)
class EvalConfig:
    """What an eval run does. `provider` holds the endpoint and its limits (the key hidden);
    `fail_on_error` and `max_cost` are the run's failure policy and spending cap
    (evals/failures.py); `on_status` receives the run's "waiting: ..." lines; `batch` (its
    `BatchOptions`) draws through the provider's Batch API, `router` (a litellm Router config
    file) spreads online requests over several deployments."""

    task: str
    model: str
    temperatures: tuple[float, ...]
    ns: tuple[int, ...]
    samples: int | None = None
    limit: int | None = None
    seed: int = 0
    data: str | None = None
    out: str | None = None
    provider: ProviderOptions = field(default_factory=ProviderOptions)
    bootstrap: int = 1000
    max_tokens: int | None = None
    skip_invalid: bool = False
    fail_on_error: float | None = None
    max_cost: float | None = None
    adaptive: tuple[str, ...] = ()  # stopping rules to score beside fixed n ("bayes", "beta")
    max_n: int | None = None  # the adaptive rules' budget (default: the samples per question)
    stop_cost: float | None = None  # the bayes rule's cost per sample (default: its own)
    dry_run: bool = False  # count requests, tokens and price; send nothing
    progress: bool = False
    on_status: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    batch: BatchOptions | None = None
    router: str | None = None
    aggregators: tuple[str, ...] = ()  # extra rules beside majority / plurality (--aggregator)
    lam1: float | None = None  # λ₁ (ψ_λ units at t = 1; λ = λ₁ / t) for lam-weighted / robust
    open: bool = False  # mathqa --open: the question without options, the answer a number
    answer: str | None = None  # jsonl --answer: the kind of rows without choices

    def k(self) -> int:
        """Samples per question and temperature (default: the largest n)."""
        return self.samples if self.samples is not None else max(self.ns)

    def validate(self) -> None:
        if not self.temperatures:
            raise InputError("give at least one temperature with --t")
        if any(t < 0 for t in self.temperatures):
            raise InputError("temperatures must be >= 0")
        if not self.ns or any(n < 1 for n in self.ns):
            raise InputError("group sizes --n must be integers >= 1")
        if self.k() < max(self.ns):
            raise InputError(f"--samples {self.k()} is smaller than the largest n "
                             f"({max(self.ns)}); draw at least as many samples as the group size")
        if self.bootstrap < 2:
            raise InputError("--bootstrap must be >= 2")
        if self.limit is not None and self.limit < 1:
            raise InputError("--limit must be >= 1")
        bad = [r for r in self.adaptive if r not in ("bayes", "beta")]
        if bad:
            raise InputError(f"--adaptive takes bayes or beta, got {bad[0]!r}")
        if self.max_n is not None and self.max_n > self.k():
            raise InputError(f"--max-n {self.max_n} is more than the samples drawn per question "
                             f"(--samples {self.k()}): draw at least --max-n samples")


def load_task(cfg: EvalConfig) -> Task:
    """The task of a config (data, limit and seed passed to the tasks that take them)."""
    opts: dict[str, Any] = {}
    if cfg.task in ("mathqa", "jsonl"):
        opts.update(data=cfg.data, limit=cfg.limit, seed=cfg.seed, skip_invalid=cfg.skip_invalid)
    elif cfg.data is not None:
        raise InputError(f"task {cfg.task!r} takes no --data")
    return build_task(cfg.task, opts, open_answers=cfg.open, answer=cfg.answer)


def run_dir(cfg: EvalConfig) -> Path:
    """--out, or `runs/TASK[-DATA]-MODEL[@ENDPOINT]` (stable: rerunning the command resumes
    there)."""
    from .records import default_run_dir

    return Path(cfg.out) if cfg.out else default_run_dir(cfg.task, cfg.model, data=cfg.data,
                                                         api_base=cfg.provider.api_base)


def select_questions(cfg: EvalConfig, task: Task) -> list[Question]:
    """The questions of a run: for boxball `limit` picks whole scenarios (both colours)."""
    questions = list(task.questions())
    if cfg.task == "boxball" and cfg.limit is not None:
        import random

        scen = sorted({q.meta["scenario"] for q in questions})
        keep = set(random.Random(cfg.seed).sample(scen, min(cfg.limit, len(scen))))
        questions = [q for q in questions if q.meta["scenario"] in keep]
    if not questions:
        raise InputError("the task has no questions")
    return questions


async def run_eval(cfg: EvalConfig) -> dict[str, Any]:
    """Sample what is missing, analyse everything, write the outputs; return the summary."""
    from ensemble.sampling.router import sampler_mode
    from ensemble.sampling.sampler import Sampler

    cfg.validate()
    task = load_task(cfg)
    questions = select_questions(cfg, task)
    if cfg.task != "boxball" and any(q.correct is None for q in questions):
        bad = next(q for q in questions if q.correct is None)
        raise InputError(f"question {bad.id!r} has no answer: every question needs one to be "
                         "scored (field 'answer')")
    if cfg.aggregators:  # refused before any request when a rule cannot apply
        from .mixed import check_aggregators

        check_aggregators(list(cfg.aggregators), binary=all(len(q.choices) == 2
                                                            for q in questions),
                          n_options=max(len(q.choices) for q in questions), lams=[cfg.lam1],
                          where="--aggregator")
    out = run_dir(cfg)
    k = cfg.k()
    max_tokens = cfg.max_tokens or getattr(task, "max_tokens", None)
    extra = {} if max_tokens is None else {"max_tokens": max_tokens}
    reqs = [SampleRequest.of(q.prompt, temperature=t, k=k, tag=q.id, **extra)
            for t in cfg.temperatures for q in questions]
    if cfg.dry_run:
        return dry_run(cfg.model, cfg.provider, out, reqs, task=cfg.task,
                       questions=len(questions), temperatures=cfg.temperatures)
    from .records import make_run_dir

    make_run_dir(out)
    t0 = time.perf_counter()
    async with Sampler(cfg.model, options=cfg.provider, store=out / "samples.sqlite",
                       progress=cfg.progress, max_cost=cfg.max_cost, on_status=cfg.on_status,
                       **sampler_mode(model=cfg.model, options=cfg.provider, batch=cfg.batch,
                                      router=cfg.router)) as sampler:
        result = await sampler.run(reqs, parser=task.parse)
        stats = sampler.stats
        endpoint = sampler.provider.identity
    wall = time.perf_counter() - t0
    from .failures import apply_failure_policy, without_failed

    failed = apply_failure_policy(result, question_ids=[q.id for q in questions],
                                  temperatures=cfg.temperatures, out=out,
                                  fail_on_error=cfg.fail_on_error,
                                  samples_total=stats.samples_total)
    # the failed questions are left out of every estimate (box-ball: their whole scenarios)
    rows, questions = without_failed(result.rows, questions, len(cfg.temperatures), failed,
                                     whole="scenario" if cfg.task == "boxball" else None)
    parse_for = getattr(task, "parse_for", None)
    answers = np.empty((len(cfg.temperatures), len(questions), k), dtype=object)
    got: dict[tuple[int, int], list[Any]] = {}
    for i, row in enumerate(rows):
        ti, qi = divmod(i, len(questions))
        q = questions[qi]
        got[ti, qi] = [parse_for(q, s.text) if parse_for is not None else s.answer for s in row]
    questions = score_open(task, questions, rows, got, len(cfg.temperatures))  # open: options
    for (ti, qi), keys in got.items():
        # an answer counts only if it is one of this question's own choices
        answers[ti, qi] = [a if a in questions[qi].choices else None for a in keys]
    t1 = time.perf_counter()
    from ensemble import __version__

    from .records import now_iso, write_run_log

    write_run_log(out, questions, cfg.temperatures, rows, answers, ns=cfg.ns,
                  rule="majority" if cfg.task == "boxball" else "plurality")
    summary = analyse(cfg, questions, answers)
    if cfg.aggregators:
        extra_rules(cfg, questions, answers, summary)
    if cfg.adaptive:
        summary["adaptive"] = adaptive_rows(cfg, questions, answers)
    summary.update({
        "requests": stats.requests, "cost_usd": stats.cost_usd,
        "cost": {"now_usd": stats.cost_usd, "stored_samples_usd": stats.stored_cost_usd,
                 "note": "now: this run's requests; stored_samples: what the samples read "
                         "from the store had cost when drawn (null: price unknown)"},
        "tokens": {"prompt": stats.prompt_tokens, "completion": stats.completion_tokens},
        "samples": {"total": stats.samples_total, "from_store": stats.samples_cached},
        "retries": stats.retries, "errors": stats.errors, "rate_limited": stats.rate_limited,
        "wall_time_s": wall, "analysis_time_s": time.perf_counter() - t1, "run_dir": str(out),
        "data": _data_notes(task), "failed": failed.to_dict(), "notes": list(stats.notes),
        "provider": cfg.provider.public(), "endpoint": endpoint,
        "created": now_iso(), "version": __version__,
    })
    from .schemas import EvalSummary

    # typed: every key checked against the schema before it is written (a bug, not input)
    summary = EvalSummary.model_validate(summary).model_dump(mode="python", exclude_unset=True)
    _write_outputs(out, summary)
    return summary


def dry_run(model: str, provider: ProviderOptions, out: Path, reqs: list[SampleRequest],
            **head: Any) -> dict[str, Any]:
    """What a run would request and cost, from the store it would resume; nothing is sent and
    nothing is written (a missing store stays missing)."""
    from ensemble.sampling.sampler import Sampler

    store = out / "samples.sqlite"
    sampler = Sampler(model, options=provider, store=store if store.exists() else None)
    try:
        est = sampler.estimate(reqs)
    finally:
        if sampler.store is not None:
            sampler.store.close()
    return {**head, "model": model, "run_dir": str(out), **est.to_dict()}


def _data_notes(task: Task) -> dict[str, Any]:
    notes: dict[str, Any] = {}
    skipped = getattr(task, "skipped", None)
    if skipped:
        notes["skipped"] = [{"row": r, "reason": why} for r, why in skipped]
    issues = getattr(task, "issues", None)
    if issues:
        notes["issues"] = {kind: len(rows) for kind, rows in issues.items()}
    answer_kind = getattr(task, "answer_kind", None)
    if answer_kind is not None and answer_kind.is_open:
        notes["answer"] = answer_kind.name
    not_numeric = getattr(task, "not_numeric", None)
    if not_numeric:  # mathqa --open: questions whose right option is not a plain number
        notes["not_numeric"] = len(not_numeric)
    return notes


VOTE_RULE = {True: "majority", False: "plurality"}
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


def analyse(cfg: EvalConfig, questions: list[Question], answers: np.ndarray, *,
            population: int | None = None) -> dict[str, Any]:
    """The result grid from answers[t, q, k] (None = invalid); no requests.

    `population` is the number of items (questions; scenarios for boxball) in the whole task,
    of which these are a random subset when `--limit` binds (default: worked out from the
    task). Every value is an exact, unbiased estimate from the samples (`evals.analysis`);
    `ci` is the 95% interval for the task, `ci_questions` the one for these questions only
    (`evals.intervals`). Contrasts: each temperature minus the lowest (kind "temperature")
    and each group size minus one expert at the same temperature (kind "ensemble").
    """
    temps = [float(t) for t in cfg.temperatures]
    ns = sorted(set(cfg.ns))
    box = cfg.task == "boxball"
    rule = VOTE_RULE[box]
    invalid = np.array([[a is None for a in answers[ti].ravel()]
                        for ti in range(answers.shape[0])], dtype=float)
    # n = 1 is always computed: the ensemble contrasts compare each n with one expert
    cells = item_cells(cfg.task, questions, answers, sorted(set(ns) | {1}))
    items = cells[0][rule, ns[0]].items
    total = max(population if population is not None else _population(cfg, questions), items)
    unit = "scenarios" if box else "questions"
    g = np.random.default_rng(cfg.seed)
    resamples = bootstrap_counts(items, cfg.bootstrap, g)
    covers = {"ci": f"the task ({total} {unit})", "ci_questions": f"these {items} {unit}"}
    keys = [(rule, n) for n in ns] + [("random-follow", 1)]

    def row(iv: ItemValues, *, diff: bool, **head: Any) -> dict[str, Any]:
        span = 2.0 if box else 1.0  # utility in [−1, 1], accuracy in [0, 1]
        lo, hi = (-span, span) if diff else ((-1.0, 1.0) if box else (0.0, 1.0))
        s = summarise(iv, population=total, counts=resamples, rng=g, bounds=(lo, hi))
        return {**head, **_fields(s, box=box, diff=diff), "covers": covers}

    results = [row(cells[ti][key], diff=False, t=t, n=key[1], aggregator=key[0])
               for ti, t in enumerate(temps) for key in keys]
    contrasts: list[dict[str, Any]] = []
    base = min(range(len(temps)), key=lambda i: temps[i])
    for ti, t in enumerate(temps):
        if ti != base:
            contrasts += [row(cells[ti][key].minus(cells[base][key], same_answers=False),
                              diff=True, kind="temperature", t=t, vs_t=temps[base], n=key[1],
                              vs_n=key[1], aggregator=key[0]) for key in keys]
    for ti, t in enumerate(temps):
        contrasts += [row(cells[ti][rule, n].minus(cells[ti][rule, 1], same_answers=True),
                          diff=True, kind="ensemble", t=t, vs_t=t, n=n, vs_n=1, aggregator=rule)
                      for n in ns if n > 1]
    by_t = [float(invalid[ti].mean()) for ti in range(len(temps))]
    warnings = []
    if box:
        asked = {q.meta["scenario"] for q in questions}
        if len(asked) > items:
            gone = len(asked) - items
            warnings.append(f"{gone} scenario{'s' if gone > 1 else ''} left out: the question "
                            "of a colour it can show is missing (a vote's utility needs both)")
    high = [f"t = {t:g}: {r:.0%}" for t, r in zip(temps, by_t, strict=True) if r > INVALID_WARN]
    if high:
        warnings.append(f"over {INVALID_WARN:.0%} of the replies are invalid ("
                        + "; ".join(high) + "); invalid answers abstain and a group without a "
                        "valid answer counts as wrong, so the numbers measure the answer format "
                        "as much as the answers: check the prompt, the parser or --max-tokens")
    some = f"these {items} of the task's {total} {unit}, drawn at random (--limit)"
    return {
        "task": cfg.task, "model": cfg.model, "metric": METRIC[box],
        "estimator": ESTIMATOR[box], "temperatures": temps, "ns": ns,
        "samples_per_question": cfg.k(), "bootstrap": cfg.bootstrap, "seed": cfg.seed,
        "population": {"items": items, "total": total, "unit": unit, "limit": cfg.limit,
                       "fraction": items / total},
        "intervals": {
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
        "results": results,
        "contrasts": contrasts,
        "invalid_rate": float(invalid.mean()),
        "invalid_rate_by_t": [{"t": t, "invalid_rate": r}
                              for t, r in zip(temps, by_t, strict=True)],
        "invalid_policy": "invalid answers abstain from the vote; a group with no valid answer "
                          "counts as wrong; random-follow counts an invalid answer as wrong",
        "warnings": warnings,
    }


def extra_rules(cfg: EvalConfig, questions: list[Any], answers: np.ndarray,
                summary: dict[str, Any]) -> None:
    """Add the `--aggregator` rules to a single-model summary: rows at each (t, n) and their
    paired difference from the main vote (kind "aggregator", the same samples). λ = λ₁ / t
    (ψ_λ units; ∞ at t = 0); one model is one group, so lam-weighted is the main vote."""
    from .analysis import box_group_values, group_rule, vote_group_values
    from .mixed import check_aggregators

    box = cfg.task == "boxball"
    names = check_aggregators(list(cfg.aggregators), binary=box or all(
        len(q.choices) == 2 for q in questions), n_options=max(len(q.choices) for q in questions),
        lams=[cfg.lam1], where="--aggregator")
    main, extra = names[0], names[1:]
    summary["aggregators"] = names
    if not extra:
        return
    temps = [float(t) for t in cfg.temperatures]
    ns = sorted(set(cfg.ns))
    cells = item_cells(cfg.task, questions, answers, ns)
    items = cells[0][main, ns[0]].items
    total = summary["population"]["total"]
    unit = summary["population"]["unit"]
    g = np.random.default_rng(cfg.seed + 1)
    resamples = bootstrap_counts(items, cfg.bootstrap, g)
    row = row_builder(box=box, total=total, unit=unit, items=items, resamples=resamples, rng=g)

    if box:
        scen, joint, loc = box_layout(questions)
    else:
        choices, idx, correct = option_codes(questions)
    for ti, t in enumerate(temps):
        lam = None if cfg.lam1 is None else (math.inf if t == 0 else cfg.lam1 / t)
        for n in ns:
            if box:
                counts = box_answer_counts(answers[ti], loc, len(scen))[None]
                got = box_group_values(counts, joint, [n], {r: group_rule(r, [lam])
                                                            for r in extra})
            else:
                codes = np.array([[idx.get(a, -1) if a is not None else -1 for a in r]
                                  for r in answers[ti]], dtype=np.int64)
                got = vote_group_values([codes], correct, [n], {r: [lam] for r in extra},
                                        n_options=len(choices))
            for r in extra:
                summary["results"].append(row(got[r], diff=False, t=t, n=n, aggregator=r))
                summary["contrasts"].append(row(
                    got[r].minus(cells[ti][main, n], same_answers=True), diff=True,
                    kind="aggregator", t=t, vs_t=t, n=n, vs_n=n, aggregator=r,
                    vs_aggregator=main))
    summary["results"].sort(key=lambda r: (r["t"], r["aggregator"] == "random-follow"))


def row_builder(*, box: bool, total: int, unit: str, items: int, resamples: Any,
                rng: np.random.Generator) -> Callable[..., dict[str, Any]]:
    """`row(values, diff=..., **head)`: one table row (head fields, then the estimate, its
    intervals and what they cover) from per-item values, with the bootstrap resamples shared by
    every row of a run (so differences between rows are paired). Box-ball values are utilities
    in ±1 units (differences in [-2, 2]); other tasks' are accuracies in [0, 1]."""
    covers = {"ci": f"the task ({total} {unit})", "ci_questions": f"these {items} {unit}"}

    def row(iv: ItemValues, *, diff: bool, **head: Any) -> dict[str, Any]:
        span = 2.0 if box else 1.0
        lo, hi = (-span, span) if diff else ((-1.0, 1.0) if box else (0.0, 1.0))
        s = summarise(iv, population=total, counts=resamples, rng=rng, bounds=(lo, hi))
        return {**head, **_fields(s, box=box, diff=diff), "covers": covers}

    return row


def _fields(s: Summary, *, box: bool, diff: bool) -> dict[str, Any]:
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


def adaptive_rows(cfg: EvalConfig, questions: list[Any], answers: np.ndarray
                  ) -> list[dict[str, Any]]:
    """Rows for each stopping rule of `cfg.adaptive` beside fixed n, per temperature, replayed on
    the drawn samples (`evals.adaptive`): the same random orders of each question's samples for
    the adaptive and the fixed rows, so the two are comparable and their difference paired.

    Multiple choice: accuracy of the plurality of the samples the rule used. Box-ball: per
    question P(ω = decision | colour), weighted by P(scenario, colour) (each expert here sees the
    question's own ball: this is not the eval's exact-utility table, which lets each expert draw
    its own ball); the fixed rows beside it are scored the same way.
    """
    from ensemble.stopping import StopSpec

    from .adaptive import adaptive_eval, boxball_inputs

    box = cfg.task == "boxball"
    max_n = cfg.max_n or cfg.k()
    if box:
        values, weights, groups = boxball_inputs(questions)
        letters = ["L", "R"]
        kw: dict[str, Any] = {"values": values, "weights": weights, "groups": groups}
    else:
        letters = []
        for q in questions:
            letters.extend(c for c in q.choices if c not in letters)
        kw = {"correct": [letters.index(str(q.correct)) for q in questions],
              "n_options": len(letters)}
    idx = {c: i for i, c in enumerate(letters)}
    codes = np.array([[[idx.get(a, -1) if a is not None else -1 for a in row]
                       for row in answers[ti]] for ti in range(answers.shape[0])],
                     dtype=np.int64)
    fixed_ns = sorted({n for n in cfg.ns if n <= max_n} | {max_n})
    rows = []
    for stop in cfg.adaptive:
        spec = StopSpec(stop=stop, max_n=max_n, cost=cfg.stop_cost if stop == "bayes" else None)
        results = adaptive_eval(codes[:, :, :max_n], spec, fixed_ns=fixed_ns,
                                reps=cfg.bootstrap, rng=cfg.seed, **kw)
        for t, res in zip(cfg.temperatures, results, strict=True):
            row = res.row(t=float(t), aggregator="majority" if box else "plurality")
            row["fixed"] = [{"n": n, "accuracy": e.value, "sem": e.sem, "ci": list(e.ci)}
                            for n, e in sorted(res.fixed.items())]
            row["scored"] = ("P(ω = decision | colour), weighted by P(scenario, colour)" if box
                             else "accuracy of the plurality of the samples used")
            rows.append(row)
    return rows


def item_cells(task: str, questions: list[Any], answers: np.ndarray, ns: list[int]
               ) -> list[dict[Cell, ItemValues]]:
    """Per temperature, the per-item estimates of every (aggregator, n) cell, from
    answers[t, q, k] (None = invalid). Items are questions, or for boxball the scenarios
    (sorted by id). `questions` may be `Question`s or run records (`QuestionRecord`)."""
    if task == "boxball":
        scen, joint, loc = box_layout(questions)
        return [box_values(box_answer_counts(answers[ti], loc, len(scen)), joint, ns)
                for ti in range(answers.shape[0])]
    choices: list[str] = []
    for q in questions:
        choices.extend(c for c in q.choices if c not in choices)
    idx = {c: i for i, c in enumerate(choices)}
    correct = np.array([idx[str(q.correct)] for q in questions])
    out = []
    for ti in range(answers.shape[0]):
        codes = np.array([[idx.get(a, -1) if a is not None else -1 for a in row]
                          for row in answers[ti]], dtype=np.int64)
        out.append(vote_values(codes, correct, ns, n_options=len(choices)))
    return out


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


def _population(cfg: EvalConfig, questions: list[Question]) -> int:
    """How many items the whole task has (the questions are a random subset under --limit)."""
    if cfg.task == "boxball":
        return len({q.meta["scenario"] for q in get_task("boxball").questions()})
    if cfg.limit is None or len(questions) < cfg.limit:
        return len(questions)  # the limit did not bind: every question of the task was run
    full = build_task(cfg.task, {"data": cfg.data, "skip_invalid": cfg.skip_invalid},
                      open_answers=cfg.open, answer=cfg.answer)
    return len(full.questions())


def _write_outputs(out: Path, summary: dict[str, Any], *, plot: bool = True) -> None:
    from ensemble.jsonio import dumps

    (out / "summary.json").write_text(dumps(summary, indent=2) + "\n")
    with open(out / "grid.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "n", "aggregator", "accuracy", "sem", "ci_low", "ci_high",
                    "ci_questions_low", "ci_questions_high", "utility", "utility_sem", "items",
                    "member"])
        for r in summary["results"]:
            u = [f"{r['utility']:.6f}", f"{r['utility_sem']:.6f}"] if "utility" in r else ["", ""]
            w.writerow(["" if r["t"] is None else r["t"], r["n"], r["aggregator"],
                        f"{r['accuracy']:.6f}", f"{r['sem']:.6f}", f"{r['ci'][0]:.6f}",
                        f"{r['ci'][1]:.6f}",
                        f"{r['ci_questions'][0]:.6f}", f"{r['ci_questions'][1]:.6f}", *u,
                        r["items"], r.get("member") or ""])
    if plot:
        _plot(out / "accuracy.png", summary)


def _plot(path: Path, summary: dict[str, Any]) -> None:
    """accuracy.png: the main vote's value against n, one line per t, 95% intervals (a
    mixed ensemble: each rule and each member alone, `mixed.mixed_figure`).

    The y axis spans the metric's whole range (accuracy [0, 1], box-ball utility [−1, 1]) so a
    small difference is not drawn as a large one; intervals are clipped to that range; the
    dashed line is chance (a uniform guess among the question's choices).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    box = summary["task"] == "boxball"
    chance = 0.0 if box else _chance(path.parent, summary)
    if summary.get("ensemble"):
        from .mixed import mixed_figure

        fig = mixed_figure(summary, chance=chance)
    else:
        fig = accuracy_figure(summary, chance=chance)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def accuracy_figure(summary: dict[str, Any], *, chance: float | None) -> Any:
    """The figure of accuracy.png (the caller closes it); `chance`: the dashed line, or None."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    box = summary["task"] == "boxball"
    main = "majority" if box else "plurality"
    key, lo_hi = ("utility", (-1.0, 1.0)) if box else ("accuracy", (0.0, 1.0))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ns = sorted({r["n"] for r in summary["results"]})
    temps = sorted({r["t"] for r in summary["results"]})
    for j, t in enumerate(temps):
        rows = sorted((r for r in summary["results"] if r["t"] == t and r["aggregator"] == main),
                      key=lambda r: r["n"])
        if not rows:
            continue
        y = np.array([r[key] for r in rows], dtype=float)
        ci = np.array([_interval(r, box) for r in rows], dtype=float).clip(*lo_hi)
        yerr = np.vstack([np.maximum(y - ci[:, 0], 0), np.maximum(ci[:, 1] - y, 0)])
        # a small horizontal offset keeps the temperatures' bars apart
        x = np.array([r["n"] for r in rows], dtype=float) + 0.06 * (j - (len(temps) - 1) / 2)
        ax.errorbar(x, y, yerr=yerr, marker="o", capsize=4, label=f"t = {t:g}")
    if chance is not None:
        ax.axhline(chance, color="0.4", ls="--", lw=1, label="chance")
    ax.set_ylim(lo_hi[0] - 0.02, lo_hi[1] + 0.02)
    ax.set_xlabel("number of experts n (samples per vote)")
    ax.set_ylabel("expected utility (±1 units)" if box else "accuracy")
    title = f"{summary['task']}: {main} vote, {summary['model']}"
    ax.set_title("\n".join(textwrap.wrap(title, 60)), fontsize=10)
    ax.set_xticks(ns)
    ax.legend(fontsize=8, title="bars: 95% interval", title_fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _interval(r: dict[str, Any], box: bool) -> tuple[float, float]:
    """A result row's 95% interval on its plotted scale (±1.96 SEM when it carries none)."""
    ci = r.get("utility_ci") if box else r.get("ci")
    if ci and ci[0] is not None and ci[1] is not None:
        return float(ci[0]), float(ci[1])
    v, s = (r["utility"], r["utility_sem"]) if box else (r["accuracy"], r["sem"])
    return v - 1.96 * s, v + 1.96 * s


def _chance(run: Path, summary: dict[str, Any]) -> float | None:
    """A uniform guess: 1/5 for MathQA, else the mean of 1/len(choices); None: open answers."""
    if (summary.get("data") or {}).get("answer"):
        return None
    if summary["task"] == "mathqa":
        return 0.2
    try:
        from .records import read_questions

        inv = [1 / len(q.choices) for q in read_questions(run) if q.choices]
    except InputError:
        return None
    return float(np.mean(inv)) if inv else None
