"""`ensemble sample`: draw k samples of one prompt and show the answers and their counts."""

from __future__ import annotations

import argparse
from typing import Any

from ..cliargs import (
    add_mode_args,
    add_provider_args,
    emit_json,
    mode_options,
    positive_float,
    positive_int,
    print_dry_run,
    provider_options,
    status_printer,
    temperature,
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sample", help="draw k samples of a prompt and count the answers",
        description="Draw k samples of one prompt from a model and count the answers (one "
                    "table: answer, count, share). An answer is read from the reply's "
                    "<answer>...</answer> (else a closing phrase or \\boxed{}); --choices and "
                    "--answer say what counts as one. "
                    "Nothing is kept unless --store names a sample store.")
    add_provider_args(p)
    p.add_argument("--t", type=temperature, default=1.0, help="temperature (default 1.0)")
    p.add_argument("-k", type=positive_int, default=5, help="number of samples (default 5)")
    p.add_argument("--choices", nargs="+", metavar="C",
                   help="allowed answers: --choices L R, or comma-separated L,R")
    p.add_argument("--answer", choices=("choice", "number", "math", "text"), default=None,
                   help="what an answer is: number (1,250 and $1,250 count as 1250), math "
                        "(symbolic equivalence), text (case and punctuation-insensitive); "
                        "default: a choice among --choices, else the raw <answer> text")
    p.add_argument("--max-tokens", type=positive_int,
                   help="completion token limit per sample (default: the provider's)")
    p.add_argument("--store", help="SQLite store path (resumable); default: none")
    p.add_argument("--refresh", action="store_true", help="re-draw stored samples")
    p.add_argument("--max-cost", type=positive_float, metavar="USD",
                   help="stop new requests before spending more than this (with --store: "
                        "what the samples already stored for these prompts cost counts too)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the requests, tokens and price, and exit without sending")
    add_mode_args(p)
    p.add_argument("--progress", action="store_true",
                   help="show a progress bar on stderr (on a terminal)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document on stdout (the samples and the counts)")
    p.add_argument("prompt", nargs="?", help="the prompt text")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    import os

    from .._sync import run_sync
    from ..errors import InputError
    from ..providers.router import sampler_mode
    from ..sampling.parsing import choice_parser, extract_answer
    from ..sampling.results import raise_for_failures
    from ..sampling.sampler import Sampler
    from ..sampling.types import SampleRequest
    from ..wording import unprintable

    if (problem := unprintable(args.model, "--model")) is not None:  # shown in its title
        raise InputError(problem)
    choices, prompt = _split_choices(args.choices, args.prompt)
    if not prompt and args.choices:
        read = ", ".join(repr(c) for c in choices or ())
        raise InputError(f"no prompt: --choices read {read} as the allowed answers and left "
                         "none; give two or more answers, then the prompt: --choices L,R "
                         "\"the prompt\" (or put the prompt before --choices)")
    if choices is not None and len(choices) < 2:
        raise InputError(f"--choices needs two or more allowed answers to count votes "
                         f"between, got {choices!r}: --choices L,R (or leave it out for the "
                         "raw <answer> text)")
    if not prompt:
        raise InputError("give the prompt text as the last argument, e.g. "
                         "ensemble sample --model M --t 0.7 -k 10 \"Which box?\"")
    batch, router = mode_options(args)
    if batch is not None and not args.store:
        raise InputError("--batch needs --store FILE: the batches are recorded there, and a "
                         "rerun of the same command collects them")
    from ..answers import resolve_answer

    kind = resolve_answer(args.answer, choices)
    if kind.is_open:
        parser = kind.parse
    else:
        parser = choice_parser(choices) if choices else extract_answer
    req = SampleRequest.of(prompt, temperature=args.t, k=args.k,
                           **({"max_tokens": args.max_tokens} if args.max_tokens else {}))

    if args.dry_run:
        s = Sampler(args.model, options=provider_options(args),
                    store=args.store if args.store and os.path.exists(args.store) else None)
        doc = {"model": args.model, **s.estimate([req]).to_dict()}
        if s.store is not None:
            s.store.close()
        if args.json:
            emit_json(doc)
        else:
            print_dry_run(doc)
        return 0

    async def go() -> tuple[Any, Any, str]:
        opts = provider_options(args)
        async with Sampler(args.model, options=opts,
                           store=args.store, refresh=args.refresh, progress=args.progress,
                           max_cost=args.max_cost, on_status=status_printer,
                           **sampler_mode(model=args.model, options=opts, batch=batch,
                                          router=router)) as s:
            return await s.run([req], parser=parser), s.stats, s.provider_name

    result, stats, served_by = run_sync(go())
    samples = [smp for smp in result.rows[0] if smp is not None]
    if (result.failures or result.stopped is not None) and not args.store and samples:
        # no store keeps them: show what was drawn (and paid for) before saying what failed
        _show(args, choices, kind, samples, stats, complete=False, served_by=served_by)
    raise_for_failures(result, 1, stored=bool(args.store))
    _show(args, choices, kind, samples, stats, complete=True, served_by=served_by)
    return 0


def _show(args: argparse.Namespace, choices: list[str] | None, kind: Any, samples: list[Any],
          stats: Any, *, complete: bool, served_by: str) -> None:
    """The answers and their counts (JSON with --json); `complete=False`: only part of the k
    samples was drawn."""
    from collections import Counter

    from ..answers import merge_same, spellings

    answers = [s.answer for s in samples]
    if kind.is_open:
        answers = merge_same(kind, answers)
    counts = Counter(a if a is not None else "(invalid)" for a in answers)
    doc = {"model": args.model, "provider": served_by, "t": args.t, "k": args.k,
           "choices": choices, "answer": kind.name, "counts": dict(counts.most_common()),
           "answers": answers,
           "spellings": spellings(answers, [kind.extract(s.text or "") if a is not None else None
                                            for s, a in zip(samples, answers, strict=True)]),
           "invalid": stats.invalid, "requests": stats.requests, "cached": stats.samples_cached,
           "cost_usd": stats.cost_usd}
    if not complete:
        doc["complete"] = False
        doc["drawn"] = len(samples)
    if args.json:
        emit_json(doc)
        return
    from ..clitables import Column, console, print_table

    of = f"sample{'s' if args.k != 1 else ''} of"
    title = (f"{args.k} {of} {args.model} at t = {args.t}" if complete else
             f"{len(samples)} of {args.k} {of} {args.model} at t = {args.t} (the run stopped; "
             "without --store these are not kept)")
    print_table([Column("answer", justify="left", wrap=True), "count", "share"],
                [[str(ans), str(c), f"{c / max(1, len(samples)):.0%}"]
                 for ans, c in counts.most_common()], title=title)
    con = console()
    cost = "unknown" if stats.cost_usd is None else f"${stats.cost_usd:.4f}"
    if stats.recorded_replies:  # a replay pays nothing: say what its replies had cost
        had = stats.recorded_cost_usd
        cost += (" (a replay: its replies had cost "
                 + ("unknown" if had is None else f"${had:.4f}") + " when recorded)")
    con.print(f"requests {stats.requests}, from store {stats.samples_cached}, "
              f"invalid {stats.invalid}, cost {cost}")


def _split_choices(raw: list[str] | None, prompt: str | None
                   ) -> tuple[list[str] | None, str | None]:
    """Choices from `--choices L R` or `--choices L,R`. argparse hands a prompt written right
    after the choices to --choices; it is recognised as the last item with a space in it."""
    if not raw:
        return None, prompt
    items = list(raw)
    from ..errors import InputError
    from ..sampling.parsing import check_choices

    if prompt is None and len(items) > 1:
        if "," in items[0]:
            # the README's order, `--choices L,R "prompt"` (or `L, R "prompt"`): the
            # comma-separated list, then the prompt
            prompt = items.pop()
        elif any(ch.isspace() for ch in items[-1]):
            prompt = items.pop()
    choices = [c.strip() for item in items for c in item.split(",") if c.strip()]
    if not choices:
        raise InputError("--choices is empty; give the allowed answers, e.g. --choices L,R")
    dup = next((c for c in choices if choices.count(c) > 1), None)
    if dup is not None:
        raise InputError(f"--choices lists {dup!r} twice; give each allowed answer once")
    check_choices(choices, what="--choices")
    return choices, prompt
