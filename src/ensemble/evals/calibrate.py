"""Run a calibration: sample the box-and-ball task (or a user task with posteriors), fit λ per
temperature and jointly, recommend a temperature and an aggregator, write the report."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.calibration import LambdaFit, fit_joint, fit_lambda, fit_probabilities
from ensemble.errors import InputError
from ensemble.profile import PROFILE_FILE, CalibrationProfile, TemperatureFit, public_api_base
from ensemble.providers.options import ProviderOptions
from ensemble.rules import ROBUST, aggregator_info, declared, main_vote
from ensemble.sampling.batch_options import BatchOptions
from ensemble.sampling.types import SampleRequest
from ensemble.tasks import Question, Task, get_task, layout_of

__all__ = ["LOGPROB_INSTRUCTION", "CalibrationConfig", "calibration_dir", "recommend",
           "run_calibration"]

# bootstrap draws behind each p-value (the fits' default; seeded from the answers, not by --seed)
GOF_REPS = 999
DEFAULT_TASK = "boxball"  # what `ensemble calibrate` fits on without --task
LOGPROB_INSTRUCTION = ("\n\nDo not explain. Reply with exactly one uppercase letter: L for the "
                       "Left Box or R for the Right Box.")


@dataclass(frozen=True)
class CalibrationConfig:
    model: str
    temperatures: tuple[float, ...]
    samples: int = 20
    task: str = DEFAULT_TASK
    data: str | None = None
    limit: int | None = None
    seed: int = 0
    bias: bool = True
    mirror: bool = False
    mode: str = "sample"
    n_budget: int = 5
    eval_dir: str | None = None
    out: str | None = None
    provider: ProviderOptions = field(default_factory=ProviderOptions)
    fail_on_error: float | None = None
    max_cost: float | None = None
    max_tokens: int | None = None
    dry_run: bool = False
    progress: bool = False
    on_status: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    target_accuracy: float | None = None
    batch: BatchOptions | None = None  # draw through the provider's Batch API
    router: str | None = None  # a litellm Router config: online over several deployments


def _task(cfg: CalibrationConfig) -> Task:
    layout = layout_of(cfg.task)
    if not layout.calibrates:
        raise InputError(f"calibration needs questions with a posterior (P(first choice)); "
                         f"task {cfg.task!r} has none: use boxball, or jsonl with a posterior "
                         "field")
    return get_task(cfg.task, **({"data": cfg.data} if layout.takes_data else {}))


def _questions(cfg: CalibrationConfig, task: Task) -> list[Question]:
    qs = list(task.questions())
    if any(q.posterior is None for q in qs):
        raise InputError("calibration questions need a `posterior` field (P(first choice))")
    if cfg.limit is not None and cfg.limit < len(qs):
        idx = sorted(random.Random(cfg.seed).sample(range(len(qs)), cfg.limit))
        qs = [qs[i] for i in idx]
    return qs


def calibration_dir(cfg: CalibrationConfig) -> Path:
    """--out, or `runs/calibrate-MODEL` (box-ball) / `runs/calibrate-jsonl-DATA-MODEL`: the same
    command finds the same folder, so a rerun resumes from its store."""
    from .records import default_run_dir

    layout = layout_of(cfg.task)
    data = cfg.data if layout.takes_data else None
    return Path(cfg.out) if cfg.out else default_run_dir(cfg.task, cfg.model, data=data,
                                                         kind="calibrate",
                                                         short=cfg.task == DEFAULT_TASK,
                                                         api_base=cfg.provider.endpoint.api_base)


def _write_records(out: Path, qs: list[Question], temperatures: tuple[float, ...],
                   rows: list[Any], answers: list[np.ndarray]) -> None:
    """questions.jsonl and samples.jsonl, in the eval's schema; no votes.jsonl (no vote here)."""
    from .records import VOTES_FILE, write_questions, write_samples

    write_questions(out, qs)
    write_samples(out, qs, temperatures, rows, answers)
    # a votes.jsonl left by an eval written into the same folder would describe other samples
    (out / VOTES_FILE).unlink(missing_ok=True)


def _profile(meta: dict[str, Any], fits: list[LambdaFit], joint: Any) -> CalibrationProfile:
    """The profile.json of a calibration: λ₁ from the joint fit, or from the single finite
    fit at t > 0 when there is no joint fit (then λ₁/t is assumed, not tested)."""
    lam1 = lam1_ci = lam1_se = source = None
    if joint is not None:
        lam1, lam1_ci, lam1_se, source = joint.lam1, tuple(joint.ci), joint.se, "joint"
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
        model=meta["model"], api_base=meta["api_base"], endpoint=meta.get("endpoint"),
        task=meta["task"], mode=meta["mode"],
        lam1=lam1, lam1_ci=lam1_ci, lam1_se=lam1_se, lam1_source=source,
        lrt_pvalue=None if joint is None else joint.lrt_pvalue,
        law_holds=None if joint is None else joint.holds,
        bias=bias,
        fits=[TemperatureFit(t=float(f.t or 0.0), lam=f.lam, ci=f.ci, se=f.se,
                             separated=f.separated, bias=f.bias, bias_se=f.bias_se,
                             n_questions=f.n_questions, n_valid=f.n_valid,
                             gof_pvalue=f.gof_pvalue) for f in fits],
        questions=meta["questions"], samples_per_question=meta["samples_per_question"],
        valid_answers=valid, seed=meta["seed"], created=meta["created"],
        version=meta["version"], data=meta["data"])


def _check(cfg: CalibrationConfig) -> dict[tuple[float, int], dict[str, Any]]:
    """Everything a calibration checks before its first request (one InputError line); returns
    the cells of `--eval-dir` (read now, so a wrong folder costs nothing)."""
    if not cfg.temperatures or any(t < 0 for t in cfg.temperatures):
        raise InputError("give temperatures >= 0 with --t")
    twice = sorted({t for t in cfg.temperatures if cfg.temperatures.count(t) > 1})
    if twice:
        raise InputError(f"--t {twice[0]:g} is given twice: each temperature is fitted once "
                         "(and λ(t) = λ₁/t is tested across distinct ones); give each once")
    if cfg.mode not in ("sample", "logprob"):
        raise InputError(f"--mode must be sample or logprob, got {cfg.mode!r}")
    if cfg.seed < 0:
        raise InputError(f"--seed must be an integer >= 0, got {cfg.seed}")
    if cfg.target_accuracy is not None and not 0 < cfg.target_accuracy < 1:
        raise InputError(f"--target-accuracy must lie in (0, 1), got {cfg.target_accuracy}")
    if cfg.target_accuracy is not None and not cfg.eval_dir:
        raise InputError("--target-accuracy needs --eval-dir: the accuracy of a vote depends on "
                         "your task, so give an `ensemble eval` run of it at these temperatures")
    return _eval_cells(cfg.eval_dir) if cfg.eval_dir else {}


def _build(cfg: CalibrationConfig, task: Task) -> Any:
    """The requests of a calibration: k samples per question and t, or (logprob mode) one
    one-token reply with its top logprobs."""
    max_tokens = cfg.max_tokens or task.max_tokens

    def build(q: Question, t: float, k: int) -> SampleRequest:
        if cfg.mode == "logprob":
            return SampleRequest.of(q.prompt + LOGPROB_INSTRUCTION, temperature=t, k=1,
                                    max_tokens=1, logprobs=True, top_logprobs=5)
        return SampleRequest.of(q.prompt, temperature=t, k=k, max_tokens=max_tokens)

    return build


async def run_calibration(cfg: CalibrationConfig) -> dict[str, Any]:
    """Draw the calibration's samples, fit λ per temperature and jointly, recommend, and write
    the profile, the report and calibration.json."""
    from .draw import DrawMember, DrawPolicy, draw, estimate

    cells = _check(cfg)
    task = _task(cfg)
    qs = _questions(cfg, task)
    out = calibration_dir(cfg)
    k = 1 if cfg.mode == "logprob" else cfg.samples
    members = [DrawMember(cfg.model, t, k, cfg.provider) for t in cfg.temperatures]
    if cfg.dry_run:
        (doc,) = estimate(task, qs, members, out=out, build=_build(cfg, task))
        return {"task": cfg.task, "questions": len(qs), "temperatures": cfg.temperatures, **doc}
    from .rundir import calibration_identity, claim_run_dir

    claim_run_dir(out, kind="calibration", task=cfg.task, model=cfg.model,
                  identity=calibration_identity(cfg.provider.endpoint.api_base, cfg.data))
    policy = DrawPolicy(fail_on_error=cfg.fail_on_error, max_cost=cfg.max_cost,
                        progress=cfg.progress, on_status=cfg.on_status, batch=cfg.batch,
                        router=cfg.router)
    # the failed questions are left out of every fit
    drawn = await draw(task, qs, members, out=out, policy=policy, build=_build(cfg, task))
    qs = drawn.questions
    _write_records(out, qs, cfg.temperatures, drawn.rows, drawn.answers)
    _say(cfg, f"fitting λ at t = {', '.join(f'{t:g}' for t in cfg.temperatures)} and testing "
              f"λ₁/t ({GOF_REPS} bootstrap draws per test)...")
    fits, panels, groups, invalid = _fits(cfg, qs, drawn)
    joint = fit_joint(groups, bias=cfg.bias) if groups else None
    _say(cfg, "choosing the rule for each temperature (worst-case regret) and writing the "
              "report...")
    rec = recommend(fits, cfg.n_budget, cells=cells, joint=joint, model=cfg.model,
                    api_base=cfg.provider.endpoint.api_base, choices=qs[0].choices,
                    target_accuracy=cfg.target_accuracy)
    (stats,) = drawn.stats
    return _write(cfg, out, qs, fits, joint, rec, panels, invalid, stats, drawn)


def _fits(cfg: CalibrationConfig, qs: list[Question], drawn: Any
          ) -> tuple[list[LambdaFit], list[dict[str, Any]], list[Any], int]:
    """λ per temperature (binomial GLM on the answers, or the logprobs' probabilities), the
    report's panels, the joint fit's groups and the invalid replies."""
    post = np.array([q.posterior for q in qs], dtype=float)
    fits: list[LambdaFit] = []
    panels, groups = [], []
    invalid = 0
    nq = len(qs)
    for ti, t in enumerate(cfg.temperatures):
        if cfg.mode == "logprob":
            block = drawn.rows[ti * nq:(ti + 1) * nq]
            probs = np.array([_p_first(r[0], qs[0].choices) for r in block], dtype=float)
            if np.isnan(probs).any():
                raise InputError("the provider returned no usable top logprobs for the answer "
                                 "token; use --mode sample")
            fit = fit_probabilities(post, probs, bias=cfg.bias, t=t)
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
            fit = fit_lambda(post, ones, valid, bias=cfg.bias, mirror=cfg.mirror, t=t)
            groups.append((t, post, ones, valid))
            with np.errstate(invalid="ignore", divide="ignore"):
                props = np.where(valid > 0, ones / np.maximum(valid, 1), np.nan)
        fits.append(fit)
        panels.append({"t": t, "fit": fit, "posteriors": post, "proportions": props})
    return fits, panels, groups, invalid


def _write(cfg: CalibrationConfig, out: Path, qs: list[Question], fits: list[LambdaFit],
           joint: Any, rec: Any, panels: list[dict[str, Any]], invalid: int, stats: Any,
           drawn: Any) -> dict[str, Any]:
    """profile.json, the report and calibration.json; returns calibration.json's document."""
    from ensemble import __version__
    from ensemble.report import write_report

    from .records import now_iso

    meta = {"model": cfg.model, "api_base": public_api_base(cfg.provider.endpoint.api_base),
            "endpoint": drawn.endpoints[0], "served_by": drawn.served_by[0],
            "task": cfg.task, "data": cfg.data, "mode": cfg.mode, "questions": len(qs),
            "samples_per_question": 1 if cfg.mode == "logprob" else cfg.samples,
            "temperatures": list(cfg.temperatures), "bias": cfg.bias, "mirror": cfg.mirror,
            "seed": cfg.seed, "limit": cfg.limit, "created": now_iso(), "version": __version__,
            "requests": stats.requests, "cost_usd": stats.cost_usd, "invalid": invalid,
            "run_dir": str(out),
            "bootstrap": None if joint is None or not joint.gof_reps else
            f"{joint.gof_reps} draws per test, seed {joint.boot_seed} (from the answers)"}
    profile = _profile(meta, fits, joint)
    profile.save(out / PROFILE_FILE)
    paths = write_report(out, model=cfg.model, fits=fits, joint=joint, panels=panels,
                         recommendation=rec, mode=cfg.mode, meta=meta)
    doc = {
        "model": cfg.model,
        "endpoint": drawn.endpoints[0],
        "meta": meta,
        "units": "λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units; bias on the logit scale",
        "mode": cfg.mode,
        "fits": [{"t": f.t, "lam": f.lam, "se": f.se, "ci": list(f.ci), "bias": f.bias,
                  "bias_se": f.bias_se, "separated": f.separated, "n_questions": f.n_questions,
                  "n_valid": f.n_valid, "deviance": f.deviance, "gof_pvalue": f.gof_pvalue,
                  "deviance_pvalue": f.deviance_pvalue, "gof_reps": f.gof_reps,
                  "boot_seed": f.boot_seed, "notes": list(f.notes)} for f in fits],
        "joint": _joint_doc(joint),
        "recommendation": rec,
        "invalid": invalid, "requests": stats.requests, "cost_usd": stats.cost_usd,
        "rate_limited": stats.rate_limited, "failed": drawn.failed.to_dict(),
        "report": {k: str(v) for k, v in paths.items()},
        "profile": str(out / PROFILE_FILE),
    }
    from ensemble.jsonio import dumps

    from .schemas import CalibrationSummary, dump

    doc = dump(CalibrationSummary.model_validate(doc))  # a bug, not input, if it fails
    (out / "calibration.json").write_text(dumps(doc, indent=2) + "\n")
    return doc


def _say(cfg: CalibrationConfig, line: str) -> None:
    """A status line after the progress bar (the fits and the report take a few seconds)."""
    if cfg.progress and cfg.on_status is not None:
        cfg.on_status(line)


def _joint_doc(joint: Any) -> dict[str, Any] | None:
    """The `joint` section of calibration.json (with the bootstrap's draws and seed)."""
    if joint is None:
        return None
    return {"lam1": joint.lam1, "se": joint.se, "ci": list(joint.ci),
            "lrt_pvalue": joint.lrt_pvalue, "holds": joint.holds, "gof_pvalue": joint.gof_pvalue,
            "deviance_pvalue": joint.deviance_pvalue, "bias_form": joint.bias_form,
            "biases": None if joint.biases is None else list(joint.biases),
            "gof_reps": joint.gof_reps, "boot_seed": joint.boot_seed}


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
              ) -> dict[str, Any] | None:
    """Temperature and aggregator for a budget of n samples, and (with an eval run) the
    cheapest (t, n) that reaches a target accuracy; each with an `Ensemble(...)` line to paste.

    For each measured temperature, the rule is majority when λ(t) <= g(n) (optimally robust by the
    paper's theorem), otherwise the minimax-regret rule; the recommended temperature is the one
    whose rule has the smallest worst-case regret over all c.i.i.d. structures (the theory's
    criterion; it needs no knowledge of the task). An eval run's accuracy, when given, is shown
    beside it (and breaks near-ties). λ in the pasted line is the λ measured at that temperature
    (the per-temperature fit), which stays right whether or not λ₁/t holds.
    """
    from ensemble.theory import robust_aggregator, threshold

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
    opts: list[dict[str, Any]] = []
    for f in fits:
        lam = f.lam
        if lam < 0:
            continue  # anti-correlated with the evidence: no aggregation rule helps
        lam_eff = max(lam, 0.0)
        res = robust_aggregator(n, lam_eff)
        majority = lam_eff <= g  # the minimax-regret rule is the majority there
        acc = cells.get((float(f.t or 0.0), n))
        opts.append({"t": f.t, "lam": lam, "aggregator": main_vote(True) if majority else ROBUST,
                     "worst_regret": res.majority_worst_regret if majority
                     else res.worst_regret,
                     "robust_f": list(res.f), "eval_accuracy": acc["accuracy"] if acc else None,
                     "eval_sem": acc["sem"] if acc else None})
    if not opts:
        return None
    best = min(opts, key=lambda o: (round(o["worst_regret"], 4),
                                    -(o["eval_accuracy"] or 0.0)))
    g_txt = "∞" if math.isinf(g) else f"{g:.4g}"
    line = _ensemble_line(model, api_base, best["t"], n, best["aggregator"], best["lam"],
                          choices)
    caveats = []
    if best["t"] == 0:
        caveats.append("At t = 0 (greedy decoding) a model gives the same reply to the same "
                       "prompt every time, so n samples are n copies of one answer: a vote "
                       "adds nothing there. Use n = 1 at t = 0, or a t > 0 for a vote.")
    rec_rule = aggregator_info(best["aggregator"])
    if rec_rule.binary and not rec_rule.vote:  # (the main vote becomes plurality on more)
        caveats.append(f"The {best['aggregator']} rule decides between two answers (like L/R); "
                       "for multiple choice with more options use "
                       f"aggregator=\"{main_vote(False)}\".")
    rec: dict[str, Any] = {
        "n": n, "g": g, "t": best["t"], "aggregator": best["aggregator"], "lam": best["lam"],
        "worst_regret": best["worst_regret"],
        "summary": f"With a budget of n = {n} samples per decision: use t = {best['t']:g} and "
                   f"the {best['aggregator']} rule (λ = {_num(best['lam'])} at that t; "
                   f"worst-case regret {best['worst_regret']:.4f} in ±1 units).",
        "why": f"Majority is optimally robust when λ(t) ≤ g({n}) = {g_txt}; above it the "
               "minimax-regret rule from `ensemble theory robust` is used. The temperature "
               "whose rule has the smallest worst-case regret (the most that the rule can lose "
               "against an all-knowing aggregator, over every task of this kind) is "
               "recommended; eval accuracy, when an eval run is given, is shown for comparison.",
        "ensemble": line,
        "caveats": caveats,
        "options": opts,
        "target": None,
    }
    if target_accuracy is not None:
        rec["target"] = _target(cells, target_accuracy, model, api_base, choices)
    return rec


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
            api_base: str | None, choices: tuple[str, ...] | None) -> dict[str, Any]:
    """The cheapest (fewest samples, then most accurate) eval cell reaching `target`: first by
    its 95% interval's lower end (reached with confidence), else by the point estimate."""
    if not cells:
        return {"accuracy": target, "met": False,
                "text": "The eval run has no majority/plurality results to compare with."}
    for how, key in (("confidently (95% interval above it)", "lo"),
                     ("on the point estimate only (its 95% interval reaches below it)",
                      "accuracy")):
        ok = [(tn, c) for tn, c in cells.items() if c[key] >= target]
        if ok:
            (t, n), c = min(ok, key=lambda kv: (kv[0][1], -kv[1]["accuracy"]))
            line = _ensemble_line(model, api_base, t, n, c["aggregator"], None, choices)
            return {"accuracy": target, "met": True, "t": t, "n": n,
                    "aggregator": c["aggregator"], "value": c["accuracy"],
                    "ci": [c["lo"], c["hi"]], "ensemble": line,
                    "text": f"For a target accuracy of {target:g}: t = {t:g} with n = {n} "
                            f"({c['aggregator']}) reaches {c['accuracy']:.3f} (95% interval "
                            f"{c['lo']:.3f} – {c['hi']:.3f}) in the eval, {how}; it is the "
                            "fewest samples per decision that does."}
    (t, n), c = max(cells.items(), key=lambda kv: kv[1]["accuracy"])
    return {"accuracy": target, "met": False, "t": t, "n": n, "value": c["accuracy"],
            "ci": [c["lo"], c["hi"]],
            "text": f"No (t, n) in the eval reaches {target:g}: the best is t = {t:g}, n = {n} "
                    f"with {c['accuracy']:.3f} (95% interval {c['lo']:.3f} – {c['hi']:.3f}). "
                    "Rerun the eval with larger --n (and --samples) to see whether more samples "
                    "reach it, or use a stronger model."}


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
