"""What an ensemble decides on one prompt: `Decision` (the winning answer, its votes and every
sample behind it) and `tally`, which aggregates the members' samples into one."""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic

from .aggregators import Vote
from .answers import AnswerKind, ToolCall, spellings, vote_keys, votes_fields
from .rules import Evidence, TraceSummary
from .sampling.types import Sample
from .stopping.priors import PriorUsed

if sys.version_info >= (3, 13):
    from typing import TypeVar
else:  # pragma: no cover - a TypeVar's default (PEP 696) is new in 3.13
    from typing_extensions import TypeVar

__all__ = ["AnswerT", "CostRuleOutcome", "Decision", "evidence_of", "plain", "tally"]

# the type of a decided answer: str for choices (the default), float for answer="number", the
# model for a pydantic answer (Ensemble's overloads pick it from `answer=`)
AnswerT = TypeVar("AnswerT", default=str)


@dataclass(frozen=True)
class CostRuleOutcome(Generic[AnswerT]):
    """What the cost rule concluded on one prompt (`Decision.cost_rule`, with `stop="cost"`;
    docs/adaptive.md). The Decision's answer is the rule's: `ensemble.cost.choice`.

    win:          the rule's posterior probability that `Decision.decision` is the reference
                  answer (with `CostSpec(credit="qr")`: that it is right, under quantal
                  response) given every vote drawn, the members weighed by their λ through
                  the fitted joint prior (against its strongest rival when more than two
                  answers tie in the ranks; 1/2 on a tie); None without a decision.
    drawn:        the votes drawn from each member (invalid replies included), in the order
                  of `Ensemble.members`.
    leaders:      the two answers of the rule's state (ranked by λ-weighted votes; None:
                  fewer answers were seen).
    tied:         the answers the rule could not tell apart (the decision is then the
                  Ensemble's tie-break among them and `Decision.tie` is True); () otherwise.
    value_usd:    dollars a right decision is worth to the rule (given, or solved for from
                  its target_loss).
    aggregator:   the Ensemble's aggregator, and `aggregator_decision` what it would decide
                  over the same votes: reported alongside, never the answer.
    mix:          the share of questions the rule runs on the cheaper of two policies (a
                  target_loss between two policies is met by mixing them, per question;
                  0: one policy; `ensemble.cost.rule`), and `cheaper` whether this prompt
                  ran the cheaper one (its coin is keyed by the prompt: the same every time).
    """

    win: float | None
    drawn: tuple[int, ...]
    leaders: tuple[str | None, str | None]
    tied: tuple[str, ...]
    value_usd: float
    aggregator: str
    aggregator_decision: AnswerT | None
    mix: float = 0.0
    cheaper: bool = False

    def to_dict(self) -> dict[str, Any]:
        """As plain JSON values (the aggregator's decision as `Decision.to_dict` writes one)."""
        return {"win": self.win, "drawn": list(self.drawn), "leaders": list(self.leaders),
                "tied": list(self.tied), "value_usd": self.value_usd,
                "aggregator": self.aggregator,
                "aggregator_decision": plain(self.aggregator_decision),
                "mix": self.mix, "cheaper": self.cheaper}


@dataclass(frozen=True, repr=False)
class Decision(Generic[AnswerT]):
    """The ensemble's decision on one prompt, with its votes and every sample behind it.

    decision:     the winning answer, typed by the answer kind (`Decision[float]` and so on,
                  as type checkers read it from `Ensemble(answer=...)`): the choice (str), a
                  float for answer="number", the LaTeX string for "math", the text as most
                  often written for "text", a model instance for structured outputs, a
                  `ToolCall` (a tuple of them for parallel calls) when the Ensemble has
                  `tools=` and the vote chose to call one (None: no valid vote, or an
                  unresolved tie; `why` says which).
    votes:        canonical answer -> count of valid votes (all members pooled); for choices
                  the choice itself.
    spellings:    canonical answer -> {raw spelling: votes} (open answers: "1,250" and
                  "$1,250" both vote for "1250").
    fields:       an answer voted part by part (structured outputs, JSON objects, a client's
                  format, tool calls): the part's name ("outer.inner" when nested; "kind",
                  "tool", "arguments.x" for tool calls) -> its `Vote` (.votes, .margin,
                  .invalid, .spellings, .value the typed winner).
    why:          when `decision` is None, why (no reply could be read, a tie, the voted parts
                  do not make a valid answer).
    answer:       the answer kind's name (choice, number, math, text, structured).
    margin:       top count minus the runner-up's.
    samples:      every sample drawn (text, parsed answer, tokens, cost, latency), member by
                  member in the order of `Ensemble.members`.
    n_invalid:    replies whose answer could not be parsed.  tie: the top was tied.
    aggregator:   the rule that decided ("cost" with stop="cost"); credit: answer -> its
                  share of the decision.
    cost_usd:     the samples' cost (None: unknown price).
    member_votes: answer -> valid votes, per member (one entry for a one-model Ensemble).
    lams:         the λ each member voted with (ψ_λ units, at its temperature; None: unknown).
    stop:         the stopping rule when samples were drawn adaptively (`stop=`), else None;
                  `n_samples` is then what it used (at most the Ensemble's max_n).
    stop_prior:   the prior that rule decided with, and why (`PriorUsed`: fitted on the
                  pilots seen, or the documented default until enough are seen), for a rule
                  that fits one (bayes, cost); None otherwise.
    cost_rule:    with stop="cost", what the cost rule concluded (`CostRuleOutcome`: its
                  posterior `win`, the votes `drawn` per member, the aggregator's decision
                  beside it); None otherwise.
    weights:      with a rule that weighs its samples by their logprobs (weighted, ...): the
                  weight each sample counted with, in the order of `samples`; () otherwise.
    scores:       with such a rule, answer -> its summed score (the decision has the highest).
    """

    decision: AnswerT | None
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
    why: str | None = None
    cost_rule: CostRuleOutcome[AnswerT] | None = None
    stop_prior: PriorUsed | None = None
    weights: tuple[float, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the rule says of this decision (a soft rule's fallback)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The voted tool calls (one, or several for parallel calls); () when the vote chose a
        text reply or there is no decision."""
        d: Any = self.decision
        if isinstance(d, ToolCall):
            return (d,)
        if isinstance(d, tuple) and d and all(isinstance(c, ToolCall) for c in d):
            return d
        return ()

    @property
    def tool_call(self) -> ToolCall | None:
        """The voted tool call (the first, for parallel calls), or None."""
        calls = self.tool_calls
        return calls[0] if calls else None

    @property
    def n_samples(self) -> int:
        """Samples drawn for this decision (all members)."""
        return len(self.samples)

    def __str__(self) -> str:
        votes = ", ".join(f"{k}: {v}" for k, v in sorted(self.votes.items(), key=lambda kv: -kv[1]))
        parts = [votes] if votes else []
        if self.tie:
            parts.append("a tie" + (", broken by the rule's tie-break" if self.decision
                                    is not None else ""))
        if self.n_invalid:
            parts.append(f"{self.n_invalid} invalid")
        if self.stop:
            parts.append(f"{self.n_samples} sample{'s' if self.n_samples != 1 else ''}, "
                         f"stop={self.stop}")
        if self.cost_rule is not None and self.cost_rule.win is not None:
            parts.append(f"the cost rule's win {self.cost_rule.win:.3g}")
        return f"{self.decision} ({'; '.join(parts)})"

    def __repr__(self) -> str:  # short: the samples are in .samples, the whole in to_dict()
        extra = ""
        if len(self.member_votes) > 1:
            extra += f", member_votes={list(self.member_votes)!r}"
        if self.stop:
            extra += f", stop={self.stop!r}"
        if self.cost_rule is not None:
            extra += f", win={self.cost_rule.win!r}, drawn={list(self.cost_rule.drawn)!r}"
        return (f"Decision(decision={self.decision!r}, votes={self.votes!r}, "
                f"n={len(self.samples)}, invalid={self.n_invalid}, tie={self.tie}, "
                f"aggregator={self.aggregator!r}{extra}, cost_usd={self.cost_usd!r})")

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON values (samples included; ±∞ λ as `ensemble.jsonio`)."""
        return {
            "decision": plain(self.decision), "votes": dict(self.votes), "margin": self.margin,
            "n_invalid": self.n_invalid, "tie": self.tie, "aggregator": self.aggregator,
            "credit": dict(self.credit), "cost_usd": self.cost_usd,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "member_votes": [dict(v) for v in self.member_votes], "lams": list(self.lams),
            "stop": self.stop, "n_samples": self.n_samples, "answer": self.answer,
            "why": self.why,
            "cost_rule": None if self.cost_rule is None else self.cost_rule.to_dict(),
            "stop_prior": None if self.stop_prior is None else self.stop_prior.to_dict(),
            "spellings": {k: dict(v) for k, v in self.spellings.items()},
            "weights": list(self.weights), "scores": dict(self.scores),
            "notes": list(self.notes),
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



def tally(rows: Sequence[Sequence[Sample]], *, kind: AnswerKind,
          aggregate: Callable[[list[str | None], list[int] | None], Vote],
          lams: tuple[float | None, ...], stop: str | None) -> Decision[Any]:
    """The Decision of one prompt from its samples, member by member (`rows[g]`: member g's).

    `aggregate(keys, groups)` is the rule over the pooled answers (groups: each vote's member,
    None for one member); open answer kinds merge equal answers first and the decision is the
    kind's typed value (a structured output is voted field by field)."""
    samples = [s for row in rows for s in row]
    answers = vote_keys(kind, [s.answer for s in samples])
    groups = [g for g, row in enumerate(rows) for _ in row] if len(rows) > 1 else None

    def vote(keys: list[str | None]) -> Vote:
        return aggregate(keys, groups)

    v = vote(answers)
    spelled: dict[str, dict[str, int]] = {}
    fields: dict[str, Vote] = {}
    decision: Any = v.decision
    if kind.is_open:
        spelled = spellings(answers, [kind.extract(s.text or "") if a is not None else None
                                      for s, a in zip(samples, answers, strict=True)])
        if votes_fields(kind):
            decision, fields = kind.vote_fields(answers, vote)
        elif v.decision is not None:
            decision = kind.value(v.decision, spelled.get(v.decision, {}))
    costs = [s.cost_usd for s in samples]
    cost = None if any(c is None for c in costs) else float(sum(c for c in costs if c))
    ends = [sum(len(r) for r in rows[:g + 1]) for g in range(len(rows))]
    member_votes = [dict(Counter(a for a in answers[end - len(row):end] if a is not None))
                    for row, end in zip(rows, ends, strict=True)]
    return Decision(
        why=None if decision is not None else _why(v, fields, kind, len(samples)),
        decision=decision, votes=v.counts, samples=tuple(samples), margin=v.margin,
        n_invalid=v.n_invalid, tie=v.tie, aggregator=v.rule, credit=v.credit,
        cost_usd=cost, prompt_tokens=sum(s.prompt_tokens or 0 for s in samples),
        completion_tokens=sum(s.completion_tokens or 0 for s in samples),
        member_votes=tuple(member_votes), lams=lams, stop=stop,
        spellings=spelled, fields=fields, answer=kind.name, weights=v.weights,
        scores=v.scores, notes=v.notes)


def _why(v: Vote, fields: dict[str, Vote], kind: AnswerKind, n: int) -> str:
    """Why a vote decided nothing."""
    if not v.counts:
        what = getattr(kind, "reads", None) or f"a {kind.name} answer"
        return f"none of the {n} replies could be read as {what}"
    if fields:
        explain = getattr(kind, "explain", None)  # the kind's own reason (a failed schema)
        said = explain(fields) if callable(explain) else None
        if said:
            return str(said)
        undecided = [name for name, f in fields.items() if f.decision is None]
        if undecided:
            return (f"no valid vote or a tie on {', '.join(undecided[:5])}: the voted parts do "
                    "not make an answer")
        return "the voted parts together do not make a valid answer"
    if v.tie:
        return "the vote is tied"
    return "no answer won the vote"


def plain(value: Any) -> Any:
    """A decision as a JSON value (a structured output's model instance as its dict, a tool
    call as {name, arguments})."""
    if isinstance(value, ToolCall):
        return {"name": value.name, "arguments": value.arguments}
    if isinstance(value, tuple) and value and all(isinstance(c, ToolCall) for c in value):
        return [plain(c) for c in value]
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", by_alias=True) if callable(dump) else value


def evidence_of(sample: Sample, *, options: Sequence[str] | None = None) -> Evidence:
    """What a sample's logprobs say about it, for the rules that read them
    (`ensemble.rules.Requests`), from its compact logprobs (`Sample.answer_lp`,
    `ensemble.sampling.logprobs`): the answer's logprob (its span's tokens summed), log
    P(option) at the answer position for choice answers (`options`: the top-k mapped to them),
    and its reply's token logprobs summarised (`trace`, with DeepConf's confidences); None
    where the reply came without them, which a rule reading them refuses."""
    from .sampling.logprobs import answer_logprob, option_probs
    from .sampling.parsing import choice_parser

    lp = sample.answer_lp
    if not isinstance(lp, dict):
        return Evidence(trace=_trace(sample.logprobs))
    parse = choice_parser(options) if options else None
    own = answer_logprob(lp, sample.answer, parse)
    probs = option_probs(lp, sample.answer, parse, options=options) if options else None
    tr = lp.get("trace")
    full = _trace(sample.logprobs)  # the exact mean where the full logprobs are at hand
    trace = (TraceSummary(tokens=int(tr[0]),
                          mean_logprob=full.mean_logprob if full is not None else float(tr[1]),
                          confidence=float(tr[2]), lowest_group=float(tr[3]), tail=float(tr[4]))
             if isinstance(tr, list) and len(tr) == 5 else full)
    return Evidence(logprob=own,
                    options=None if probs is None else
                    {k: math.log(max(v, 1e-300)) for k, v in probs.items()},
                    trace=trace)


def _trace(logprobs: Any) -> TraceSummary | None:
    """The OpenAI `logprobs` object's tokens: how many and their mean logprob."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    values: list[float] = []
    for t in content:
        v = t.get("logprob") if isinstance(t, dict) else None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v > 0:
            return None  # not a logprob: refused as missing rather than read as one
        values.append(float(v))
    return TraceSummary(tokens=len(values), mean_logprob=math.fsum(values) / len(values))
