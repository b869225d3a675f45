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

__all__ = ["CostPolicy", "Endpoint", "FailurePolicy", "Limits", "ProviderKwargs",
           "ProviderOptions", "Retry", "check_keywords", "per_1k_cost", "validate_api_base"]


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
        if self.api_base is not None:
            object.__setattr__(self, "api_base", validate_api_base(self.api_base))
        if self.api_key is not None:
            if not isinstance(self.api_key, str) or not self.api_key.strip():
                raise InputError("api_key must be a non-empty string (or None to read the "
                                 "provider's environment variable)")
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
        _positive_int("max_concurrency", self.max_concurrency)
        if self.rpm is not None:
            _positive_number("rpm", self.rpm)
        if self.tpm is not None:
            _positive_number("tpm", self.tpm)


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
        _positive_number("timeout", self.timeout)
        _positive_int("max_attempts", self.max_attempts)
        _positive_number("max_retry_time", self.max_retry_time)


@dataclass(frozen=True)
class FailurePolicy:
    """When a run stops: after `max_failures` consecutive permanent failures (scattered
    refusals don't stop it)."""

    max_failures: int = 10

    def __post_init__(self) -> None:
        _positive_int("max_failures", self.max_failures)


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
        if self.price_per_1k is None:
            return
        try:
            pin, pout = (float(x) for x in self.price_per_1k)
        except (TypeError, ValueError):
            raise InputError("price_per_1k must be (prompt, completion) USD per 1,000 "
                             f"tokens, got {self.price_per_1k!r}") from None
        if not (math.isfinite(pin) and math.isfinite(pout) and pin >= 0 and pout >= 0):
            raise InputError(f"price_per_1k must be finite and >= 0, got {self.price_per_1k!r}")
        object.__setattr__(self, "price_per_1k", (pin, pout))


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


def _positive_number(name: str, value: Any) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and value > 0
    if not ok:
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name} must be an integer >= 1, got {value!r}")


def validate_api_base(url: Any) -> str:
    """An http(s) URL with a host, or InputError saying what a base URL looks like."""
    if not isinstance(url, str) or not url.strip():
        raise InputError("api_base must be a URL such as http://127.0.0.1:8000/v1")
    url = url.strip()
    parsed = urlparse(url)
    if parsed.username is not None or parsed.password is not None:
        # never echoed: the part before "@" is a credential. aiohttp refuses such a URL
        # together with the Authorization header, so it could never work either.
        host = parsed.hostname or "the host"
        raise InputError(f"api_base carries a user name or password (USER:PASSWORD@{host}); "
                         "credentials in the URL are refused: give the base URL without them "
                         "and the key with --api-key / api_key= (or the provider's environment "
                         "variable)")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InputError(f"api_base {url!r} is not an http(s) URL; give the API's base URL, "
                         "e.g. http://127.0.0.1:8000/v1 or https://api.example.com/v1")
    try:
        parsed.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise InputError(f"api_base {url!r} has an invalid port") from None
    if parsed.fragment or url.endswith("#"):
        # never echoed: a fragment is never sent to a server (and the routes would be appended
        # to it), so whatever is there does not belong in the run's files either
        raise InputError(f"api_base {url.split('#', 1)[0]!r}#... carries a #fragment, which "
                         "is never sent to a server: give the base URL without it")
    return url.rstrip("/")


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
