"""What `ensemble serve` serves: public model names mapped to ensembles (pydantic, YAML).

    host: 127.0.0.1            # the default; anything else must be asked for
    port: 8000
    api_key_env: ENSEMBLE_SERVE_API_KEY   # clients must send this key (optional)
    max_queue: 256             # requests admitted at once; past it 429 with Retry-After
    request_timeout: 300       # seconds per request; past it 504
    store: runs/serve.sqlite   # keep every sample drawn (optional)
    max_cost: 25.0             # USD the endpoint may spend (fleet-wide with a fleet); then 429
    drain_timeout: 30          # seconds a SIGTERM waits for the votes accepted to finish
    fleet:                     # replicas sharing limits, vote cache and spend (docs/serve.md)
      redis_url_env: ENSEMBLE_REDIS_URL   # or redis_url: redis://host:6379/0
      replicas: 3              # for local shares (limit ÷ replicas) while Redis is lost
      on_redis_down: refuse    # at start: refuse (one line) or local (local shares)
    models:
      vote-mini:               # what a request's `model` names
        model: openai/gpt-4o-mini
        api_key_env: OPENAI_API_KEY
        n: 5
        temperature: 0.7
        choices: [A, B, C, D, E]
        max_concurrency: 64    # requests in flight upstream, at most (all requests share it)
        max_request_n: 10      # a request's extra_body {"ensemble": {"n": ...}} up to this
      mixed:
        members:
          - {model: openai/gpt-4o, n: 1, temperature: 0.3, lam: 4.0}
          - {model: openai/gpt-4o-mini, n: 4, temperature: 1.0, lam: 1.5}
        aggregator: lam-weighted

Upstream keys are named by environment variable (`api_key_env`), never written in the file:
they stay in the server's environment and never reach a client or a log.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from ..errors import InputError
from ..providers.options import option_fields
from ..rules import DEFAULT_AGGREGATOR
from ..wording import unprintable

__all__ = ["LOOPBACK", "REDIS_URL_ENV", "SERVE_KEY_ENV", "SERVE_MAX_CONCURRENCY",
           "EndpointConfig", "FleetConfig", "MemberConfig", "ServeConfig", "ServedModel",
           "load_config", "parse_config"]

LOOPBACK = "127.0.0.1"
SERVE_KEY_ENV = "ENSEMBLE_SERVE_API_KEY"
REDIS_URL_ENV = "ENSEMBLE_REDIS_URL"
# Requests in flight to one upstream, all clients together, unless a model says otherwise.
# A served endpoint stands in front of many clients: at 8 (the old default) 32 clients of a
# 100 ms upstream got half the rate they got calling it directly (issue 38). 64 lets 64
# decisions (n samples each in one request) be in flight; the provider's own bound (a local
# model's slots) and the limiter's backoff on 429s still apply below it.
SERVE_MAX_CONCURRENCY = 64


# the provider options a served model takes, declared once (`ensemble.providers.options`):
# their fields made from the declaration (mypy sees a plain model)
if TYPE_CHECKING:
    _Upstream = BaseModel
else:
    _Upstream = create_model("_Upstream", **option_fields("serve"))


class EndpointConfig(_Upstream):
    """Where an upstream model is and how hard to push it: the provider options given in
    "serve" (`ensemble.providers.options.OPTIONS`: api_base, api_key_env, max_concurrency,
    rpm, tpm, timeout, max_attempts, max_retry_time, price_per_1k), each checked as declared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def provider_options(self) -> dict[str, Any]:
        """The keyword arguments of `ProviderOptions` (the key read from its variable;
        `max_concurrency` the endpoint's default, `SERVE_MAX_CONCURRENCY`, unless given)."""
        out: dict[str, Any] = {k: getattr(self, k) for k in EndpointConfig.model_fields
                               if getattr(self, k) is not None}
        out.setdefault("max_concurrency", SERVE_MAX_CONCURRENCY)
        env = out.pop("api_key_env", None)
        if env:
            key = os.environ.get(env)
            if not key:
                raise InputError(f"api_key_env names {env}, which is not set: "
                                 f"export {env}=... before `ensemble serve`")
            out["api_key"] = key
        return out


class MemberConfig(EndpointConfig):
    """One member of a mixed ensemble: a model at one temperature, n votes, its own endpoint."""

    model: str
    n: int = Field(default=1, ge=1)
    temperature: float = Field(default=0.7, ge=0)
    lam: float | None = None
    calibration: str | None = None


class CostPriorConfig(BaseModel):
    """A joint prior given to the cost rule instead of fitting one from pilots: nodes `q` (one
    row per node, one share per member) and their weights `w` (`ensemble.cost.JointPrior`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    q: list[list[Annotated[float, Field(ge=0, le=1)]]] = Field(min_length=1)
    w: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(min_length=1)


class CostConfig(BaseModel):
    """The cost rule of a served ensemble (`stop: cost`; docs/adaptive.md): dollars a right
    decision is worth, or the accuracy it may lose against a reference; the fields of
    `ensemble.cost.spec.CostSpec`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    target_loss: float | None = Field(default=None, gt=0, lt=1)
    reference: Literal["strongest", "fixed"] = "strongest"
    credit: Literal["reference", "qr"] = "reference"
    pilot: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None, min_length=1, description="votes per member on a pilot question, one "
                                                "per member (default 2 each)")
    pilot_questions: int = Field(default=30, ge=1)
    prices: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(
        default=None, min_length=1, description="USD per vote, one per member (default: each "
                                                "member's token usage at its price_per_1k)")
    prior: CostPriorConfig | None = Field(default=None, description="a joint prior instead "
                                          "of pilots")
    default_prior: CostPriorConfig | None = Field(
        default=None, description="the joint prior until pilot_questions pilots are in "
                                  "(default: the members read the same question, the "
                                  "strongest member's q uniform)")

    @model_validator(mode="after")
    def _one_parameter(self) -> CostConfig:
        if self.value_usd is not None and self.target_loss is not None:
            raise ValueError("give value_usd or target_loss, not both")
        return self

    def check(self, name: str, members: int) -> None:
        """Per-member fields give one entry per member; the prior is a valid JointPrior."""
        for field_name in ("pilot", "prices"):
            got = getattr(self, field_name)
            if got is not None and len(got) != members:
                raise InputError(f"served model {name!r}: cost.{field_name} gives {len(got)} "
                                 f"value(s); give one per member ({members})")
        for field_name in ("prior", "default_prior"):
            prior = getattr(self, field_name)
            if prior is None:
                continue
            if any(len(row) != members for row in prior.q):
                raise InputError(f"served model {name!r}: cost.{field_name}.q gives each node "
                                 f"one share per member ({members})")
            try:
                self.joint_prior(field_name)  # its weights: one per node, a positive sum
            except InputError as exc:
                raise InputError(f"served model {name!r}: cost.{field_name}: {exc}") from None

    def joint_prior(self, field_name: str = "prior") -> Any:
        from ..cost.joint import JointPrior

        prior = getattr(self, field_name)
        if prior is None:
            return None
        return JointPrior.of(prior.q, prior.w)

    def spec(self) -> Any:
        """The `CostSpec` this config asks for."""
        from ..cost.spec import CostSpec

        return CostSpec(value_usd=self.value_usd, target_loss=self.target_loss,
                        reference=self.reference, credit=self.credit,
                        pilot=None if self.pilot is None else tuple(self.pilot),
                        pilot_questions=self.pilot_questions,
                        prices=None if self.prices is None else tuple(self.prices),
                        prior=self.joint_prior(),
                        default_prior=self.joint_prior("default_prior"))


class ServedModel(EndpointConfig):
    """One served name: a one-model ensemble (`model`, `n`, `temperature`) or `members`."""

    model: str | None = None
    members: list[MemberConfig] | None = None
    n: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0)
    lam: float | None = None
    choices: list[str] | None = None
    answer: Literal["choice", "number", "math", "text"] | None = Field(
        default=None, description="the answer kind (see docs/answers.md); default: choice with "
                                  "choices, else the stripped <answer> text")
    aggregator: str = DEFAULT_AGGREGATOR
    stop: str | None = None
    max_n: int | None = Field(default=None, ge=1)
    cost: CostConfig | None = Field(default=None, description="the cost rule's parameter "
                                    "(stop: cost); members carry their price_per_1k")
    calibration: list[str] | None = None
    system: str | None = None
    seed: int | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    request_timeout: float | None = Field(default=None, gt=0)
    max_request_n: int | None = Field(default=None, ge=1, description="the largest n (or max_n) "
                                      "a request may ask for; default: the configured one")

    @field_validator("calibration", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    def check(self, name: str) -> None:
        for i, model in ([(None, self.model)] if self.members is None else
                         [(i, m.model) for i, m in enumerate(self.members)]):
            problem = None if model is None else unprintable(
                model, f"served model {name!r}: " + ("model" if i is None else
                                                      f"members.{i}.model"))
            if problem is not None:
                raise InputError(problem)
        if (self.model is None) == (self.members is None):
            raise InputError(f"served model {name!r}: give either model: or members:, "
                             "not both and not neither")
        if self.members is not None:
            given = [k for k in ("n", "temperature", "lam", *EndpointConfig.model_fields)
                     if getattr(self, k) is not None]
            if given:
                raise InputError(f"served model {name!r}: {', '.join(given)} belong to each "
                                 "member, not to the ensemble")
            if not self.members:
                raise InputError(f"served model {name!r}: members: is empty")
        if self.cost is not None:
            self.cost.check(name, len(self.members) if self.members is not None else 1)
        from ..rules import aggregator_info
        from ..stopping import is_over_members

        if self.stop is not None and is_over_members(self.stop) and self.members is None:
            raise InputError(f"served model {name!r}: stop: {self.stop} chooses which member "
                             "to ask next: serve a mixed ensemble (members: in --config) for "
                             "it, or pick another --stop")
        sources: list[tuple[float | None, object]] = \
            [(m.lam, m.calibration) for m in self.members] if self.members is not None \
            else [(self.lam, None)]
        unknown = [lam for lam, cal in sources if lam is None and cal is None
                   and not self.calibration]
        if aggregator_info(self.aggregator).needs_lam and unknown:
            raise InputError(f"served model {name!r}: the {self.aggregator} rule weighs votes "
                             "by λ: give --lam L or --calibration PROFILE (lam: or "
                             "calibration: in the config, on each member of a mixed "
                             "ensemble), or another --aggregator")

    @property
    def budget(self) -> int:
        """Samples per decision as configured (the adaptive rule's max_n when there is one)."""
        if self.members is not None:
            return sum(m.n for m in self.members)
        return self.max_n or self.n or 5

    @property
    def request_n_bound(self) -> int:
        return self.max_request_n or self.budget


class FleetConfig(BaseModel):
    """Replicas sharing their upstream limits, idempotent vote cache and spend ledger through
    Redis (`ensemble.fleet`). The URL may carry a password: it is never logged or echoed (name
    it by environment variable with `redis_url_env` to keep it out of the file too)."""

    model_config = ConfigDict(extra="forbid")

    redis_url: str | None = Field(default=None, description="redis://[:password@]host:port/db")
    redis_url_env: str | None = Field(default=None, description="environment variable "
                                      "holding the Redis URL")
    prefix: str = Field(default="ensemble", min_length=1, description="this fleet's keys "
                        "(two fleets on one Redis need two prefixes)")
    replicas: int | None = Field(default=None, ge=1, description="the replicas of the fleet: "
                                 "local shares divide by it while Redis is lost (default: the "
                                 "count last seen alive)")
    on_redis_down: Literal["refuse", "local"] = Field(
        default="refuse", description="Redis unreachable at start: refuse to start, or start "
                                      "on local shares of the limits (said in /health)")
    idempotency_ttl: float = Field(default=86400.0, gt=0, description="seconds a reply is "
                                   "kept for retries carrying its Idempotency-Key")
    lease_ttl: float = Field(default=15.0, gt=0, le=3600, description="seconds a dead "
                             "replica's upstream slots and idempotency claims outlive it")

    def url(self) -> str | None:
        """The Redis URL (from the file, else from `redis_url_env`)."""
        if self.redis_url:
            return self.redis_url
        if self.redis_url_env:
            got = os.environ.get(self.redis_url_env)
            if not got:
                raise InputError(f"fleet.redis_url_env names {self.redis_url_env}, which is "
                                 f"not set: export {self.redis_url_env}=redis://... before "
                                 "`ensemble serve`")
            return got
        return None


class ServeConfig(BaseModel):
    """The whole server: where it listens, its limits, and the served names."""

    model_config = ConfigDict(extra="forbid")

    host: str = LOOPBACK
    port: int = Field(default=8000, ge=0, le=65535)
    api_key_env: str | None = None
    max_queue: int = Field(default=256, ge=1)
    max_variants: int = Field(default=128, ge=1, description="request variants (a schema, "
                              "tools, overrides) kept built; past it the least recently used "
                              "is dropped")
    request_timeout: float = Field(default=300.0, gt=0)
    body_timeout: float = Field(default=30.0, gt=0, description="seconds a client has to "
                                "send its request's body; past it 408 (a slow or stalled "
                                "client holds no connection for long)")
    store: str | None = None
    log_json: bool = False
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False,
                                   description="USD the endpoint may spend on votes (across "
                                               "the fleet with one); then new votes get 429")
    drain_timeout: float = Field(default=30.0, ge=0, allow_inf_nan=False,
                                 description="seconds a SIGTERM waits for accepted votes")
    fleet: FleetConfig | None = None
    models: dict[str, ServedModel]

    def model_post_init(self, context: Any) -> None:
        if not self.models:
            raise InputError("the config serves no models: add at least one under models:")
        for name, m in self.models.items():
            if not name.strip() or name != name.strip():
                raise InputError(f"served model name {name!r} must be non-empty, without "
                                 "surrounding spaces")
            problem = unprintable(name, "served model name")  # in logs, /v1/models, replies
            if problem is not None:
                raise InputError(problem)
            m.check(name)
        if not math.isfinite(self.request_timeout):
            raise InputError("request_timeout must be a finite number of seconds")

    def timeout_for(self, name: str) -> float:
        return self.models[name].request_timeout or self.request_timeout


def load_config(path: str | os.PathLike[str]) -> ServeConfig:
    """A `ServeConfig` from a YAML (or JSON) file; every problem is one InputError line."""
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read the serve config {p}: {exc.strerror}; give an existing "
                         "YAML file to --config") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"the serve config {p} is not valid YAML{where}: "
                         f"{getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(doc, dict):
        raise InputError(f"the serve config {p} must be a mapping with a models: section")
    return parse_config(doc, source=str(p))


def parse_config(doc: dict[str, Any], *, source: str = "config") -> ServeConfig:
    """A `ServeConfig` from a plain mapping; pydantic's errors become one line."""
    try:
        return ServeConfig.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, InputError):  # a check of ours, which names the field itself
            raise InputError(f"{source}: {cause}") from None
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise InputError(f"{source}: {where}: {err['msg']} (see docs/serve.md for the "
                         "config format)") from None
