"""Run an eval: sample a (question × temperature) grid once, then analyse it.

Samples live in the run directory's store (`samples.sqlite`); rerunning the same command on a
finished run makes no request and only recomputes. Outputs: summary.json (DESIGN.md section 6
shape, plus `ci`, `metric`, tokens, wall time), grid.csv and accuracy.png.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.errors import InputError
from ensemble.sampling.types import SampleRequest
from tasks import Question, Task, get_task

from .analysis import BOX_RULES, VOTE_RULES, box_utility_draws, estimate, vote_draws

__all__ = ["EvalConfig", "analyse", "load_task", "run_dir", "run_eval", "select_questions"]


@dataclass(frozen=True)
class EvalConfig:
    task: str
    model: str
    temperatures: tuple[float, ...]
    ns: tuple[int, ...]
    samples: int | None = None
    limit: int | None = None
    seed: int = 0
    data: str | None = None
    out: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    bootstrap: int = 1000
    max_concurrency: int = 16
    max_tokens: int | None = None
    skip_invalid: bool = False
    sampler_options: dict[str, Any] = field(default_factory=dict)
    progress: bool = False

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


def load_task(cfg: EvalConfig) -> Task:
    """The task of a config (data, limit and seed passed to the tasks that take them)."""
    opts: dict[str, Any] = {}
    if cfg.task in ("mathqa", "jsonl"):
        opts.update(data=cfg.data, limit=cfg.limit, seed=cfg.seed, skip_invalid=cfg.skip_invalid)
    elif cfg.data is not None:
        raise InputError(f"task {cfg.task!r} takes no --data")
    return get_task(cfg.task, **opts)


def run_dir(cfg: EvalConfig) -> Path:
    """--out, or `runs/TASK[-DATA]-MODEL` (stable: rerunning the command resumes there)."""
    from .records import default_run_dir

    return Path(cfg.out) if cfg.out else default_run_dir(cfg.task, cfg.model, data=cfg.data)


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
    from ensemble.sampling.sampler import Sampler

    cfg.validate()
    task = load_task(cfg)
    questions = select_questions(cfg, task)
    if cfg.task != "boxball" and any(q.correct is None for q in questions):
        bad = next(q for q in questions if q.correct is None)
        raise InputError(f"question {bad.id!r} has no answer: every question needs one to be "
                         "scored (field 'answer')")
    out = run_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    k = cfg.k()
    extra = {} if cfg.max_tokens is None else {"max_tokens": cfg.max_tokens}
    reqs = [SampleRequest.of(q.prompt, temperature=t, k=k, tag=q.id, **extra)
            for t in cfg.temperatures for q in questions]
    t0 = time.perf_counter()
    async with Sampler(cfg.model, api_base=cfg.api_base, api_key=cfg.api_key,
                       store=out / "samples.sqlite", max_concurrency=cfg.max_concurrency,
                       progress=cfg.progress, **cfg.sampler_options) as sampler:
        rows = await sampler.sample(reqs, parser=task.parse)
        stats = sampler.stats
    wall = time.perf_counter() - t0
    parse_for = getattr(task, "parse_for", None)
    answers = np.empty((len(cfg.temperatures), len(questions), k), dtype=object)
    for i, row in enumerate(rows):
        ti, qi = divmod(i, len(questions))
        q = questions[qi]
        # an answer counts only if it is one of this question's own choices
        got = [parse_for(q, s.text) if parse_for is not None else s.answer for s in row]
        answers[ti, qi] = [a if a in q.choices else None for a in got]
    t1 = time.perf_counter()
    from ensemble import __version__

    from .records import now_iso, write_run_log

    write_run_log(out, questions, cfg.temperatures, rows, answers, ns=cfg.ns,
                  rule="majority" if cfg.task == "boxball" else "plurality")
    summary = analyse(cfg, questions, answers)
    summary.update({
        "requests": stats.requests, "cost_usd": stats.cost_usd,
        "tokens": {"prompt": stats.prompt_tokens, "completion": stats.completion_tokens},
        "samples": {"total": stats.samples_total, "from_store": stats.samples_cached},
        "retries": stats.retries, "errors": stats.errors, "wall_time_s": wall,
        "analysis_time_s": time.perf_counter() - t1, "run_dir": str(out),
        "data": _data_notes(task),
        "created": now_iso(), "version": __version__,
    })
    _write_outputs(out, summary)
    return summary


def _data_notes(task: Task) -> dict[str, Any]:
    notes: dict[str, Any] = {}
    skipped = getattr(task, "skipped", None)
    if skipped:
        notes["skipped"] = [{"row": r, "reason": why} for r, why in skipped]
    issues = getattr(task, "issues", None)
    if issues:
        notes["issues"] = {kind: len(rows) for kind, rows in issues.items()}
    return notes


def analyse(cfg: EvalConfig, questions: list[Question], answers: np.ndarray) -> dict[str, Any]:
    """The result grid from answers[t, q, k] (None = invalid); no requests."""
    invalid = np.array([[a is None for a in answers[ti].ravel()]
                        for ti in range(answers.shape[0])], dtype=float)
    ns = sorted(set(cfg.ns))
    temps = list(cfg.temperatures)
    results: list[dict[str, Any]] = []
    contrasts: list[dict[str, Any]] = []
    if cfg.task == "boxball":
        metric = ("expected utility of the vote in ±1 units (exact over each expert's own ball; "
                  "accuracy = (1 + utility) / 2), bootstrap over each question's samples")
        rules = BOX_RULES
        scen = sorted({q.meta["scenario"] for q in questions})
        si = {s: i for i, s in enumerate(scen)}
        joint = np.zeros((len(scen), 2, 2))
        loc = []
        for q in questions:
            c = 0 if q.meta["colour"] == "red" else 1
            joint[si[q.meta["scenario"]], c] = q.meta["joint"]
            loc.append((si[q.meta["scenario"]], c))
        g = np.random.default_rng(cfg.seed)
        for ti, t in enumerate(temps):
            counts = np.zeros((3, len(scen), 2), dtype=np.int64)  # L, R, all
            for qi, (s, c) in enumerate(loc):
                a = list(answers[ti, qi])
                counts[:, s, c] = (a.count("L"), a.count("R"), len(a))
            point, draws = box_utility_draws(counts[0], counts[1], counts[2], joint, ns,
                                             reps=cfg.bootstrap, rng=g)
            for ni, n in enumerate(ns):
                for ri, rule in enumerate(rules):
                    e = estimate(draws[ni, ri], point[ni, ri])
                    results.append({
                        "t": t, "n": n, "aggregator": rule,
                        "accuracy": (1 + e.value) / 2, "sem": e.sem / 2,
                        "ci": [(1 + e.ci[0]) / 2, (1 + e.ci[1]) / 2],
                        "utility": e.value, "utility_sem": e.sem, "utility_ci": list(e.ci),
                        "items": len(scen)})
    else:
        metric = ("accuracy of the vote (plurality, ties broken at random, seeded), bootstrap "
                  "over questions and n-subsets of the samples without replacement")
        rules = VOTE_RULES
        choices: list[str] = []
        for q in questions:
            choices.extend(c for c in q.choices if c not in choices)
        idx = {c: i for i, c in enumerate(choices)}
        correct = np.array([idx[str(q.correct)] for q in questions])
        codes = np.array([[[idx[a] if a is not None else -1 for a in row] for row in answers[ti]]
                          for ti in range(len(temps))], dtype=np.int64)
        draws = vote_draws(codes, correct, ns, n_options=len(choices), reps=cfg.bootstrap,
                           rng=cfg.seed)
        for ti, t in enumerate(temps):
            for ni, n in enumerate(ns):
                for ri, rule in enumerate(rules):
                    e = estimate(draws[ti, ni, ri])
                    results.append({"t": t, "n": n, "aggregator": rule, "accuracy": e.value,
                                    "sem": e.sem, "ci": list(e.ci), "items": len(questions)})
        # paired differences (the same question and subset draws at every temperature)
        base = min(range(len(temps)), key=lambda i: temps[i])
        for ti, t in enumerate(temps):
            if ti == base:
                continue
            for ni, n in enumerate(ns):
                for ri, rule in enumerate(rules):
                    e = estimate(draws[ti, ni, ri] - draws[base, ni, ri])
                    contrasts.append({"t": t, "vs_t": temps[base], "n": n, "aggregator": rule,
                                      "difference": e.value, "sem": e.sem, "ci": list(e.ci)})
    summary: dict[str, Any] = {
        "task": cfg.task, "model": cfg.model, "metric": metric,
        "samples_per_question": cfg.k(), "bootstrap": cfg.bootstrap, "seed": cfg.seed,
        "results": results,
        "invalid_rate": float(invalid.mean()),
        "invalid_rate_by_t": [{"t": t, "invalid_rate": float(invalid[ti].mean())}
                              for ti, t in enumerate(temps)],
        "invalid_policy": "invalid answers abstain from the vote; a group with no valid answer "
                          "counts as wrong; random-follow counts an invalid answer as wrong",
    }
    if contrasts:
        summary["contrasts"] = contrasts
    return summary


def _write_outputs(out: Path, summary: dict[str, Any]) -> None:
    from ensemble.jsonio import dumps

    (out / "summary.json").write_text(dumps(summary, indent=2) + "\n")
    with open(out / "grid.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "n", "aggregator", "accuracy", "sem", "ci_low", "ci_high", "utility",
                    "utility_sem", "items"])
        for r in summary["results"]:
            u = [f"{r['utility']:.6f}", f"{r['utility_sem']:.6f}"] if "utility" in r else ["", ""]
            w.writerow([r["t"], r["n"], r["aggregator"], f"{r['accuracy']:.6f}",
                        f"{r['sem']:.6f}", f"{r['ci'][0]:.6f}", f"{r['ci'][1]:.6f}", *u,
                        r["items"]])
    _plot(out / "accuracy.png", summary)


def _plot(path: Path, summary: dict[str, Any]) -> None:
    """accuracy.png: the main vote's value against n, one line per t, 95% intervals.

    The y axis spans the metric's whole range (accuracy [0, 1], box-ball utility [−1, 1]) so a
    small difference is not drawn as a large one; intervals are clipped to that range; the
    dashed line is chance (a uniform guess among the question's choices).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    box = summary["task"] == "boxball"
    fig = accuracy_figure(summary, chance=0.0 if box else _chance(path.parent, summary))
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
    """The accuracy of a uniform guess: 1/5 for MathQA, else the mean of 1/len(choices)."""
    if summary["task"] == "mathqa":
        return 0.2
    try:
        from .records import read_questions

        inv = [1 / len(q.choices) for q in read_questions(run) if q.choices]
    except InputError:
        return None
    return float(np.mean(inv)) if inv else None
