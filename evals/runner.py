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

from .analysis import bootstrap_vote_accuracy, box_utility_bootstrap

__all__ = ["EvalConfig", "run_eval", "analyse", "load_task"]


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
    sampler_options: dict[str, Any] = field(default_factory=dict)
    progress: bool = False

    def k(self) -> int:
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


def load_task(cfg: EvalConfig) -> Task:
    opts: dict[str, Any] = {}
    if cfg.task in ("mathqa", "jsonl"):
        opts.update(data=cfg.data, limit=cfg.limit, seed=cfg.seed)
    elif cfg.data is not None:
        raise InputError(f"task {cfg.task!r} takes no --data")
    return get_task(cfg.task, **opts)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-")


def run_dir(cfg: EvalConfig) -> Path:
    return Path(cfg.out) if cfg.out else Path("runs") / f"{cfg.task}-{_slug(cfg.model)}"


async def run_eval(cfg: EvalConfig) -> dict[str, Any]:
    """Sample what is missing, analyse everything, write the outputs; return the summary."""
    from ensemble.sampling.sampler import Sampler

    cfg.validate()
    task = load_task(cfg)
    questions = list(task.questions())
    if cfg.task == "boxball" and cfg.limit is not None:
        import random

        scen = sorted({q.meta["scenario"] for q in questions})
        keep = set(random.Random(cfg.seed).sample(scen, min(cfg.limit, len(scen))))
        questions = [q for q in questions if q.meta["scenario"] in keep]
    if not questions:
        raise InputError("the task has no questions")
    out = run_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    k = cfg.k()
    reqs = [SampleRequest.of(q.prompt, temperature=t, k=k, tag=q.id)
            for t in cfg.temperatures for q in questions]
    t0 = time.perf_counter()
    async with Sampler(cfg.model, api_base=cfg.api_base, api_key=cfg.api_key,
                       store=out / "samples.sqlite", max_concurrency=cfg.max_concurrency,
                       progress=cfg.progress, **cfg.sampler_options) as sampler:
        rows = await sampler.sample(reqs, parser=task.parse)
        stats = sampler.stats
    wall = time.perf_counter() - t0
    answers = np.empty((len(cfg.temperatures), len(questions), k), dtype=object)
    for i, row in enumerate(rows):
        ti, qi = divmod(i, len(questions))
        answers[ti, qi] = [s.answer for s in row]
    summary = analyse(cfg, questions, answers)
    summary.update({
        "requests": stats.requests, "cost_usd": stats.cost_usd,
        "tokens": {"prompt": stats.prompt_tokens, "completion": stats.completion_tokens},
        "samples": {"total": stats.samples_total, "from_store": stats.samples_cached},
        "retries": stats.retries, "wall_time_s": wall, "run_dir": str(out),
    })
    _write_outputs(out, summary)
    return summary


def analyse(cfg: EvalConfig, questions: list[Question], answers: np.ndarray) -> dict[str, Any]:
    """The result grid from answers[t, q, k] (None = invalid)."""
    invalid = float(np.mean([a is None for a in answers.ravel()]))
    results = []
    ns = sorted(set(cfg.ns))
    if cfg.task == "boxball":
        metric = "expected utility of the vote in ±1 units; accuracy = (1 + utility) / 2"
        scen = sorted({q.meta["scenario"] for q in questions})
        si = {s: i for i, s in enumerate(scen)}
        joint = np.zeros((len(scen), 2, 2))
        for ti, t in enumerate(cfg.temperatures):
            ones = np.zeros((len(scen), 2), dtype=np.int64)
            valid = np.zeros((len(scen), 2), dtype=np.int64)
            for qi, q in enumerate(questions):
                c = 0 if q.meta["colour"] == "red" else 1
                s = si[q.meta["scenario"]]
                joint[s, c] = q.meta["joint"]
                a = answers[ti, qi]
                ones[s, c] = sum(x == "L" for x in a)
                valid[s, c] = sum(x is not None for x in a)
            est = box_utility_bootstrap(ones, valid, joint, ns, reps=cfg.bootstrap, rng=cfg.seed)
            for n in ns:
                for rule, e in est[n].items():
                    results.append({
                        "t": t, "n": n, "aggregator": rule,
                        "accuracy": (1 + e.value) / 2, "sem": e.sem / 2,
                        "ci": [(1 + e.ci[0]) / 2, (1 + e.ci[1]) / 2],
                        "utility": e.value, "utility_sem": e.sem, "items": len(scen)})
    else:
        metric = "accuracy of the vote (plurality, random tie-break), bootstrap over questions " \
                 "and n-subsets of the samples"
        choices = list(questions[0].choices)
        for q in questions:
            for c in q.choices:
                if c not in choices:
                    choices.append(c)
        idx = {c: i for i, c in enumerate(choices)}
        correct = np.array([idx.get(q.correct, -2) if q.correct is not None else -2
                            for q in questions])
        if (correct < 0).any():
            raise InputError("every question needs a correct answer to be scored")
        for ti, t in enumerate(cfg.temperatures):
            codes = np.array([[idx.get(a, -1) if a is not None else -1 for a in row]
                              for row in answers[ti]], dtype=np.int64)
            est = bootstrap_vote_accuracy(codes, correct, ns, n_options=len(choices),
                                          reps=cfg.bootstrap, rng=cfg.seed)
            for n in ns:
                for rule in ("plurality", "random-follow"):
                    e = est[n][rule]
                    results.append({"t": t, "n": n, "aggregator": rule, "accuracy": e.value,
                                    "sem": e.sem, "ci": list(e.ci), "items": len(questions)})
    return {"task": cfg.task, "model": cfg.model, "metric": metric, "samples_per_question": cfg.k(),
            "bootstrap": cfg.bootstrap, "results": results, "invalid_rate": invalid}


def _write_outputs(out: Path, summary: dict[str, Any]) -> None:
    from ensemble.commands._output import to_jsonable

    (out / "summary.json").write_text(json.dumps(to_jsonable(summary), indent=2) + "\n")
    with open(out / "grid.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "n", "aggregator", "accuracy", "sem", "ci_low", "ci_high", "items"])
        for r in summary["results"]:
            w.writerow([r["t"], r["n"], r["aggregator"], f"{r['accuracy']:.6f}",
                        f"{r['sem']:.6f}", f"{r['ci'][0]:.6f}", f"{r['ci'][1]:.6f}", r["items"]])
    _plot(out / "accuracy.png", summary)


def _plot(path: Path, summary: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    box = summary["task"] == "boxball"
    main = "majority" if box else "plurality"
    fig, ax = plt.subplots(figsize=(6, 4))
    for t in sorted({r["t"] for r in summary["results"]}):
        rows = sorted((r for r in summary["results"] if r["t"] == t and r["aggregator"] == main),
                      key=lambda r: r["n"])
        key, err = ("utility", "utility_sem") if box else ("accuracy", "sem")
        ax.errorbar([r["n"] for r in rows], [r[key] for r in rows], yerr=[r[err] for r in rows],
                    marker="o", capsize=4, label=f"t = {t:g}")
    ax.set_xlabel("number of experts n")
    ax.set_ylabel("expected utility (±1 units)" if box else "accuracy")
    ax.set_title(f"{summary['task']}: {main} vote, {summary['model']} (error bars: SEM)")
    ax.set_xticks(sorted({r["n"] for r in summary["results"]}))
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
