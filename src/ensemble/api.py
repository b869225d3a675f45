"""Voting in Python code: `Ensemble(...).decide(prompt)` (the `@vote` decorator is `ensemble.vote`,
what it returns `ensemble.decision.Decision`).

    from ensemble import Ensemble
    ens = Ensemble(model="openai/gpt-4o-mini", temperature=0.5, n=5, choices=["L", "R"])
    d = ens.decide("...")          # or: await ens.adecide("...")
    d.decision, d.votes, d.margin

The core is async (`adecide`, `adecide_many`); `decide` and `decide_many` are thin wrappers that
work inside and outside a running event loop (Jupyter included).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import threading
import weakref
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from ._sync import LoopThread, run_sync
from .aggregators import Vote, aggregator_info, get_aggregator
from .answers import AnswerKind, ToolCalls, resolve_answer
from .credit import as_rng
from .decision import AnswerT, Decision, evidence_of, tally
from .errors import EnsembleError, InputError, SamplingFailed
from .members import Member
from .providers.base import Provider
from .providers.options import ProviderKwargs, ProviderOptions, check_keywords
from .providers.params import SamplingParams
from .providers.registry import provider_for
from .rules import DEFAULT_AGGREGATOR
from .sampling.parsing import check_choices, choice_parser, extract_answer
from .sampling.types import Message, Sample, as_messages
from .stopping.plan import HISTORY_MAX as HISTORY_MAX

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .answers import Choice, Math, Number, Text, ToolCall
    from .cost.spec import CostMemory
    from .rules import Requests
    from .sampling.store import SampleStore
    from .stopping.drawn import Observation
    from .stopping.plan import StopPlan, StopPolicy

__all__ = ["HISTORY_MAX", "Ensemble", "EnsembleKwargs", "Prompt"]

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound="BaseModel")

Prompt = str | Sequence[Message]


def _check_choices(choices: Any) -> None:
    """InputError unless `choices` are two or more distinct non-empty strings that are valid
    text and differ in more than case."""
    if isinstance(choices, str) or len(set(choices)) != len(choices) or not all(
            isinstance(c, str) and c.strip() for c in choices):
        raise InputError(f"choices must be distinct non-empty strings, got {choices!r}")
    if len(choices) < 2:
        raise InputError(f"choices needs at least two answers to vote between, got "
                         f"{list(choices)!r}; leave it out for free-form answers")
    check_choices(choices)


def _check_store_path(store: Any) -> None:
    """InputError when `store=` names a folder (SQLite would say "unable to open database
    file" at the first decision)."""
    if isinstance(store, (str, os.PathLike)) and os.path.isdir(store):
        raise InputError(f"store={os.fspath(store)!r} is a folder: give the path of the store's "
                         f"file, such as {os.path.join(os.fspath(store), 'samples.sqlite')!r}")


class EnsembleKwargs(ProviderKwargs, total=False):
    """`Ensemble`'s keyword arguments but `answer=` and `tools=` (which type its decisions),
    for the overloads of `Ensemble` and `vote`."""

    members: Sequence[Member] | None
    temperature: float | None
    n: int | None
    aggregator: str
    choices: Sequence[str] | None
    parser: Callable[[str], str | None] | None
    tie: str
    invalid: str
    seed: int | None
    lam: float | None
    calibration: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None
    stop: str | StopPlan | None
    max_n: int | None
    system: str | None
    store: str | os.PathLike[str] | SampleStore | None
    options: ProviderOptions | None
    provider: Provider | None
    providers: Callable[[Member], Provider] | None
    extra_body: dict[str, Any] | None
    tool_choice: Any
    top_p: float | None
    max_tokens: int | None
    sampling_seed: int | None
    stop_sequences: str | Sequence[str] | None
    logprobs: bool | None
    top_logprobs: int | None


class Ensemble(Generic[AnswerT]):
    """Draw samples of a prompt from one model, or from several members, and aggregate them.

    One model:    `Ensemble("openai/gpt-4o-mini", n=5, temperature=0.5, ...)`: n samples at one
                  temperature. model is a litellm model string (openai/..., anthropic/...,
                  ollama/...), "local", "local/<path.gguf>" or "local:<path.gguf>" for the
                  embedded llama.cpp model.
    Members:      `Ensemble(members=[Member(...), ...], ...)`: each member is one model at one
                  temperature with its own n and endpoint (`ensemble.members.Member`); members
                  are sampled concurrently, each within its own endpoint's limits, and their
                  votes pooled.
    choices:      the allowed answers; the default parser then normalises replies to them
                  (the paper's <answer>X</answer> format with fallbacks).
    answer:       what an answer is (`ensemble.answers`, docs/answers.md): "choice" (the
                  default with choices=), "number" (1250, 1,250, $1,250 and \\boxed{1250}
                  are one answer; the decision a float), "math" (symbolic equivalence through
                  math-verify), "text" (case, punctuation and whitespace-insensitive), an
                  AnswerKind such as Number(rel_tol=...) or Text(similarity=0.9), or a
                  pydantic model class (structured outputs: its JSON schema sent as
                  response_format, the replies voted field by field, the decision an
                  instance). Open answers refuse the rules that need two fixed options
                  (robust). The store keeps the raw replies: changing the kind re-reads them.
    tools:        function tools (OpenAI's `{"type": "function", "function": {"name": ...,
                  "parameters": {...}}}`), sent with every request; each reply is a text or
                  a tool call, and the vote decides the kind, then the tool, then each
                  argument with the kind its JSON schema implies (`ensemble.answers.toolcalls`):
                  `Decision.tool_call` is the voted `ToolCall(name, arguments)`, valid for the
                  tool's schema; a text win is voted by `answer`/`choices`. `tool_choice` is
                  sent as given ("auto", "required", "none", or a function).
    aggregator:   a registered rule (`aggregator_names()`; `register_rule` adds one):
                  plurality (default), majority, random-follow, weighted (by each reply's
                  logprob confidence: the Ensemble draws the logprobs a rule reads, and a
                  reply without them is refused, never counted plainly), lam-weighted
                  (each vote weighs 2λ of its member), robust (the minimax-regret rule;
                  binary choices; per-member counts for members).
                  The rules that weigh votes by λ need every member's λ.
    lam:          λ of the one model at its temperature (ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units);
                  members carry their own.
    calibration:  a profile (`ensemble calibrate`'s profile.json or its folder) or a list of
                  them: each member's λ is λ₁/t from the profile matching its (model,
                  api_base), unless it has its own `lam` or `calibration`.
    stop:         a stopping rule's name (`stop_rule_names()`; `register_stop_rule` adds
                  one) or a `StopSpec`: draw adaptively, up to `max_n` (default n)
                  samples per decision, stopping once the answer is settled; the bayes rule's
                  prior is fitted from the pilots of this Ensemble's earlier decisions too
                  (the most recent HISTORY_MAX = 20,000), once 30 questions' pilots are in
                  (`StopSpec.fit_after`): until then it is the uniform one (the spec's
                  `default_prior`), and `Decision.stop_prior` says which. One draw loop
                  (`ensemble.drawing`) serves fixed n, every stopping rule and the cost rule.
                  With members, the rule reads the pooled votes, drawn in rounds of one more
                  vote per member (each up to its own n; max_n does not apply).
    tie:          "random" (seeded by `seed`) or "fractional"; never list order.
    invalid:      "ignore" | "abstain" | "fail" for unparseable answers.
    seed:         seeds the tie-breaking (and the robust rule's randomisation); it does not seed
                  the provider's sampling (pass `sampling_seed=` for a provider that has one).
    store:        a SQLite path to keep every sample (resumable, never paid twice); None: none.
    options:      `ProviderOptions`, or its fields as keywords: api_base, api_key, timeout,
                  max_concurrency, rpm, tpm, max_attempts, max_retry_time, max_failures (one
                  model; members carry their own). Limits are per endpoint and process: every
                  Ensemble, Sampler and concurrent `adecide` call on one endpoint shares them.
    provider:     a provider object to use instead of the model string's (one model; e.g.
                  `ensemble.testing.FakeExpertProvider` in unit tests).
    providers:    where each member's provider comes from (`providers(member)`), shared with
                  other Ensembles: many Ensembles on one upstream (`ensemble serve`'s variants
                  per request format) then share its connections. The caller owns them: the
                  Ensemble does not close them. `store=` may likewise be an open `SampleStore`
                  that the caller owns and closes.
    Sampling parameters: top_p, max_tokens, sampling_seed, stop_sequences (the provider's
    `stop`; `stop=` here is the stopping rule), logprobs, top_logprobs; provider-specific
    parameters go in `extra_body={...}`. Unknown keywords are an error that names the closest
    known one.

    The Ensemble keeps what it opens (its providers' HTTP clients and their connections, the
    embedded local model's servers, the store) until `close()` (or `with Ensemble(...) as
    ens:`), so repeated `decide` calls reuse them: the sync calls run on one event loop of the
    Ensemble's own, on a background thread started by the first of them.
    """

    # the answer's type, for type checkers: `Ensemble[float]` with answer="number" or a Number,
    # the model with a pydantic model, `Ensemble[str]` with choices (the default), math or
    # text; with tools= a decision may be a tool call (or parallel calls) instead
    @overload
    def __init__(self: Ensemble[str | ToolCall | tuple[ToolCall, ...]],
                 model: str | None = None, *,
                 answer: Literal["choice", "math", "text"] | Choice | Math | Text | None = None,
                 tools: Sequence[dict[str, Any]], **kwargs: Unpack[EnsembleKwargs]) -> None: ...

    @overload
    def __init__(self: Ensemble[Any], model: str | None = None, *, answer: Any,
                 tools: Sequence[dict[str, Any]], **kwargs: Unpack[EnsembleKwargs]) -> None: ...

    @overload
    def __init__(self: Ensemble[float], model: str | None = None, *,
                 answer: Literal["number"] | Number, tools: None = None,
                 **kwargs: Unpack[EnsembleKwargs]) -> None: ...

    @overload
    def __init__(self: Ensemble[ModelT], model: str | None = None, *, answer: type[ModelT],
                 tools: None = None, **kwargs: Unpack[EnsembleKwargs]) -> None: ...

    @overload
    def __init__(self: Ensemble[str], model: str | None = None, *,
                 answer: Literal["choice", "math", "text"] | Choice | Math | Text | None = None,
                 tools: None = None, **kwargs: Unpack[EnsembleKwargs]) -> None: ...

    @overload
    def __init__(self: Ensemble[Any], model: str | None = None, *,
                 answer: AnswerKind | Literal["json", "format"], tools: None = None,
                 **kwargs: Unpack[EnsembleKwargs]) -> None: ...

    def __init__(self, model: str | None = None, *, members: Sequence[Member] | None = None,
                 temperature: float | None = None, n: int | None = None,
                 aggregator: str = DEFAULT_AGGREGATOR, choices: Sequence[str] | None = None,
                 answer: Any = None, parser: Callable[[str], str | None] | None = None,
                 tie: str = "random",
                 invalid: str = "ignore", seed: int | None = None, lam: float | None = None,
                 calibration: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] |
                 None = None, stop: str | StopPlan | None = None,
                 max_n: int | None = None,
                 system: str | None = None,
                 store: str | os.PathLike[str] | SampleStore | None = None,
                 options: ProviderOptions | None = None, provider: Provider | None = None,
                 providers: Callable[[Member], Provider] | None = None,
                 extra_body: dict[str, Any] | None = None,
                 tools: Sequence[dict[str, Any]] | None = None, tool_choice: Any = None,
                 **kwargs: Any) -> None:
        from .members import resolve_members

        check_keywords(kwargs, (*ProviderOptions.names(), *_PARAM_FIELDS, *_ENSEMBLE_NAMES),
                       where="Ensemble")
        provider_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in ProviderOptions.names()}
        n_given = n
        if members is not None:
            given = [name for name, v in (("model", model), ("temperature", temperature),
                                          ("n", n), ("lam", lam), ("options", options),
                                          ("provider", provider)) if v is not None]
            given += sorted(provider_kw)
            if given:
                raise InputError(f"Ensemble(members=...): give {', '.join(given)} to each "
                                 "Member, not to the Ensemble (members carry their own model, "
                                 "n, temperature, λ and endpoint)")
            if isinstance(members, Member):
                members = [members]
            members = list(members)
        else:
            if not isinstance(model, str) or not model.strip():
                raise InputError("Ensemble needs a model (a litellm model string such as "
                                 "openai/gpt-4o-mini) or members=[Member(...), ...]")
            n = 5 if n is None else n
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise InputError(f"n must be an integer >= 1, got {n!r}")
            opts = ProviderOptions.build(options, **provider_kw)
            members = [Member(model, n=n, temperature=0.7 if temperature is None else temperature,
                              lam=lam, options=opts)]
        self.members: tuple[Member, ...] = resolve_members(members, calibration)
        self.model = self.members[0].model if len(self.members) == 1 else None
        self.temperature = self.members[0].temperature if len(self.members) == 1 else None
        self.n = sum(m.n for m in self.members)
        self.options = self.members[0].options
        if choices is not None:
            _check_choices(choices)
        self.choices = tuple(choices) if choices is not None else None
        self.answer_kind: AnswerKind = _with_tools(resolve_answer(answer, self.choices), tools,
                                                   tool_choice)
        if not self.answer_kind.is_open:
            self.parser = parser or (choice_parser(self.choices) if self.choices
                                     else extract_answer)
        else:
            self.parser = parser or self.answer_kind.parse
        self.aggregator_info = aggregator_info(aggregator)  # unknown: one line, the known ones
        self.aggregator_name = self.aggregator_info.name  # a plug-in's by its full name
        self.aggregator = self._make_aggregator(aggregator, tie=tie, invalid=invalid, seed=seed)
        self.stop_spec = self._stop_spec(stop, max_n, n_given)
        from .stopping.plan import StopMemory

        # what the stopping rule keeps between calls (the bayes rule's pilots, the cost rule's
        # counts and prices): the most recent HISTORY_MAX decisions, so that a long-lived
        # Ensemble (`ensemble serve`) neither grows nor slows without bound
        self.stop_memory = StopMemory()
        # the cost rule breaks its ties as the aggregator would (its own seeded stream)
        self._tie = (tie, invalid, as_rng(seed))
        self.system = system
        rename = {"sampling_seed": "seed", "stop_sequences": "stop"}
        params = self.aggregator_info.requests.asked_with(  # what the rule reads is drawn
            {rename.get(k, k): v for k, v in kwargs.items()}, rule=aggregator)
        if self.stop_spec is not None:  # and what the stopping rule reads
            params = self._stop_requests().asked_with(
                params, rule=f"the {self.stop_spec.stop} stopping rule")
        extra = _request_extra(extra_body, self.answer_kind, tools, tool_choice)
        self._params = [SamplingParams.make(m.temperature, extra=extra or None, **params)
                        for m in self.members]
        self.params = self._params[0]
        if store is not None:
            self._check_stored_apart()
        _check_store_path(store)
        shared_store = store is not None and not isinstance(store, (str, os.PathLike))
        self._store_path: str | os.PathLike[str] | None = \
            store if isinstance(store, (str, os.PathLike)) else None
        self._store: Any = store if shared_store else None
        self._own_store = not shared_store
        self._given_provider = provider
        self._shared_providers = providers
        self._n_ok: list[bool | None] = [None] * len(self.members)  # learned: honours n?
        self._providers: dict[tuple[str, ProviderOptions], Provider] = {}
        self._lock = threading.Lock()
        self._loop = LoopThread("ensemble-sync")
        self._finalizer: weakref.finalize[Any, Any] | None = None
        # requests sent with a store by calls since cancelled (Ctrl-C in decide): their
        # replies are paid for, so `aclose` waits for them (briefly) before closing the store
        self._in_flight: set[asyncio.Task[Any]] = set()

    def _check_stored_apart(self) -> None:
        """Members whose samples would share store keys are refused (merge them)."""
        from .providers.endpoints import normalise_api_base

        seen: dict[tuple[str, str | None, str], int] = {}
        for g, (m, prm) in enumerate(zip(self.members, self._params, strict=True)):
            where = normalise_api_base(m.api_base) if m.api_base else None
            # parameters by value: extra_body and response_format are dicts (unhashable)
            same = json.dumps(prm.as_dict(), sort_keys=True, default=str)
            first = seen.setdefault((m.model, where, same), g)
            if first != g:
                raise InputError(
                    f"members {first} and {g} ({m.model} at t = {m.temperature:g}"
                    f"{' at ' + where if where else ''}) would read each other's stored "
                    "samples (one endpoint, model, prompt and sampling parameters): merge "
                    "them into one Member with the summed n")

    def _make_aggregator(self, name: str, *, tie: str, invalid: str, seed: int | None) -> Any:
        from .aggregators import aggregator_names

        info = aggregator_info(name)
        opts: dict[str, Any] = {"tie": tie, "invalid": invalid, "rng": seed}
        if info.needs_lam:
            unknown = [m for m in self.members if m.lam is None]
            if unknown:
                m = unknown[0]
                raise InputError(f"{name} needs each member's λ and {m.model} at t = "
                                 f"{m.temperature:g} has none: give lam=, calibration=PROFILE "
                                 "(from `ensemble calibrate`), or Member(lam=...)")
            lams = [float(m.lam) for m in self.members]  # type: ignore[arg-type]
            if len(self.members) == 1:
                opts["lam"] = lams[0]
            else:
                opts["lams"] = lams
        kind = self.answer_kind
        if kind.is_open and not info.open:
            raise InputError(f"{name} decides between two fixed options; answer={kind!r} is "
                             "open (any number of answers): use "
                             f"{', '.join(aggregator_names(open=True))}")
        if info.binary and self.choices is None and not kind.is_open:
            raise InputError(f"{name} decides between two options: give choices=[first, "
                             "second] (the first is the report '1')")
        if kind.is_open:
            return get_aggregator(name, open=True, **opts)
        return get_aggregator(name, choices=self.choices, **opts)

    def _stop_spec(self, stop: str | StopPlan | None, max_n: int | None,
                   n: int | None) -> StopPlan | None:
        from .stopping.plan import StopPlan
        from .stopping.spec import plan_for

        if stop is None:
            if max_n is not None:
                raise InputError("max_n= applies with stop= (adaptive sampling); for a fixed "
                                 "number of samples give n=")
            return None
        if max_n is not None and len(self.members) > 1:
            raise InputError("max_n= is for one model; with members each Member's n is the "
                             "most votes it gives a decision")
        if max_n is not None and n is not None and max_n < n:
            raise InputError(f"n={n} and max_n={max_n} disagree: with stop= a decision draws "
                             "at most max_n samples; give max_n= alone (or an n no larger "
                             "than it)")
        if not isinstance(stop, (str, StopPlan)):
            raise InputError(f"stop must be a stopping rule's name or a StopSpec, got {stop!r}")
        # unknown: one line listing the known rules
        plan = stop if isinstance(stop, StopPlan) else \
            plan_for(stop, max_n=self.n if max_n is None else max_n)
        check_members = getattr(plan, "check_members", None)
        if check_members is not None:  # a plan over members (the cost rule's prices, pilot)
            check_members(len(self.members))
        return plan

    @property
    def cost_memory(self) -> CostMemory:
        """What the cost rule keeps between calls (stop="cost"): every decision's counts, the
        members' prices per vote, the last rule (`ensemble.cost.spec.CostMemory`)."""
        from .cost.spec import CostMemory

        return self.stop_memory.part("cost", CostMemory)

    def __repr__(self) -> str:
        if len(self.members) == 1:
            m = self.members[0]
            return (f"Ensemble(model={m.model!r}, temperature={m.temperature}, n={m.n}, "
                    f"aggregator={self.aggregator_name!r})")
        return f"Ensemble(members={list(self.members)!r}, aggregator={self.aggregator_name!r})"

    # -- resources ---------------------------------------------------------------------------
    def _vote_price(self, m: Member, messages: Sequence[tuple[dict[str, str], ...]]
                    ) -> Callable[[float], float | None]:
        """Member m's dollars for one vote on these prompts given its completion tokens: its
        provider's price of the prompts' mean tokens (counted on the first call: a plan that
        never asks counts nothing) and those completion tokens."""
        from .sampling.online import prompt_tokens

        counted: list[float] = []

        def price(completion_tokens: float) -> float | None:
            provider = self._provider_for(m)
            if not counted:
                counts = [prompt_tokens(provider, msgs) for msgs in messages]
                counted.append(sum(counts) / max(1, len(counts)))
            return provider.price(round(counted[0]), round(completion_tokens))

        return price

    def _provider_for(self, m: Member) -> Provider:
        with self._lock:
            if self._given_provider is not None:
                return self._given_provider
            if self._shared_providers is not None:
                return self._shared_providers(m)
            key = (m.model, m.options)
            if key not in self._providers:
                self._providers[key] = provider_for(m.model, m.options)
            return self._providers[key]

    def _get_store(self) -> Any:
        with self._lock:
            if self._store is None and self._store_path is not None:
                from .sampling.store import SampleStore

                self._store = SampleStore(self._store_path)
            return self._store

    async def aclose(self) -> None:
        """Stop what the Ensemble started (local models' servers) and close its store; a
        later call opens them again (see `close`). The requests a cancelled call (Ctrl-C in
        `decide`) had already sent are waited for first, at most `IN_FLIGHT_GRACE` (15) s, so
        that their replies, paid for, are stored and never asked for again."""
        from .sampling.run import IN_FLIGHT_GRACE

        loop = asyncio.get_running_loop()
        sent = [t for t in list(self._in_flight) if not t.done() and t.get_loop() is loop]
        if sent:
            await asyncio.wait(sent, timeout=IN_FLIGHT_GRACE)
        with self._lock:
            providers, self._providers = list(self._providers.values()), {}
            store, self._store = (self._store, None) if self._own_store else (None,
                                                                               self._store)
        for p in providers:
            await p.aclose()
        if store is not None:
            store.close()

    def close(self) -> None:
        """`aclose()` from sync code; then the event loop of the sync calls ends.

        Closing releases what the Ensemble holds (its event loop, providers and local model
        servers, its own store); it does not end the Ensemble: a later call opens them again
        (the store from its path, so nothing stored is asked for twice)."""
        with self._lock:
            running = self._loop.running
        if running:
            from .sampling.run import IN_FLIGHT_GRACE

            self._loop.stop(self.aclose, timeout=IN_FLIGHT_GRACE + 15.0)
        else:
            run_sync(self.aclose())

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the Ensemble's event loop (started on first use) and wait."""
        with self._lock:
            if not self._loop.running:
                self._loop.start(_started)
                if self._finalizer is None:  # an Ensemble never closed ends its loop
                    self._finalizer = weakref.finalize(self, self._loop.stop_soon)
        return self._loop.run(coro)

    def __enter__(self) -> Ensemble[AnswerT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Ensemble[AnswerT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- deciding ----------------------------------------------------------------------------
    def _messages(self, prompt: Prompt) -> tuple[dict[str, str], ...]:
        messages = as_messages(prompt)
        if self.system:
            messages = ({"role": "system", "content": self.system},) + messages
        return messages

    def _stop_requests(self) -> Requests:
        """What the stopping rule reads from each sample beyond its hard answer (a plan
        that declares none: the hard answer)."""
        from .rules import HARD

        return getattr(self.stop_spec, "requests", None) or HARD

    def _observe(self, rows: Sequence[Sequence[Sample]]) -> tuple[tuple[Observation, ...], ...]:
        """What a stopping rule reads of one question's samples (`ensemble.stopping.drawn`):
        each sample's answer as the Decision counts it (open answers merged over every
        member's samples so far), its tokens and dollars, and where logprobs were drawn (the
        aggregator or the stopping rule reads them) its evidence: the rules' `Evidence`, and
        for fixed choices its own P(option) at the answer position as its shares."""
        from .answers import member_keys
        from .stopping.drawn import Observation

        keys = member_keys(self.answer_kind, [[s.answer for s in row] for row in rows])
        soft = self.aggregator_info.requests.logprobs or self._stop_requests().logprobs
        choices = None if self.answer_kind.is_open else self.choices
        out = []
        for krow, row in zip(keys, rows, strict=True):
            obs = []
            for k, s in zip(krow, row, strict=True):
                e = evidence_of(s, options=choices) if soft else None
                shares = (None if e is None or e.options is None
                          else {a: math.exp(v) for a, v in e.options.items()})
                obs.append(Observation(k, shares=shares, tokens=s.completion_tokens,
                                       cost_usd=s.cost_usd, evidence=e))
            out.append(tuple(obs))
        return tuple(out)

    def _decide(self, rows: Sequence[Sequence[Sample]], policy: StopPolicy | None = None,
                messages: Sequence[dict[str, str]] = ()) -> Decision[AnswerT]:
        """The Decision over each member's samples: the aggregator's, or with a stopping rule
        that decides (the cost rule) the rule's own, the aggregator's reported alongside
        (`messages`: the prompt's, whose key picked its policy where the rule mixes two)."""
        choices = None if self.answer_kind.is_open else self.choices
        evidence = ([evidence_of(s, options=choices) for row in rows for s in row]
                    if self.aggregator_info.requests.logprobs else None)

        def aggregate(keys: list[str | None], groups: list[int] | None) -> Vote:
            return self.aggregator(keys, choices=choices, groups=groups, evidence=evidence)

        plan = self.stop_spec
        stop = plan.stop if plan is not None else None
        lams = tuple(m.lam for m in self.members)
        d = tally(rows, kind=self.answer_kind, aggregate=aggregate, lams=lams, stop=stop)
        used = getattr(policy, "prior_used", None)
        if used is not None:
            d = replace(d, stop_prior=used)
        if policy is None or not getattr(plan, "decides", False):
            return d
        from .decision import CostRuleOutcome
        from .drawing import question_key
        from .spending import CostVote

        tie, invalid, rng = self._tie
        by_rule = CostVote(policy, plan.choose,  # type: ignore[union-attr]
                           tie=tie, invalid=invalid, rng=rng, open=self.answer_kind.is_open)
        out = tally(rows, kind=self.answer_kind, lams=lams, stop=stop,
                    aggregate=lambda keys, groups: by_rule(keys, choices=choices, groups=groups))
        choice, vote = by_rule.made[0]  # the whole answer's (parts follow)
        win = None if vote.decision is None else choice.win.get(vote.decision)
        return replace(out, stop_prior=used, cost_rule=CostRuleOutcome(
            win=win, drawn=tuple(len(row) for row in rows), leaders=choice.leaders,
            tied=choice.tied, value_usd=float(getattr(policy, "value_usd", float("nan"))),
            aggregator=d.aggregator, aggregator_decision=d.decision,
            mix=float(getattr(policy, "mix", 0.0)),
            cheaper=bool(getattr(policy, "runs_cheaper", lambda q: False)(
                question_key(messages)))))

    @overload
    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: Literal["raise"] = ...) -> list[Decision[AnswerT]]: ...

    @overload
    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: Literal["return"]
                           ) -> list[Decision[AnswerT] | EnsembleError]: ...

    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: str = "raise"
                           ) -> Sequence[Decision[AnswerT] | EnsembleError]:
        """Decide many prompts concurrently (within each endpoint's limits; members at once).

        A prompt that fails for good (e.g. refused by the provider) does not stop the others:
        they all finish and are stored. Then `on_error="raise"` raises `SamplingFailed` naming
        the failures; `on_error="return"` puts the error in that prompt's place in the list.
        """
        if on_error not in ("raise", "return"):
            raise InputError(f"on_error must be 'raise' or 'return', got {on_error!r}")
        if isinstance(prompts, str):
            raise InputError("adecide_many takes a list of prompts; use adecide for one")
        if prompts is None or not hasattr(prompts, "__iter__"):
            raise InputError("decide_many / adecide_many take a list of prompts, got "
                             f"{type(prompts).__name__}")
        messages = [self._messages(p) for p in prompts]
        from .cost.spec import two_fixed_choices
        from .drawing import draw_all
        from .stopping.plan import FitContext, fixed_plan

        plan = self.stop_spec if self.stop_spec is not None else fixed_plan()
        ns = [m.n for m in self.members]
        context = FitContext(budgets=plan.budgets(ns), lams=tuple(m.lam for m in self.members),
                             two_choices=two_fixed_choices(self.choices,
                                                           is_open=self.answer_kind.is_open),
                             vote_price=tuple(self._vote_price(m, messages)
                                              for m in self.members))
        drawing = await draw_all(self.members, self._params, messages, plan,
                                 observe=self._observe, memory=self.stop_memory,
                                 context=context, parser=self.parser, store=self._get_store(),
                                 provider_for=self._provider_for, use_n=self._n_ok,
                                 in_flight=self._in_flight)
        results = drawing.results
        policy = drawing.policy if self.stop_spec is not None else None
        failures = [f for r in results for f in r.failures]
        if on_error == "raise":
            from .sampling.results import raise_for_failures

            for r in results:
                raise_for_failures(r, len(messages))
        out: list[Decision[AnswerT] | EnsembleError] = []
        for ri in range(len(messages)):
            rows = [[s for s in r.rows[ri] if s is not None] for r in results]
            drawn = all(len(row) == len(r.rows[ri]) for row, r in zip(rows, results, strict=True))
            if not drawn or any(f.request == ri for f in failures):
                mine = [f for f in failures if f.request == ri]
                stopped = next((r.stopped for r in results if r.stopped is not None), None)
                why = mine[0].message if mine else str(stopped)
                out.append(SamplingFailed(why, failures=mine))
            else:
                out.append(self._decide(rows, policy, messages[ri]))
        return out

    async def adecide(self, prompt: Prompt) -> Decision[AnswerT]:
        """Draw the samples of `prompt` (every member's) and aggregate them (async)."""
        return (await self.adecide_many([prompt]))[0]

    def decide(self, prompt: Prompt) -> Decision[AnswerT]:
        """Draw the samples of `prompt` and aggregate them. Works inside a running event loop
        too (Jupyter): the request runs on the Ensemble's own loop, on its thread."""
        return self._run(self.adecide(prompt))

    def decide_many(self, prompts: Sequence[Prompt]) -> list[Decision[AnswerT]]:
        """Decide many prompts concurrently (sync form of `adecide_many`)."""
        return self._run(self.adecide_many(prompts))


def _request_extra(extra_body: dict[str, Any] | None, kind: AnswerKind,
                   tools: Sequence[dict[str, Any]] | None, tool_choice: Any) -> dict[str, Any]:
    """What every request carries besides the sampling parameters: extra_body, the answer
    kind's response_format, the tools and tool_choice (as given)."""
    extra: dict[str, Any] = {"extra_body": extra_body} if extra_body else {}
    response_format = kind.response_format()
    if response_format is not None:
        extra["response_format"] = response_format
    if tools is not None:
        extra["tools"] = [dict(t) for t in tools]
        if tool_choice is not None:
            extra["tool_choice"] = tool_choice
    return extra


def _with_tools(kind: AnswerKind, tools: Sequence[dict[str, Any]] | None,
                tool_choice: Any) -> AnswerKind:
    """The answer kind of an Ensemble with `tools=`: tool calls, text replies voted by `kind`."""
    if tools is None:
        if tool_choice is not None:
            raise InputError("tool_choice= applies with tools=[...]")
        return kind
    return ToolCalls(tools, text=kind, choice=tool_choice)


_PARAM_FIELDS = ("top_p", "max_tokens", "sampling_seed", "stop_sequences", "logprobs",
                 "top_logprobs")
_ENSEMBLE_NAMES = ("model", "members", "temperature", "n", "aggregator", "choices", "answer",
                   "parser", "tie", "invalid", "seed", "lam", "calibration", "stop", "max_n",
                   "system", "store", "options", "provider", "providers", "extra_body", "tools",
                   "tool_choice")


async def _started() -> None:
    """The sync calls' loop needs nothing set up."""
