"""`ensemble batches list|cancel --out RUN`: a run's provider batches, from its store."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..cliargs import add_option_args, emit_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "batches", help="list or cancel a run's provider batches (--batch)",
        description="The batches a --batch run submitted, as recorded in its store "
                    "(RUN/samples.sqlite), with their status checked at the provider.")
    p.set_defaults(_parser=p)
    sub = p.add_subparsers(dest="batches_command", metavar="WHAT", parser_class=type(p))
    ls = sub.add_parser("list", help="show a run's batches: status, request counts, times")
    _common(ls)
    ls.add_argument("--offline", action="store_true",
                    help="show what the store recorded, without asking the provider")
    ls.add_argument("--json", action="store_true",
                    help="print the batches as one JSON document on stdout")
    ls.set_defaults(func=run_list, _parser=ls)
    cx = sub.add_parser("cancel", help="cancel a run's batches still in flight")
    _common(cx)
    cx.add_argument("--id", nargs="+", metavar="BATCH",
                    help="cancel only these batch ids (default: every live batch of the run)")
    cx.add_argument("--json", action="store_true",
                    help="print what was cancelled as one JSON document on stdout")
    cx.set_defaults(func=run_cancel, _parser=cx)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, metavar="RUN",
                   help="the run folder (with samples.sqlite), or a store file")
    add_option_args(p, "batches", helps={
        "api_key": "the key that submitted the batches (default: the provider's environment "
                   "variable, e.g. OPENAI_API_KEY)", "timeout": "seconds per API call"})


def _store(out: str) -> Any:
    from ..errors import InputError
    from ..sampling.store import SampleStore

    path = Path(out)
    if path.is_dir():
        path = path / "samples.sqlite"
    if not path.is_file():
        raise InputError(f"no sample store at {path}: give the run folder of a --batch run "
                         "(the --out of eval/calibrate) or a --store file")
    return SampleStore(path)


def _api(rec: Any, args: argparse.Namespace, providers: dict[tuple[str, str], Any]) -> Any:
    """The Batch API a record's batch lives at: the one its model's provider declares
    (`Capabilities.batch_api`; `provider_for` picks the provider as the run did, e.g. the
    openai SDK for openai/...), at the record's endpoint, with this key."""
    from ..errors import InputError
    from ..providers.options import ProviderOptions
    from ..providers.registry import provider_for

    key = (rec.model, rec.endpoint)
    if key not in providers:
        base = rec.endpoint if rec.endpoint.startswith(("http://", "https://")) else None
        prov = provider_for(rec.model, ProviderOptions(api_base=base, api_key=args.api_key,
                                                       timeout=args.timeout, max_attempts=3))
        providers[key] = prov
    prov = providers[key]
    make = prov.capabilities.batch_api
    if make is None:
        raise InputError(f"{rec.model}: its provider ({getattr(prov, 'name', 'unknown')}) "
                         "declares no Batch API, so its batches cannot be checked here")
    return make()


async def _close(providers: dict[tuple[str, str], Any]) -> None:
    for prov in providers.values():
        await prov.aclose()


def run_list(args: argparse.Namespace) -> int:
    from .._sync import run_sync
    from ..errors import ProviderError

    store = _store(args.out)
    notes: list[str] = []
    try:
        records = store.batches()
        if not args.offline:
            cache: dict[tuple[str, str], Any] = {}

            async def refresh() -> None:
                try:
                    await check(cache)
                finally:
                    await _close(cache)

            async def check(cache: dict[tuple[str, str], Any]) -> None:
                for rec in records:
                    if not rec.live or rec.batch_id is None:
                        continue
                    try:
                        info = await _api(rec, args, cache).retrieve(rec.batch_id)
                    except ProviderError as exc:
                        notes.append(f"{rec.batch_id}: could not check ({exc.reason}); shown "
                                     "as recorded")
                        continue
                    store.update_batch(rec.id, status=info.status, counts=info.counts,
                                       output_file_id=info.output_file_id,
                                       error_file_id=info.error_file_id)

            run_sync(refresh())
            records = store.batches()
    finally:
        store.close()
    docs = [r.to_dict() for r in records]
    if args.json:
        emit_json({"run": args.out, "batches": docs, "notes": notes})
        return 0
    from ..clitables import Column, console, print_table

    con = console()
    if not records:
        con.print(f"no batches recorded in {args.out}")
        return 0
    rows = []
    for r in records:
        c = r.counts
        counts = (f"{c.get('completed', 0)} / {c.get('failed', 0)} / {c.get('total', r.lines)}"
                  if c else f"– / – / {r.lines}")
        rows.append([r.batch_id or f"({r.id}, not accepted)", r.status, counts,
                     str(r.samples), _time(r.created), _time(r.updated),
                     "yes" if r.collected else "no"])
    # the id is what `batches cancel --id` needs: never cut; the times go first
    print_table([Column("batch", justify="left"), Column("status", drop=4),
                 Column("done/failed/total"), Column("samples", drop=3),
                 Column("submitted", drop=1), Column("updated", drop=2), Column("collected")],
                rows, title=f"batches of {args.out}")
    live = [r for r in records if r.live]
    done = [r for r in records if not r.collected and not r.live]
    if live or done:
        con.print(f"{len(live)} in flight, {len(done)} finished and not yet collected: rerun "
                  "the run's command (with --batch) to collect them")
    for n in notes:
        con.print(f"[yellow]note:[/] {n}")
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    from .._sync import run_sync
    from ..errors import InputError, ProviderError

    store = _store(args.out)
    cancelled: list[str] = []
    failed: list[str] = []
    try:
        records = [r for r in store.batches() if r.live and r.batch_id is not None]
        if args.id:
            known = {r.batch_id for r in store.batches()}
            unknown = [i for i in args.id if i not in known]
            if unknown:
                raise InputError(f"no batch {unknown[0]} in {args.out}; `ensemble batches list "
                                 f"--out {args.out}` shows its batches")
            records = [r for r in records if r.batch_id in set(args.id)]
        cache: dict[tuple[str, str], Any] = {}

        async def cancel() -> None:
            try:
                await cancel_each()
            finally:
                await _close(cache)

        async def cancel_each() -> None:
            for rec in records:
                try:
                    info = await _api(rec, args, cache).cancel(rec.batch_id)
                except ProviderError as exc:
                    failed.append(f"{rec.batch_id} ({exc.reason})")
                    continue
                store.update_batch(rec.id, status=info.status, counts=info.counts)
                cancelled.append(rec.batch_id)

        run_sync(cancel())
    finally:
        store.close()
    msg = (f"cancelling {len(cancelled)} batch{'es' if len(cancelled) != 1 else ''}"
           + (f": {', '.join(cancelled)}" if cancelled else " (none in flight)")
           + ("; what they finished is collected, and the rest resubmitted, by a rerun of the "
              "run's command with --batch" if cancelled else ""))
    if failed:
        msg += f"; could not cancel {', '.join(failed)}"
    if args.json:
        emit_json({"cancelled": cancelled, "failed": failed, "message": msg})
    else:
        print(msg)
    return 1 if failed else 0


def _time(t: float | None) -> str:
    import time

    return "–" if not t else time.strftime("%m-%d %H:%M", time.localtime(t))
