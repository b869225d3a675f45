"""The calibration report: report.md (with its figures beside it) and a self-contained
report.html, rendered from a calibration's typed document (`schemas.CalibrationSummary`) and
its fits.

The HTML page embeds its images (base64 PNG), escapes every piece of model or user text and
loads nothing from the network, so it opens anywhere, offline. Its prose is written once, in
`ensemble.report`'s inline markup, and rendered for each format. The report says what each
number means where it appears (`ensemble.report.GLOSSARY`), carries the run's metadata, and
ends in a recommendation that can be pasted (an `Ensemble(...)` line with λ filled in).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ensemble.calibration import JointFit, LambdaFit
from ensemble.report import (
    GLOSSARY,
    UNITS,
    fmt_number,
    fmt_pvalue,
    inline_html,
    lambda_t_png,
    md_text,
    qr_curves_png,
)

from .schemas import CalibrationMeta, CalibrationSummary, Recommendation

__all__ = ["write_report"]


def _meta_rows(meta: CalibrationMeta) -> list[tuple[str, str]]:
    """The report's head: what was calibrated, how, when, and what it cost."""
    rows = [("model", f"`{meta.model}`")]
    if meta.api_base:
        rows.append(("endpoint", f"`{meta.api_base}`"))
    rows.append(("task", meta.task + (f" (`{meta.data}`)" if meta.data else "")))
    rows.append(("questions", str(meta.questions)
                 + (f" (a seeded random subset, --limit {meta.limit})" if meta.limit else "")))
    rows.append(("samples", f"{meta.samples_per_question} per question and temperature"))
    if meta.temperatures:
        rows.append(("temperatures", ", ".join(f"{t:g}" for t in meta.temperatures)))
    bias = "fitted" if meta.bias else "not fitted (--no-bias)"
    rows.append(("mode", f"{meta.mode}; bias term {bias}"))
    rows.append(("seed", str(meta.seed)))
    if meta.bootstrap:
        rows.append(("bootstrap", meta.bootstrap))
    rows.append(("date", meta.created))
    rows.append(("ensemble version", meta.version))
    cost = meta.cost_usd
    rows.append(("requests", f"{meta.requests} this run; cost "
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


def _law_lines(joint: Any, *, mode: str = "sample") -> list[str]:
    """The λ₁/t paragraph(s): the test's result, and what to do about it."""
    if joint is None and mode == "logprob":
        return ["λ(t) = λ₁/t is not fitted in logprob mode: the joint fit and its test read "
                "sampled answers (--mode sample). Use the λ measured at each temperature."]
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


def _recommendation_lines(rec: Recommendation | None) -> tuple[list[str], list[str]]:
    """(paragraphs, code lines) of the recommendation."""
    if rec is None:
        return ["No recommendation: no temperature could be fitted."], []
    lines = [rec.summary]
    for opt in rec.options:
        acc = opt.eval_accuracy
        acc_s = (f"; eval accuracy {acc:.3f} ± {opt.eval_sem or 0.0:.3f}" if acc is not None
                 else "")
        lines.append(f"t = {opt.t or 0.0:g}: λ = {fmt_number(opt.lam)}, rule {opt.aggregator}, "
                     f"worst-case regret {opt.worst_regret:.4f}{acc_s}")
    code = ["from ensemble import Ensemble", "", f"ens = {rec.ensemble}"] if rec.ensemble else []
    target = rec.target
    if target:
        lines.append(target.text)
        if target.ensemble:
            code += ["", f"# reaches the target accuracy {target.accuracy:g} in the eval",
                     f"ens = {target.ensemble}"]
    lines += list(rec.caveats)
    lines.append(rec.why)
    lines.append("λ₁ and each temperature's fit are saved in profile.json beside this report; "
                 "load them with `ensemble.CalibrationProfile.load(path)`.")
    return lines, code


def _fit_rows(fits: Sequence[LambdaFit]) -> list[tuple[str, ...]]:
    """The λ table's rows, one per temperature (the GLOSSARY's columns)."""
    return [(f"{f.t:g}", fmt_number(f.lam), fmt_number(f.se),
             (f"≥ {fmt_number(f.ci[0])} (one-sided)" if f.separated and f.lam > 0 else
              f"≤ {fmt_number(f.ci[1])} (one-sided)" if f.separated else
              f"[{fmt_number(f.ci[0])}, {fmt_number(f.ci[1])}]"),
             fmt_number(f.bias), "yes" if f.separated else "no", str(f.n_questions),
             str(f.n_valid), fmt_pvalue(f.gof_pvalue), fmt_pvalue(f.deviance_pvalue))
            for f in fits]


def _interval_lines(fits: Sequence[LambdaFit]) -> list[str]:
    """What the table's intervals are, said under it: one line per kind, with its rows' t."""
    return [f"95% interval at t = "
            f"{', '.join(f'{f.t or 0.0:g}' for f in fits if f.interval == k)}: {k}"
            for k in dict.fromkeys(f.interval for f in fits)]


def write_report(out: Path, doc: CalibrationSummary, *, fits: Sequence[LambdaFit],
                 joint: JointFit | None, panels: Sequence[dict[str, Any]]) -> dict[str, Path]:
    """Write report.md (+ PNGs beside it) and a self-contained report.html into `out`, from a
    calibration's document (its model, context and recommendation), its fits (per
    temperature and joint, with the test statistics the document does not keep) and the
    curves' panels; returns the report's files ("html", "md")."""
    model = doc.model
    out.mkdir(parents=True, exist_ok=True)
    curves = qr_curves_png(panels)
    lam_t = lambda_t_png(fits, joint)
    (out / "qr_curves.png").write_bytes(curves)
    (out / "lambda_t.png").write_bytes(lam_t)
    rows = _fit_rows(fits)
    head = tuple(GLOSSARY)
    meta_rows = _meta_rows(doc.meta)
    law = _law_lines(joint, mode=doc.mode)
    rec_lines, code = _recommendation_lines(doc.recommendation)
    notes = sorted({n for f in fits for n in f.notes})
    kinds = _interval_lines(fits)
    used = [h for h in head if h not in ("t", "questions", "valid answers")]

    md = [f"# Calibration of {model}", ""]
    md += [f"- **{k}**: {md_text(v)}" for k, v in meta_rows]
    md += ["", md_text(UNITS), "", "## λ at each temperature", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md += [line for k in kinds for line in ("", f"{md_text(k)}.")]
    md += ["", "How to read it:", ""] + [f"- **{h}**: {md_text(GLOSSARY[h])}" for h in used]
    md += ["", "## λ across temperatures", ""] + [md_text(x) + "\n" for x in law]
    md += ["![quantal-response curves](qr_curves.png)", "", "![λ against t](lambda_t.png)", ""]
    if notes:
        md += ["## Notes", ""] + [f"- {md_text(n)}" for n in notes] + [""]
    md += ["## Recommendation", ""] + [md_text(x) + "\n" for x in rec_lines]
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
{"".join(f"<p>{h(k)}.</p>" for k in kinds)}
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
