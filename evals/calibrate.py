"""Run a calibration: sample the box-and-ball task (or a user task with posteriors), fit λ per
temperature and jointly, recommend a temperature and an aggregator, write the report."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ensemble.calibration import LambdaFit, fit_joint, fit_lambda, fit_probabilities
from ensemble.errors import InputError
from ensemble.sampling.options import ProviderOptions
from ensemble.sampling.types import SampleRequest
from tasks import Question, get_task

__all__ = ["LOGPROB_INSTRUCTION", "CalibrationConfig", "recommend", "run_calibration"]

LOGPROB_INSTRUCTION = ("\n\nDo not explain. Reply with exactly one uppercase letter: L for the "
                       "Left Box or R for the Right Box.")


@dataclass(frozen=True)
class CalibrationConfig:
    model: str
    temperatures: tuple[float, ...]
    samples: int = 20
    task: str = "boxball"
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
    progress: bool = False
    on_status: Callable[[str], None] | None = field(default=None, repr=False, compare=False)


def _questions(cfg: CalibrationConfig) -> list[Question]:
    if cfg.task == "boxball":
        qs = list(get_task("boxball").questions())
    elif cfg.task == "jsonl":
        qs = list(get_task("jsonl", data=cfg.data).questions())
        if any(q.posterior is None for q in qs):
            raise InputError("calibration questions need a `posterior` field (P(first choice))")
    else:
        raise InputError(f"calibration runs on boxball or jsonl, not {cfg.task!r}")
    if cfg.limit is not None and cfg.limit < len(qs):
        idx = sorted(random.Random(cfg.seed).sample(range(len(qs)), cfg.limit))
        qs = [qs[i] for i in idx]
    return qs


async def run_calibration(cfg: CalibrationConfig) -> dict[str, Any]:
    from ensemble.sampling.sampler import Sampler

    if not cfg.temperatures or any(t < 0 for t in cfg.temperatures):
        raise InputError("give temperatures >= 0 with --t")
    if cfg.mode not in ("sample", "logprob"):
        raise InputError(f"--mode must be sample or logprob, got {cfg.mode!r}")
    qs = _questions(cfg)
    task = get_task(cfg.task, **({"data": cfg.data} if cfg.task == "jsonl" else {}))
    one = qs[0].choices[0]
    out = Path(cfg.out) if cfg.out else Path("runs") / ("calibrate-" + "".join(
        c if c.isalnum() or c in "-_." else "-" for c in cfg.model))
    out.mkdir(parents=True, exist_ok=True)
    if cfg.mode == "logprob":
        reqs = [SampleRequest.of(q.prompt + LOGPROB_INSTRUCTION, temperature=t, k=1,
                                 max_tokens=1, logprobs=True, top_logprobs=5)
                for t in cfg.temperatures for q in qs]
    else:
        max_tokens = cfg.max_tokens or getattr(task, "max_tokens", None)
        extra = {} if max_tokens is None else {"max_tokens": max_tokens}
        reqs = [SampleRequest.of(q.prompt, temperature=t, k=cfg.samples, **extra)
                for t in cfg.temperatures for q in qs]
    async with Sampler(cfg.model, options=cfg.provider, store=out / "samples.sqlite",
                       progress=cfg.progress, max_cost=cfg.max_cost,
                       on_status=cfg.on_status) as sampler:
        result = await sampler.run(reqs, parser=task.parse)
        stats = sampler.stats
    from .failures import apply_failure_policy

    failed = apply_failure_policy(result, question_ids=[q.id for q in qs],
                                  temperatures=cfg.temperatures, out=out,
                                  fail_on_error=cfg.fail_on_error,
                                  samples_total=stats.samples_total)
    rows = result.rows
    if failed.count:  # leave the failed questions out of every fit
        keep = [qi for qi, q in enumerate(qs) if q.id not in set(failed.ids)]
        rows = [rows[ti * len(qs) + qi] for ti in range(len(cfg.temperatures)) for qi in keep]
        qs = [qs[qi] for qi in keep]
    post = np.array([q.posterior for q in qs], dtype=float)
    fits: list[LambdaFit] = []
    panels = []
    groups = []
    invalid = 0
    for ti, t in enumerate(cfg.temperatures):
        block = rows[ti * len(qs):(ti + 1) * len(qs)]
        if cfg.mode == "logprob":
            probs = np.array([_p_first(r[0], qs[0].choices) for r in block], dtype=float)
            if np.isnan(probs).any():
                raise InputError("the provider returned no usable top logprobs for the answer "
                                 "token; use --mode sample")
            fit = fit_probabilities(post, probs, bias=cfg.bias, t=t)
            props = probs
        else:
            ones = np.array([sum(s.answer == one for s in r) for r in block])
            valid = np.array([sum(s.answer is not None for s in r) for r in block])
            invalid += int(sum(len(r) for r in block) - valid.sum())
            if valid.sum() == 0:
                raise InputError(f"no valid answers at t = {t:g}: the model's replies could not "
                                 "be parsed (see `ensemble sample` to inspect them)")
            fit = fit_lambda(post, ones, valid, bias=cfg.bias, mirror=cfg.mirror, t=t,
                             rng=cfg.seed)
            groups.append((t, post, ones, valid))
            with np.errstate(invalid="ignore", divide="ignore"):
                props = np.where(valid > 0, ones / np.maximum(valid, 1), np.nan)
        fits.append(fit)
        panels.append({"t": t, "fit": fit, "posteriors": post, "proportions": props})
    joint = fit_joint(groups, bias=cfg.bias, rng=cfg.seed) if groups else None
    rec = recommend(fits, cfg.n_budget, eval_dir=cfg.eval_dir)
    from ensemble.report import write_report

    paths = write_report(out, model=cfg.model, fits=fits, joint=joint, panels=panels,
                         recommendation=rec, mode=cfg.mode)
    doc = {
        "model": cfg.model,
        "units": "λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units; bias on the logit scale",
        "mode": cfg.mode,
        "fits": [{"t": f.t, "lam": f.lam, "se": f.se, "ci": list(f.ci), "bias": f.bias,
                  "bias_se": f.bias_se, "separated": f.separated, "n_questions": f.n_questions,
                  "n_valid": f.n_valid, "deviance": f.deviance, "gof_pvalue": f.gof_pvalue,
                  "deviance_pvalue": f.deviance_pvalue, "notes": list(f.notes)} for f in fits],
        "joint": None if joint is None else {
            "lam1": joint.lam1, "se": joint.se, "ci": list(joint.ci),
            "lrt_pvalue": joint.lrt_pvalue, "holds": joint.holds, "gof_pvalue": joint.gof_pvalue,
            "deviance_pvalue": joint.deviance_pvalue},
        "recommendation": rec,
        "invalid": invalid, "requests": stats.requests, "cost_usd": stats.cost_usd,
        "rate_limited": stats.rate_limited, "failed": failed.to_dict(),
        "report": {k: str(v) for k, v in paths.items()},
    }
    from ensemble.jsonio import dumps

    (out / "calibration.json").write_text(dumps(doc, indent=2) + "\n")
    return doc


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


def recommend(fits: list[LambdaFit], n: int, *, eval_dir: str | None = None
              ) -> dict[str, Any] | None:
    """Temperature and aggregator for a budget of n samples.

    For each measured temperature, the rule is majority when λ(t) <= g(n) (optimally robust by the
    paper's theorem), otherwise the minimax-regret rule; the recommended temperature is the one
    whose rule has the smallest worst-case regret over all c.i.i.d. structures (the theory's
    criterion; it needs no knowledge of the task). An eval run's accuracy, when given, is shown
    beside it (and breaks near-ties).
    """
    from ensemble.theory import robust_aggregator, threshold

    if not fits:
        return None
    g = threshold(n)
    evals = _eval_results(eval_dir, n) if eval_dir else {}
    opts = []
    for f in fits:
        lam = f.lam
        if lam < 0:
            continue  # anti-correlated with the evidence: no aggregation rule helps
        lam_eff = max(lam, 0.0)
        res = robust_aggregator(n, lam_eff)
        rule = "majority" if lam_eff <= g else "robust"
        acc = evals.get(f.t)
        opts.append({"t": f.t, "lam": lam, "aggregator": rule,
                     "worst_regret": res.majority_worst_regret if rule == "majority"
                     else res.worst_regret,
                     "robust_f": list(res.f), "eval_accuracy": acc[0] if acc else None,
                     "eval_sem": acc[1] if acc else None})
    if not opts:
        return None
    best = min(opts, key=lambda o: (round(o["worst_regret"], 4),
                                    -(o["eval_accuracy"] or 0.0)))
    g_txt = "∞" if math.isinf(g) else f"{g:.4g}"
    return {
        "n": n, "g": g, "t": best["t"], "aggregator": best["aggregator"],
        "summary": f"With n = {n} samples: use t = {best['t']:g} and the {best['aggregator']} "
                   f"rule (worst-case regret {best['worst_regret']:.4f} in ±1 units).",
        "why": f"Majority is optimally robust when λ(t) ≤ g({n}) = {g_txt}; above it the "
               "minimax-regret rule from `ensemble theory robust` is used. The temperature "
               "whose rule has the smallest worst-case regret is recommended; eval accuracy, "
               "when an eval run is given, is shown for comparison.",
        "options": opts,
    }


def _eval_results(eval_dir: str, n: int) -> dict[float, tuple[float, float]]:
    path = Path(eval_dir) / "summary.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read eval summary {path}: {exc}") from None
    out = {}
    for r in doc.get("results", []):
        if r.get("n") == n and r.get("aggregator") in ("plurality", "majority"):
            out[float(r["t"])] = (float(r["accuracy"]), float(r["sem"]))
    return out
