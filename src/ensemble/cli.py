"""The `ensemble` command.

Start-up is kept cheap: this module and the command modules it registers import neither
litellm nor the numerical stack at module level; each command imports what it needs when run.
Every failure a user can cause ends as one line on stderr and a non-zero exit, no traceback.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import BatchesSubmitted, EnsembleError, InputError
from .registry import entry_points_of, plugin_skipped

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["build_parser", "main"]

# The core's subcommand modules (ensemble.commands); each defines register(subparsers). Other
# packages add commands through the entry-point group below (the evals: eval, compare,
# calibrate, view), so the core never imports them.
COMMANDS = ("theory", "sample", "testing", "models", "batches", "serve")
ENTRY_POINT_GROUP = "ensemble.commands"
# the order of `ensemble --help`; commands not named here follow, sorted
HELP_ORDER = ("theory", "sample", "testing", "eval", "compare", "calibrate", "view", "serve",
              "models", "batches", "schema")

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM: kill, docker stop, a cancelled CI job (ensemble._sync)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line naming the fix."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="ensemble",
        description=(
            "LLM ensemble voting under quantal response. "
            "λ is always in ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units; utility and regret in ±1 units."
        ),
    )
    parser.add_argument("--version", action="version", version=f"ensemble {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    modules: dict[str, Any] = {name: f"{__package__}.commands.{name}" for name in COMMANDS}
    modules.update(_plugin_commands(frozenset(modules)))
    rank = {name: i for i, name in enumerate(HELP_ORDER)}
    for name in sorted(modules, key=lambda n: (rank.get(n, len(rank)), n)):
        where = modules[name]
        if isinstance(where, str):
            importlib.import_module(where).register(sub)
            continue
        module, ep = where
        try:  # a plug-in's command: its failure costs one warning line, not the CLI
            module.register(sub)
        except Exception as exc:
            if ep.name not in _FAILED:
                _FAILED.add(ep.name)
                plugin_skipped(ep, ENTRY_POINT_GROUP, exc)
    return parser


_FAILED: set[str] = set()  # plug-in commands whose register() failed (warned once)


@functools.cache
def _plugin_commands(core: frozenset[str]) -> dict[str, tuple[Any, EntryPoint]]:
    """Command name -> (module, entry point), from the installed packages'
    "ensemble.commands" entry points, imported once per process; this package's own (the
    evals' commands) first, so a plug-in naming one of its commands or a core one is left out
    with one warning line, as is one that fails to import."""
    eps = sorted(entry_points_of(ENTRY_POINT_GROUP),
                 key=lambda ep: not _ours(ep.value))
    out: dict[str, tuple[Any, EntryPoint]] = {}
    for ep in eps:
        taken = out[ep.name][1] if ep.name in out else None
        if ep.name in core or (taken is not None and _ours(taken.value)):
            plugin_skipped(ep, ENTRY_POINT_GROUP,
                           InputError(f"{ep.name!r} is the name of a built-in command"))
        elif taken is not None:
            plugin_skipped(ep, ENTRY_POINT_GROUP, InputError(
                f"the command {ep.name!r} is already added by {taken.value}"))
        elif _ours(ep.value):
            out[ep.name] = (importlib.import_module(ep.value), ep)
        else:
            try:
                out[ep.name] = (ep.load(), ep)
            except Exception as exc:
                plugin_skipped(ep, ENTRY_POINT_GROUP, exc)
    return out


def _ours(value: str) -> bool:
    return value == __package__ or value.startswith(f"{__package__}.")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        target = getattr(args, "_parser", parser)
        target.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        result = func(args)
    except BatchesSubmitted as exc:  # --detach: not a failure
        _detached(exc, as_json=bool(getattr(args, "json", False)))
        return 0
    except EnsembleError as exc:
        print(f"ensemble: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        kept = ("no --store was given, so the samples drawn are not kept"
                if getattr(args, "store", "") is None
                else "completed samples are kept in the store")
        # a SIGTERM the command's runner turned into a KeyboardInterrupt (ensemble._sync.
        # Terminated; not imported here: start-up stays cheap)
        terminated = getattr(exc, "signum", None) == signal.SIGTERM
        print(f"ensemble: {'terminated (SIGTERM)' if terminated else 'interrupted'}; {kept}",
              file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_ERROR
    except RecursionError:
        # the last resort for an input nested deeper than Python reads (each reader of a
        # nested file or schema should say so itself)
        print("ensemble: error: an input is nested too deeply to read (thousands of levels "
              "of lists or objects); give a flatter one", file=sys.stderr)
        return EXIT_ERROR
    except UnicodeError as exc:
        # the last resort for text that is not UTF-8 where a reader did not check it (each
        # reader names its file; this names at least what was wrong)
        print(f"ensemble: error: {_unicode_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    return int(result or 0)


def _unicode_line(exc: UnicodeError) -> str:
    from .secrets import redact

    why = "not UTF-8"
    if isinstance(exc, (UnicodeDecodeError, UnicodeEncodeError)):
        why = f"{exc.reason} at position {exc.start}"
    return redact(f"an input is not valid UTF-8 text ({why}): a binary file, "
                  "a file in another encoding, or a lone surrogate such as \\ud800; save it "
                  "as UTF-8 and rerun")


def _detached(exc: BatchesSubmitted, *, as_json: bool) -> None:
    """What --detach prints: the batch ids and how to collect (JSON with --json)."""
    if as_json:
        from .jsonio import emit_json

        emit_json({"detached": True, "batches": exc.batch_ids, "message": _one_line(exc)})
    else:
        print(f"ensemble: {_one_line(exc)}", flush=True)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
