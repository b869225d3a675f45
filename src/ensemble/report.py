"""Calibration reports: figures, a Markdown file and a self-contained HTML page.

The HTML page embeds its images (base64 PNG), escapes every piece of model or user text and
loads nothing from the network, so it opens anywhere, offline. Its prose is written once, with
a small inline markup (`code`, **bold**, ψ_λ for a subscript), and rendered for each format:
HTML gets <code>, <b> and <sub> (after escaping), Markdown keeps the backticks.

The report says what each number means where it appears, carries the run's metadata, and ends
in a recommendation that can be pasted (an `Ensemble(...)` line with λ filled in).
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GLOSSARY", "inline_html", "lambda_t_figure", "lambda_t_png", "qr_curves_png",
           "write_report"]

UNITS = ("λ in ψ_λ units: ψ_λ(p) = 1/(1+exp(2λ(1−2p))), the probability of answering L (report 1) "
         "with posterior p; the bias b adds to the logit. Utility and regret in ±1 units.")

# What each column of the λ table means, in plain words (shown under the table, and as the
# header's tooltip in HTML).
GLOSSARY: dict[str, str] = {
    "t": "the sampling temperature the answers were drawn at.",
    "λ": "the model's rationality at this temperature: how closely its answers follow the "
         "evidence. λ = 0 is a coin flip whatever the evidence; the larger λ, the more often it "
         "picks the more likely box; λ = ∞ means it always does.",
    "SE": "standard error of λ (the binomial GLM's); a rough ± for λ when the interval is "
          "symmetric.",
    "95% interval": "the values of λ the answers are consistent with (profile likelihood). When "
                    "the row is separated it is one-sided, [bound, ∞]: λ is at least the bound "
                    "with 95% confidence, and the data cannot give an upper end.",
    "bias b": "a constant preference for L on the logit scale, whatever the evidence: b > 0 "
              "favours L, b < 0 favours R, 0 is none. Not estimated when the row is separated.",
    "separated": "yes when every answer agrees with a threshold on the posterior (the model "
                 "picked the more likely box every single time, as greedy decoding at t = 0 "
                 "does): the fit then cannot put an upper limit on λ, so λ is reported as ∞ "
                 "with a one-sided lower bound.",
    "questions": "how many calibration questions were asked at this temperature.",
    "valid answers": "answers that could be read as L or R (the others were unparseable and "
                     "left out of the fit).",
    "link test p": "goodness of fit of the curve's shape (link test): the chance, if the "
                   "quantal-response (logistic) curve were the truth, of answers whose curve "
                   "departs at least this much from it in the tails. Small values (below "
                   "0.01) mean the answers follow another curve: λ still summarises the slope "
                   "near p = 1/2, but read it with care. It is not a test of λ itself.",
    "deviance p": "goodness of fit between questions (deviance test): the chance, if the "
                  "fitted curve were the truth, of questions spread at least this far from it. "
                  "Small values (below 0.01) mean some questions are answered otherwise than "
                  "their posterior predicts (a prompt read differently, say). Both p-values "
                  "come from a parametric bootstrap (answers redrawn from the fit); – when not "
                  "computed (a separated row).",
}

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
# a one-letter (Latin or Greek) symbol with a one- or two-character subscript: ψ_λ, q_w, λ_1
_SUB = re.compile(r"(?<!\w)([^\W\d_])_([^\W_]{1,2})(?!\w)")


def inline_html(text: str) -> str:
    """Escape `text` for HTML and render its inline markup: `code`, **bold**, ψ_λ subscripts."""
    out: list[str] = []
    pos = 0
    for m in _CODE.finditer(text):
        out.append(_prose_html(text[pos:m.start()]))
        out.append(f"<code>{html.escape(m.group(1))}</code>")
        pos = m.end()
    out.append(_prose_html(text[pos:]))
    return "".join(out)


def _prose_html(text: str) -> str:
    text = _SUB.sub(r"\1<sub>\2</sub>", html.escape(text))
    return _BOLD.sub(r"<b>\1</b>", text)


def _md(text: str) -> str:
    """Markdown: the same markup; an underscore subscript is escaped so it is not emphasis."""
    out: list[str] = []
    pos = 0
    for m in _CODE.finditer(text):
        out.append(_SUB.sub(r"\1\\_\2", text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_SUB.sub(r"\1\\_\2", text[pos:]))
    return "".join(out)


def _fig_bytes(fig: Any) -> bytes:
    buf = io.BytesIO()
    # "tight" keeps titles and labels inside the image however long the model's name
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def qr_curves_png(panels: Sequence[dict[str, Any]]) -> bytes:
    """One panel per temperature: observed shares of L (gray), the fitted ψ curve, and chance."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.9), squeeze=False)
    grid = np.linspace(0, 1, 401)
    for ax, pn in zip(axes[0], panels, strict=True):
        fit = pn["fit"]
        ax.axhline(0.5, color="0.35", ls="--", lw=1, label="chance (ψ = 1/2, λ = 0)")
        ax.scatter(pn["posteriors"], np.clip(pn["proportions"], 0, 1), s=12, color="0.55",
                   alpha=0.6, label="questions (share of L)")
        if math.isinf(fit.lam):
            step = np.where(grid > 0.5, 1.0, np.where(grid < 0.5, 0.0, 0.5))
            curve = step if fit.lam > 0 else 1.0 - step
            label = (f"λ = ∞ (λ ≥ {fit.ci[0]:.3g})" if fit.lam > 0
                     else f"λ = −∞ (λ ≤ {fit.ci[1]:.3g})")
        else:
            from scipy.special import expit

            # ψ_λ(p) with the fitted bias on its logit scale (the model fitted, as drawn)
            curve = expit(2 * fit.lam * (2 * grid - 1) + (fit.bias or 0.0))
            label = f"λ = {fit.lam:.3g} [{_fmt(fit.ci[0])}, {_fmt(fit.ci[1])}]"
        ax.plot(grid, curve, color="tab:orange", lw=2.2, label=label)
        ax.set_title(f"t = {pn['t']:g}")
        ax.set_xlabel("posterior P(left | ball)")
        ax.set_ylabel("share of answers 'L'")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    return _fig_bytes(fig)


def lambda_t_png(fits: Sequence[Any], joint: Any) -> bytes:
    """λ against t with 95% intervals (clipped to the axis), the joint λ₁/t curve, λ = 0."""
    return _fig_bytes(lambda_t_figure(fits, joint))


def lambda_t_figure(fits: Sequence[Any], joint: Any) -> Any:
    """The matplotlib figure of `lambda_t_png` (the caller closes it)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.8, 4.0))
    finite = [f for f in fits if not math.isinf(f.lam)]
    tops = [f.ci[1] for f in finite if math.isfinite(f.ci[1])] or [1.0]
    bottoms = [f.ci[0] for f in finite if math.isfinite(f.ci[0])] or [0.0]
    ymax = 1.35 * max(max(tops), 1e-9)
    # the axis starts at λ = 0 (no rationality) unless a λ is negative: no zoomed-in baseline
    ymin = min(0.0, 1.1 * min(bottoms))
    for f in finite:
        lo, hi = max(f.ci[0], ymin), min(f.ci[1], ymax)
        ax.errorbar([f.t], [f.lam], yerr=[[max(f.lam - lo, 0)], [max(hi - f.lam, 0)]],
                    fmt="o", color="tab:blue", capsize=4)
    for f in fits:
        if math.isinf(f.lam):
            # λ = ∞ cannot be drawn to scale: an arrow at the top, labelled with its lower bound
            ax.annotate(f"t = {f.t:g}: λ = ∞\n(≥ {f.ci[0]:.3g})", xy=(f.t, ymax * 0.97),
                        xytext=(f.t, ymax * 0.72), ha="center", fontsize=8,
                        arrowprops={"arrowstyle": "->", "color": "tab:red"}, color="tab:red")
    ax.axhline(0.0, color="0.35", ls="--", lw=1, label="λ = 0 (answers ignore the evidence)")
    ax.set_ylim(ymin, ymax)
    all_t = [f.t for f in fits if f.t is not None]
    if all_t:
        pad = 0.1 * max(0.5, max(all_t) - min(all_t))
        ax.set_xlim(min(all_t) - pad, max(all_t) + pad)
    if joint is not None:
        ts = np.linspace(min(joint.temperatures) * 0.8, max(joint.temperatures) * 1.1, 100)
        ax.plot(ts, joint.lam1 / ts, "--", color="tab:orange",
                label=f"λ₁/t, λ₁ = {joint.lam1:.3g} (test p = {joint.lrt_pvalue:.2g})")
    ax.legend(fontsize=8)
    ax.set_xlabel("temperature t")
    ax.set_ylabel(r"λ ($\psi_\lambda$ units)")
    ax.set_title("Rationality against temperature (bars: 95% interval)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _fmt(v: float | None, nd: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{nd}g}"


def _fmt_p(p: float | None) -> str:
    if p is None:
        return "–"
    if p < 0.001:
        return "< 0.001"
    if p > 0.99:
        return "> 0.99"
    return f"{p:.2g}"


def _meta_rows(model: str, mode: str, meta: dict[str, Any] | None) -> list[tuple[str, str]]:
    m = meta or {}
    rows = [("model", f"`{model}`")]
    if m.get("api_base"):
        rows.append(("endpoint", f"`{m['api_base']}`"))
    if m.get("task"):
        rows.append(("task", m["task"] + (f" (`{m['data']}`)" if m.get("data") else "")))
    if m.get("questions") is not None:
        rows.append(("questions", str(m["questions"])
                     + (f" (a seeded random subset, --limit {m['limit']})" if m.get("limit")
                        else "")))
    if m.get("samples_per_question") is not None:
        rows.append(("samples", f"{m['samples_per_question']} per question and temperature"))
    if m.get("temperatures"):
        rows.append(("temperatures", ", ".join(f"{t:g}" for t in m["temperatures"])))
    bias = {True: "fitted", False: "not fitted (--no-bias)"}.get(bool(m["bias"])) \
        if "bias" in m else ""
    rows.append(("mode", mode + (f"; bias term {bias}" if bias else "")))
    if m.get("seed") is not None:
        rows.append(("seed", str(m["seed"])))
    if m.get("bootstrap"):
        rows.append(("bootstrap", m["bootstrap"]))
    if m.get("created"):
        rows.append(("date", m["created"]))
    if m.get("version"):
        rows.append(("ensemble version", m["version"]))
    if m.get("requests") is not None:
        cost = m.get("cost_usd")
        rows.append(("requests", f"{m['requests']} this run; cost "
                     + ("unknown (no price for this model)" if cost is None else f"${cost:.4f}")))
    return rows


def _test_how(joint: Any) -> str:
    """How the λ₁/t test's p-value was computed, with what repeats it."""
    form = {"per-t": "each temperature with its own bias b, in both models",
            "fixed": "one bias b at every temperature", "scaled": "a bias b₁/t",
            "none": "no bias"}.get(getattr(joint, "bias_form", ""), "")
    reps = getattr(joint, "gof_reps", 0)
    seed = getattr(joint, "boot_seed", None)
    if reps > 0:
        how = f"parametric bootstrap, {reps} draws" + (f", seed {seed}" if seed is not None
                                                         else "")
    else:
        how = "χ² reference"
    return f"({how}; {form})" if form else f"({how})"


def _law_lines(joint: Any) -> list[str]:
    """The λ₁/t paragraph(s): the test's result, and what to do about it."""
    if joint is None:
        return ["λ(t) = λ₁/t could not be tested: that needs two temperatures > 0 whose answers "
                "are not separated. Use the λ measured at each temperature."]
    p = joint.lrt_pvalue
    head = (f"Joint fit λ(t) = λ₁/t: λ₁ = {joint.lam1:.4g} (95% interval {joint.ci[0]:.4g} – "
            f"{joint.ci[1]:.4g}), λ₁ being λ at t = 1. Likelihood-ratio test against a free λ "
            f"at each temperature: χ² = {joint.lrt_stat:.2f} on {joint.lrt_df} df, "
            f"p = {p:.3g} {_test_how(joint)}.")
    if joint.holds:
        return [head + " **Not rejected** at the 5% level: the λ measured at the different "
                "temperatures are consistent with λ₁/t, so λ at another temperature in the "
                "measured range is λ₁/t. (Not rejecting is not proof: with few samples the test "
                "has little power.)"]
    if p >= 0.01:
        chance = (f"What one rejection near 0.05 means: at the 5% level about 1 calibration in "
                  f"20 of a model that follows λ₁/t exactly rejects it by chance, so p = {p:.2g} "
                  "alone is weak evidence against the law.")
    else:
        chance = (f"p = {p:.2g} is far below 0.05: a model that follows λ₁/t gives a p this "
                  "small in fewer than 1 calibration in 100.")
    return [head + " **Rejected** at the 5% level (p < 0.05).",
            "What this means: the λ measured at the different temperatures are not in the "
            "ratio 1/t that sampling from fixed logits at temperature t predicts (for instance "
            "the provider rescales or caps the temperature, or the answers are not a softmax of "
            "fixed scores). What to use instead: the λ measured at each temperature (the table "
            "above; `fits` in profile.json), and for a temperature you have not measured, a "
            "calibration at that temperature. The recommendation below already uses the "
            "measured λ, and so does a `Member` or `Ensemble` built from profile.json at a "
            "measured temperature (at one not measured it falls back to λ₁/t, with a warning).",
            chance + " To tell chance from a real departure, calibrate again with more "
            "`--samples` per question (or more questions): new answers decide it. Do not rerun "
            "with another `--seed`: on the same answers that changes nothing the test "
            "measures (its bootstrap is seeded from the answers)."]


def _recommendation_lines(rec: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(paragraphs, code lines) of the recommendation."""
    if not rec:
        return ["No recommendation: no temperature could be fitted."], []
    lines = [rec["summary"]]
    for opt in rec.get("options", []):
        acc = opt.get("eval_accuracy")
        acc_s = f"; eval accuracy {acc:.3f} ± {opt['eval_sem']:.3f}" if acc is not None else ""
        lines.append(f"t = {opt['t']:g}: λ = {_fmt(opt['lam'])}, rule {opt['aggregator']}, "
                     f"worst-case regret {opt['worst_regret']:.4f}{acc_s}")
    code = ["from ensemble import Ensemble", "", f"ens = {rec['ensemble']}"] \
        if rec.get("ensemble") else []
    target = rec.get("target")
    if target:
        lines.append(target["text"])
        if target.get("ensemble"):
            code += ["", f"# reaches the target accuracy {target['accuracy']:g} in the eval",
                     f"ens = {target['ensemble']}"]
    lines += list(rec.get("caveats", []))
    lines.append(rec["why"])
    lines.append("λ₁ and each temperature's fit are saved in profile.json beside this report; "
                 "load them with `ensemble.CalibrationProfile.load(path)`.")
    return lines, code


def write_report(out: Path, *, model: str, fits: Sequence[Any], joint: Any,
                 panels: Sequence[dict[str, Any]], recommendation: dict[str, Any] | None,
                 mode: str, meta: dict[str, Any] | None = None) -> dict[str, Path]:
    """Write report.md (+ PNGs beside it) and a self-contained report.html into `out`.

    `meta` carries the run's context (model, api_base, task, questions, samples_per_question,
    temperatures, seed, created, version, requests, cost_usd); missing keys are left out.
    """
    out.mkdir(parents=True, exist_ok=True)
    curves = qr_curves_png(panels)
    lam_t = lambda_t_png(fits, joint)
    (out / "qr_curves.png").write_bytes(curves)
    (out / "lambda_t.png").write_bytes(lam_t)
    rows = [(f"{f.t:g}", _fmt(f.lam), _fmt(f.se),
             (f"≥ {_fmt(f.ci[0])} (one-sided)" if f.separated and f.lam > 0 else
              f"≤ {_fmt(f.ci[1])} (one-sided)" if f.separated else
              f"[{_fmt(f.ci[0])}, {_fmt(f.ci[1])}]"),
             _fmt(f.bias), "yes" if f.separated else "no", str(f.n_questions), str(f.n_valid),
             _fmt_p(f.gof_pvalue), _fmt_p(getattr(f, "deviance_pvalue", None))) for f in fits]
    head = tuple(GLOSSARY)
    meta_rows = _meta_rows(model, mode, meta)
    law = _law_lines(joint)
    rec_lines, code = _recommendation_lines(recommendation)
    notes = sorted({n for f in fits for n in f.notes})
    used = [h for h in head if h not in ("t", "questions", "valid answers")]

    md = [f"# Calibration of {model}", ""]
    md += [f"- **{k}**: {_md(v)}" for k, v in meta_rows]
    md += ["", _md(UNITS), "", "## λ at each temperature", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md += ["", "How to read it:", ""] + [f"- **{h}**: {_md(GLOSSARY[h])}" for h in used]
    md += ["", "## λ across temperatures", ""] + [_md(x) + "\n" for x in law]
    md += ["![quantal-response curves](qr_curves.png)", "", "![λ against t](lambda_t.png)", ""]
    if notes:
        md += ["## Notes", ""] + [f"- {_md(n)}" for n in notes] + [""]
    md += ["## Recommendation", ""] + [_md(x) + "\n" for x in rec_lines]
    if code:
        md += ["```python", *code, "```"]
    (out / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")

    e = html.escape
    h = inline_html

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    meta_html = "<table class=\"meta\">" + "".join(
        f"<tr><th>{e(k)}</th><td>{h(v)}</td></tr>" for k, v in meta_rows) + "</table>"
    table = "<table><tr>" + "".join(
        f"<th title=\"{e(GLOSSARY[c])}\">{e(c)}</th>" for c in head) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>"
    gloss = "<dl class=\"gloss\">" + "".join(
        f"<dt>{e(c)}</dt><dd>{h(GLOSSARY[c])}</dd>" for c in used) + "</dl>"
    code_html = (f"<pre><code>{e(chr(10).join(code))}</code></pre>" if code else "")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>Calibration of {e(model)}</title>
<style>
body {{ font-family: -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }}
h1 {{ font-size: 1.6em; }} h2 {{ font-size: 1.25em; margin-top: 1.6em; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.95em; }}
th, td {{ border: 1px solid #ccc; padding: 0.35em 0.7em; text-align: right; }}
th {{ background: #f3f3f3; }} th[title] {{ cursor: help; }}
table.meta th, table.meta td {{ text-align: left; }}
.units {{ color: #555; font-size: 0.92em; }}
dl.gloss {{ font-size: 0.92em; color: #333; }} dl.gloss dt {{ font-weight: 600; }}
dl.gloss dd {{ margin: 0 0 0.4em 1.5em; }}
code {{ background: #f2f2f2; padding: 0 0.25em; border-radius: 3px; }}
pre {{ background: #f6f8fa; border: 1px solid #ddd; padding: 0.8em; white-space: pre-wrap;
       overflow-wrap: anywhere; }}
pre code {{ background: none; padding: 0; }}
.rec {{ background: #eef6ee; border-left: 4px solid #3a3; padding: 0.8em 1em; }}
.law {{ border-left: 4px solid #999; padding: 0.2em 1em; }}
img {{ max-width: 100%; border: 1px solid #eee; }}
</style></head><body>
<h1>Calibration of {e(model)}</h1>
{meta_html}
<p class="units">{h(UNITS)}</p>
<h2>λ at each temperature</h2>
{table}
<p>How to read it (hover a column's name for the same text):</p>
{gloss}
<h2>λ across temperatures</h2>
<div class="law">{"".join(f"<p>{h(x)}</p>" for x in law)}</div>
<h2>Quantal-response fits</h2>
<img alt="quantal-response curves" src="data:image/png;base64,{b64(curves)}">
<h2>λ against temperature</h2>
<img alt="lambda against temperature" src="data:image/png;base64,{b64(lam_t)}">
{"<h2>Notes</h2><ul>" + "".join(f"<li>{h(n)}</li>" for n in notes) + "</ul>" if notes else ""}
<h2>Recommendation</h2>
<div class="rec">{"".join(f"<p>{h(line)}</p>" for line in rec_lines)}{code_html}</div>
</body></html>
"""
    (out / "report.html").write_text(page, encoding="utf-8")
    return {"html": out / "report.html", "md": out / "report.md"}
