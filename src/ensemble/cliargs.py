"""The command line's shared parts, public for every package that adds a command: argparse value
types that reject bad input with a clear message, the provider and run-policy flags, status and
dry-run printers, JSON output (`emit_json`) and λ for people (`fmt_lam`).

Commands live in `ensemble.commands` (the core's) and in other packages, which register theirs
under the entry-point group "ensemble.commands" (the evals do: `evals.commands`); each module
has `register(subparsers)`. Keep module-level imports light: argparse only.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .jsonio import emit_json, to_jsonable

__all__ = [
    "add_mode_args", "add_option_args", "add_provider_args", "add_run_policy_args", "emit_json",
    "fmt_lam", "option_values",
    "lam_value", "mode_options", "nonneg_float", "nonneg_int", "positive_float", "positive_int",
    "price_pair", "print_dry_run", "probability", "provider_options", "rule_choices",
    "share_or_count", "status_printer", "stop_choices", "temperature", "to_jsonable",
]

_N = TypeVar("_N", int, float)

if TYPE_CHECKING:
    from .providers.options import ProviderOptions
    from .registry import Choices, Names
    from .sampling.batch_options import BatchOptions


def _value(text: str, convert: Callable[[str], _N], ok: Callable[[_N], bool], what: str) -> _N:
    """`convert(text)` if it converts and passes `ok`, else one message: expected `what`."""
    try:
        value = convert(text)
    except (ValueError, OverflowError):
        ok_ = False
    else:
        ok_ = ok(value)
    if not ok_:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _value(text, int, lambda v: v >= 1, "an integer >= 1")


def nonneg_int(text: str) -> int:
    """An integer >= 0."""
    return _value(text, int, lambda v: v >= 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _value(text, float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")


def nonneg_float(text: str) -> float:
    """A finite number >= 0."""
    return _value(text, float, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")


def lam_value(text: str) -> float:
    """A rationality λ >= 0; 'inf' allowed (the rational expert)."""
    return _value(text, float, lambda v: v >= 0, "a number >= 0 (or inf) for λ")


def temperature(text: str) -> float:
    """A sampling temperature: a finite number >= 0."""
    return _value(text, float, lambda v: math.isfinite(v) and v >= 0,
                  "a temperature (a finite number >= 0)")


def probability(text: str) -> float:
    """A number in [0, 1]."""
    return _value(text, float, lambda v: 0.0 <= v <= 1.0, "a probability in [0, 1]")


def share_or_count(text: str) -> float:
    """A share in [0, 1) or a count >= 1 (for --fail-on-error)."""
    return _value(text, float,
                  lambda v: math.isfinite(v) and v >= 0 and (v < 1 or v == int(v)),
                  "a share below 1 (e.g. 0.05) or a whole count (e.g. 3)")


def add_provider_args(p: argparse.ArgumentParser, *, model_required: bool = True) -> None:
    """--model and the provider options shared by sample, eval and calibrate (their flags
    made from the options' one declaration, `ensemble.providers.options.OPTIONS`)."""
    p.add_argument("--model", required=model_required,
                   help="litellm model string (openai/gpt-4o-mini, ollama/llama3, ...) or "
                        "local / local:<path.gguf>")
    g = p.add_argument_group("provider and limits (shared by every run on the same endpoint)")
    add_option_args(g, "run")


def add_option_args(group: Any, place: str, *, unset: bool = False,
                    defaults: Mapping[str, str] | None = None,
                    helps: Mapping[str, str] | None = None,
                    key_env: str | None = None) -> None:
    """The flags of the provider options given in `place` ("run", "serve", "batches"), each
    from its declaration (`ensemble.providers.options.Option`): its flag, value (checked as
    the option checks it: `argument --rpm: must be a finite number > 0, got '-1'`), help and
    default, the option's name as the parsed attribute. `unset`: a flag not given parses to
    None, its default left to whoever reads the flags (`ensemble serve`'s config); `defaults`:
    the default to show instead of the option's own; `helps`: a place's own help for an
    option; `key_env`: the key given by the name of its environment variable, with this flag
    (`ensemble serve --upstream-key-env`; parsed as `api_key_env`), not the key itself."""
    from .providers.options import options_in

    defaults, helps = defaults or {}, helps or {}
    for opt in options_in(place):
        shown = defaults.get(opt.name)
        if shown is None and opt.default is not None:
            shown = f"{opt.default:g}" if isinstance(opt.default, float) else str(opt.default)
        text = helps.get(opt.name, opt.help) + (f" (default {shown})" if shown else "")
        if opt.secret and key_env is not None:
            group.add_argument(key_env, dest=f"{opt.name}_env", metavar="VAR", help=text)
            continue
        group.add_argument(opt.flag, dest=opt.name, type=_option_type(opt.name),
                           default=None if unset else opt.default, metavar=opt.metavar,
                           help=text)


def option_values(args: argparse.Namespace, place: str) -> dict[str, Any]:
    """The options given as flags (`add_option_args(group, place, ...)`), by their fields in a
    file (a key given by its variable: `api_key_env`); those not given left out."""
    from .providers.options import options_in

    out: dict[str, Any] = {}
    for opt in options_in(place):
        field = f"{opt.name}_env" if opt.secret else opt.name  # a file never holds a key
        value = getattr(args, field, None)
        if value is not None:
            out[field] = value
    return out


def _option_type(name: str) -> Callable[[str], Any]:
    """argparse's `type` for a declared option: its value, or its problem for argparse to
    print after the flag."""
    def convert(text: str) -> Any:
        from .providers.options import option

        try:
            return option(name).kind.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name  # argparse names a failed type by it in some messages
    return convert


def price_pair(text: str) -> tuple[float, float]:
    """IN,OUT: two finite numbers >= 0."""
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected IN,OUT (USD per 1,000 prompt and completion tokens), got {text!r}"
        ) from None
    if not (math.isfinite(a) and math.isfinite(b) and a >= 0 and b >= 0):
        raise argparse.ArgumentTypeError(f"expected two finite prices >= 0, got {text!r}")
    return a, b


def add_run_policy_args(p: argparse.ArgumentParser) -> None:
    """--fail-on-error and --max-cost (eval, calibrate)."""
    p.add_argument("--fail-on-error", type=share_or_count, metavar="F",
                   help="accept up to this share (below 1) or count (1 or more) of questions "
                        "failing for good; they are left out of every estimate and listed")
    p.add_argument("--max-cost", type=positive_float, metavar="USD",
                   help="stop new requests before the run's cost passes this (what its samples "
                        "already in the store cost counts too: the cap is the run's, not each "
                        "invocation's); rerun with a higher cap to continue from the store")
    p.add_argument("--dry-run", action="store_true",
                   help="print the requests, tokens and price the run would spend, and exit "
                        "without sending anything")


def print_dry_run(doc: dict[str, Any]) -> None:
    """The dry run's count, for people."""
    from rich.console import Console

    cost = ("unknown" if doc["cost_usd_max"] is None else f"at most ${doc['cost_usd_max']:.4f}")
    ct = doc["completion_tokens_max"]
    Console().print(
        f"dry run: {_count(doc['samples_missing'], 'sample')} to draw ({doc['samples_stored']} "
        f"already stored) in {_count(doc['requests'], 'request')}; {doc['prompt_tokens']} "
        f"prompt tokens{_by(doc)}, "
        f"{'no bound on' if ct is None else 'at most ' + str(ct)} completion tokens; cost "
        f"{cost} ({doc['price']}). Nothing was sent.")


def _by(doc: dict[str, Any]) -> str:
    """` (by tiktoken)`: which counter counted the prompt tokens, where one did."""
    by = doc.get("prompt_tokens_by")
    return f" (by {by})" if by and by != "none counted" else ""


def _count(n: int, word: str) -> str:
    """`1 sample`, `2 samples`."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def add_mode_args(p: argparse.ArgumentParser) -> None:
    """--batch, --detach and --router (sample, eval, calibrate)."""
    g = p.add_argument_group("batch mode and routing (docs/batch.md)")
    g.add_argument("--batch", action="store_true",
                   help="draw the missing samples through the provider's Batch API (about half "
                        "the price, done within 24 h); a rerun re-attaches to batches in flight")
    g.add_argument("--detach", action="store_true",
                   help="with --batch: submit, print the batch ids and exit at once; rerun the "
                        "same command to collect")
    g.add_argument("--batch-poll", type=positive_float, default=2.0, metavar="S",
                   help="with --batch: seconds before the first status check; the interval "
                        "grows to 5 minutes (default 2)")
    g.add_argument("--router", metavar="CONFIG.yaml",
                   help="spread online requests over several deployments or keys with litellm's "
                        "Router (its model_list format; --model names the model group)")


def mode_options(args: argparse.Namespace) -> tuple[BatchOptions | None, str | None]:
    """(BatchOptions or None, router config path or None) of the parsed mode arguments."""
    from .errors import InputError

    batch = getattr(args, "batch", False)
    if getattr(args, "detach", False) and not batch:
        raise InputError("--detach submits batches: use it with --batch")
    router = getattr(args, "router", None)
    if router and batch:
        raise InputError("--router spreads online requests over deployments; a batch goes to "
                         "one endpoint: use --batch with --api-base, or --router without --batch")
    if router and getattr(args, "api_base", None):
        raise InputError("--router takes each deployment's api_base from its config; drop "
                         "--api-base")
    if not batch:
        return None, router
    from .sampling.batch_options import BatchOptions

    return BatchOptions(detach=args.detach, poll_initial=args.batch_poll), router


def provider_options(args: argparse.Namespace, place: str = "run") -> ProviderOptions:
    """The `ProviderOptions` of the parsed flags of `add_option_args(group, place)`."""
    from .providers.options import ProviderOptions, options_in

    given = {o.name: getattr(args, o.name) for o in options_in(place) if hasattr(args, o.name)}
    return ProviderOptions(**{k: v for k, v in given.items()
                              if v is not None or k in ("rpm", "tpm")})


def status_printer(line: str) -> None:
    """Where a run's "waiting: ..." lines go: one line on stderr, terminal or not."""
    import sys

    print(f"ensemble: {line}", file=sys.stderr, flush=True)


def fmt_lam(lam: float | None) -> str:
    """λ for people: '∞' or '−∞' for an infinite value."""
    if lam is None or (isinstance(lam, float) and math.isinf(lam)):
        return "−∞" if lam is not None and lam < 0 else "∞"
    return f"{lam:.4g}"


def rule_choices(**filters: bool) -> Choices:
    """The registered aggregation rules (`ensemble.rules.aggregator_names(**filters)`), for a
    flag's choices, read when a value is checked or the help printed (so building the parser
    loads no rule): give the flag a metavar and write %(choices)s in its help."""
    from .registry import Choices

    def names() -> Names:
        from .rules import aggregator_names

        return aggregator_names(**filters)

    return Choices(names)


def stop_choices() -> Choices:
    """The registered stopping rules, for a flag's choices and help (read as `rule_choices`)."""
    from .registry import Choices

    def names() -> Names:
        from .stopping import stop_rule_names  # the package imports numpy: only when asked

        return stop_rule_names()

    return Choices(names)
