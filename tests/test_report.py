import dataclasses
import json
import math

import numpy as np
import pytest

from ensemble.calibration import JointFit, LambdaFit
from ensemble.errors import InputError
from ensemble.report import inline_html, lambda_t_figure

# a fit of 10 questions, and one whose data are separated (λ infinite): the tests change fields
FIT = LambdaFit(lam=3.0, se=0.2, ci=(2.6, 3.4), bias=-0.2, bias_se=0.05, separated=False,
                n_questions=10, n_valid=100, deviance=8.0, df=8, gof_pvalue=0.4, dispersion=1.0,
                t=1.0)
SEPARATED = LambdaFit(lam=math.inf, se=None, ci=(40.0, math.inf), bias=None, bias_se=None,
                      separated=True, n_questions=10, n_valid=100, deviance=None, df=9,
                      gof_pvalue=None, dispersion=None, t=0.0)


def test_html_escapes_text_and_embeds_images(tmp_path):
    fit = dataclasses.replace(FIT, notes=("<script>alert(1)</script>",))
    sep = SEPARATED
    p = np.linspace(0, 1, 10)
    panels = [
        {"t": 0.0, "fit": sep, "posteriors": p, "proportions": (p > 0.5).astype(float)},
        {"t": 1.0, "fit": fit, "posteriors": p, "proportions": p},
    ]
    paths = write_report(tmp_path, model="<b>evil</b>", fits=[sep, fit], panels=panels)
    html = paths["html"].read_text()
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert "<b>evil</b>" not in html and "&lt;b&gt;evil" in html
    assert html.count("data:image/png;base64,") == 2 and 'src="http' not in html
    assert (tmp_path / "report.md").exists() and (tmp_path / "qr_curves.png").stat().st_size > 1000


def test_report_renders_in_headless_chromium(tmp_path):
    """Render the HTML offline in Debian's chromium (apt-get install chromium) and screenshot it."""
    import shutil
    import subprocess

    import pytest

    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium not installed (apt-get install chromium) - render check skipped")
    fit = FIT
    paths = write_report(tmp_path, model="sim", fits=[fit])
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,1600",
            paths["html"].as_uri(),
        ],
        capture_output=True,
        timeout=90,
    )
    assert shot.exists() and shot.stat().st_size > 20_000  # a page with its images, not blank


# -- reports a person can act on --------------------------------------------------------------

def write_report(out, *, model, fits, joint=None, panels=None, recommendation=None,
                 mode="sample", meta=None):
    """The calibration report of these fits (`ensemble.evals.report.write_report`), its
    document built as a calibration builds it: `meta` the run's context, the rest blank;
    `panels` by default each fit's over ten posteriors (`_panels`)."""
    panels = _panels(fits) if panels is None else panels
    from ensemble.evals import report
    from ensemble.evals.schemas import (
        CalibrationMeta,
        CalibrationSummary,
        FailedSummary,
        Recommendation,
    )

    ctx = {"api_base": None, "endpoint": None, "served_by": None, "task": "boxball",
           "data": None, "questions": 0, "samples_per_question": 0, "temperatures": [],
           "bias": True, "mirror": False, "seed": 0, "limit": None, "created": "",
           "version": "", "requests": 0, "cost_usd": None, "invalid": 0, "run_dir": str(out),
           "bootstrap": None, **(meta or {}), "model": model, "mode": mode}
    doc = CalibrationSummary(
        model=model, endpoint=None, meta=CalibrationMeta(**ctx), units="", mode=mode, fits=[],
        joint=None, invalid=0, requests=0, cost_usd=None, rate_limited=0, report={},
        recommendation=None if recommendation is None else Recommendation.model_validate(
            recommendation),
        failed=FailedSummary(count=0, of=0, ids=[], reasons={}, file=None), profile="")
    return report.write_report(out, doc, fits=fits, joint=joint, panels=panels)


META = {
    "model": "openai/sim",
    "api_base": "http://127.0.0.1:9/v1",
    "task": "boxball",
    "questions": 400,
    "samples_per_question": 20,
    "temperatures": [0.5, 1.0],
    "bias": True,
    "seed": 7,
    "created": "2026-01-02T03:04:05+00:00",
    "version": "9.9.9",
    "requests": 800,
    "cost_usd": None,
}


def _fits():
    a = dataclasses.replace(FIT, lam=7.0, se=0.4, ci=(6.2, 7.9), bias=-0.1, n_questions=400,
                            n_valid=8000, deviance=300.0, df=398, gof_pvalue=0.5, t=0.5)
    b = dataclasses.replace(a, lam=3.0, se=0.2, ci=(2.6, 3.4), gof_pvalue=0.004, t=1.0)
    return [a, b]


def _panels(fits):
    p = np.linspace(0, 1, 10)
    return [{"t": f.t, "fit": f, "posteriors": p, "proportions": p} for f in fits]


def test_inline_markup_is_rendered_and_escaped():
    assert (
        inline_html("ψ_λ(p) and `x<y` and **b**")
        == "ψ<sub>λ</sub>(p) and <code>x&lt;y</code> and <b>b</b>"
    )
    assert inline_html("fit_joint q_w <script>") == "fit_joint q<sub>w</sub> &lt;script&gt;"
    assert inline_html("`ψ_λ stays in code`") == "<code>ψ_λ stays in code</code>"


def test_report_renders_greek_explains_terms_and_carries_metadata(tmp_path):
    from ensemble.evals.calibrate import recommend

    fits = _fits()
    rec = recommend(
        fits, 3, model="openai/sim", api_base="http://u:sk-key@127.0.0.1:9/v1", choices=("L", "R")
    )
    paths = write_report(tmp_path, model="openai/sim", fits=fits, recommendation=rec, meta=META)
    page = paths["html"].read_text()
    body = page[page.index("<body>") :]
    assert "ψ_λ" not in body and "`" not in body and "ψ<sub>λ</sub>" in body
    for term in ("separated", "link test p", "deviance p", "95% interval", "bias b"):
        assert f"<dt>{term}</dt>" in body
    assert "one-sided" in body and "not a test of λ itself" in body
    for value in (
        "openai/sim",
        "boxball",
        "400",
        "20 per question",
        "2026-01-02T03:04:05",
        "9.9.9",
        "<th>seed</th><td>7</td>",
    ):
        assert value in body, value
    assert "sk-key" not in page and "sk-key" not in paths["md"].read_text()
    # the recommendation ends the page, with a line that can be pasted and run
    assert body.rindex("Recommendation") > body.rindex("λ against temperature")
    assert "Ensemble(&#x27;openai/sim&#x27;, api_base=&#x27;http://127.0.0.1:9/v1&#x27;" in body
    ns: dict = {}
    exec("from ensemble import Ensemble\nens = " + rec.ensemble, ns)
    ens = ns["ens"]
    assert (ens.n, ens.temperature, ens.aggregator_name) == (3, rec.t, rec.aggregator)
    if rec.aggregator == "robust":
        assert f"lam={rec.lam:.4g}" in rec.ensemble
    md = paths["md"].read_text()
    assert "ψ\\_λ" in md and "```python" in md and rec.ensemble in md


def test_rejected_law_says_what_to_use_and_the_one_in_twenty(tmp_path):
    fits = _fits()
    joint = JointFit(3.2, 0.1, (3.0, 3.4), -0.1, 5.1, 1, 0.024, (0.5, 1.0), False)
    paths = write_report(tmp_path, model="m", fits=fits, joint=joint, meta=META)
    text = paths["html"].read_text()
    assert "<b>Rejected</b>" in text and "about 1 calibration in 20" in text
    assert "λ measured at each temperature" in text and "profile.json" in text
    ok = JointFit(3.2, 0.1, (3.0, 3.4), -0.1, 0.3, 1, 0.58, (0.5, 1.0), True)
    text = write_report(tmp_path, model="m", fits=fits, joint=ok)["html"].read_text()
    assert "<b>Not rejected</b>" in text and "1 calibration in 20" not in text


def test_a_rejection_near_005_advises_more_answers_never_another_seed(tmp_path):
    """Issue 21: the README's demo rejected λ₁/t at p = 0.035 on a simulator built to satisfy it
    and the report advised another `--seed`, which only redrew the bootstrap. The report now
    says what a rejection near 0.05 means (about 1 in 20 under the law), advises more samples
    or questions, never another seed, and says how the p-value was computed."""
    fits = _fits()
    joint = JointFit(3.883, 0.1, (3.7, 4.1), None, 4.4, 1, 0.035, (0.5, 1.0), False,
                     bias_form="per-t", biases=(-0.6, -0.55), boot_seed=12345, gof_reps=999)
    md = write_report(tmp_path, model="m", fits=fits, joint=joint, meta=META)["md"].read_text()
    law = md[md.index("## λ across temperatures"):md.index("## Recommendation")]
    assert "about 1 calibration in 20" in law and "p = 0.035 alone is weak evidence" in law
    assert "more `--samples`" in law and "Do not rerun with another `--seed`" in law
    assert "rerun with another `--seed` or" not in law  # the old advice
    assert "parametric bootstrap, 999 draws, seed 12345" in law
    assert "each temperature with its own bias" in law
    strong = JointFit(3.883, 0.1, (3.7, 4.1), None, 14.0, 1, 0.001, (0.5, 1.0), False,
                      gof_reps=999, boot_seed=1)
    md = write_report(tmp_path, model="m", fits=fits, joint=strong, meta=META)["md"].read_text()
    assert "fewer than 1 calibration in 100" in md and "weak evidence" not in md


def test_the_p_value_columns_say_which_test_they_show(tmp_path):
    """Issue 21: the "fit p-value" column showed the link test while its explanation said
    "(deviance test)", and the deviance p-value was not shown. Each now has its column and an
    explanation naming its own test."""
    a, b = _fits()
    fits = [a, dataclasses.replace(b, gof_pvalue=0.31, deviance_pvalue=0.0123)]
    md = write_report(tmp_path, model="m", fits=fits, meta=META)["md"].read_text()
    lines = md.splitlines()
    head = next(x for x in lines if x.startswith("| t |"))
    cols = [c.strip() for c in head.strip("|").split("|")]
    row = next(x for x in lines if x.startswith("| 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[cols.index("link test p")] == "0.31"
    assert cells[cols.index("deviance p")] == "0.012"
    assert "fit p-value" not in md
    gloss = {x.split("**")[1]: x for x in lines if x.startswith("- **")}
    assert "(link test)" in gloss["link test p"] and "deviance" not in gloss["link test p"]
    assert "(deviance test)" in gloss["deviance p"]


def test_target_accuracy_picks_the_fewest_samples_that_reach_it(tmp_path, run_cli):
    from ensemble.evals.calibrate import recommend
    from ensemble.evals.schemas import EvalSummary
    from ensemble.testing import SimulatedServer

    # a real eval's summary.json (the typed document recommend reads), its rows then planted
    with SimulatedServer(lam1=3.0, seed=1) as srv:
        r = run_cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                    srv.base_url, "--t", "0.5", "1", "--n", "1", "3", "5", "--samples", "5",
                    "--limit", "2", "--out", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    rows = [
        {
            "t": t,
            "n": n,
            "aggregator": "plurality",
            "accuracy": a,
            "sem": 0.01,
            "ci": [a - 0.02, a + 0.02],
            "sem_questions": 0.01,
            "ci_questions": [a - 0.02, a + 0.02],
            "items": 500,
        }
        for t, n, a in [
            (0.5, 1, 0.60),
            (0.5, 3, 0.71),
            (0.5, 5, 0.78),
            (1.0, 1, 0.55),
            (1.0, 3, 0.73),
            (1.0, 5, 0.80),
        ]
    ]
    doc = json.loads((tmp_path / "summary.json").read_text())
    doc["results"] = rows
    EvalSummary.model_validate(doc)
    (tmp_path / "summary.json").write_text(json.dumps(doc))
    fits = _fits()
    rec = recommend(fits, 3, eval_dir=str(tmp_path), model="m", target_accuracy=0.70)
    tg = rec.target  # n = 3 reaches 0.70: at t = 1 only with confidence (0.71 - 0.02 < 0.70)
    assert tg.met and (tg.t, tg.n) == (1.0, 3) and "confidently" in tg.text
    assert "n=3" in tg.ensemble and "aggregator='plurality'" in tg.ensemble
    tg = recommend(fits, 3, eval_dir=str(tmp_path), model="m", target_accuracy=0.79).target
    assert (tg.t, tg.n) == (1.0, 5) and "point estimate only" in tg.text
    tg = recommend(fits, 3, eval_dir=str(tmp_path), model="m", target_accuracy=0.95).target
    assert not tg.met and "No (t, n)" in tg.text and (tg.t, tg.n) == (1.0, 5)
    with pytest.raises(InputError, match="--eval-dir"):
        recommend(fits, 3, target_accuracy=0.7)


def test_lambda_plot_starts_at_zero_and_clips_intervals():
    import matplotlib.pyplot as plt

    fits = _fits() + [
        SEPARATED,
        dataclasses.replace(FIT, lam=1.0, se=5.0, ci=(-30.0, 200.0), bias=0.0, bias_se=0.1,
                            deviance=1.0, gof_pvalue=0.5, t=2.0),
    ]
    fig = lambda_t_figure(fits, None)
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo <= 0 and any(
        line.get_ydata()[0] == 0 for line in ax.get_lines() if line.get_linestyle() == "--"
    )  # the λ = 0 line
    for coll in ax.collections:  # error bars stay inside the axis
        for seg in coll.get_segments():
            assert lo - 1e-9 <= seg[:, 1].min() and seg[:, 1].max() <= hi + 1e-9
    plt.close(fig)


def test_accuracy_plot_spans_the_metric_with_a_chance_line():
    import matplotlib.pyplot as plt

    from ensemble.evals.outputs import accuracy_figure
    from ensemble.evals.schemas import ResultRow
    from ensemble.tasks import layout_of

    rows = [ResultRow(t=1.0, n=n, aggregator="plurality", accuracy=a, sem=0.2,
                      ci=[a - 0.4, a + 0.4], sem_questions=0.2, ci_questions=[a - 0.4, a + 0.4],
                      items=10)
            for n, a in [(1, 0.9), (3, 0.95)]]
    fig = accuracy_figure(rows, layout=layout_of("mathqa"),
                          title="mathqa: plurality vote, " + "x" * 150, chance=0.2)
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert lo <= 0 and hi >= 1 and hi - lo < 1.1  # the whole [0, 1], not a zoom
    assert any(list(line.get_ydata()) == [0.2, 0.2] for line in ax.get_lines())
    for coll in ax.collections:
        for seg in coll.get_segments():
            assert seg[:, 1].max() <= 1.0 + 1e-9  # 0.95 + 0.4 clipped to 1
    assert "\n" in ax.get_title()  # a long model name wraps instead of running off the figure
    plt.close(fig)
    box = accuracy_figure(
        [ResultRow(t=1.0, n=1, aggregator="majority", accuracy=0.5, sem=0.1, ci=[0, 1],
                   sem_questions=0.1, ci_questions=[0, 1], utility=0.0, utility_sem=0.2,
                   utility_ci=[-1.5, 1.5], items=3)],
        layout=layout_of("boxball"), title="boxball: majority vote, m", chance=0.0)
    lo, hi = box.axes[0].get_ylim()
    assert lo <= -1 and hi >= 1
    plt.close(box)
