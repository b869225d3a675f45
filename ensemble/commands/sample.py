"""`ensemble sample`: draw k samples of one prompt and show the answers and their counts."""

from __future__ import annotations

import argparse
from typing import Any

from ._args import positive_int, temperature
from ._output import emit_json


def add_provider_args(p: argparse.ArgumentParser) -> None:
    """--model, --api-base, --api-key and the limits shared by sample, eval and calibrate."""
    p.add_argument("--model", required=True,
                   help="litellm model string (openai/gpt-4o-mini, ollama/llama3, ...) or local")
    p.add_argument("--api-base", help="OpenAI-compatible base URL (e.g. the simulated server)")
    p.add_argument("--api-key", help="API key (default: the provider's environment variable)")
    p.add_argument("--max-concurrency", type=positive_int, default=16)
    p.add_argument("--rpm", type=positive_int, help="requests per minute limit")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    p.add_argument("--max-attempts", type=positive_int, default=6)
    p.add_argument("--max-retry-time", type=float, default=300.0,
                   help="give up retrying a request after this many seconds")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("sample", help="draw k samples of a prompt and count the answers")
    add_provider_args(p)
    p.add_argument("--t", type=temperature, default=1.0, help="temperature")
    p.add_argument("-k", type=positive_int, default=5, help="number of samples")
    p.add_argument("--choices", nargs="+", metavar="C",
                   help="allowed answers: --choices L R, or comma-separated L,R")
    p.add_argument("--max-tokens", type=positive_int)
    p.add_argument("--store", help="SQLite store path (resumable); default: none")
    p.add_argument("--refresh", action="store_true", help="re-draw stored samples")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("prompt", nargs="?", help="the prompt text")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from collections import Counter

    from .._sync import run_sync
    from ..sampling.parsing import choice_parser, extract_answer
    from ..sampling.sampler import Sampler
    from ..sampling.types import SampleRequest

    from ..errors import InputError

    choices, prompt = _split_choices(args.choices, args.prompt)
    if not prompt:
        raise InputError("give the prompt text as the last argument, e.g. "
                         "ensemble sample --model M --t 0.7 -k 10 \"Which box?\"")
    parser = choice_parser(choices) if choices else extract_answer
    req = SampleRequest.of(prompt, temperature=args.t, k=args.k,
                           **({"max_tokens": args.max_tokens} if args.max_tokens else {}))

    async def go() -> tuple[Any, Any]:
        async with Sampler(args.model, api_base=args.api_base, api_key=args.api_key,
                           store=args.store, max_concurrency=args.max_concurrency, rpm=args.rpm,
                           timeout=args.timeout, max_attempts=args.max_attempts,
                           max_retry_time=args.max_retry_time, refresh=args.refresh,
                           progress=args.progress) as s:
            rows = await s.sample([req], parser=parser)
            return rows[0], s.stats

    samples, stats = run_sync(go())
    counts = Counter(s.answer if s.answer is not None else "(invalid)" for s in samples)
    doc = {"model": args.model, "t": args.t, "k": args.k, "choices": choices,
           "counts": dict(counts.most_common()),
           "answers": [s.answer for s in samples],
           "invalid": stats.invalid, "requests": stats.requests, "cached": stats.samples_cached,
           "cost_usd": stats.cost_usd}
    if args.json:
        emit_json(doc)
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{args.k} samples of {args.model} at t = {args.t}")
    table.add_column("answer")
    table.add_column("count", justify="right")
    table.add_column("share", justify="right")
    for ans, c in counts.most_common():
        table.add_row(str(ans), str(c), f"{c / args.k:.0%}")
    con = Console()
    con.print(table)
    cost = "unknown" if stats.cost_usd is None else f"${stats.cost_usd:.4f}"
    con.print(f"requests {stats.requests}, from store {stats.samples_cached}, "
              f"invalid {stats.invalid}, cost {cost}")
    return 0


def _split_choices(raw: list[str] | None, prompt: str | None
                   ) -> tuple[list[str] | None, str | None]:
    """Choices from `--choices L R` or `--choices L,R`. argparse hands a prompt written right
    after the choices to --choices; it is recognised as the last item with a space in it."""
    if not raw:
        return None, prompt
    items = list(raw)
    if prompt is None and len(items) > 1 and any(ch.isspace() for ch in items[-1]):
        prompt = items.pop()
    choices = [c.strip() for item in items for c in item.split(",") if c.strip()]
    return choices or None, prompt
