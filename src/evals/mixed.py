"""Evaluate a mixed ensemble: `ensemble eval TASK --ensemble SPEC.json`.

A spec names the members (a model at a temperature, n votes each, behind its own endpoint) and
the rules to score. Each member is sampled through its own `Sampler` (its endpoint's limits)
into the run's one store, at least n samples per question (more: the estimates average over
n-subsets and get intervals for the questions run). The report gives the ensemble under each
rule, each member alone at its own n (majority / plurality), and each rule minus majority /
plurality on the same samples (kind "aggregator"), all with 95% intervals.

λ is in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units, at the member's temperature; utility in ±1 units.
The theory behind the rules treats the members as groups of experts with one shared signal
structure: exact for one model at several temperatures, an approximation across models
(docs/ensembles.md).

    {"members": [{"model": "openai/a", "api_base": "http://127.0.0.1:8001/v1", "n": 1,
                  "temperature": 1.0, "lam": 2.0},
                 {"model": "openai/b", "n": 1, "temperature": 1.0, "calibration": "runs/cal-b"}],
     "calibration": ["runs/calibrate-a"],
     "aggregators": ["majority", "lam-weighted", "robust"]}
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ensemble.errors import InputError
from ensemble.sampling.options import ProviderOptions

from .openanswers import refuse_open

__all__ = ["EnsembleSpec", "MemberSpec", "default_aggregators", "load_spec", "run_mixed",
           "spec_schema"]

UNITS = ("λ in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units, at each member's temperature; "
         "utility in ±1 units (accuracy = (1 + utility) / 2)")
SHARED_SIGNAL = ("the rules treat the members as groups of experts sharing one signal "
                 "structure: exact for one model at several temperatures, an approximation "
                 "across models (docs/ensembles.md)")


class MemberSpec(BaseModel):
    """One member: `model` at `temperature`, `n` votes per decision."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="litellm model string, e.g. openai/gpt-4o-mini")
    api_base: str | None = Field(None, description="OpenAI-compatible base URL of its endpoint")
    n: int = Field(ge=1, description="votes of this member per decision")
    temperature: float = Field(ge=0, allow_inf_nan=False, description="sampling temperature")
    lam: float | None = Field(None, ge=0, description="λ at this temperature (ψ_λ units)")
    calibration: str | None = Field(None, description="calibration profile (or folder) giving "
                                                      "this member's λ₁; λ = λ₁ / t")
    samples: int | None = Field(None, ge=1, description="samples per question (default: "
                                                        "the larger of n and --samples)")
    label: str | None = Field(None, description="name in the tables (default model@t)")


class EnsembleSpec(BaseModel):
    """A mixed ensemble to evaluate (`ensemble eval TASK --ensemble SPEC.json`)."""

    model_config = ConfigDict(extra="forbid")

    members: list[MemberSpec] = Field(min_length=1)
    calibration: list[str] | None = Field(
        None, description="profiles matched to members by (model, api_base)")
    aggregators: list[str] | None = Field(
        None, description="rules to score (default: majority or plurality; with every λ "
                          "known also lam-weighted, and robust on binary tasks)")


def spec_schema() -> dict[str, Any]:
    """The JSON schema of a spec file."""
    return EnsembleSpec.model_json_schema()


_FIX = {
    "members": 'give a list of members, e.g. [{"model": "openai/gpt-4o-mini", "n": 3, '
               '"temperature": 0.7}]',
    "model": "a litellm model string such as openai/gpt-4o-mini",
    "n": "an integer >= 1 (votes of this member per decision)",
    "temperature": "a number >= 0",
    "lam": "a number >= 0 in ψ_λ units (λ at this member's temperature), or leave it out",
    "samples": "an integer >= 1, at least n",
    "calibration": "a path (member) or a list of paths (top level) to calibration profiles",
    "aggregators": 'a list of rule names, e.g. ["majority", "lam-weighted", "robust"]',
}


def load_spec(path: str) -> EnsembleSpec:
    """Read and validate a spec; a bad one is one InputError line naming the field and the fix."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"--ensemble {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"--ensemble {path}: not UTF-8 text (a binary file?); give the JSON "
                         "spec of the members") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--ensemble {path}: not JSON ({exc.msg} at line {exc.lineno})"
                         ) from None
    if isinstance(doc, dict) and isinstance(doc.get("calibration"), str):
        doc["calibration"] = [doc["calibration"]]
    try:
        return EnsembleSpec.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        field = next((str(x) for x in reversed(err["loc"]) if isinstance(x, str)), "members")
        fix = _FIX.get(field, "remove it (allowed: " + ", ".join(MemberSpec.model_fields)
                       + " per member; members, calibration, aggregators at the top)")
        raise InputError(f"--ensemble {path}: {loc}: {err['msg'].lower()}; fix: {fix}"
                         ) from None


def _members(spec: EnsembleSpec) -> tuple[Any, ...]:
    from ensemble.members import Member, resolve_members

    ms = [Member(m.model, n=m.n, temperature=m.temperature, api_base=m.api_base, lam=m.lam,
                 calibration=m.calibration) for m in spec.members]
    from ensemble.sampling.types import normalise_api_base

    seen: dict[tuple[str, str | None, float], int] = {}
    for i, m in enumerate(ms):
        key = (m.model, normalise_api_base(m.api_base) if m.api_base else None, m.temperature)
        if key in seen:
            raise InputError(f"--ensemble: members {seen[key]} and {i} are {m.model} at t = "
                             f"{m.temperature:g}: they would share the stored samples; give "
                             "one member with n = the sum of theirs")
        seen[key] = i
    return resolve_members(ms, calibration=spec.calibration)


def default_aggregators(lams: list[float | None], binary: bool) -> list[str]:
    """majority (binary) or plurality; with every λ known also lam-weighted, and robust on
    binary tasks."""
    out = ["majority" if binary else "plurality"]
    if all(x is not None for x in lams):
        out.append("lam-weighted")
        if binary:
            out.append("robust")
    return out


def check_aggregators(names: list[str], *, binary: bool, n_options: int,
                      lams: list[float | None], where: str) -> list[str]:
    """The rules to score, refused (one line) before any request when they cannot apply."""
    from ensemble.aggregators import aggregator_info, get_aggregator

    base = "majority" if binary else "plurality"
    out: list[str] = []
    for name in names:
        info = aggregator_info(name)
        if name in ("weighted", "omniscient", "random-follow"):
            raise InputError(f"{where}: {name} cannot be scored here (use majority, plurality, "
                             "lam-weighted or robust)")
        if name == "majority" and not binary:
            name = "plurality"  # one rule for the main vote of a multiple-choice task
        elif name == "plurality" and binary:
            name = "majority"
        if info.binary and not binary:
            get_aggregator(name, n_options=n_options)  # raises: says why
        if "lam" in info.needs and any(x is None for x in lams):
            raise InputError(f"{where}: {name} needs every member's λ: give lam or "
                             "calibration per member, or a calibration list (or drop it)")
        if name not in out:
            out.append(name)
    if base in out:
        out.remove(base)
    return [base, *out]


def _label(spec: Any, m: Any) -> str:
    return spec.label or f"{m.model}@t={m.temperature:g}"


async def run_mixed(spec: EnsembleSpec, cfg: Any) -> dict[str, Any]:
    """Sample every member, score the ensemble and each member alone; return the summary.
    `cfg` is the eval's `EvalConfig` (task, samples, limit, seed, data, out, limits, policy);
    its model, temperatures and ns are unused."""
    from ensemble.sampling.sampler import Sampler
    from ensemble.sampling.types import SampleRequest

    from .failures import FailedQuestions, apply_failure_policy, without_failed
    from .runner import dry_run, load_task, run_dir, select_questions

    if cfg.batch is not None or cfg.router is not None:
        raise InputError("--ensemble samples each member online through its own endpoint: "
                         "drop --batch / --router")
    if cfg.adaptive:
        raise InputError("--adaptive scores one model; drop it with --ensemble")
    members = _members(spec)
    labels = [_label(s, m) for s, m in zip(spec.members, members, strict=True)]
    if len(set(labels)) < len(labels):
        raise InputError("--ensemble: two members have the same label; give each a 'label'")
    task = refuse_open(load_task(cfg))
    questions = select_questions(cfg, task)
    box = cfg.task == "boxball"
    if not box and any(q.correct is None for q in questions):
        bad = next(q for q in questions if q.correct is None)
        raise InputError(f"question {bad.id!r} has no answer: every question needs one to be "
                         "scored (field 'answer')")
    binary = all(len(q.choices) == 2 for q in questions)
    n_options = max(len(q.choices) for q in questions)
    lams = [m.lam for m in members]
    names = check_aggregators(spec.aggregators or default_aggregators(lams, binary and box),
                              binary=binary, n_options=n_options, lams=lams,
                              where="--ensemble")
    if "robust" in names and not box:
        raise InputError("--ensemble: the group-robust rule is scored on box-ball only (its "
                         "estimate there is exact over the per-group counts); use lam-weighted "
                         "for another binary task")
    ks = [s.samples or max(m.n, cfg.samples or m.n) for s, m in zip(spec.members, members,
                                                                     strict=True)]
    for g, (k, m) in enumerate(zip(ks, members, strict=True)):
        if k < m.n:
            raise InputError(f"--ensemble: members.{g}.samples {k} is smaller than its n "
                             f"({m.n}); draw at least n samples")
    out = run_dir(cfg)
    max_tokens = cfg.max_tokens or getattr(task, "max_tokens", None)
    extra = {} if max_tokens is None else {"max_tokens": max_tokens}
    reqs = [[SampleRequest.of(q.prompt, temperature=m.temperature, k=k, tag=q.id, **extra)
             for q in questions] for m, k in zip(members, ks, strict=True)]
    opts = [_options(cfg.provider, m) for m in members]
    if cfg.dry_run:
        return {"task": cfg.task, "questions": len(questions), "members": [
            dry_run(m.model, o, out, r, label=lb)
            for m, o, r, lb in zip(members, opts, reqs, labels, strict=True)]}
    from .records import make_run_dir

    make_run_dir(out)
    t0 = time.perf_counter()
    stats: list[Any] = []
    results: list[Any] = []

    async def one(g: int) -> None:
        async with Sampler(members[g].model, options=opts[g], store=out / "samples.sqlite",
                           progress=cfg.progress, max_cost=cfg.max_cost,
                           on_status=cfg.on_status) as sampler:
            results[g] = await sampler.run(reqs[g], parser=task.parse)
            stats[g] = sampler.stats

    stats[:] = results[:] = [None] * len(members)
    await asyncio.gather(*(one(g) for g in range(len(members))))
    wall = time.perf_counter() - t0
    ids: list[str] = []
    reasons: dict[str, int] = {}
    for g, (res, st) in enumerate(zip(results, stats, strict=True)):
        sub = out / f"member-{g}"
        sub.mkdir(exist_ok=True)
        f = apply_failure_policy(res, question_ids=[q.id for q in questions],
                                 temperatures=(members[g].temperature,), out=sub,
                                 fail_on_error=cfg.fail_on_error,
                                 samples_total=st.samples_total)
        ids += [i for i in f.ids if i not in ids]
        for r, c in f.reasons.items():
            reasons[r] = reasons.get(r, 0) + c
    failed = FailedQuestions(ids=tuple(ids), reasons=reasons, total_questions=len(questions))
    rows_all = [row for res in results for row in res.rows]
    rows_all, questions = without_failed(rows_all, questions, len(members), failed,
                                         whole="scenario" if box else None)
    parse_for = getattr(task, "parse_for", None)
    answers: list[np.ndarray] = []
    nq = len(questions)
    for g in range(len(members)):
        a = np.empty((nq, ks[g]), dtype=object)
        for qi, q in enumerate(questions):
            row = rows_all[g * nq + qi]
            got = [parse_for(q, s.text) if parse_for is not None else s.answer for s in row]
            a[qi] = [x if x in q.choices else None for x in got]
        answers.append(a)
    t1 = time.perf_counter()
    summary = analyse_mixed(cfg, questions, answers, members=members, labels=labels,
                            samples=ks, aggregators=names)
    from ensemble import __version__

    from .records import now_iso, write_run_log

    write_run_log(out, questions, [m.temperature for m in members], rows_all, answers,
                  ns=[m.n for m in members], rule=names[0],
                  members=[(lb, m.model) for lb, m in zip(labels, members, strict=True)],
                  ensemble=ensemble_vote(names, lams))

    def total(attr: str) -> Any:
        vals = [getattr(s, attr) for s in stats]
        return None if any(v is None for v in vals) else sum(vals)

    summary.update({
        "requests": total("requests"), "cost_usd": total("cost_usd"),
        "cost": {"now_usd": total("cost_usd"), "stored_samples_usd": total("stored_cost_usd"),
                 "note": "now: this run's requests; stored_samples: what the samples read "
                         "from the store had cost when drawn (null: price unknown); all "
                         "members"},
        "tokens": {"prompt": total("prompt_tokens"), "completion": total("completion_tokens")},
        "samples": {"total": total("samples_total"), "from_store": total("samples_cached")},
        "retries": total("retries"), "errors": total("errors"),
        "rate_limited": total("rate_limited"),
        "wall_time_s": wall, "analysis_time_s": time.perf_counter() - t1, "run_dir": str(out),
        "data": {}, "failed": failed.to_dict(),
        "notes": [n for s in stats for n in s.notes],
        "provider": {lb: o.public() for lb, o in zip(labels, opts, strict=True)},
        "created": now_iso(), "version": __version__,
    })
    from .runner import _write_outputs
    from .schemas import EvalSummary

    summary = EvalSummary.model_validate(summary).model_dump(mode="python", exclude_unset=True)
    _write_outputs(out, summary)
    return summary


def ensemble_vote(rules: list[str], lams: list[float | None]) -> Any:
    """The ensemble's decision under each rule for votes.jsonl (`records.EnsembleVote`), from
    each member's first n_g answers; invalid answers abstain, a tie is left open.

    Binary questions: the group form of each rule (`evals.analysis.group_rule`, as the tables
    use), deciding choices[0] with probability f (robust may randomise: the likelier choice
    is written, f as `p_first`). More options: plurality of the pooled votes, or lam-weighted
    (votes weighted by 2λ_g)."""
    from ensemble.aggregators import lam_weighted_credit, plurality_credit

    from .analysis import group_rule

    binary_rules = {r: group_rule(r, lams) for r in rules if r != "plurality"}

    def decide(q: Any, votes: list[list[str | None]]
               ) -> list[tuple[str, str | None, bool, float | None]]:
        choices = list(q.choices)
        out: list[tuple[str, str | None, bool, float | None]] = []
        if len(choices) == 2:
            x = [sum(a == choices[0] for a in v) for v in votes]
            valid = [sum(a is not None for a in v) for v in votes]
            present = tuple(g for g, k in enumerate(valid) if k > 0)
            for r in rules:
                if not present:
                    out.append((r, None, False, None))
                    continue
                rule = binary_rules.get(r) or group_rule("majority", lams)
                f = float(rule(present, tuple(valid[g] for g in present))[
                    tuple(x[g] for g in present)])
                dec = choices[0] if f > 0.5 else choices[1] if f < 0.5 else None
                out.append((r, dec, dec is None, f))
            return out
        idx = {c: i for i, c in enumerate(choices)}
        counts = np.zeros((len(votes), len(choices)))
        for g, v in enumerate(votes):
            for a in v:
                if a in idx:
                    counts[g, idx[a]] += 1
        every = np.arange(len(choices))
        for r in rules:
            if r in ("plurality", "majority"):
                credit = plurality_credit(np.repeat(counts.sum(axis=0)[None], len(choices), 0),
                                          every)
            else:
                credit = lam_weighted_credit(np.repeat(counts[None], len(choices), 0), every,
                                             [float(x) for x in lams if x is not None])
            top = [choices[i] for i in every if credit[i] > 0]
            out.append((r, top[0] if len(top) == 1 else None, len(top) > 1, None))
        return out

    return decide


def mixed_figure(summary: dict[str, Any], *, chance: float | None) -> Any:
    """accuracy.png of a mixed ensemble: the ensemble under each rule and each member alone,
    with 95% intervals for the task, on the metric's whole range (the caller closes it)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .runner import _interval

    box = summary["task"] == "boxball"
    key, lo_hi = ("utility", (-1.0, 1.0)) if box else ("accuracy", (0.0, 1.0))
    rows = summary["results"]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    y = np.array([r[key] for r in rows], dtype=float)
    ci = np.array([_interval(r, box) for r in rows], dtype=float).clip(*lo_hi)
    yerr = np.vstack([np.maximum(y - ci[:, 0], 0), np.maximum(ci[:, 1] - y, 0)])
    x = np.arange(len(rows))
    ens = np.array([r.get("member") == "ensemble" for r in rows])
    for mask, colour, name in ((ens, "C0", "ensemble (n = total votes)"),
                               (~ens, "C1", "member alone")):
        if mask.any():
            ax.errorbar(x[mask], y[mask], yerr=yerr[:, mask], fmt="o", capsize=4, color=colour,
                        label=name)
    if chance is not None:
        ax.axhline(chance, color="0.4", ls="--", lw=1, label="chance")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['aggregator']}" if r.get("member") == "ensemble"
                        else f"{r.get('member')}\n(n = {r['n']})" for r in rows],
                       rotation=20, ha="right", fontsize=8)
    ax.set_ylim(lo_hi[0] - 0.02, lo_hi[1] + 0.02)
    ax.set_ylabel("expected utility (±1 units)" if box else "accuracy")
    title = f"{summary['task']}: {summary['model']}"
    ax.set_title("\n".join(textwrap.wrap(title, 60)), fontsize=10)
    ax.legend(fontsize=8, title="bars: 95% interval", title_fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _widen(alone: Any, g: int, like: Any) -> Any:
    """Member g's values alone in the jackknife layout of the ensemble `like` (its variants
    are member g's block there; the other members' answers do not move it)."""
    from .analysis import ItemValues

    v = alone.jack.shape[1]
    jack = np.zeros_like(like.jack)
    jack[:, g * v:(g + 1) * v] = alone.jack
    return ItemValues(alone.values, jack, like.weight, alone.jackknife, alone.identical)


def _options(base: ProviderOptions, m: Any) -> ProviderOptions:
    """The eval's limits and key, with the member's endpoint."""
    if m.api_base is None:
        return base
    return ProviderOptions.build(base, api_base=m.api_base)


def analyse_mixed(cfg: Any, questions: list[Any], answers: list[np.ndarray], *,
                  members: Any, labels: list[str], samples: list[int],
                  aggregators: list[str]) -> dict[str, Any]:
    """The mixed ensemble's tables from answers[g] (Q, K_g) per member (None = invalid)."""
    from .analysis import (
        box_group_values,
        box_values,
        group_rule,
        vote_group_values,
        vote_values,
    )
    from .intervals import bootstrap_counts
    from .runner import _population, box_answer_counts, box_layout, option_codes, row_builder

    box = cfg.task == "boxball"
    ns = [m.n for m in members]
    lams = [m.lam for m in members]
    base = aggregators[0]
    if box:
        scen, joint, loc = box_layout(questions)
        counts = np.stack([box_answer_counts(a, loc, len(scen)) for a in answers])
        rules = {r: group_rule(r, lams) for r in aggregators}
        cells = box_group_values(counts, joint, ns, rules)
        alone = [box_values(counts[g], joint, [ns[g]])["majority", ns[g]]
                 for g in range(len(members))]
    else:
        choices, idx, correct = option_codes(questions)
        codes = [np.array([[idx.get(x, -1) if x is not None else -1 for x in row] for row in a],
                          dtype=np.int64) for a in answers]
        cells = vote_group_values(codes, correct, ns,
                                  {r: (None if r in ("plurality", "majority") else lams)
                                   for r in aggregators},
                                  n_options=len(choices))
        alone = [vote_values(codes[g], correct, [ns[g]], n_options=len(choices))[
            "plurality", ns[g]] for g in range(len(members))]
    items = cells[base].items
    total = max(_population(cfg, questions), items)
    unit = "scenarios" if box else "questions"
    g = np.random.default_rng(cfg.seed)
    resamples = bootstrap_counts(items, cfg.bootstrap, g)
    row = row_builder(box=box, total=total, unit=unit, items=items, resamples=resamples, rng=g)

    big = sum(ns)
    results = [row(cells[r], diff=False, member="ensemble", t=None, n=big, aggregator=r)
               for r in aggregators]
    results += [row(alone[i], diff=False, member=labels[i], t=members[i].temperature,
                    n=ns[i], aggregator=base) for i in range(len(members))]
    contrasts = [row(cells[r].minus(cells[base], same_answers=True), diff=True,
                     kind="aggregator", member="ensemble", t=None, vs_t=None, n=big, vs_n=big,
                     aggregator=r, vs_aggregator=base) for r in aggregators[1:]]
    # the ensemble under each rule minus its best member alone (the highest estimate here),
    # paired: the ensemble's estimate uses that member's samples too
    best = max(range(len(members)), key=lambda i: float(alone[i].values.mean()))
    contrasts += [row(cells[r].minus(_widen(alone[best], best, cells[r]), same_answers=True),
                      diff=True, kind="vs-best-member", member="ensemble", t=None,
                      vs_t=members[best].temperature, n=big, vs_n=ns[best], aggregator=r,
                      vs_aggregator=base, vs_member=labels[best]) for r in aggregators]
    inv = [float(np.mean([x is None for x in a.ravel()])) for a in answers]
    warnings = []
    high = [f"{lb}: {r:.0%}" for lb, r in zip(labels, inv, strict=True) if r > 0.2]
    if high:
        warnings.append("over 20% of the replies are invalid (" + "; ".join(high) + "): "
                        "check the prompt, the parser or --max-tokens")
    from .runner import ESTIMATOR, METRIC

    return {
        "task": cfg.task, "model": " + ".join(f"{n}×{lb}" for n, lb in zip(ns, labels,
                                                                           strict=True)),
        "metric": METRIC[box].replace("of the vote", "of each rule's vote")
        if not box else METRIC[box],
        "estimator": ("exact and unbiased: per item, each member's n_g answers drawn without "
                      "replacement from its samples (per colour for box-ball, each expert "
                      "drawing its own ball), so the utility / accuracy polynomial in the "
                      "members' answer probabilities is estimated without bias; members alone: "
                      + ESTIMATOR[box]),
        "temperatures": [float(m.temperature) for m in members], "ns": ns,
        "samples_per_question": max(samples), "bootstrap": cfg.bootstrap, "seed": cfg.seed,
        "population": {"items": items, "total": total, "unit": unit, "limit": cfg.limit,
                       "fraction": items / total},
        "intervals": {
            "ci": f"95% interval for the task ({total} {unit}): bootstrap over {unit} with the "
                  "finite-population correction (as for one model)",
            "ci_questions": f"95% interval for these {items} {unit} only (jackknife over "
                            "each member's samples)",
            "contrasts": "paired: each rule minus " + base + " on the same samples "
                         "(kind aggregator); the ensemble under each rule minus its best "
                         "member alone, the member with the highest estimate here, on the same "
                         "questions and that member's same samples (kind vs-best-member; "
                         "choosing the best on these samples favours the member a little)",
        },
        "results": results,
        "contrasts": contrasts,
        "invalid_rate": float(np.mean(inv)),
        "invalid_rate_by_t": [{"t": float(m.temperature), "member": float(i),
                               "invalid_rate": r}
                              for i, (m, r) in enumerate(zip(members, inv, strict=True))],
        "invalid_policy": "invalid answers drop out of the vote (the rule for the valid "
                          "counts); no valid answer at all counts as wrong",
        "warnings": warnings,
        "ensemble": {
            "members": [{"label": lb, "model": m.model, "api_base": m.api_base, "n": m.n,
                         "temperature": m.temperature,
                         "lam": m.lam,
                         "lam_source": m.lam_source, "samples": k}
                        for lb, m, k in zip(labels, members, samples, strict=True)],
            "aggregators": aggregators, "units": UNITS, "assumption": SHARED_SIGNAL,
        },
    }
