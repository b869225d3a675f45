"""What a calibration report is made of: its figures (the quantal-response curves, λ against
t), the words for each number (`GLOSSARY`, `UNITS`) and the small inline markup its prose is
written in (`code`, **bold**, ψ_λ for a subscript), rendered for HTML (`inline_html`: escaped,
then <code>, <b> and <sub>) and Markdown (`md_text`: the backticks kept). The report itself,
rendered from a calibration's typed document, is `ensemble.evals.report`.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["GLOSSARY", "UNITS", "fmt_number", "fmt_pvalue", "inline_html", "lambda_t_figure",
           "lambda_t_png", "md_text", "qr_curves_png"]

UNITS = ("λ in ψ_λ units: ψ_λ(p) = 1/(1+exp(2λ(1−2p))), the probability of answering L (report 1) "
         "with posterior p; the bias b adds to the logit. Utility and regret in ±1 units.")

# What each column of the λ table means, in plain words (shown under the table, and as the
# header's tooltip in HTML).
GLOSSARY: dict[str, str] = {
    "t": "the sampling temperature the answers were drawn at.",
    "λ": "the model's rationality at this temperature: how closely its answers follow the "
         "evidence. λ = 0 is a coin flip whatever the evidence; the larger λ, the more often it "
         "picks the more likely box; λ = ∞ means it always does.",
    "SE": "standard error of λ (the binomial GLM's; for logprobs the larger of the "
          "cluster-robust and the quasi-binomial one); a rough ± for λ when the interval is "
          "symmetric.",
    "95% interval": "the values of λ the answers are consistent with (the line under the table "
                    "says how it was computed: profile likelihood for sampled answers, "
                    "clustered by question for logprobs). When the row is separated it is "
                    "one-sided, [bound, ∞]: λ is at least the bound with 95% confidence, and "
                    "the data cannot give an upper end.",
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


def md_text(text: str) -> str:
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
            label = f"λ = {fit.lam:.3g} [{fmt_number(fit.ci[0])}, {fmt_number(fit.ci[1])}]"
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


def fmt_number(v: float | None, nd: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{nd}g}"


def fmt_pvalue(p: float | None) -> str:
    if p is None:
        return "–"
    if p < 0.001:
        return "< 0.001"
    if p > 0.99:
        return "> 0.99"
    return f"{p:.2g}"
