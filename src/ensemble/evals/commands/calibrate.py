"""`ensemble calibrate`: λ per temperature with honest uncertainty, a report and advice."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ensemble.cliargs import (
    add_mode_args,
    add_provider_args,
    add_run_policy_args,
    emit_json,
    fmt_lam,
    mode_options,
    positive_int,
    print_dry_run,
    probability,
    provider_options,
    status_printer,
    temperature,
)

if TYPE_CHECKING:
    from ensemble.evals.schemas import CalibrationSummary


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "calibrate", help="fit each temperature's rationality λ (quantal response)",
        description="Sample the box-and-ball task (or --task jsonl --data with posteriors), fit "
                    "logit P(L) = 2λ(2p−1) + b per temperature (binomial GLM, profile-likelihood "
                    "intervals, λ = ∞ with a lower bound under separation), test λ(t) = λ₁/t, "
                    "and recommend a temperature and an aggregator.")
    add_provider_args(p, model_required=False)
    p.add_argument("--t", type=temperature, nargs="+", help="temperatures")
    p.add_argument("--spec", metavar="FILE",
                   help="the calibration from a spec file instead of --model/--t (\"kind\": "
                        "\"calibration\"); flags given replace its values; a calibration's "
                        "folder (RUN or RUN/spec.json, which every calibration writes) repeats "
                        "it there (`ensemble schema run-spec`)")
    p.add_argument("--samples", type=positive_int,
                   help="samples per question and temperature (default 20)")
    p.add_argument("--task", choices=("boxball", "jsonl"), help="default boxball")
    p.add_argument("--data", help="jsonl/csv questions with a posterior field")
    p.add_argument("--limit", type=positive_int,
                   help="L questions drawn at random (with --seed) from the task's; box-ball: "
                        "of its 400 (scenario, colour) questions (docs/statistics.md)")
    p.add_argument("--seed", type=int, help="seed of the --limit subset (default 0)")
    p.add_argument("--no-bias", dest="bias", action="store_const", const=False,
                   help="fit without a bias term")
    p.add_argument("--mirror", action="store_const", const=True,
                   help="the paper's symmetric mirroring")
    p.add_argument("--mode", choices=("sample", "logprob"), help="default sample")
    p.add_argument("--max-tokens", type=positive_int,
                   help="completion token limit per sample (default: the task's, 512 for "
                        "boxball)")
    p.add_argument("--n-budget", type=positive_int, help="samples you can afford (default 5)")
    p.add_argument("--eval-dir", help="an eval run directory, for expected accuracy")
    p.add_argument("--target-accuracy", type=probability, metavar="A",
                   help="with --eval-dir: recommend the fewest samples per decision whose "
                        "eval accuracy reaches A")
    p.add_argument("--out", help="run folder (default runs/calibrate-MODEL, runs/calibrate-"
                                 "jsonl-DATA-MODEL for --task jsonl, with @ENDPOINT for an "
                                 "--api-base: the same command finds it again and resumes)")
    add_run_policy_args(p)
    add_mode_args(p)
    p.add_argument("--json", action="store_true",
                   help="print calibration.json's document (`ensemble schema calibration`) on "
                        "stdout instead of the tables, and no progress bar")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from ensemble._sync import run_sync
    from ensemble.evals.calibrate import run_calibration
    from ensemble.evals.runner import RunOptions, estimate_run
    from ensemble.evals.schemas import dump
    from ensemble.evals.spec import calibration_command_spec, spec_folder

    batch, router = mode_options(args)
    given = {"task": args.task, "samples": args.samples, "data": args.data,
             "limit": args.limit, "seed": args.seed, "max_tokens": args.max_tokens,
             "fail_on_error": args.fail_on_error, "max_cost": args.max_cost,
             "mode": args.mode, "bias": args.bias, "mirror": args.mirror,
             "n_budget": args.n_budget, "eval_dir": args.eval_dir,
             "target_accuracy": args.target_accuracy}
    spec = calibration_command_spec(given, path=args.spec, model=args.model,
                                    temperatures=args.t, api_base=args.api_base)
    folder = spec_folder(args.spec) if args.spec and not args.out else None
    options = RunOptions(provider=provider_options(args),
                         out=args.out or (str(folder) if folder else None),
                         dry_run=args.dry_run, progress=not args.json, on_status=status_printer,
                         batch=batch, router=router)
    if options.dry_run:
        est = estimate_run(spec, options)
        if args.json:
            emit_json(est)
        else:
            print_dry_run(est)
        return 0
    doc = run_sync(run_calibration(spec, options))
    if args.json:
        emit_json(dump(doc))
        return 0
    _print(doc)
    return 0


def _print(doc: CalibrationSummary) -> None:
    from ensemble.clitables import console, print_table

    print_table(["t", "λ", "SE", "95% interval", "bias", "separated"],
                [[f"{f.t or 0.0:g}", fmt_lam(f.lam), "–" if f.se is None else f"{f.se:.3g}",
                  f"[{fmt_lam(f.ci[0])}, {fmt_lam(f.ci[1])}]",
                  "–" if f.bias is None else f"{f.bias:.3g}",
                  "yes" if f.separated else "no"] for f in doc.fits],
                title=f"Calibration of {doc.model} ({doc.mode} mode)", caption=doc.units)
    con = console()
    if doc.joint:
        j = doc.joint
        verdict = ("holds" if j.holds
                   else "rejected: use the λ measured at each t; see the report")
        con.print(f"λ(t) = λ₁/t: λ₁ = {j.lam1:.4g}, LRT p = {j.lrt_pvalue or 0.0:.3g} "
                  f"({verdict})")
    rec = doc.recommendation
    if rec:
        con.print(f"[bold]{rec.summary}[/]")
        if rec.target:
            con.print(rec.target.text)
        # code to paste: printed whole (soft-wrapped by the terminal, never broken by us)
        con.print(rec.ensemble, markup=False, highlight=False, soft_wrap=True)
    # one path a line, whole (soft-wrapped by the terminal): "a · b" folded at 80 columns left
    # the separator at a line's end and the profile's path on the next
    con.print(f"report: {doc.report['html']}", soft_wrap=True, highlight=False)
    con.print(f"profile: {doc.profile}", soft_wrap=True, highlight=False)
