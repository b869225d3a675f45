"""`ensemble schema NAME`: the JSON schema of a file a run writes or reads (summary.json,
profile.json, calibration.json, a run spec), so other tools can validate what they read."""

from __future__ import annotations

import argparse
from typing import Any

from ensemble.cliargs import emit_json

# name -> (module, class): imported only when asked for
_FILES = {
    "eval-summary": ("ensemble.evals.schemas", "EvalSummary", "summary.json of `ensemble eval`"),
    "calibration": ("ensemble.evals.schemas", "CalibrationSummary",
                    "calibration.json of `ensemble calibrate`"),
    "run-spec": ("ensemble.evals.spec", "RunSpec",
                 "the spec of `ensemble eval --spec FILE` (every run writes its own: "
                 "RUN/spec.json)"),
    "ensemble-spec": ("ensemble.evals.spec", "EnsembleSpec",
                      "the SPEC.json of `ensemble eval TASK --ensemble SPEC.json` (the run "
                      "spec's fields, under this name)"),
    "question-record": ("ensemble.evals.records", "QuestionRecord",
                        "a line of questions.jsonl in a run folder"),
    "sample-record": ("ensemble.evals.records", "SampleRecord",
                      "a line of samples.jsonl in a run folder"),
    "vote-record": ("ensemble.evals.records", "VoteRecord",
                    "a line of votes.jsonl in an eval's run folder"),
    "failure-record": ("ensemble.evals.records", "FailureRecord",
                       "a line of failures.jsonl (the requests that failed for good)"),
    "profile": ("ensemble.profile", "CalibrationProfile",
                "profile.json of `ensemble calibrate` (CalibrationProfile.load)"),
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "schema", help="the JSON schema of a file a run writes",
        description="Print the JSON schema (draft 2020-12, from the pydantic model that "
                    "validates the file before it is written). On disk an infinite number is "
                    "null with a sibling `NAME_inf: \"+\" | \"-\"` marker, beside what the "
                    "schema describes. Names: " + "; ".join(
                        f"{k}: {v[2]}" for k, v in _FILES.items()))
    p.add_argument("name", choices=sorted(_FILES), help="which file")
    # every reporting command takes --json; the schema is one JSON document either way
    p.add_argument("--json", action="store_true", help="JSON output (the default; accepted for "
                                                       "symmetry with the other commands)")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    import importlib

    module, cls, _ = _FILES[args.name]
    model = getattr(importlib.import_module(module), cls)
    emit_json(model.model_json_schema())
    return 0
