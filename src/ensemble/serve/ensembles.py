"""The served ensembles: one `Ensemble` per served name, built once at start-up.

Every request to a name goes through that name's Ensemble, so its members' endpoints are
reached through the library's process-wide limiters: never more requests in flight upstream
than the configured `max_concurrency`, whatever the number of clients. A request that
overrides n or the stopping rule (within the configured bounds), or brings its own schema or
tools, gets a variant of the Ensemble, built on first use and kept while it is among the
`max_variants` most recently used; variants reach the same providers (one per upstream), hence
the same connections and limiters.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..answers import ClientFormat, JsonObject
from ..api import Ensemble
from ..errors import EnsembleError, InputError
from ..members import Member
from ..providers.base import Provider
from ..providers.options import ProviderOptions
from ..providers.registry import provider_for
from ..stopping import is_over_members
from .config import ServeConfig, ServedModel

if TYPE_CHECKING:
    from ..sampling.store import SampleStore

__all__ = ["OVERRIDE_KEYS", "Overrides", "ServedEnsembles", "build_ensemble", "open_store",
           "parse_overrides"]

OVERRIDE_KEYS = ("n", "stop", "max_n")


@dataclass(frozen=True)
class Overrides:
    """A request's `extra_body={"ensemble": {...}}`: n, the stopping rule and its budget.

    `stop` is None when the request does not set it; "none" asks for no adaptive stopping.
    """

    n: int | None = None
    stop: str | None = None
    max_n: int | None = None

    @property
    def empty(self) -> bool:
        return self.n is None and self.stop is None and self.max_n is None


def parse_overrides(doc: Any, served: ServedModel) -> Overrides:
    """The overrides of one request, checked against the served model's bounds (InputError
    naming the key and the allowed range otherwise)."""
    if doc is None:
        return Overrides()
    if not isinstance(doc, dict):
        raise InputError('"ensemble" must be an object such as {"n": 3}')
    unknown = sorted(set(doc) - set(OVERRIDE_KEYS))
    if unknown:
        raise InputError(f"unknown ensemble override {unknown[0]!r}; a request may set "
                         f"{', '.join(OVERRIDE_KEYS)}")
    bound = served.request_n_bound
    ints: dict[str, int | None] = {}
    for key in ("n", "max_n"):
        v = doc.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not
                              1 <= v <= bound):
            raise InputError(f"ensemble.{key} must be an integer from 1 to {bound} (this "
                             f"server's bound for the model), got {v!r}")
        ints[key] = v
    stop = doc.get("stop", None)
    if "stop" in doc and stop is None:
        stop = "none"
    if stop is not None and stop != "none":
        from ..stopping import stop_rule_names

        # a one-model server cannot use a rule that chooses among members (the cost rule)
        known = stop_rule_names() if served.members is not None else \
            stop_rule_names(over_members=False)
        if stop not in known:
            raise InputError(f"ensemble.stop must be one of {', '.join(known)} or null, "
                             f"got {stop!r}")
    if served.members is not None and (ints["n"] is not None or ints["max_n"] is not None):
        raise InputError("this model is a mixed ensemble: its members carry their own n; a "
                         "request may set ensemble.stop only")
    return Overrides(n=ints["n"], stop=stop, max_n=ints["max_n"])


def open_store(path: str) -> SampleStore:
    """The server's sample store, opened at start: a path it cannot write is one line naming
    the store (`--store`), not a 502 on every request."""
    from ..sampling.store import SampleStore

    try:
        return SampleStore(path)
    except (OSError, EnsembleError) as exc:
        raise InputError(f"the endpoint's store (--store, store:): {exc}; give a writable "
                         "path") from None


def _members(served: ServedModel) -> list[Member]:
    return [Member(mc.model, n=mc.n, temperature=mc.temperature, lam=mc.lam,
                   calibration=mc.calibration, **mc.provider_options())
            for mc in served.members or []]


def build_ensemble(served: ServedModel, *, store: str | SampleStore | None = None,
                   overrides: Overrides | None = None, answer: Any = None,
                   sampling: tuple[tuple[str, Any], ...] = (),
                   providers: Callable[[Member], Provider] | None = None) -> Ensemble[Any]:
    """The Ensemble a served name stands for, with a request's overrides applied (`answer`: a
    request's structured-output model, in place of the served answer kind; `sampling`: the
    Ensemble keywords a request adds, e.g. logprobs; `providers`: where its members' providers
    come from, shared with the server's other Ensembles)."""
    overrides = overrides or Overrides()
    stop = served.stop if overrides.stop is None else (
        None if overrides.stop == "none" else overrides.stop)
    choices = served.choices
    if answer is None:  # neither choices nor an answer kind: the client's own format
        answer = served.answer if served.answer is not None or served.choices else \
            ClientFormat()
    else:  # the request's own format (a schema, JSON mode) wins: choices are for plain text
        choices = None
    kw: dict[str, Any] = {"choices": choices, "aggregator": served.aggregator,
                          "answer": answer,
                          "stop": stop, "calibration": served.calibration,
                          "system": served.system, "seed": served.seed, "store": store,
                          "providers": providers, **dict(sampling)}
    if served.max_tokens is not None:
        kw["max_tokens"] = served.max_tokens
    if stop is not None and served.cost is not None and is_over_members(stop):
        kw["stop"] = served.cost.spec()
    if served.members is not None:
        return Ensemble(members=_members(served), **kw)
    n = overrides.n or served.n or 5
    max_n = overrides.max_n or (overrides.n if stop is not None else None) or served.max_n
    if stop is not None:
        kw["max_n"] = max_n or n
        n = min(n, kw["max_n"])  # with a stopping rule n is a fixed run's: at most max_n
    return Ensemble(model=served.model, n=n, temperature=served.temperature, lam=served.lam,
                    **kw, **served.provider_options())


class ServedEnsembles:
    """Name -> Ensemble for the whole server (built at start-up, so a bad config fails then),
    and the variants requests ask for (a schema, tools, overrides, logprobs), built on first
    use and kept, the least recently used dropped past `config.max_variants`.

    Every Ensemble, variants included, reaches its upstreams through one provider per
    (model, endpoint options), owned here: a variant holds no connection of its own, so
    thousands of distinct schemas leave the sockets and the memory where they were. With a
    store, they share one open store too."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self._providers: dict[tuple[str, ProviderOptions], Provider] = {}
        self._store: SampleStore | None = None
        if config.store is not None:
            self._store = open_store(config.store)
        self._base: dict[str, Ensemble[Any]] = {}
        self._variants: OrderedDict[tuple[str, Overrides, str, tuple[tuple[str, Any], ...]],
                                    Ensemble[Any]] = OrderedDict()
        self._models: OrderedDict[str, Any] = OrderedDict()  # schema digest -> its kind
        for name, served in config.models.items():
            try:
                self._base[name] = self._build(served)
            except InputError as exc:
                raise InputError(f"served model {name!r}: {exc}") from None
            self._check_priced(name, served)
            self._check_logprobs(name)

    def _check_logprobs(self, name: str) -> None:
        """A served model whose rule reads token logprobs, with a member whose provider
        declares it cannot return them, is refused at start, before any request (one whose
        provider learns it on starting, litellm's, is refused by its first draw)."""
        ens = self._base[name]
        if not ens.params.logprobs:
            return
        for m in ens.members:
            why = self.provider(m).capabilities.refuses(top_logprobs=ens.params.top_logprobs or 0)
            if why is not None:
                raise InputError(
                    f"served model {name!r}: aggregator {ens.aggregator_name} (or its stop "
                    f"rule) reads token logprobs, and {m.model} {why}; use a rule that reads "
                    "the answers alone (plurality, majority, ...), or a model that returns them")

    def _check_priced(self, name: str, served: ServedModel) -> None:
        """The cost rule prices every vote: a member whose price is unknown is refused at
        start, before anything is paid (it was refused on every request, after paying)."""
        if served.stop is None or not is_over_members(served.stop) or (
                served.cost is not None and served.cost.prices is not None):
            return
        for m in self._base[name].members:
            if self.provider(m).price(1000, 1000) is None:
                raise InputError(
                    f"served model {name!r}: stop: {served.stop} prices every vote, and the "
                    f"price of {m.model} is unknown: give its price_per_1k: [IN, OUT] (USD "
                    "per 1,000 prompt and completion tokens; --price-per-1k-tokens IN,OUT) or "
                    "cost: {prices: [...]}, one per member")

    def provider(self, member: Member) -> Provider:
        """The one provider of a member's upstream (model and endpoint options), shared by
        every Ensemble of the server."""
        key = (member.model, member.options)
        p = self._providers.get(key)
        if p is None:
            p = self._providers[key] = provider_for(member.model, member.options)
        return p

    def _build(self, served: ServedModel, **kw: Any) -> Ensemble[Any]:
        return build_ensemble(served, store=self._store, providers=self.provider, **kw)

    @property
    def names(self) -> list[str]:
        return list(self.config.models)

    @property
    def variants(self) -> int:
        """How many request variants are built and kept now."""
        return len(self._variants)

    @property
    def connections(self) -> int:
        """How many upstream providers (each with its connection pool) the server holds."""
        return len(self._providers)

    def served(self, name: str) -> ServedModel | None:
        return self.config.models.get(name)

    def get(self, name: str, overrides: Overrides | None = None,
            response_format: Any = None, sampling: tuple[tuple[str, Any], ...] = (),
            tools: Sequence[Any] | None = None, tool_choice: Any = None) -> Ensemble[Any]:
        """The Ensemble for a served name, a request's overrides, its structured-output
        schema (or JSON mode), the sampling keywords it adds (`ChatRequest.sampling`:
        logprobs) and its tools (sent upstream, voted: `ensemble.answers.toolcalls`); each
        variant built once and kept while it is among the `max_variants` most recently used;
        every variant reaches the same providers, hence the same limiters."""
        answer: Any = None
        schema = ""
        if tools is not None:
            from .schemas import schema_key

            sampling = (*sampling, ("tools", list(tools)), ("tool_choice", tool_choice))
            schema = "tools:" + schema_key("tools", {"tools": list(tools),
                                                     "tool_choice": tool_choice})
        if isinstance(response_format, Mapping) and response_format.get("type") == "json_object":
            answer, schema = JsonObject(), schema + "json_object"
        elif response_format is not None:
            from .schemas import json_schema_of, schema_key, schema_kind

            spec = json_schema_of(response_format)
            if spec is not None:
                digest = schema_key("response_format", response_format)
                answer = self._models.get(digest)
                if answer is None:
                    answer = schema_kind(response_format)
                self._keep(self._models, digest, answer)
                schema += digest
        overrides = overrides or Overrides()
        plain = tuple(kv for kv in sampling if kv[0] not in ("tools", "tool_choice"))
        if not schema and not plain and overrides.empty:
            return self._base[name]
        key = (name, overrides, schema, plain)
        ens = self._variants.get(key)
        if ens is None:
            try:
                ens = self._build(self.config.models[name], overrides=overrides,
                                  answer=answer, sampling=sampling)
            except InputError as exc:
                if tools is not None and str(exc).startswith("tools"):
                    from .wire import RequestRejected

                    raise RequestRejected(str(exc), param="tools") from None
                raise
        self._keep(self._variants, key, ens)
        return ens

    def _keep(self, cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        """Put `key` last (the most recently used); drop the least recently used past the
        bound. A dropped variant owns nothing (its providers and store are the server's), so
        a request still deciding with it carries on."""
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self.config.max_variants:
            cache.popitem(last=False)

    def describe(self, name: str) -> dict[str, Any]:
        """What `GET /v1/models` says about a served name (no endpoint, no key)."""
        ens = self._base[name]
        return {"members": [{"model": m.model, "n": m.n, "temperature": m.temperature}
                            for m in ens.members],
                "aggregator": ens.aggregator_name,
                "stop": ens.stop_spec.stop if ens.stop_spec is not None else None,
                "choices": list(ens.choices) if ens.choices else None}

    def warm_up(self) -> None:
        """Import litellm now if a member needs it (~4 s here), so that the first request does
        not stall the event loop while it loads (`openai/...` members go through the openai
        SDK and need none)."""
        from ..providers.base import is_local_model
        from ..providers.openai import serves

        if any(not is_local_model(m.model) and not serves(m.model)
               for ens in self._base.values() for m in ens.members):
            from ..providers.litellm_lib import litellm

            litellm()

    async def aclose(self) -> None:
        built = list(self._base.values()) + list(self._variants.values())
        self._base, self._variants = {}, OrderedDict()
        for ens in built:
            await ens.aclose()
        providers, self._providers = list(self._providers.values()), {}
        for p in providers:
            await p.aclose()
        if self._store is not None:
            self._store.close()
            self._store = None
