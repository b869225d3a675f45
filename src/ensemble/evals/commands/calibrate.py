"""`ensemble calibrate`: λ per temperature with honest uncertainty, a report and advice."""

from __future__ import annotations

import argparse
from typing import Any

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


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "calibrate", help="fit each temperature's rationality λ (quantal response)",
        description="Sample the box-and-ball task (or --task jsonl --data with posteriors), fit "
                    "logit P(L) = 2λ(2p−1) + b per temperature (binomial GLM, profile-likelihood "
                    "intervals, λ = ∞ with a lower bound under separation), test λ(t) = λ₁/t, "
                    "and recommend a temperature and an aggregator.")
    add_provider_args(p)
    p.add_argument("--t", type=temperature, nargs="+", required=True, help="temperatures")
    p.add_argument("--samples", type=positive_int, default=20, help="samples per question")
    p.add_argument("--task", default="boxball", choices=("boxball", "jsonl"))
    p.add_argument("--data", help="jsonl/csv questions with a posterior field")
    p.add_argument("--limit", type=positive_int, help="random subset of the questions")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-bias", dest="bias", action="store_false", help="fit without a bias term")
    p.add_argument("--mirror", action="store_true", help="the paper's symmetric mirroring")
    p.add_argument("--mode", choices=("sample", "logprob"), default="sample")
    p.add_argument("--max-tokens", type=positive_int,
                   help="completion token limit per sample (default: the task's, 512 for "
                        "boxball)")
    p.add_argument("--n-budget", type=positive_int, default=5, help="samples you can afford")
    p.add_argument("--eval-dir", help="an eval run directory, for expected accuracy")
    p.add_argument("--target-accuracy", type=probability, metavar="A",
                   help="with --eval-dir: recommend the fewest samples per decision whose "
                        "eval accuracy reaches A")
    p.add_argument("--out", help="run directory (default runs/calibrate-MODEL; "
                                 "runs/calibrate-jsonl-DATA-MODEL for --task jsonl)")
    add_run_policy_args(p)
    add_mode_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from ensemble._sync import run_sync
    from ensemble.evals.calibrate import CalibrationConfig, run_calibration

    batch, router = mode_options(args)
    cfg = CalibrationConfig(
        model=args.model, temperatures=tuple(args.t), samples=args.samples, task=args.task,
        data=args.data, limit=args.limit, seed=args.seed, bias=args.bias, mirror=args.mirror,
        mode=args.mode, n_budget=args.n_budget, eval_dir=args.eval_dir, out=args.out,
        provider=provider_options(args), fail_on_error=args.fail_on_error,
        max_tokens=args.max_tokens, target_accuracy=args.target_accuracy,
        max_cost=args.max_cost, dry_run=args.dry_run, progress=not args.json,
        on_status=status_printer, batch=batch, router=router)
    doc = run_sync(run_calibration(cfg))
    if args.json:
        emit_json(doc)
        return 0
    if cfg.dry_run:
        print_dry_run(doc)
        return 0
    from ensemble.clitables import console, print_table

    print_table(["t", "λ", "SE", "95% interval", "bias", "separated"],
                [[f"{f['t']:g}", fmt_lam(f["lam"]), "–" if f["se"] is None else f"{f['se']:.3g}",
                  f"[{fmt_lam(f['ci'][0])}, {fmt_lam(f['ci'][1])}]",
                  "–" if f["bias"] is None else f"{f['bias']:.3g}",
                  "yes" if f["separated"] else "no"] for f in doc["fits"]],
                title=f"Calibration of {args.model} ({doc['mode']} mode)", caption=doc["units"])
    con = console()
    if doc["joint"]:
        j = doc["joint"]
        verdict = ("holds" if j["holds"]
                   else "rejected: use the λ measured at each t; see the report")
        con.print(f"λ(t) = λ₁/t: λ₁ = {j['lam1']:.4g}, LRT p = {j['lrt_pvalue']:.3g} ({verdict})")
    rec = doc["recommendation"]
    if rec:
        con.print(f"[bold]{rec['summary']}[/]")
        if rec.get("target"):
            con.print(rec["target"]["text"])
        # code to paste: printed whole (soft-wrapped by the terminal, never broken by us)
        con.print(rec["ensemble"], markup=False, highlight=False, soft_wrap=True)
    con.print(f"report: {doc['report']['html']} · profile: {doc['profile']}")
    return 0
