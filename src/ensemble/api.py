"""Voting in Python code: `Ensemble(...).decide(prompt)` and the `@vote` decorator.

    from ensemble import Ensemble
    ens = Ensemble(model="openai/gpt-4o-mini", temperature=0.5, n=5, choices=["L", "R"])
    d = ens.decide("...")          # or: await ens.adecide("...")
    d.decision, d.votes, d.margin

The core is async (`adecide`, `adecide_many`); `decide` and `decide_many` are thin wrappers that
work inside and outside a running event loop (Jupyter included).
"""

from __future__ import annotations

import collections
import functools
import inspect
import json
import os
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, Protocol, cast, overload

from .aggregators import Vote, get_aggregator
from .answers import AnswerKind, Structured, merge_same, resolve_answer, spellings
from .errors import EnsembleError, InputError, SamplingFailed
from .members import Member
from .providers.base import Provider
from .providers.options import ProviderOptions, check_keywords
from .providers.params import SamplingParams
from .providers.registry import provider_for
from .sampling.parsing import check_choices, choice_parser, extract_answer
from .sampling.types import Message, Sample, SampleRequest, as_messages

if TYPE_CHECKING:
    from .stopping import StopSpec

__all__ = ["AsyncVoted", "Decision", "Ensemble", "Member", "Voted", "vote"]

P = ParamSpec("P")
HISTORY_MAX = 20_000  # earlier decisions' pilots the bayes stopping rule's prior is fitted from

Prompt = str | Sequence[Message]


@dataclass(frozen=True, repr=False)
class Decision:
    """The ensemble's decision on one prompt, with its votes and every sample behind it.

    decision:     the winning answer, typed by the answer kind: the choice (str), a float for
                  answer="number", the LaTeX string for "math", the text as most often
                  written for "text", a model instance for structured outputs (None: no
                  valid vote, or an unresolved tie).
    votes:        canonical answer -> count of valid votes (all members pooled); for choices
                  the choice itself.
    spellings:    canonical answer -> {raw spelling: votes} (open answers: "1,250" and
                  "$1,250" both vote for "1250").
    fields:       structured outputs: field name ("outer.inner" when nested) -> its `Vote`
                  (.votes, .margin, .invalid, .spellings, .value the typed winner).
    answer:       the answer kind's name (choice, number, math, text, structured).
    margin:       top count minus the runner-up's.
    samples:      every sample drawn (text, parsed answer, tokens, cost, latency), member by
                  member in the order of `Ensemble.members`.
    n_invalid:    replies whose answer could not be parsed.  tie: the top was tied.
    aggregator:   the rule that decided; credit: answer -> its share of the decision.
    cost_usd:     the samples' cost (None: unknown price).
    member_votes: answer -> valid votes, per member (one entry for a one-model Ensemble).
    lams:         the λ each member voted with (ψ_λ units, at its temperature; None: unknown).
    stop:         the stopping rule when samples were drawn adaptively (`stop=`), else None;
                  `n_samples` is then what it used (at most the Ensemble's max_n).
    """

    # statically `str | None` (choices, the default); an open kind stores its typed value here
    # (float for "number", a model instance for structured outputs): cast where it matters
    decision: str | None
    votes: dict[str, int]
    samples: tuple[Sample, ...]
    margin: int
    n_invalid: int
    tie: bool
    aggregator: str
    credit: dict[str, float]
    cost_usd: float | None
    prompt_tokens: int
    completion_tokens: int
    member_votes: tuple[dict[str, int], ...] = ()
    lams: tuple[float | None, ...] = ()
    stop: str | None = None
    spellings: dict[str, dict[str, int]] = field(default_factory=dict)
    fields: dict[str, Vote] = field(default_factory=dict)
    answer: str = "choice"

    @property
    def n_samples(self) -> int:
        """Samples drawn for this decision (all members)."""
        return len(self.samples)

    def __str__(self) -> str:
        votes = ", ".join(f"{k}: {v}" for k, v in sorted(self.votes.items(), key=lambda kv: -kv[1]))
        parts = [votes] if votes else []
        if self.n_invalid:
            parts.append(f"{self.n_invalid} invalid")
        if self.stop:
            parts.append(f"{self.n_samples} samples, stop={self.stop}")
        return f"{self.decision} ({'; '.join(parts)})"

    def __repr__(self) -> str:  # short: the samples are in .samples, the whole in to_dict()
        extra = ""
        if len(self.member_votes) > 1:
            extra += f", member_votes={list(self.member_votes)!r}"
        if self.stop:
            extra += f", stop={self.stop!r}"
        return (f"Decision(decision={self.decision!r}, votes={self.votes!r}, "
                f"n={len(self.samples)}, invalid={self.n_invalid}, tie={self.tie}, "
                f"aggregator={self.aggregator!r}{extra}, cost_usd={self.cost_usd!r})")

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON values (samples included; ±∞ λ as `ensemble.jsonio`)."""
        return {
            "decision": _plain(self.decision), "votes": dict(self.votes), "margin": self.margin,
            "n_invalid": self.n_invalid, "tie": self.tie, "aggregator": self.aggregator,
            "credit": dict(self.credit), "cost_usd": self.cost_usd,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "member_votes": [dict(v) for v in self.member_votes], "lams": list(self.lams),
            "stop": self.stop, "n_samples": self.n_samples, "answer": self.answer,
            "spellings": {k: dict(v) for k, v in self.spellings.items()},
            "fields": {name: {"decision": f.decision, "votes": dict(f.counts),
                              "margin": f.margin, "n_invalid": f.n_invalid}
                       for name, f in self.fields.items()},
            "samples": [{"index": s.index, "text": s.text, "answer": s.answer,
                         "valid": s.valid, "finish_reason": s.finish_reason,
                         "completion_tokens": s.completion_tokens, "cost_usd": s.cost_usd,
                         "latency_s": s.latency_s, "cached": s.cached} for s in self.samples],
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """`to_dict()` as JSON text (±∞ as null plus a `k_inf` sign marker)."""
        from .jsonio import dumps

        return dumps(self.to_dict(), indent=indent)


class Ensemble:
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
    aggregator:   plurality (default), majority, random-follow, weighted (by logprob
                  confidence), lam-weighted (each vote weighs 2λ of its member), robust (the
                  minimax-regret rule; binary choices; per-member counts for members).
                  lam-weighted and robust need every member's λ.
    lam:          λ of the one model at its temperature (ψ_λ(p) = 1/(1+exp(2λ(1−2p))) units);
                  members carry their own.
    calibration:  a profile (`ensemble calibrate`'s profile.json or its folder) or a list of
                  them: each member's λ is λ₁/t from the profile matching its (model,
                  api_base), unless it has its own `lam` or `calibration`.
    stop:         "bayes" | "beta" | a `StopSpec`: draw adaptively, up to `max_n` (default n)
                  samples per decision, stopping once the answer is settled; the bayes rule's
                  prior is fitted from the pilots of this Ensemble's earlier decisions too
                  (the most recent HISTORY_MAX = 20,000).
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
    Sampling parameters: top_p, max_tokens, sampling_seed, stop_sequences (the provider's
    `stop`; `stop=` here is the stopping rule), logprobs, top_logprobs; provider-specific
    parameters go in `extra_body={...}`. Unknown keywords are an error that names the closest
    known one.

    The Ensemble keeps what it opens (the embedded local model's servers, the store) until
    `close()` (or `with Ensemble(...) as ens:`), so repeated `decide` calls reuse them.
    """

    def __init__(self, model: str | None = None, *, members: Sequence[Member] | None = None,
                 temperature: float | None = None, n: int | None = None,
                 aggregator: str = "plurality", choices: Sequence[str] | None = None,
                 answer: Any = None, parser: Callable[[str], str | None] | None = None,
                 tie: str = "random",
                 invalid: str = "ignore", seed: int | None = None, lam: float | None = None,
                 calibration: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] |
                 None = None, stop: str | StopSpec | None = None, max_n: int | None = None,
                 system: str | None = None, store: str | os.PathLike[str] | None = None,
                 options: ProviderOptions | None = None, provider: Provider | None = None,
                 extra_body: dict[str, Any] | None = None, **kwargs: Any) -> None:
        from .members import resolve_members

        check_keywords(kwargs, (*ProviderOptions.names(), *_PARAM_FIELDS, *_ENSEMBLE_NAMES),
                       where="Ensemble")
        provider_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in ProviderOptions.names()}
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
        if choices is not None and (isinstance(choices, str) or len(set(choices)) != len(
                choices) or not all(isinstance(c, str) and c.strip() for c in choices)):
            raise InputError(f"choices must be distinct non-empty strings, got {choices!r}")
        if choices is not None:
            check_choices(choices)
        self.choices = tuple(choices) if choices is not None else None
        self.answer_kind: AnswerKind = resolve_answer(answer, self.choices)
        if not self.answer_kind.is_open:
            self.parser = parser or (choice_parser(self.choices) if self.choices
                                     else extract_answer)
        else:
            self.parser = parser or self.answer_kind.parse
        self.aggregator_name = aggregator
        self.aggregator = self._make_aggregator(aggregator, tie=tie, invalid=invalid, seed=seed)
        self.stop_spec = self._stop_spec(stop, max_n)
        # (top, second) pilot counts for the bayes prior: the most recent HISTORY_MAX, so that
        # a long-lived Ensemble (`ensemble serve`) neither grows nor slows without bound
        self._history: collections.deque[tuple[int, int]] = collections.deque(
            maxlen=HISTORY_MAX)
        self.system = system
        rename = {"sampling_seed": "seed", "stop_sequences": "stop"}
        params = {rename.get(k, k): v for k, v in kwargs.items()}
        extra: dict[str, Any] = {"extra_body": extra_body} if extra_body else {}
        response_format = self.answer_kind.response_format()
        if response_format is not None:
            extra["response_format"] = response_format
        self._params = [SamplingParams.make(m.temperature, extra=extra or None, **params)
                        for m in self.members]
        self.params = self._params[0]
        if store is not None:
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
        self._store_path = store
        self._store: Any = None
        self._given_provider = provider
        self._providers: dict[tuple[str, ProviderOptions], Provider] = {}
        self._lock = threading.Lock()

    def _make_aggregator(self, name: str, *, tie: str, invalid: str, seed: int | None) -> Any:
        from .aggregators import aggregator_info

        info = aggregator_info(name)
        opts: dict[str, Any] = {"tie": tie, "invalid": invalid, "rng": seed}
        if "lam" in info.needs:
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
                             "open (any number of answers): use plurality, majority, weighted "
                             "or lam-weighted")
        if info.binary and self.choices is None and not kind.is_open:
            raise InputError(f"{name} decides between two options: give choices=[first, "
                             "second] (the first is the report '1')")
        if kind.is_open:
            return get_aggregator(name, open=True, **opts)
        return get_aggregator(name, choices=self.choices, **opts)

    def _stop_spec(self, stop: str | StopSpec | None, max_n: int | None) -> StopSpec | None:
        from .stopping import StopSpec

        if stop is None:
            if max_n is not None:
                raise InputError("max_n= applies with stop= (adaptive sampling); for a fixed "
                                 "number of samples give n=")
            return None
        if max_n is not None and len(self.members) > 1:
            raise InputError("max_n= is for one model; with members each Member's n is the "
                             "most votes it gives a decision")
        if isinstance(stop, StopSpec):
            return stop
        if stop not in ("bayes", "beta"):
            raise InputError(f"stop must be 'bayes', 'beta' or a StopSpec, got {stop!r}")
        return StopSpec(stop=stop, max_n=self.n if max_n is None else max_n)

    def __repr__(self) -> str:
        if len(self.members) == 1:
            m = self.members[0]
            return (f"Ensemble(model={m.model!r}, temperature={m.temperature}, n={m.n}, "
                    f"aggregator={self.aggregator_name!r})")
        return f"Ensemble(members={list(self.members)!r}, aggregator={self.aggregator_name!r})"

    # -- resources ---------------------------------------------------------------------------
    def _provider_for(self, m: Member) -> Provider:
        with self._lock:
            if self._given_provider is not None:
                return self._given_provider
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
        """Stop what the Ensemble started (local models' servers) and close its store."""
        with self._lock:
            providers, self._providers = list(self._providers.values()), {}
            store, self._store = self._store, None
        for p in providers:
            await p.aclose()
        if store is not None:
            store.close()

    def close(self) -> None:
        """`aclose()` from sync code."""
        from ._sync import run_sync

        run_sync(self.aclose())

    def __enter__(self) -> Ensemble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Ensemble:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- deciding ----------------------------------------------------------------------------
    def _messages(self, prompt: Prompt) -> tuple[dict[str, str], ...]:
        messages = as_messages(prompt)
        if self.system:
            messages = ({"role": "system", "content": self.system},) + messages
        return messages

    def _decide(self, rows: Sequence[Sequence[Sample]]) -> Decision:
        kind = self.answer_kind
        samples = [s for row in rows for s in row]
        answers = [s.answer for s in samples]
        if kind.is_open:
            answers = merge_same(kind, answers)
        groups = [g for g, row in enumerate(rows) for _ in row] if len(rows) > 1 else None
        weights = [_confidence(s) for s in samples] if self.aggregator_name == "weighted" else None
        choices = None if kind.is_open else self.choices

        def aggregate(keys: list[str | None]) -> Vote:
            return self.aggregator(keys, choices=choices, weights=weights, groups=groups)

        v = aggregate(answers)
        spelled: dict[str, dict[str, int]] = {}
        fields: dict[str, Vote] = {}
        decision: Any = v.decision
        if kind.is_open:
            spelled = spellings(answers, [kind.extract(s.text or "") if a is not None else None
                                          for s, a in zip(samples, answers, strict=True)])
            if isinstance(kind, Structured):
                decision, fields = kind.vote_fields(answers, aggregate)
            elif v.decision is not None:
                decision = kind.value(v.decision, spelled.get(v.decision, {}))
        costs = [s.cost_usd for s in samples]
        cost = None if any(c is None for c in costs) else float(sum(c for c in costs if c))
        ends = [sum(len(r) for r in rows[:g + 1]) for g in range(len(rows))]
        member_votes = [dict(Counter(a for a in answers[end - len(row):end] if a is not None))
                        for row, end in zip(rows, ends, strict=True)]
        return Decision(
            decision=decision, votes=v.counts, samples=tuple(samples), margin=v.margin,
            n_invalid=v.n_invalid, tie=v.tie, aggregator=v.rule, credit=v.credit,
            cost_usd=cost, prompt_tokens=sum(s.prompt_tokens or 0 for s in samples),
            completion_tokens=sum(s.completion_tokens or 0 for s in samples),
            member_votes=tuple(member_votes), lams=tuple(m.lam for m in self.members),
            stop=self.stop_spec.stop if self.stop_spec is not None else None,
            spellings=spelled, fields=fields, answer=kind.name)

    async def _sample_member(self, g: int, messages: Sequence[tuple[dict[str, str], ...]]
                             ) -> Any:
        from .sampling.sampler import Sampler

        m = self.members[g]
        requests = [SampleRequest(msgs, self._params[g], m.n) for msgs in messages]
        sampler = Sampler(m.model, options=m.options, provider=self._provider_for(m),
                          store=self._get_store())
        async with sampler:
            if self.stop_spec is None:
                return await sampler.run(requests, parser=self.parser)
            from .stopping import answer_counts

            result = await sampler.run_adaptive(requests, self.stop_spec, parser=self.parser,
                                                history=list(self._history))
            first = self.stop_spec.first_draw()
            for row in result.rows:
                pilot = [s.answer for s in row[:first] if s is not None]
                if len(pilot) == first:
                    _, top, second = answer_counts(pilot)
                    self._history.append((top, second))
            return result

    async def _sample_pooled(self, messages: Sequence[tuple[dict[str, str], ...]],
                             spec: StopSpec) -> list[Any]:
        """Adaptive sampling over members, the rule applied to the pooled votes.

        Per prompt, votes are drawn in rounds: one more sample from every member that has not
        reached its n. After the pilot rounds (at least `spec.first_draw()` pooled votes; the
        bayes prior is fitted from them across the prompts and this Ensemble's earlier
        decisions), a new round is drawn while the rule asks for more and some member has
        budget left. Member g's i-th vote is its stored sample i (as in a fixed run), so a
        rerun on a store costs nothing; without a store, an in-memory one keeps the drawn
        samples for the call.
        """
        import asyncio
        import contextlib

        from .sampling.sampler import Sampler, SampleResult
        from .sampling.store import SampleStore
        from .stopping import answer_counts

        store = self._get_store()
        scratch = SampleStore(":memory:") if store is None else None
        G, P = len(self.members), len(messages)
        rows: list[list[list[Sample]]] = [[[] for _ in range(G)] for _ in range(P)]
        failures: list[list[Any]] = [[] for _ in range(G)]
        failed: set[int] = set()

        async with contextlib.AsyncExitStack() as stack:
            samplers = [await stack.enter_async_context(Sampler(
                m.model, options=m.options, provider=self._provider_for(m),
                store=store or scratch)) for m in self.members]

            async def draw_round(p: int) -> bool:
                """One more vote from each member with budget left; False if none had any."""
                todo = [g for g in range(G) if len(rows[p][g]) < self.members[g].n]
                if not todo or p in failed:
                    return False

                async def one(g: int) -> None:
                    req = SampleRequest(messages[p], self._params[g], len(rows[p][g]) + 1)
                    res = await samplers[g].run([req], parser=self.parser)
                    if res.failures or res.stopped is not None:
                        failed.add(p)
                        failures[g] += [replace(f, request=p) for f in res.failures]
                        return
                    rows[p][g] = [s for s in res.rows[0] if s is not None]

                await asyncio.gather(*(one(g) for g in todo))
                return True

            def pooled(p: int) -> list[str | None]:
                return [s.answer for g in range(G) for s in rows[p][g]]

            async def pilot(p: int) -> None:
                while len(pooled(p)) < spec.first_draw() and await draw_round(p):
                    pass

            await asyncio.gather(*(pilot(p) for p in range(P)))
            if spec.needs_pilot:
                counts = [answer_counts(pooled(p)) for p in range(P) if p not in failed]
                rule = spec.rule_from_counts([c[1] for c in counts] + [h[0] for h in self._history],
                                             [c[2] for c in counts] + [h[1] for h in self._history])
                self._history.extend((c[1], c[2]) for c in counts)
            else:
                rule = spec.rule()

            async def finish(p: int) -> None:
                while p not in failed and rule.more(pooled(p)) > 0 and await draw_round(p):
                    pass

            await asyncio.gather(*(finish(p) for p in range(P)))
        if scratch is not None:
            scratch.close()
        return [SampleResult(rows=[list(rows[p][g]) for p in range(P)], failures=failures[g])
                for g in range(G)]

    @overload
    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: Literal["raise"] = ...) -> list[Decision]: ...

    @overload
    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: Literal["return"]) -> list[Decision | EnsembleError]: ...

    async def adecide_many(self, prompts: Sequence[Prompt], *,
                           on_error: str = "raise") -> Sequence[Decision | EnsembleError]:
        """Decide many prompts concurrently (within each endpoint's limits; members at once).

        A prompt that fails for good (e.g. refused by the provider) does not stop the others:
        they all finish and are stored. Then `on_error="raise"` raises `SamplingFailed` naming
        the failures; `on_error="return"` puts the error in that prompt's place in the list.
        """
        import asyncio

        if on_error not in ("raise", "return"):
            raise InputError(f"on_error must be 'raise' or 'return', got {on_error!r}")
        if isinstance(prompts, str):
            raise InputError("adecide_many takes a list of prompts; use adecide for one")
        if prompts is None or not hasattr(prompts, "__iter__"):
            raise InputError("decide_many / adecide_many take a list of prompts, got "
                             f"{type(prompts).__name__}")
        messages = [self._messages(p) for p in prompts]
        if self.stop_spec is not None and len(self.members) > 1:
            results = await self._sample_pooled(messages, self.stop_spec)
        else:
            results = list(await asyncio.gather(*(self._sample_member(g, messages)
                                                  for g in range(len(self.members)))))
        failures = [f for r in results for f in r.failures]
        if on_error == "raise":
            from .sampling.sampler import raise_for_failures

            for r in results:
                raise_for_failures(r, len(messages))
        out: list[Decision | EnsembleError] = []
        for ri in range(len(messages)):
            rows = [r.rows[ri] for r in results]
            if any(s is None for row in rows for s in row) or any(
                    f.request == ri for f in failures):
                mine = [f for f in failures if f.request == ri]
                stopped = next((r.stopped for r in results if r.stopped is not None), None)
                why = mine[0].message if mine else str(stopped)
                out.append(SamplingFailed(why, failures=mine))
            else:
                out.append(self._decide(rows))
        return out

    async def adecide(self, prompt: Prompt) -> Decision:
        """Draw the samples of `prompt` (every member's) and aggregate them (async)."""
        return (await self.adecide_many([prompt]))[0]

    def decide(self, prompt: Prompt) -> Decision:
        """Draw the samples of `prompt` and aggregate them. Works inside a running event loop
        too (Jupyter): the request then runs on a worker thread."""
        from ._sync import run_sync

        return run_sync(self.adecide(prompt))

    def decide_many(self, prompts: Sequence[Prompt]) -> list[Decision]:
        """Decide many prompts concurrently (sync form of `adecide_many`)."""
        from ._sync import run_sync

        return run_sync(self.adecide_many(prompts))


_PARAM_FIELDS = ("top_p", "max_tokens", "sampling_seed", "stop_sequences", "logprobs",
                 "top_logprobs")
_ENSEMBLE_NAMES = ("model", "members", "temperature", "n", "aggregator", "choices", "answer",
                   "parser",
                   "tie", "invalid", "seed", "lam", "calibration", "stop", "max_n", "system",
                   "store", "options", "provider", "extra_body")


def _plain(value: Any) -> Any:
    """A decision as a JSON value (a structured output's model instance as its dict)."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def _confidence(s: Sample) -> float:
    """exp(mean token logprob) of a sample: a confidence weight in (0, 1]; 1 when unknown."""
    import math

    try:
        toks = s.logprobs["content"]
        lps = [t["logprob"] for t in toks]
        return math.exp(sum(lps) / len(lps)) if lps else 1.0
    except (TypeError, KeyError):
        return 1.0


class Voted(Protocol[P]):
    """A prompt builder decorated with `@vote`: calling it returns the ensemble's Decision."""

    @property
    def ensemble(self) -> Ensemble: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Decision: ...

    def adecide(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, Decision]: ...


class AsyncVoted(Protocol[P]):
    """An `async def` prompt builder decorated with `@vote`: awaiting it gives the Decision."""

    @property
    def ensemble(self) -> Ensemble: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, Decision]: ...


class _VoteDecorator:
    """What `vote(...)` returns: applied to a prompt builder, a function returning Decisions."""

    def __init__(self, ens: Ensemble) -> None:
        self.ensemble = ens

    @overload
    def __call__(self, fn: Callable[P, Awaitable[Prompt]]) -> AsyncVoted[P]: ...

    @overload
    def __call__(self, fn: Callable[P, Prompt]) -> Voted[P]: ...

    def __call__(self, fn: Callable[P, Any]) -> AsyncVoted[P] | Voted[P]:
        ens = self.ensemble
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Decision:
                return await ens.adecide(await fn(*args, **kwargs))

            async_wrapper.ensemble = ens  # type: ignore[attr-defined]
            return cast("AsyncVoted[P]", async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Decision:
            return ens.decide(fn(*args, **kwargs))

        async def adecide(*args: P.args, **kwargs: P.kwargs) -> Decision:
            return await ens.adecide(fn(*args, **kwargs))

        wrapper.adecide = adecide  # type: ignore[attr-defined]
        wrapper.ensemble = ens  # type: ignore[attr-defined]
        return cast("Voted[P]", wrapper)


def vote(model: str | None = None, **options: Any) -> _VoteDecorator:
    """Decorator: the function builds a prompt; calling it returns the ensemble's Decision.

        @vote("openai/gpt-4o-mini", temperature=0.5, n=5, choices=["positive", "negative"])
        def sentiment(text: str) -> str:
            return f"Is this review positive or negative? {text}"

        sentiment("Great film!").decision
        await sentiment.adecide("Great film!")      # async variant

    Takes what `Ensemble` takes (members=, calibration=, stop=, ...). An `async def` prompt
    builder gives an async function returning the Decision. Type checkers see the decorated
    function's parameters, `Decision` as its result, and its `.adecide` and `.ensemble`
    (`Voted` / `AsyncVoted`).
    """
    return _VoteDecorator(Ensemble(model, **options))
