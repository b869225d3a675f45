"""The outputs step: summary.json, grid.csv and accuracy.png of an eval run (one model or a
mixed ensemble alike: a single model at t1..tk is k members), rendered from the typed summary
(`evals.schemas.EvalSummary`)."""

from __future__ import annotations

import csv
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.tasks import TaskLayout

from .schemas import ContrastRow, EvalSummary, ResultRow, dump

__all__ = ["accuracy_figure", "contrast_text", "figure_title", "interval", "write_outputs"]

GRID_COLUMNS = ["t", "n", "aggregator", "accuracy", "sem", "ci_low", "ci_high",
                "ci_questions_low", "ci_questions_high", "utility", "utility_sem", "items",
                "member"]


def contrast_text(c: ContrastRow) -> str:
    """What a paired difference of summary.json compares, in words (the eval's tables and the
    view): another t, another n, another rule, or the ensemble against its best member."""
    t = c.t
    if c.kind == "vs-best-member":
        return f"ensemble {c.aggregator} − {c.vs_member} alone"
    if c.kind == "aggregator":
        return (f"{c.aggregator} − {c.vs_aggregator}"
                + ("" if t is None else f" at t = {t:g}, n = {c.n}"))
    if c.kind == "ensemble":
        return f"n = {c.n} − n = 1 at t = {t:g}"
    return f"t = {t:g} − t = {c.vs_t:g} at n = {c.n}"


def write_outputs(out: Path, summary: EvalSummary, *, chance: float | None = None,
                  plot: bool = True) -> None:
    """summary.json, grid.csv and (with `plot`) accuracy.png into the run folder; `chance`:
    the figure's dashed line (the accuracy of a uniform guess), or None."""
    from ensemble.jsonio import dumps

    (out / "summary.json").write_text(dumps(dump(summary), indent=2) + "\n")
    with open(out / "grid.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(GRID_COLUMNS)
        for r in summary.results:
            u = ([f"{r.utility:.6f}", f"{r.utility_sem or 0.0:.6f}"]
                 if "utility" in r.model_fields_set else ["", ""])
            w.writerow(["" if r.t is None else r.t, r.n, r.aggregator, f"{r.accuracy:.6f}",
                        f"{r.sem:.6f}", f"{r.ci[0]:.6f}", f"{r.ci[1]:.6f}",
                        f"{r.ci_questions[0]:.6f}", f"{r.ci_questions[1]:.6f}", *u, r.items,
                        r.member or ""])
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        with warnings.catch_warnings():
            # a title in a script the font lacks (a task named 哺乳類) is drawn as boxes;
            # matplotlib's warning per missing glyph reached the terminal (issue 41 item 15)
            warnings.filterwarnings("ignore", message="Glyph .* missing from",
                                    category=UserWarning)
            fig = accuracy_figure(summary.results, layout=summary.layout,
                                  title=figure_title(summary), chance=chance)
            fig.savefig(out / "accuracy.png", dpi=120, bbox_inches="tight")
        plt.close(fig)


def figure_title(summary: EvalSummary) -> str:
    """accuracy.png's title: the task as people name it, one model's main vote, the model."""
    rule = "" if summary.ensemble else f" {summary.layout.vote_rule} vote,"
    return f"{summary.title or summary.task}:{rule} {summary.model}"


def _series(rows: Sequence[ResultRow], main: str) -> list[tuple[str, list[ResultRow]]]:
    """What accuracy.png draws against n: each member (a single model's temperature is one)
    under the main vote, and the ensemble of a mixed run under each rule at its total n."""
    out: list[tuple[str, list[ResultRow]]] = []
    members = [r for r in rows if r.member and r.member != "ensemble"]
    if members:
        for r in members:
            out.append((f"{r.member} alone", [r]))
        for r in rows:
            if r.member == "ensemble":
                out.append((f"ensemble, {r.aggregator}", [r]))
        return out
    for t in sorted({r.t for r in rows if r.t is not None}):
        sel = sorted((r for r in rows if r.t == t and r.aggregator == main), key=lambda r: r.n)
        if sel:
            out.append((f"t = {t:g}", sel))
    return out


def accuracy_figure(rows: Sequence[ResultRow], *, layout: TaskLayout, title: str,
                    chance: float | None) -> Any:
    """The figure of accuracy.png (the caller closes it): each series' value against the
    number of votes n with its 95% interval (`rows`: a summary's results, scored with
    `layout`); `chance`: the dashed line, or None.

    Accuracy spans [0, 1], so a small difference is not drawn as a large one; the box-ball
    utility (±1 units) is scaled to the intervals drawn (its values sit in a narrow band of
    [−1, 1], where a whole-range axis would flatten them); intervals are clipped to the
    metric's range."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    box = layout.utility
    lo_hi = (-1.0, 1.0) if box else (0.0, 1.0)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    series = _series(rows, layout.vote_rule)
    spans: list[float] = []
    for j, (label, sel) in enumerate(series):
        y = np.array([(r.utility if box else r.accuracy) for r in sel], dtype=float)
        ci = np.array([interval(r, box) for r in sel], dtype=float).clip(*lo_hi)
        spans += [float(ci.min()), float(ci.max())]
        yerr = np.vstack([np.maximum(y - ci[:, 0], 0), np.maximum(ci[:, 1] - y, 0)])
        # a small horizontal offset keeps the series' bars apart
        x = np.array([r.n for r in sel], dtype=float) + 0.06 * (j - (len(series) - 1) / 2)
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
    ax.set_title("\n".join(textwrap.wrap(title, 60)), fontsize=10)
    ax.set_xticks(sorted({r.n for _, sel in series for r in sel}))
    ax.legend(fontsize=8, title="bars: 95% interval", title_fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def interval(r: ResultRow, box: bool) -> tuple[float, float]:
    """A result row's 95% interval on its plotted scale (±1.96 SEM when it carries none)."""
    ci = r.utility_ci if box else r.ci
    if ci and ci[0] is not None and ci[1] is not None:
        return float(ci[0]), float(ci[1])
    v = (r.utility or 0.0) if box else r.accuracy
    s = (r.utility_sem or 0.0) if box else r.sem
    return v - 1.96 * s, v + 1.96 * s

