"""How to reach a provider and how hard to push it: five frozen, validated values, one per
concept (as httpx separates `Timeout` and `Limits`), and `ProviderOptions` holding one of each.

- `Endpoint`: where the provider is and the key (`repr` hides it; it is registered for
  redaction the moment it is given);
- `Limits`: requests in flight and per minute, tokens per minute (the endpoint's limiter);
- `Retry`: seconds per attempt, attempts for transient errors, seconds per sample in all;
- `FailurePolicy`: consecutive permanent failures that stop a run;
- `CostPolicy`: the price of a model whose price litellm does not know.

`ProviderOptions` is what `Sampler`, `Ensemble`, the evals and the CLI pass around instead of a
row of keyword arguments; it is built from the parts or from their fields as keywords
(`ProviderOptions(api_base=..., max_concurrency=8)`, the names every user-facing signature
takes), and each consumer reads its part (`options.limits`, `options.retry`, ...). Every value
is validated once, when built: every number finite and positive, the api_base a real http(s)
URL.

Each option is declared once, in `OPTIONS` (an `Option`: its name, part, kind of value,
default, flag and words): the parts validate their fields by it, and the command line's flags
(`ensemble.cliargs.add_option_args`), `ensemble serve`'s config fields and a run spec's member
fields are made from it, so a problem is said in the user's own terms: the flag on the command
line (`argument --api-base: ...`), the field in a file (`models.vote.api_base: ...`), the
keyword in Python (`api_base ...`).

The retry policy (see docs/sampling.md):
- 429, and 503/529 "overloaded" replies, are backpressure: the endpoint's shared limiter slows
  down and every request to it waits out the Retry-After; the request is retried without using
  up `max_attempts`, until `max_retry_time` (per sample) runs out.
- Other transient errors (5xx, timeouts, dropped connections, malformed replies) get at most
  `max_attempts` attempts with exponential backoff and jitter.
- 400/401/403/404 fail at once; 401/403 and an unreachable or wrong endpoint stop the run, as do
  `max_failures` consecutive permanent failures.
"""

from __future__ import annotations

import difflib
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypedDict
from urllib.parse import urlparse

from ..errors import InputError
from .http import Transport

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

__all__ = ["OPTIONS", "CostPolicy", "Endpoint", "FailurePolicy", "Kind", "Limits", "Option",
           "ProviderKwargs", "ProviderOptions", "Retry", "check_field", "check_keywords", "option",
           "option_fields", "options_in", "per_1k_cost", "validate_api_base"]


class Kind:
    """A kind of option value: its type in files (`annotation`, `bounds` for the JSON schema),
    what it expects in words, and `check(value)`: the value (from Python, a file or a flag's
    text: `parse`), or ValueError saying the problem without naming the option (each place
    names it in its own terms)."""

    def __init__(self, annotation: Any, expects: str, convert: Any, *,
                 bounds: Mapping[str, Any] | None = None, parse: Any = None,
                 echo: bool = True) -> None:
        self.annotation = annotation
        self.expects = expects
        self.bounds = dict(bounds or {})
        self._convert = convert
        self._parse = parse
        self._echo = echo  # a key is never quoted back

    def _problem(self, value: Any) -> ValueError:
        got = f", got {value!r}" if self._echo else ""
        return ValueError(f"must be {self.expects}{got}")

    def check(self, value: Any) -> Any:
        got = self._convert(value)
        if got is None:
            raise self._problem(value)
        return got

    def parse(self, text: str) -> Any:
        """A flag's text as the value (its problem named as `check`'s)."""
        if self._parse is None:
            return self.check(text)
        try:
            value = self._parse(text)
            if self._convert(value) is None:
                raise ValueError(text)
        except (TypeError, ValueError, OverflowError):
            raise self._problem(text) from None
        return self.check(value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive_int(value: Any) -> int | None:
    return value if _number(value) and isinstance(value, int) and value >= 1 else None


def _positive_float(value: Any) -> float | None:
    ok = _number(value) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def _key(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _price(value: Any) -> tuple[float, float] | None:
    try:
        pin, pout = (float(x) for x in value)
    except (TypeError, ValueError):
        return None
    if isinstance(value, str) or not all(math.isfinite(x) and x >= 0 for x in (pin, pout)):
        return None
    return pin, pout


def _url(value: Any) -> str:
    return api_base_problem(value)


POSITIVE_INT = Kind(int, "an integer >= 1", _positive_int, bounds={"ge": 1}, parse=int)
POSITIVE_NUMBER = Kind(float, "a finite number > 0", _positive_float, bounds={"gt": 0},
                       parse=float)
URL = Kind(str, "an http(s) base URL such as http://127.0.0.1:8000/v1", _url)
KEY = Kind(str, "a non-empty key", _key, echo=False)
PRICE = Kind(tuple[float, float], "two finite prices >= 0 (USD per 1,000 prompt and "
             "completion tokens)", _price, parse=lambda text: text.split(","))


@dataclass(frozen=True)
class Option:
    """One provider option, declared once.

    name:    its keyword in Python and its field in a spec or a serve config.
    part:    the `ProviderOptions` part that holds it.
    kind:    what values it takes (`Kind`).
    default: its value when not given (None: the provider's own, or no bound).
    flag:    its command-line flag; `metavar` the flag's value in the help.
    help:    what it is, for a flag's help and a field's description.
    places:  where else than Python it is given: "run" (sample, eval, calibrate), "serve"
             (`ensemble serve`'s flags and config), "member" (a spec's member), "batches"
             (`ensemble batches`).
    secret:  a key: files and `ensemble serve` name the environment variable holding it
             (`<name>_env`), never the key.
    """

    name: str
    part: str
    kind: Kind
    default: Any
    flag: str
    help: str
    metavar: str | None = None
    places: tuple[str, ...] = ("run", "serve")
    secret: bool = False

    def check(self, value: Any) -> Any:
        """The value, or InputError naming the option by its keyword (None passes where the
        option's default is None)."""
        if value is None and self.default is None:
            return None
        try:
            return self.kind.check(value)
        except ValueError as exc:
            raise InputError(f"{self.name} {exc}") from None


OPTIONS: tuple[Option, ...] = (
    Option("api_base", "endpoint", URL, None, "--api-base",
           "OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1",
           places=("run", "serve", "member")),
    Option("api_key", "endpoint", KEY, None, "--api-key",
           "API key (default: the provider's environment variable, e.g. OPENAI_API_KEY)",
           places=("run", "serve", "batches"), secret=True),
    Option("max_concurrency", "limits", POSITIVE_INT, 16, "--max-concurrency",
           "requests in flight at most"),
    Option("rpm", "limits", POSITIVE_NUMBER, None, "--rpm", "requests per minute at most"),
    Option("tpm", "limits", POSITIVE_NUMBER, None, "--tpm", "tokens per minute at most"),
    Option("timeout", "retry", POSITIVE_NUMBER, 60.0, "--timeout",
           "seconds to wait for one reply", places=("run", "serve", "batches")),
    Option("max_attempts", "retry", POSITIVE_INT, 6, "--max-attempts",
           "attempts per request for transient errors; rate limits do not count"),
    Option("max_retry_time", "retry", POSITIVE_NUMBER, 900.0, "--max-retry-time",
           "seconds one sample may spend waiting and retrying, rate limits included"),
    Option("max_failures", "failures", POSITIVE_INT, 10, "--max-failures",
           "stop after this many requests in a row fail for good", places=("run",)),
    Option("price_per_1k", "cost", PRICE, None, "--price-per-1k-tokens",
           "USD per 1,000 prompt and completion tokens, for a model litellm has no price for "
           "(self-hosted, the simulator); prices --batch lines too, as given (no discount: "
           "give the Batch API's rates for a batch run)", metavar="IN,OUT",
           places=("run", "serve", "member")),
)
_BY_NAME = {o.name: o for o in OPTIONS}


def option(name: str) -> Option:
    """The declared option of this keyword name."""
    return _BY_NAME[name]


def options_in(place: str) -> tuple[Option, ...]:
    """The options given in `place` ("run", "serve", "member", "batches"), in declared order."""
    return tuple(o for o in OPTIONS if place in o.places)


def check_field(name: str, value: Any) -> Any:
    """A file's value of the declared option `name`, for a pydantic validator of a field
    spelled in a model (a spec's member): the value, or pydantic's error carrying the
    option's problem, which the file's reader names by the field's path. Imports pydantic."""
    from pydantic_core import PydanticCustomError

    if value is None:
        return None
    try:
        return option(name).kind.check(value)
    except ValueError as exc:
        raise PydanticCustomError("option", str(exc)) from None


def option_fields(place: str) -> dict[str, Any]:
    """The fields of a file's pydantic model for the options given in `place`
    (`pydantic.create_model(name, **option_fields("serve"))`): each optional (None: not given),
    described and checked as declared, so that a problem is the field's own
    (`models.vote.rpm: must be a finite number > 0, got -1`); a key by the environment
    variable holding it (`api_key_env`), never the key. Imports pydantic (files only)."""
    from typing import Annotated, Optional

    from pydantic import BeforeValidator, Field

    def checker(opt: Option) -> Any:
        return lambda value: check_field(opt.name, value)

    schema = {"ge": "minimum", "gt": "exclusiveMinimum"}
    out: dict[str, Any] = {}
    for opt in options_in(place):
        if opt.secret:
            out[f"{opt.name}_env"] = (Optional[str], Field(  # noqa: UP045 - a runtime type
                None, description="environment variable holding the key (the key itself is "
                                  "never in a file)"))
            continue
        bounds = {schema[k]: v for k, v in opt.kind.bounds.items()}
        out[opt.name] = (Annotated[Optional[opt.kind.annotation],  # noqa: UP045
                                   BeforeValidator(checker(opt))],
                         Field(None, description=opt.help, json_schema_extra=bounds or None))
    return out


class ProviderKwargs(TypedDict, total=False):
    """The keyword arguments that build `ProviderOptions` (for `**kwargs` signatures)."""

    api_base: str | None
    api_key: str | None
    timeout: float
    max_concurrency: int
    rpm: float | None
    tpm: float | None
    max_attempts: int
    max_retry_time: float
    max_failures: int
    price_per_1k: tuple[float, float] | None
    transport: Transport | None


@dataclass(frozen=True)
class Endpoint:
    """Where the provider is and how to reach it.

    api_base:  an OpenAI-compatible base URL (None: the provider's own).
    api_key:   the key (None: the provider's environment variable, e.g. OPENAI_API_KEY).
    transport: how the HTTP clients of OpenAI-compatible requests connect
               (`ensemble.providers.http.Transport`: the openai provider's aiohttp session,
               the openai SDK's client, litellm's through its `client=`), e.g.
               `ensemble.testing.InProcessTransport`: the simulated server in this process.
               None: the network. Never written to files.
    """

    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    transport: Transport | None = None

    def __post_init__(self) -> None:
        if self.transport is not None and not isinstance(self.transport, Transport):
            raise InputError(
                f"transport must be an ensemble.providers.http.Transport (connector, proxy, "
                f"httpx_transport), such as SimulatedServer.transport(), got "
                f"{type(self.transport).__name__}: an httpx transport alone cannot carry the "
                "openai provider's aiohttp requests")
        _checked(self)
        if self.api_key is not None:
            from ..secrets import register

            register(self.api_key)

    def __repr__(self) -> str:  # the key never appears, set or not
        key = "***" if self.api_key else None
        via = f", transport={self.transport!r}" if self.transport is not None else ""
        return f"Endpoint(api_base={self.api_base!r}, api_key={key!r}{via})"


@dataclass(frozen=True)
class Limits:
    """How hard to push the endpoint (its limiter; shared by every Sampler and Ensemble of the
    process that uses the same endpoint and key, the tightest of each applying).

    max_concurrency: requests in flight, at most.
    rpm, tpm:        requests / tokens per minute, at most (None: learned from 429s only).
    """

    max_concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None

    def __post_init__(self) -> None:
        _checked(self)


@dataclass(frozen=True)
class Retry:
    """The time and the attempts a request gets.

    timeout:        seconds per request attempt.
    max_attempts:   attempts per request for transient errors (not counting rate limits).
    max_retry_time: seconds one sample may spend waiting and retrying, rate limits included.
    """

    timeout: float = 60.0
    max_attempts: int = 6
    max_retry_time: float = 900.0

    def __post_init__(self) -> None:
        _checked(self)


@dataclass(frozen=True)
class FailurePolicy:
    """When a run stops: after `max_failures` consecutive permanent failures (scattered
    refusals don't stop it)."""

    max_failures: int = 10

    def __post_init__(self) -> None:
        _checked(self)


def per_1k_cost(price_per_1k: tuple[float, float], prompt_tokens: int,
                completion_tokens: int) -> float:
    """USD for these tokens at (prompt, completion) USD per 1,000 tokens."""
    return (prompt_tokens * price_per_1k[0] + completion_tokens * price_per_1k[1]) / 1000.0


@dataclass(frozen=True)
class CostPolicy:
    """What samples cost. price_per_1k: (prompt, completion) USD per 1,000 tokens, for a model
    whose price litellm does not know (a self-hosted or simulated one); None: litellm's price
    table.

    A given price is applied as given to online replies and Batch API lines alike (`cost`):
    no batch discount is applied to it (nor guessed anywhere: a model's batch rates come from
    the price table or stay unknown). For a batch run at the Batch API's rates, typically half
    the online ones, give those rates."""

    price_per_1k: tuple[float, float] | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD for these tokens at `price_per_1k`, online or batch; None: no price given."""
        if self.price_per_1k is None:
            return None
        return per_1k_cost(self.price_per_1k, prompt_tokens, completion_tokens)

    def __post_init__(self) -> None:
        _checked(self)


# the parts of ProviderOptions, each with the keyword names its fields go by
_PARTS: dict[str, type[Any]] = {"endpoint": Endpoint, "limits": Limits, "retry": Retry,
                                "failures": FailurePolicy, "cost": CostPolicy}
_PART_OF: dict[str, str] = {f.name: part for part, cls in _PARTS.items() for f in fields(cls)}


@dataclass(frozen=True, init=False)
class ProviderOptions:
    """Where the provider is and the limits to respect: one `Endpoint`, `Limits`, `Retry`,
    `FailurePolicy` and `CostPolicy` (see the module docstring).

    Built from the parts, from their fields as keywords, or both (a keyword replaces its
    part's field): `ProviderOptions(api_base=url, max_concurrency=8)`,
    `ProviderOptions(limits=Limits(max_concurrency=8), retry=Retry(timeout=30))`.
    """

    endpoint: Endpoint
    limits: Limits
    retry: Retry
    failures: FailurePolicy
    cost: CostPolicy

    def __init__(self, *, endpoint: Endpoint | None = None, limits: Limits | None = None,
                 retry: Retry | None = None, failures: FailurePolicy | None = None,
                 cost: CostPolicy | None = None, **kwargs: Unpack[ProviderKwargs]) -> None:
        check_keywords(kwargs, tuple(_PART_OF), what="provider option")
        given: dict[str, Any] = {"endpoint": endpoint, "limits": limits, "retry": retry,
                                 "failures": failures, "cost": cost}
        for name, cls in _PARTS.items():
            part = given[name]
            if part is not None and not isinstance(part, cls):
                raise InputError(f"{name}= takes {cls.__name__}(...), got {part!r}")
            mine = {k: v for k, v in kwargs.items() if _PART_OF[k] == name}
            if part is None:
                part = cls(**mine)
            elif mine:
                part = replace(part, **mine)
            object.__setattr__(self, name, part)

    def __repr__(self) -> str:  # the key never appears (Endpoint's repr hides it)
        return (f"ProviderOptions(endpoint={self.endpoint!r}, limits={self.limits!r}, "
                f"retry={self.retry!r}, failures={self.failures!r}, cost={self.cost!r})")

    @classmethod
    def build(cls, options: ProviderOptions | None = None, /, **kwargs: Any) -> ProviderOptions:
        """`options` (or the defaults) updated with keyword arguments, names checked."""
        if not kwargs:  # the common case (a Sampler per decision): nothing to check
            return options if options is not None else cls()
        check_keywords(kwargs, cls.names(), what="provider option")
        kwargs = {k: v for k, v in kwargs.items() if v is not None or k in ("rpm", "tpm")}
        if options is None:
            return cls(**kwargs)
        return options.replace(**kwargs) if kwargs else options

    def replace(self, **kwargs: Unpack[ProviderKwargs]) -> ProviderOptions:
        """A copy with these fields (by their keyword names) replaced."""
        return ProviderOptions(endpoint=self.endpoint, limits=self.limits, retry=self.retry,
                               failures=self.failures, cost=self.cost, **kwargs)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The keyword names of the parts' fields (what user-facing signatures take)."""
        return tuple(_PART_OF)

    def public(self) -> dict[str, Any]:
        """The options as one flat dict for files and reports: the key reduced to a
        fingerprint, the transport left out."""
        from ..secrets import fingerprint

        out = {k: getattr(getattr(self, part), k) for k, part in _PART_OF.items()
               if k not in ("api_key", "transport")}
        key = self.endpoint.api_key
        out["api_key"] = None if key is None else f"fingerprint:{fingerprint(key)}"
        return out


def _checked(part: Any) -> None:
    """Check a part's declared fields (`OPTIONS`), each value normalised in place."""
    for f in fields(part):
        opt = _BY_NAME.get(f.name)
        if opt is not None:
            object.__setattr__(part, f.name, opt.check(getattr(part, f.name)))


def api_base_problem(url: Any) -> str:
    """An http(s) URL with a host, normalised (no trailing slash), or ValueError saying what
    is wrong with it and what a base URL looks like (never echoing a credential, a query or a
    fragment)."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("must be a URL such as http://127.0.0.1:8000/v1")
    url = url.strip()
    parsed = urlparse(url)
    if parsed.username is not None or parsed.password is not None:
        # never echoed: the part before "@" is a credential. aiohttp refuses such a URL
        # together with the Authorization header, so it could never work either.
        host = parsed.hostname or "the host"
        raise ValueError(f"carries a user name or password (USER:PASSWORD@{host}); "
                         "credentials in the URL are refused: give the base URL without them "
                         "and the key with --api-key / api_key= (or the provider's environment "
                         "variable)")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL; give the API's base URL, "
                         "e.g. http://127.0.0.1:8000/v1 or https://api.example.com/v1")
    try:
        parsed.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise ValueError(f"{url!r} has an invalid port") from None
    if parsed.fragment or url.endswith("#"):
        # never echoed: a fragment is never sent to a server (and the routes would be appended
        # to it), so whatever is there does not belong in the run's files either
        raise ValueError(f"{url.split('#', 1)[0]!r}#... carries a #fragment, which is never "
                         "sent to a server: give the base URL without it")
    if parsed.query or "?" in url:
        # never echoed: a query often carries a key, and the run's files record the base URL;
        # the routes are appended to the path, so a query would sit in the middle of each one
        raise ValueError(f"{url.split('?', 1)[0]!r}?... carries a ?query, which would end up "
                         "in the middle of every request's URL and in the files that record the "
                         "endpoint: give "
                         "the base URL without it (a key goes in --api-key / api_key=)")
    return url.rstrip("/")


def validate_api_base(url: Any) -> str:
    """An http(s) URL with a host, or InputError saying what a base URL looks like."""
    return str(option("api_base").check(url))


def check_keywords(given: Mapping[str, Any], known: tuple[str, ...] | list[str], *,
                   what: str = "keyword argument", where: str = "") -> None:
    """Raise InputError for a keyword not in `known`, suggesting the closest known name."""
    unknown = [k for k in given if k not in known]
    if not unknown:
        return
    name = unknown[0]
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    place = f" for {where}" if where else ""
    raise InputError(f"unknown {what} {name!r}{place}{hint} (provider-specific parameters go "
                     "through extra_body={...})")
