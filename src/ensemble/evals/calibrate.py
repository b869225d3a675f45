"""A calibration, the run kind that fits λ: the box-and-ball task (or a user task with
posteriors) sampled at each temperature, λ fitted per temperature and jointly, a temperature
and an aggregator recommended, the profile, the report and calibration.json written.

It runs on the evals' one orchestration: its spec (`evals.spec.RunSpec`, `kind:
"calibration"`, `calibration_spec`) is resolved into a plan (`evals.plan.resolve`: task,
questions, one member per temperature, folder, requests), which `runner.draw_plan` draws as it
draws an eval's; only what is done with the samples differs (here: fits, not votes).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.calibration import JointFit, LambdaFit, fit_joint, fit_lambda, fit_probabilities
from ensemble.errors import InputError
from ensemble.profile import PROFILE_FILE, CalibrationProfile, TemperatureFit, public_api_base
from ensemble.rules import ROBUST, aggregator_info, declared, main_vote
from ensemble.tasks import Question

from .draw import Drawn
from .plan import RunOptions, RunPlan, resolve_to_draw
from .runner import draw_plan
from .schemas import (
    CALIBRATION_VERSION,
    CalibrationFit,
    CalibrationJoint,
    CalibrationMeta,
    CalibrationSummary,
    FailedSummary,
    Recommendation,
    RecommendOption,
    Target,
)
from .spec import RunSpec

__all__ = ["calibrate_plan", "recommend", "run_calibration"]

# bootstrap draws behind each p-value (the fits' default; seeded from the answers, not by --seed)
GOF_REPS = 999
UNITS = "λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units; bias on the logit scale"


async def run_calibration(spec: RunSpec, options: RunOptions | None = None
                          ) -> CalibrationSummary:
    """Draw the calibration's samples, fit λ per temperature and jointly, recommend, and write
    the profile, the report and calibration.json; returns calibration.json's document. The
    spec is read once, into its plan. A dry run is `runner.estimate_run`."""
    return await calibrate_plan(resolve_to_draw(spec, options, "calibration"))


async def calibrate_plan(plan: RunPlan) -> CalibrationSummary:
    """A calibration's steps on its plan: read the eval run it recommends from (before any
    request), draw (`runner.draw_plan`), write the records, fit, recommend, write."""
    fit = plan.fit
    assert fit is not None, "a calibration's plan has its fit"
    cells = _eval_cells(fit.eval_dir) if fit.eval_dir else {}
    # the failed questions are left out of every fit
    drawn = await draw_plan(plan)
    qs = drawn.questions
    _write_records(plan.out, qs, plan.temperatures, drawn.rows, drawn.answers)
    _say(plan, f"fitting λ at t = {', '.join(f'{t:g}' for t in plan.temperatures)} and testing "
               f"λ₁/t ({GOF_REPS} bootstrap draws per test)...")
    fits, panels, groups, invalid = _fits(plan, qs, drawn)
    joint = fit_joint(groups, bias=fit.bias) if groups else None
    _say(plan, "choosing the rule for each temperature (worst-case regret) and writing the "
               "report...")
    rec = recommend(fits, fit.n_budget, cells=cells, joint=joint, model=plan.model,
                    api_base=plan.members[0].api_base, choices=qs[0].choices,
                    target_accuracy=fit.target_accuracy)
    return _write(plan, qs, fits, joint, rec, panels, invalid, drawn)


def _write_records(out: Path, qs: list[Question], temperatures: tuple[float, ...],
                   rows: list[Any], answers: list[np.ndarray]) -> None:
    """questions.jsonl and samples.jsonl, in the eval's schema; no votes.jsonl (no vote here)."""
    from .records import VOTES_FILE, write_questions, write_samples

    write_questions(out, qs)
    write_samples(out, qs, temperatures, rows, answers)
    # a votes.jsonl left by an eval written into the same folder would describe other samples
    (out / VOTES_FILE).unlink(missing_ok=True)


def _profile(meta: CalibrationMeta, fits: list[LambdaFit], joint: JointFit | None
             ) -> CalibrationProfile:
    """The profile.json of a calibration: λ₁ from the joint fit, or from the single finite
    fit at t > 0 when there is no joint fit (then λ₁/t is assumed, not tested)."""
    lam1 = lam1_ci = lam1_se = source = None
    if joint is not None:
        lam1, lam1_ci, lam1_se, source = joint.lam1, (joint.ci[0], joint.ci[1]), joint.se, "joint"
    else:
        finite = [f for f in fits if f.t and f.t > 0 and math.isfinite(f.lam)]
        if len(finite) == 1:
            f = finite[0]
            assert f.t is not None
            lam1, lam1_se, source = f.lam * f.t, None if f.se is None else f.se * f.t, f"t={f.t:g}"
            lam1_ci = (f.ci[0] * f.t, f.ci[1] * f.t)
    valid = sum(f.n_valid for f in fits)
    bias = joint.bias if joint is not None else None
    if joint is None and source is not None:
        bias = next(f.bias for f in fits if f.t and f"t={f.t:g}" == source)
    return CalibrationProfile(
        model=meta.model, api_base=meta.api_base, endpoint=meta.endpoint,
        task=meta.task, mode=meta.mode,
        lam1=lam1, lam1_ci=lam1_ci, lam1_se=lam1_se, lam1_source=source,
        lrt_pvalue=None if joint is None else joint.lrt_pvalue,
        law_holds=None if joint is None else joint.holds,
        bias=bias,
        fits=[TemperatureFit(t=float(f.t or 0.0), lam=f.lam, ci=f.ci, se=f.se,
                             separated=f.separated, bias=f.bias, bias_se=f.bias_se,
                             n_questions=f.n_questions, n_valid=f.n_valid,
                             gof_pvalue=f.gof_pvalue, interval=f.interval) for f in fits],
        questions=meta.questions, samples_per_question=meta.samples_per_question,
        valid_answers=valid, seed=meta.seed, created=meta.created,
        version=meta.version, data=meta.data)


def _fits(plan: RunPlan, qs: list[Question], drawn: Drawn
          ) -> tuple[list[LambdaFit], list[dict[str, Any]], list[Any], int]:
    """λ per temperature (binomial GLM on the answers, or the logprobs' probabilities), the
    report's panels, the joint fit's groups and the invalid replies."""
    fit = plan.fit
    assert fit is not None
    post = np.array([q.posterior for q in qs], dtype=float)
    fits: list[LambdaFit] = []
    panels, groups = [], []
    invalid = 0
    nq = len(qs)
    for ti, t in enumerate(plan.temperatures):
        if fit.mode == "logprob":
            block = drawn.rows[ti * nq:(ti + 1) * nq]
            probs = np.array([_p_first(r[0], qs[0].choices) for r in block], dtype=float)
            if np.isnan(probs).any():
                raise InputError("the provider returned no usable top logprobs for the answer "
                                 "token; use --mode sample")
            lam_fit = fit_probabilities(post, probs, bias=fit.bias, t=t)
            props = probs
        else:
            ans = drawn.answers[ti]
            ones = np.array([sum(a == q.choices[0] for a in row) for q, row in zip(qs, ans,
                                                                                  strict=True)])
            valid = np.array([sum(a is not None for a in row) for row in ans])
            invalid += int(ans.size - valid.sum())
            if valid.sum() == 0:
                raise InputError(f"no valid answers at t = {t:g}: the model's replies could not "
                                 "be parsed (see `ensemble sample` to inspect them)")
            lam_fit = fit_lambda(post, ones, valid, bias=fit.bias, mirror=fit.mirror, t=t)
            groups.append((t, post, ones, valid))
            with np.errstate(invalid="ignore", divide="ignore"):
                props = np.where(valid > 0, ones / np.maximum(valid, 1), np.nan)
        fits.append(lam_fit)
        panels.append({"t": t, "fit": lam_fit, "posteriors": post, "proportions": props})
    return fits, panels, groups, invalid


def _write(plan: RunPlan, qs: list[Question], fits: list[LambdaFit], joint: JointFit | None,
           rec: Recommendation | None, panels: list[dict[str, Any]], invalid: int,
           drawn: Drawn) -> CalibrationSummary:
    """profile.json, the report and calibration.json (built by keyword from the fits);
    returns calibration.json's document."""
    from ensemble import __version__
    from ensemble.jsonio import dumps, write_atomic

    from .records import now_iso
    from .report import write_report
    from .schemas import dump

    fit = plan.fit
    assert fit is not None
    (stats,) = drawn.stats
    meta = CalibrationMeta(
        model=plan.model, api_base=public_api_base(plan.members[0].api_base),
        endpoint=drawn.endpoints[0], served_by=drawn.served_by[0], task=plan.task_name,
        data=plan.data, mode=fit.mode, questions=len(qs),
        samples_per_question=plan.members[0].samples, temperatures=list(plan.temperatures),
        bias=fit.bias, mirror=fit.mirror, seed=plan.seed, limit=plan.limit, created=now_iso(),
        version=__version__, requests=stats.requests, cost_usd=stats.cost_usd,
        invalid=invalid, run_dir=str(plan.out),
        bootstrap=None if joint is None or not joint.gof_reps else
        f"{joint.gof_reps} draws per test, seed {joint.boot_seed} (from the answers)")
    _profile(meta, fits, joint).save(plan.out / PROFILE_FILE)
    doc = CalibrationSummary(
        schema_version=CALIBRATION_VERSION, model=plan.model, endpoint=drawn.endpoints[0],
        meta=meta, units=UNITS, mode="logprob" if fit.mode == "logprob" else "sample",
        fits=[CalibrationFit(t=f.t, lam=f.lam, se=f.se, ci=list(f.ci), bias=f.bias,
                             bias_se=f.bias_se, separated=f.separated,
                             n_questions=f.n_questions, n_valid=f.n_valid, deviance=f.deviance,
                             gof_pvalue=f.gof_pvalue, deviance_pvalue=f.deviance_pvalue,
                             gof_reps=f.gof_reps, boot_seed=f.boot_seed, notes=list(f.notes),
                             interval=f.interval)
              for f in fits],
        joint=_joint_doc(joint),
        recommendation=rec,
        invalid=invalid, requests=stats.requests, cost_usd=stats.cost_usd,
        rate_limited=stats.rate_limited, failed=FailedSummary(**drawn.failed.to_dict()),
        report={}, profile=str(plan.out / PROFILE_FILE))
    paths = write_report(plan.out, doc, fits=fits, joint=joint, panels=panels)
    doc.report = {k: str(v) for k, v in paths.items()}
    write_atomic(plan.out / "calibration.json", dumps(dump(doc), indent=2) + "\n")
    return doc


def _say(plan: RunPlan, line: str) -> None:
    """A status line after the progress bar (the fits and the report take a few seconds)."""
    if plan.policy.progress and plan.policy.on_status is not None:
        plan.policy.on_status(line)


def _joint_doc(joint: JointFit | None) -> CalibrationJoint | None:
    """The `joint` section of calibration.json (with the bootstrap's draws and seed)."""
    if joint is None:
        return None
    return CalibrationJoint(
        lam1=joint.lam1, se=joint.se, ci=list(joint.ci), lrt_pvalue=joint.lrt_pvalue,
        holds=joint.holds, gof_pvalue=joint.gof_pvalue, deviance_pvalue=joint.deviance_pvalue,
        bias_form=joint.bias_form, biases=None if joint.biases is None else list(joint.biases),
        gof_reps=joint.gof_reps, boot_seed=joint.boot_seed)


def _p_first(sample: Any, choices: tuple[str, ...]) -> float:
    """P(first choice) from the answer token's top logprobs, renormalised over the choices."""
    try:
        tops = sample.logprobs["content"][0]["top_logprobs"]
    except (TypeError, KeyError, IndexError):
        return math.nan
    probs = {c: 0.0 for c in choices[:2]}
    for tok in tops:
        t = str(tok["token"]).strip().upper()
        if t in probs:
            probs[t] += math.exp(float(tok["logprob"]))
    total = sum(probs.values())
    return probs[choices[0]] / total if total > 0 else math.nan


def recommend(fits: list[LambdaFit], n: int, *, eval_dir: str | None = None,
              joint: Any = None, model: str | None = None, api_base: str | None = None,
              choices: tuple[str, ...] | None = None, target_accuracy: float | None = None,
              cells: dict[tuple[float, int], dict[str, Any]] | None = None
              ) -> Recommendation | None:
    """Temperature and aggregator for a budget of n samples, and (with an eval run) the
    cheapest (t, n) that reaches a target accuracy; each with an `Ensemble(...)` line to paste.

    For each measured temperature, the rule is majority when λ(t) <= g(n) (optimally robust by the
    paper's theorem), otherwise the minimax-regret rule; the recommended temperature is the one
    whose rule has the smallest worst-case regret over all c.i.i.d. structures (the theory's
    criterion; it needs no knowledge of the task). An eval run's accuracy, when given, is shown
    beside it (and breaks near-ties). λ in the pasted line is the λ measured at that temperature
    (the per-temperature fit), which stays right whether or not λ₁/t holds.
    """
    from ensemble.theory import random_follow_f, robust_aggregator, threshold, worst_case_regret

    if not fits:
        return None
    if target_accuracy is not None and not 0 < target_accuracy < 1:
        raise InputError(f"--target-accuracy must lie in (0, 1), got {target_accuracy}")
    if target_accuracy is not None and not eval_dir and cells is None:
        raise InputError("--target-accuracy needs --eval-dir: the accuracy of a vote depends on "
                         "your task, so give an `ensemble eval` run of it at these temperatures")
    g = threshold(n)
    if cells is None:
        cells = _eval_cells(eval_dir) if eval_dir else {}
    opts: list[RecommendOption] = []
    for f in fits:
        lam = f.lam
        if lam < 0:
            continue  # anti-correlated with the evidence: no aggregation rule helps
        acc = cells.get((float(f.t or 0.0), n))
        if not f.t and n > 1:
            # Greedy decoding: the n samples are n copies of one reply, so any rule follows
            # that one expert: the regret of f(x) = x/n against n independent experts (the
            # theory's λ = ∞ robust rule would count the copies as independent).
            follow = random_follow_f(n)
            opts.append(RecommendOption(
                t=f.t, lam=lam, aggregator=main_vote(True),
                worst_regret=worst_case_regret(follow, math.inf).value,
                robust_f=list(follow), eval_accuracy=acc["accuracy"] if acc else None,
                eval_sem=acc["sem"] if acc else None))
            continue
        lam_eff = max(lam, 0.0)
        res = robust_aggregator(n, lam_eff)
        majority = lam_eff <= g  # the minimax-regret rule is the majority there
        opts.append(RecommendOption(
            t=f.t, lam=lam, aggregator=main_vote(True) if majority else ROBUST,
            worst_regret=res.majority_worst_regret if majority else res.worst_regret,
            robust_f=list(res.f), eval_accuracy=acc["accuracy"] if acc else None,
            eval_sem=acc["sem"] if acc else None))
    if not opts:
        return None
    best = min(opts, key=lambda o: (round(o.worst_regret, 4), -(o.eval_accuracy or 0.0)))
    t_best = float(best.t or 0.0)
    g_txt = "∞" if math.isinf(g) else f"{g:.4g}"
    n_use = 1 if t_best == 0 else n  # at t = 0 more samples are copies: never n > 1 there
    line = _ensemble_line(model, api_base, t_best, n_use, best.aggregator, best.lam, choices)
    caveats = []
    if t_best == 0 and n > 1:
        caveats.append(f"At t = 0 (greedy decoding) a model gives the same reply to the same "
                       f"prompt every time, so {n} samples would be {n} copies of one answer: "
                       f"a vote adds nothing there, hence n = 1 (its worst-case regret is that "
                       f"of following one expert against {n} independent ones). For a vote of "
                       f"{n}, calibrate at a t > 0 as well.")
    rec_rule = aggregator_info(best.aggregator)
    if rec_rule.binary and not rec_rule.vote:  # (the main vote becomes plurality on more)
        caveats.append(f"The {best.aggregator} rule decides between two answers (like L/R); "
                       "for multiple choice with more options use "
                       f"aggregator=\"{main_vote(False)}\".")
    use = (f"t = {t_best:g} with n = 1, since greedy decoding makes more samples copies of "
           "one reply" if n_use != n else f"t = {t_best:g} and the {best.aggregator} rule")
    return Recommendation(
        n=n_use, g=g, t=best.t, aggregator=best.aggregator, lam=best.lam,
        worst_regret=best.worst_regret,
        summary=f"With a budget of n = {n} samples per decision: use {use} (λ = "
                f"{_num(best.lam)} at that t; worst-case regret {best.worst_regret:.4f} in ±1 "
                "units).",
        why=f"Majority is optimally robust when λ(t) ≤ g({n}) = {g_txt}; above it the "
            "minimax-regret rule from `ensemble theory robust` is used. The temperature "
            "whose rule has the smallest worst-case regret (the most that the rule can lose "
            "against an all-knowing aggregator, over every task of this kind) is "
            "recommended; eval accuracy, when an eval run is given, is shown for comparison.",
        ensemble=line, caveats=caveats, options=opts,
        target=None if target_accuracy is None else _target(cells, target_accuracy, model,
                                                             api_base, choices))


def _num(v: float | None) -> str:
    if v is None:
        return "–"
    return ("∞" if v > 0 else "−∞") if math.isinf(v) else f"{v:.4g}"


def _ensemble_line(model: str | None, api_base: str | None, t: float, n: int, rule: str,
                   lam: float | None, choices: tuple[str, ...] | None) -> str:
    """The `Ensemble(...)` call for a recommendation, ready to paste (no key: it comes from the
    provider's environment variable)."""
    args = [repr(model or "MODEL")]
    base = public_api_base(api_base)
    if base:
        args.append(f"api_base={base!r}")
    args += [f"temperature={t:g}", f"n={n}", f"aggregator={rule!r}"]
    if aggregator_info(rule).needs_lam and lam is not None:
        args.append("lam=float('inf')" if math.isinf(lam) else f"lam={lam:.4g}")
    if choices:
        args.append(f"choices={list(choices)!r}")
    return f"Ensemble({', '.join(args)})"


def _target(cells: dict[tuple[float, int], dict[str, Any]], target: float, model: str | None,
            api_base: str | None, choices: tuple[str, ...] | None) -> Target:
    """The cheapest (fewest samples, then most accurate) eval cell reaching `target`: first by
    its 95% interval's lower end (reached with confidence), else by the point estimate."""
    if not cells:
        return Target(accuracy=target, met=False,
                      text="The eval run has no majority/plurality results to compare with.")
    for how, key in (("confidently (95% interval above it)", "lo"),
                     ("on the point estimate only (its 95% interval reaches below it)",
                      "accuracy")):
        ok = [(tn, c) for tn, c in cells.items() if c[key] >= target]
        if ok:
            (t, n), c = min(ok, key=lambda kv: (kv[0][1], -kv[1]["accuracy"]))
            line = _ensemble_line(model, api_base, t, n, c["aggregator"], None, choices)
            return Target(accuracy=target, met=True, t=t, n=n, aggregator=c["aggregator"],
                          value=c["accuracy"], ci=[c["lo"], c["hi"]], ensemble=line,
                          text=f"For a target accuracy of {target:g}: t = {t:g} with n = {n} "
                               f"({c['aggregator']}) reaches {c['accuracy']:.3f} (95% interval "
                               f"{c['lo']:.3f} – {c['hi']:.3f}) in the eval, {how}; it is the "
                               "fewest samples per decision that does.")
    (t, n), c = max(cells.items(), key=lambda kv: kv[1]["accuracy"])
    return Target(accuracy=target, met=False, t=t, n=n, value=c["accuracy"],
                  ci=[c["lo"], c["hi"]],
                  text=f"No (t, n) in the eval reaches {target:g}: the best is t = {t:g}, "
                       f"n = {n} with {c['accuracy']:.3f} (95% interval {c['lo']:.3f} – "
                       f"{c['hi']:.3f}). Rerun the eval with larger --n (and --samples) to see "
                       "whether more samples reach it, or use a stronger model.")


def _eval_cells(eval_dir: str) -> dict[tuple[float, int], dict[str, Any]]:
    """(t, n) -> accuracy, sem, 95% interval and rule of an eval run's main vote."""
    from .rundir import eval_summary

    doc = eval_summary(Path(eval_dir), flag="--eval-dir")
    out = {}
    for r in doc.results:
        info = declared(r.aggregator)
        if info is not None and info.vote and r.t is not None:
            acc, sem = float(r.accuracy), float(r.sem)
            ci = r.ci or [acc - 1.96 * sem, acc + 1.96 * sem]
            out[(float(r.t), int(r.n))] = {"accuracy": acc, "sem": sem, "lo": float(ci[0]),
                                           "hi": float(ci[1]), "aggregator": r.aggregator}
    return out
