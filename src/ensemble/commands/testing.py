"""`ensemble testing serve`: the simulated OpenAI-compatible expert server."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ..cliargs import lam_value, nonneg_float, nonneg_int, probability


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("testing", help="the simulated expert server for tests",
                              description="A simulated OpenAI-compatible expert (quantal "
                                          "response at a λ you set, faults on demand): try "
                                          "every command offline, no key, no network.")
    p.set_defaults(_parser=p)
    sub = p.add_subparsers(dest="testing_command", metavar="WHAT", parser_class=type(p))
    s = sub.add_parser("serve", help="serve a simulated OpenAI-compatible expert on 127.0.0.1",
                       description="Prints its base URL (http://127.0.0.1:P/v1) on the first line, "
                                   "then serves until interrupted. λ₁ (--lam) is the expert's "
                                   "rationality at t = 1 in ψ_λ units; at t it answers with λ₁/t.")
    s.add_argument("--lam", type=lam_value, default=10.0, help="λ₁, rationality at t = 1")
    s.add_argument("--port", type=nonneg_int, default=0, help="port (default: a free one)")
    s.add_argument("--bias", type=float, default=0.0, help="logit bias towards 'L'")
    s.add_argument("--bias-form", choices=("fixed", "scaled"), default="fixed",
                   help="fixed: the same bias at every t (added after the temperature); "
                        "scaled: bias/t, divided by t with the rest of the logit, as sampling "
                        "does to a preference that is part of the model's scores")
    s.add_argument("--latency", type=nonneg_float, default=0.0, help="seconds per request")
    s.add_argument("--seed", type=nonneg_int, default=0,
                   help="seed of the simulated draws (an integer >= 0, default 0)")
    s.add_argument("--fault-rate", type=probability, default=0.0,
                   help="share of requests answered with a fault of --faults (default 0)")
    s.add_argument("--faults", default="429,500,503,malformed,drop",
                   help="comma-separated kinds: 429,500,503,timeout,slow,malformed,drop,short_n")
    s.add_argument("--fail-first", type=nonneg_int, default=0, help="fail the first K requests")
    s.add_argument("--fail-every", type=nonneg_int, default=0,
                   help="fail every m-th request (0: never)")
    s.add_argument("--retry-after", type=nonneg_float, default=0.05,
                   help="seconds sent in Retry-After with injected 429s")
    s.add_argument("--hang", type=nonneg_float, default=30.0,
                   help="seconds an injected 'timeout' fault holds the request")
    s.add_argument("--slow", type=nonneg_float, default=0.5,
                   help="extra seconds of an injected 'slow' response")
    s.add_argument("--reject-n", action="store_true", help="reject n > 1 (like llama.cpp)")
    s.add_argument("--invalid-rate", type=probability, default=0.0,
                   help="fraction of replies without an answer")
    s.add_argument("--answer-key", metavar="FILE",
                   help="JSON object: question text -> correct letter")
    s.add_argument("--beliefs", choices=("informative", "noise"), default="informative",
                   help="what each sample's answer-token logprobs say: informative (its own "
                        "belief, Dirichlet(kappa * the QR distribution), the default) or noise "
                        "(a confidence unrelated to the question)")
    s.add_argument("--chain-kappa", type=float, default=None, metavar="K",
                   help="the informative beliefs' concentration kappa > 0 (default 1; inf: "
                        "every sample reports the QR distribution itself)")
    s.add_argument("--link", choices=("logit", "probit"), default="logit",
                   help="the expert's link: logit (quantal response) or probit (not QR)")
    s.add_argument("--rate-limit", type=_rate_limit, metavar="N/W",
                   help="answer 429 above N accepted requests in any W seconds, e.g. 20/1")
    s.add_argument("--rate-limit-retry-after", type=nonneg_float, default=1.0,
                   help="seconds sent in Retry-After with --rate-limit 429s (default 1)")
    s.add_argument("--refuse-rate", type=probability, default=0.0,
                   help="share of prompts refused for good (400 content policy)")
    s.add_argument("--echo-key", action="store_true",
                   help="quote the request's API key in every reply's text (a careless provider)")
    s.add_argument("--report-usage", type=_usage, metavar="P,C",
                   help="report P prompt and C completion tokens in every reply, e.g. "
                        "--report-usage=-5,-9 (with '=': a value starting with - is read "
                        "as an option otherwise)")
    o = s.add_argument_group("open answers, structured outputs, tool calls, clients' formats")
    o.add_argument("--open-answers", metavar="FILE",
                   help="JSON object: question text (after '### Question:') -> its number; "
                        "those prompts get the number in varied forms (1,250, $1,250, ...)")
    o.add_argument("--open-accuracy", type=probability, default=None, metavar="P",
                   help="chance a sample gives the right number (default: Beta(3, 2) per "
                        "question)")
    o.add_argument("--structured", metavar="JSON",
                   help="planted field values, e.g. '{\"label\": \"no\", \"score\": 7}': "
                        "requests with a response_format JSON schema get JSON replies")
    o.add_argument("--structured-accuracy", type=probability, default=0.8, metavar="P",
                   help="chance each field of a structured reply is the planted value")
    o.add_argument("--missing-rate", type=probability, default=0.0, metavar="P",
                   help="JSON mode: chance each planted key is left out of a reply")
    o.add_argument("--tools", action="store_true",
                   help="answer a request with tools by a tool call planted per prompt")
    o.add_argument("--tool-accuracy", type=probability, default=0.8, metavar="P",
                   help="chance a tool call names the planted tool, and each argument is right")
    o.add_argument("--tool-text-rate", type=probability, default=0.0, metavar="P",
                   help="chance a request with tools is answered in text instead")
    o.add_argument("--client-formats", action="store_true",
                   help="answer DSPy's [[ ## field ## ]] and inspect_ai's 'ANSWER: $LETTER' "
                        "requests in their format")
    o.add_argument("--format-accuracy", type=probability, default=0.7, metavar="P",
                   help="chance each field of a formatted reply is the planted value")
    b = s.add_argument_group("Batch API (/v1/files, /v1/batches)")
    b.add_argument("--batch-delay", type=nonneg_float, default=1.0, metavar="S",
                   help="seconds from a batch's creation to its completion (default 1)")
    b.add_argument("--batch-fail-rate", type=probability, default=0.0, metavar="P",
                   help="share of batch lines that fail (500) on every submission")
    b.add_argument("--batch-fail-first", type=probability, default=0.0, metavar="P",
                   help="share of batch lines that fail (500) on their first submission only")
    b.add_argument("--batch-expire-first", type=nonneg_int, default=0, metavar="K",
                   help="the first K batches expire with half their lines done")
    b.add_argument("--batch-max-lines", type=nonneg_int, default=50_000, metavar="N",
                   help="lines per input file at most (default 50,000, as OpenAI)")
    s.set_defaults(func=run_serve, _parser=s)


def _rate_limit(text: str) -> tuple[int, float]:
    try:
        n, w = text.split("/")
        out = (int(n), float(w))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N/W, e.g. 20/1 (N requests in W seconds), "
                                         f"got {text!r}") from None
    if out[0] < 1 or not out[1] > 0:
        raise argparse.ArgumentTypeError(f"expected N >= 1 and W > 0 in N/W, got {text!r}")
    return out


def _usage(text: str) -> tuple[int, int]:
    try:
        p, c = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected P,C (two whole token counts), got {text!r}"
                                         ) from None
    return p, c


def _question_map(path: str, what: str, values: str,
                  ok: Callable[[object], bool]) -> dict[str, Any]:
    """The JSON object in the file at `path` mapping question text to values that pass `ok`
    (`values` says what they are); one InputError line naming `what` otherwise: a file that
    cannot be read, bytes that are not UTF-8, text that is not JSON, another shape."""
    import json

    from ..errors import InputError

    shape = f"a JSON object mapping question text to {values}"
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {what} {path}: {exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} {path} is not UTF-8 text (a binary file?); give {shape}"
                         ) from None
    if not isinstance(doc, dict) or not all(ok(v) for v in doc.values()):
        raise InputError(f"{what} {path} must be {shape}")
    return doc


def _open_modes(args: argparse.Namespace) -> dict[str, Any]:
    """The expert's plans the flags ask for: open answers, structured outputs and JSON mode,
    tool calls, clients' formats."""
    import json

    from ..errors import InputError
    from ..testing import FormatPlan, OpenAnswers, StructuredPlan, ToolPlan

    open_answers = structured = None
    if args.open_answers:
        doc = _question_map(args.open_answers, "--open-answers", "a number",
                            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
        open_answers = OpenAnswers(doc, accuracy=args.open_accuracy)
    if args.structured:
        try:
            values = json.loads(args.structured)
        except json.JSONDecodeError as exc:
            raise InputError(f"--structured is not JSON ({exc.msg}); give an object such as "
                             "'{\"label\": \"no\"}'") from None
        if not isinstance(values, dict):
            raise InputError("--structured must be a JSON object of field values")
        structured = StructuredPlan(values, accuracy=args.structured_accuracy,
                                    missing_rate=args.missing_rate)
    return {"open_answers": open_answers, "structured": structured,
            "tools": ToolPlan(accuracy=args.tool_accuracy, text_rate=args.tool_text_rate)
            if args.tools else None,
            "formats": FormatPlan(accuracy=args.format_accuracy) if args.client_formats
            else None}


def _beliefs(args: argparse.Namespace) -> Any:
    from ..testing import CHAIN_KAPPA, ChainBeliefs

    kappa = CHAIN_KAPPA if args.chain_kappa is None else args.chain_kappa
    return ChainBeliefs(mode=args.beliefs, kappa=kappa)  # InputError names a bad kappa


def run_serve(args: argparse.Namespace) -> int:
    import sys

    from .._sync import serve_until_signal
    from ..errors import InputError
    from ..testing import BatchPlan, FaultPlan, SimulatedServer

    key = None
    if args.answer_key:
        key = _question_map(args.answer_key, "answer key", "a letter",
                            lambda v: isinstance(v, str))
    plans = _open_modes(args)
    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    faults = FaultPlan(rate=args.fault_rate, kinds=kinds, first=args.fail_first,
                       every=args.fail_every, retry_after=args.retry_after, hang=args.hang,
                       slow=args.slow, seed=args.seed)
    if args.port > 65535:
        raise InputError(f"--port {args.port} is not a port number (0 to 65535; 0: a free one)")
    server = SimulatedServer(lam1=args.lam, bias=args.bias, bias_form=args.bias_form,
                             link=args.link, answer_key=key,
                             latency=args.latency, faults=faults, seed=args.seed, port=args.port,
                             reject_n=args.reject_n, invalid_rate=args.invalid_rate,
                             rate_limit=args.rate_limit,
                             rate_limit_retry_after=args.rate_limit_retry_after,
                             refuse_rate=args.refuse_rate, echo_key=args.echo_key,
                             usage=args.report_usage, **plans,
                             beliefs=_beliefs(args),
                             batch=BatchPlan(delay=args.batch_delay,
                                             fail_rate=args.batch_fail_rate,
                                             fail_first=args.batch_fail_first,
                                             expire_first=args.batch_expire_first,
                                             max_lines=max(1, args.batch_max_lines),
                                             seed=args.seed))

    try:
        serve_until_signal(server.serve_forever(on_ready=lambda url: print(url, flush=True)))
    except OSError as exc:
        raise InputError(f"cannot serve on port {args.port}: {exc.strerror}") from None
    sys.stderr.flush()
    return 0
