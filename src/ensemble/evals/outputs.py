"""The outputs step: summary.json, grid.csv and accuracy.png of an eval run (one model or a
mixed ensemble alike: a single model at t1..tk is k members)."""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.errors import InputError
from ensemble.tasks import TaskLayout, layout_of

__all__ = ["accuracy_figure", "contrast_text", "interval", "run_layout", "write_outputs"]


def run_layout(summary: dict[str, Any]) -> TaskLayout:
    """The layout a run was scored with: recorded in its summary, else its task's (a run
    written before the layout was recorded), else the default (a task no longer registered)."""
    rec = summary.get("layout")
    if isinstance(rec, dict):
        return TaskLayout(**rec)
    try:
        return layout_of(str(summary.get("task")))
    except InputError:
        return TaskLayout()


def contrast_text(c: dict[str, Any]) -> str:
    """What a paired difference of summary.json compares, in words (the eval's tables and the
    view): another t, another n, another rule, or the ensemble against its best member."""
    kind, t = c.get("kind"), c.get("t")
    if kind == "vs-best-member":
        return f"ensemble {c['aggregator']} − {c.get('vs_member')} alone"
    if kind == "aggregator":
        return (f"{c['aggregator']} − {c.get('vs_aggregator')}"
                + ("" if t is None else f" at t = {t:g}, n = {c['n']}"))
    if kind == "ensemble":
        return f"n = {c['n']} − n = 1 at t = {t:g}"
    return f"t = {t:g} − t = {c['vs_t']:g} at n = {c['n']}"


def write_outputs(out: Path, summary: dict[str, Any], *, plot: bool = True) -> None:
    """summary.json, grid.csv and (with `plot`) accuracy.png into the run folder."""
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
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        layout = run_layout(summary)
        open_answers = bool((summary.get("data") or {}).get("answer"))
        fig = accuracy_figure(summary, chance=None if open_answers else _chance(out, layout))
        fig.savefig(out / "accuracy.png", dpi=120, bbox_inches="tight")
        plt.close(fig)


def _series(summary: dict[str, Any], main: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """What accuracy.png draws against n: each member (a single model's temperature is one)
    under the main vote, and the ensemble of a mixed run under each rule at its total n."""
    rows = summary["results"]
    out: list[tuple[str, list[dict[str, Any]]]] = []
    members = [r for r in rows if r.get("member") and r.get("member") != "ensemble"]
    if members:
        for r in members:
            out.append((f"{r['member']} alone", [r]))
        for r in rows:
            if r.get("member") == "ensemble":
                out.append((f"ensemble, {r['aggregator']}", [r]))
        return out
    for t in sorted({r["t"] for r in rows}):
        sel = sorted((r for r in rows if r["t"] == t and r["aggregator"] == main),
                     key=lambda r: r["n"])
        if sel:
            out.append((f"t = {t:g}", sel))
    return out


def accuracy_figure(summary: dict[str, Any], *, chance: float | None) -> Any:
    """The figure of accuracy.png (the caller closes it): each series' value against the
    number of votes n with its 95% interval; `chance`: the dashed line, or None.

    Accuracy spans [0, 1], so a small difference is not drawn as a large one; the box-ball
    utility (±1 units) is scaled to the intervals drawn (its values sit in a narrow band of
    [−1, 1], where a whole-range axis would flatten them); intervals are clipped to the
    metric's range."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layout = run_layout(summary)
    box = layout.utility
    key, lo_hi = ("utility", (-1.0, 1.0)) if box else ("accuracy", (0.0, 1.0))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    series = _series(summary, layout.vote_rule)
    spans: list[float] = []
    for j, (label, rows) in enumerate(series):
        y = np.array([r[key] for r in rows], dtype=float)
        ci = np.array([interval(r, box) for r in rows], dtype=float).clip(*lo_hi)
        spans += [float(ci.min()), float(ci.max())]
        yerr = np.vstack([np.maximum(y - ci[:, 0], 0), np.maximum(ci[:, 1] - y, 0)])
        # a small horizontal offset keeps the series' bars apart
        x = np.array([r["n"] for r in rows], dtype=float) + 0.06 * (j - (len(series) - 1) / 2)
        ax.errorbar(x, y, yerr=yerr, marker="o", capsize=4, label=label)
    if box and spans:
        lo, hi = min(spans), max(spans)
        pad = max(0.1 * (hi - lo), 0.02)
        ylim = (max(lo - pad, lo_hi[0] - 0.02), min(hi + pad, lo_hi[1] + 0.02))
    else:
        ylim = (lo_hi[0] - 0.02, lo_hi[1] + 0.02)
    if chance is not None and ylim[0] <= chance <= ylim[1]:
        ax.axhline(chance, color="0.4", ls="--", lw=1, label="chance")
    ax.set_ylim(*ylim)
    ax.set_xlabel("number of votes n (samples per vote)")
    ax.set_ylabel("expected utility (±1 units)" if box else "accuracy")
    rule = "" if summary.get("ensemble") else f" {layout.vote_rule} vote,"
    title = f"{summary.get('title') or summary['task']}:{rule} {summary['model']}"
    ax.set_title("\n".join(textwrap.wrap(title, 60)), fontsize=10)
    ax.set_xticks(sorted({r["n"] for _, rows in series for r in rows}))
    ax.legend(fontsize=8, title="bars: 95% interval", title_fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def interval(r: dict[str, Any], box: bool) -> tuple[float, float]:
    """A result row's 95% interval on its plotted scale (±1.96 SEM when it carries none)."""
    ci = r.get("utility_ci") if box else r.get("ci")
    if ci and ci[0] is not None and ci[1] is not None:
        return float(ci[0]), float(ci[1])
    v, s = (r["utility"], r["utility_sem"]) if box else (r["accuracy"], r["sem"])
    return v - 1.96 * s, v + 1.96 * s


def _chance(run: Path, layout: TaskLayout) -> float | None:
    """The accuracy of a uniform guess: the task's own, else the mean of 1/len(choices)."""
    if layout.chance is not None:
        return layout.chance
    try:
        from .records import read_questions

        inv = [1 / len(q.choices) for q in read_questions(run) if q.choices]
    except InputError:
        return None
    return float(np.mean(inv)) if inv else None
