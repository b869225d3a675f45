"""Calibration reports: figures, a Markdown file and a self-contained HTML page.

The HTML page embeds its images (base64 PNG), escapes every piece of model or user text and
loads nothing from the network, so it opens anywhere, offline.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["lambda_t_png", "qr_curves_png", "write_report"]

UNITS = ("λ in ψ_λ units: ψ_λ(p) = 1/(1+exp(2λ(1−2p))), the probability of answering L (report 1) "
         "with posterior p; the bias b adds to the logit. Utility and regret in ±1 units.")


def _fig_bytes(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def qr_curves_png(panels: Sequence[dict[str, Any]]) -> bytes:
    """One panel per temperature: observed proportions (gray) and the fitted ψ curve."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    grid = np.linspace(0, 1, 401)
    for ax, pn in zip(axes[0], panels):
        fit = pn["fit"]
        ax.scatter(pn["posteriors"], pn["proportions"], s=12, color="0.55", alpha=0.6,
                   label="questions")
        if math.isinf(fit.lam):
            step = np.where(grid > 0.5, 1.0, np.where(grid < 0.5, 0.0, 0.5))
            curve = step if fit.lam > 0 else 1.0 - step
            label = (f"λ = ∞ (λ ≥ {fit.ci[0]:.3g})" if fit.lam > 0
                     else f"λ = −∞ (λ ≤ {fit.ci[1]:.3g})")
        else:
            z = 2 * fit.lam * (2 * grid - 1) + (fit.bias or 0.0)
            curve = 1 / (1 + np.exp(-z))
            label = f"λ = {fit.lam:.3g} [{fit.ci[0]:.3g}, {fit.ci[1]:.3g}]"
        ax.plot(grid, curve, color="tab:orange", lw=2.2, label=label)
        ax.set_title(f"t = {pn['t']:g}")
        ax.set_xlabel("posterior P(left | ball)")
        ax.set_ylabel("share of answers 'L'")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return _fig_bytes(fig)


def lambda_t_png(fits: Sequence[Any], joint: Any) -> bytes:
    """λ against t with 95% intervals, and the joint λ₁/t curve."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    finite = [f for f in fits if not math.isinf(f.lam)]
    for f in finite:
        ax.errorbar([f.t], [f.lam], yerr=[[f.lam - f.ci[0]], [max(0, f.ci[1] - f.lam)]],
                    fmt="o", color="tab:blue", capsize=4)
    tops = [f.ci[1] for f in finite if math.isfinite(f.ci[1])] or [1.0]
    ymax = 1.35 * max(tops)
    for f in fits:
        if math.isinf(f.lam):
            # λ = ∞ cannot be drawn to scale: an arrow at the top, labelled with its lower bound
            ax.annotate(f"t = {f.t:g}: λ = ∞\n(≥ {f.ci[0]:.3g})", xy=(f.t, ymax * 0.97),
                        xytext=(f.t, ymax * 0.72), ha="center", fontsize=8,
                        arrowprops={"arrowstyle": "->", "color": "tab:red"}, color="tab:red")
    ax.set_ylim(0, ymax)
    all_t = [f.t for f in fits if f.t is not None]
    if all_t:
        pad = 0.1 * max(0.5, max(all_t) - min(all_t))
        ax.set_xlim(min(all_t) - pad, max(all_t) + pad)
    if joint is not None:
        ts = np.linspace(min(joint.temperatures) * 0.8, max(joint.temperatures) * 1.1, 100)
        ax.plot(ts, joint.lam1 / ts, "--", color="tab:orange",
                label=f"λ₁/t, λ₁ = {joint.lam1:.3g} (LRT p = {joint.lrt_pvalue:.2g})")
        ax.legend(fontsize=8)
    ax.set_xlabel("temperature t")
    ax.set_ylabel("λ (ψ_λ units)")
    ax.set_title("Rationality against temperature")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _fig_bytes(fig)


def _fmt(v: float | None, nd: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{nd}g}"


def write_report(out: Path, *, model: str, fits: Sequence[Any], joint: Any,
                 panels: Sequence[dict[str, Any]], recommendation: dict[str, Any] | None,
                 mode: str) -> dict[str, Path]:
    """Write report.md (+ PNGs beside it) and a self-contained report.html into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    curves = qr_curves_png(panels)
    lam_t = lambda_t_png(fits, joint)
    (out / "qr_curves.png").write_bytes(curves)
    (out / "lambda_t.png").write_bytes(lam_t)
    rows = [(f"{f.t:g}", _fmt(f.lam), _fmt(f.se), f"[{_fmt(f.ci[0])}, {_fmt(f.ci[1])}]",
             _fmt(f.bias), "yes" if f.separated else "no", str(f.n_questions), str(f.n_valid),
             _fmt(f.gof_pvalue, 2)) for f in fits]
    head = ("t", "λ", "SE", "95% interval", "bias b", "separated", "questions", "valid answers",
            "fit p-value")
    joint_txt = ("λ(t) = λ₁/t could not be tested (needs two temperatures > 0 with finite λ)."
                 if joint is None else
                 f"Joint fit λ(t) = λ₁/t: λ₁ = {joint.lam1:.4g} (95% CI {joint.ci[0]:.4g} – "
                 f"{joint.ci[1]:.4g}); likelihood-ratio test against a free λ per temperature: "
                 f"χ² = {joint.lrt_stat:.2f} on {joint.lrt_df} df, p = {joint.lrt_pvalue:.3g} — "
                 + ("consistent with λ₁/t." if joint.holds else "λ₁/t does NOT hold here."))
    rec_lines = _recommendation_lines(recommendation)
    notes = sorted({n for f in fits for n in f.notes})
    md = [f"# Calibration of {model}", "", UNITS, "", f"Mode: **{mode}**.", "",
          "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md += ["", joint_txt, "", "![quantal-response curves](qr_curves.png)", "",
           "![λ against t](lambda_t.png)", "", "## Recommendation", ""] + rec_lines
    if notes:
        md += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    (out / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")

    e = html.escape
    b64 = lambda data: base64.b64encode(data).decode()
    table = "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>"
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Calibration of {e(model)}</title>
<style>
body {{ font-family: -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }}
h1 {{ font-size: 1.6em; }} h2 {{ font-size: 1.25em; margin-top: 1.6em; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.95em; }}
th, td {{ border: 1px solid #ccc; padding: 0.35em 0.7em; text-align: right; }}
th {{ background: #f3f3f3; }} .units {{ color: #555; font-size: 0.92em; }}
.rec {{ background: #eef6ee; border-left: 4px solid #3a3; padding: 0.8em 1em; }}
img {{ max-width: 100%; border: 1px solid #eee; }}
</style></head><body>
<h1>Calibration of {e(model)}</h1>
<p class="units">{e(UNITS)}</p>
<p>Mode: <b>{e(mode)}</b>.</p>
{table}
<p>{e(joint_txt)}</p>
<h2>Quantal-response fits</h2>
<img alt="quantal-response curves" src="data:image/png;base64,{b64(curves)}">
<h2>λ against temperature</h2>
<img alt="lambda against temperature" src="data:image/png;base64,{b64(lam_t)}">
<h2>Recommendation</h2>
<div class="rec">{"".join(f"<p>{e(line)}</p>" for line in rec_lines)}</div>
{"<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>" if notes else ""}
</body></html>
"""
    (out / "report.html").write_text(page, encoding="utf-8")
    return {"html": out / "report.html", "md": out / "report.md"}


def _recommendation_lines(rec: dict[str, Any] | None) -> list[str]:
    if not rec:
        return ["No recommendation: no temperature could be fitted."]
    lines = [rec["summary"]]
    for opt in rec.get("options", []):
        acc = opt.get("eval_accuracy")
        acc_s = f"; eval accuracy {acc:.3f} ± {opt['eval_sem']:.3f}" if acc is not None else ""
        lines.append(f"t = {opt['t']:g}: λ = {_fmt(opt['lam'])}, rule {opt['aggregator']}, "
                     f"worst-case regret {opt['worst_regret']:.4f}{acc_s}")
    lines.append(rec["why"])
    return lines
