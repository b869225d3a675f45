"""The aggregation rules by name: each rule is one registered `RuleInfo` that says what it is.

A rule declares what it applies to (two options only, or open answers), what it needs (every
member's λ, per-vote weights, the true structure), whether the evals can score it, and its
forms: the per-vote rule (`build`, an `Aggregator` class), its vector f(0..n) for one group of
n experts of rationality λ (`f`), its array f[x_1, ..., x_G] for groups (`group_f`, what the
theory and the box-ball estimates use) and its credit on observed votes over any number of
options (`credit`, what the multiple-choice estimates use). Register one with the class
decorator:

    from ensemble import RuleBase, register_rule

    @register_rule(summary="plurality over the first two votes", credit=first_two_credit)
    class FirstTwo(RuleBase):
        name = "first-two"
        def aggregate(self, answers, *, choices, weights, groups): ...

or through the entry-point group `ensemble.rules` (loaded on the first look-up). Every
consumer asks here: `get_aggregator`, `Ensemble(aggregator=...)`, the evals' checks and
scoring, `ensemble theory regret --aggregator`, `ensemble serve --aggregator`, the CLI's
choices. An unknown name, or a rule that cannot apply, is refused in one line; no rule stands
in for another.

The built-in rules are in `ensemble.aggregators`; their names, which the evals and the
tasks use for the main vote and the baseline, are the constants below.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .errors import InputError
from .registry import Names, Registry, own_name, registration

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "DEFAULT_AGGREGATOR",
    "HARD",
    "LAM_WEIGHTED",
    "MAJORITY",
    "PLURALITY",
    "RANDOM_FOLLOW",
    "ROBUST",
    "WEIGHTED",
    "Ballots",
    "Evidence",
    "Requests",
    "RuleInfo",
    "RunBallots",
    "TraceSummary",
    "aggregator_info",
    "aggregator_names",
    "baseline",
    "declared",
    "default_rules",
    "is_baseline",
    "main_vote",
    "reads",
    "register_rule",
    "rules",
]

# the built-ins' names, written once (ensemble.aggregators registers their rules)
PLURALITY = "plurality"
MAJORITY = "majority"
RANDOM_FOLLOW = "random-follow"
WEIGHTED = "weighted"
LAM_WEIGHTED = "lam-weighted"
ROBUST = "robust"
DEFAULT_AGGREGATOR = PLURALITY

FArray = Callable[[int, "float | None"], "NDArray[np.float64]"]
GroupF = Callable[[Sequence[Any]], "NDArray[np.float64]"]
Credit = Callable[[Any, Any, "Sequence[float | None]"], "NDArray[np.float64]"]
Weighs = Callable[["Sequence[float | None]"], "Sequence[float]"]
C = TypeVar("C", bound=Callable[..., Any])


@dataclass(frozen=True)
class Requests:
    """What a rule reads from each sample beyond its hard answer; whoever draws asks for it
    (`sampling()`), and a rule whose requests a sample cannot meet is refused (`missing`),
    never replaced by a rule that reads less.

    answer_logprobs: the answer's own log-probability (the answer span's token logprobs).
    top_logprobs: the k most likely tokens at the answer position (0: none), from which a
        sample's distribution over the options is read.
    trace_logprobs: every token's logprob over the whole reply (its trace confidence).
    """

    answer_logprobs: bool = False
    top_logprobs: int = 0
    trace_logprobs: bool = False

    def __post_init__(self) -> None:
        k = self.top_logprobs
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 20:
            raise InputError(f"Requests: top_logprobs is an integer in 0..20 (the providers' "
                             f"limit), got {k!r}")

    @property
    def logprobs(self) -> bool:
        """Whether the rule reads any token logprobs (a hard answer alone does not)."""
        return self.answer_logprobs or self.top_logprobs > 0 or self.trace_logprobs

    def __or__(self, other: Requests) -> Requests:
        """What two rules read together (a run that scores both draws once)."""
        return Requests(self.answer_logprobs or other.answer_logprobs,
                        max(self.top_logprobs, other.top_logprobs),
                        self.trace_logprobs or other.trace_logprobs)

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters that ask a provider for it (`SamplingParams` fields)."""
        if not self.logprobs:
            return {}
        return {"logprobs": True, **({"top_logprobs": self.top_logprobs}
                                     if self.top_logprobs else {})}

    def asked_with(self, params: Mapping[str, Any], *, rule: str) -> dict[str, Any]:
        """Sampling parameters (`SamplingParams` keywords) that also ask for what `rule`
        reads: logprobs on, top_logprobs at least k; a caller's explicit `logprobs=False`
        contradicts the rule and is refused in one line."""
        out = dict(params)
        if not self.logprobs:
            return out
        if "logprobs" in out and not out["logprobs"]:
            raise InputError(f"{rule} weighs each vote by {self.describe()}, so it draws "
                             "logprobs: drop logprobs=False, or choose a rule that counts hard "
                             "answers")
        out["logprobs"] = True
        if self.top_logprobs:
            given = out.get("top_logprobs")
            out["top_logprobs"] = max(self.top_logprobs, given if isinstance(given, int) else 0)
        return out

    def describe(self) -> str:
        """What it reads, for people: "the answer's logprob and the top 5 at its position"."""
        parts = (["the answer's logprob"] if self.answer_logprobs else []) + (
            [f"the top {self.top_logprobs} logprobs at the answer position"]
            if self.top_logprobs else []) + (
            ["the reply's token logprobs"] if self.trace_logprobs else [])
        return " and ".join(parts) or "the hard answer"

    def missing(self, evidence: Sequence[Evidence | None]) -> str | None:
        """Why `evidence` (one per sample) cannot meet these requests, in a few words, or None:
        how many samples lack what is read."""
        lacking = self.lacking(evidence)
        if not lacking:
            return None
        return f"{lacking} of {len(evidence)} replies came without {self.describe()}"

    def lacking(self, evidence: Sequence[Evidence | None]) -> int:
        """How many samples of `evidence` lack what is read (0 for the hard answer alone)."""
        if not self.logprobs:
            return 0
        # a reply that came with logprobs but whose answer they do not spell (an invalid
        # reply, or an answer read from words the tokens split oddly) is the rule's to weigh
        # (a soft rule counts it as a hard vote); a reply without any is missing them
        return sum(1 for e in evidence if e is None or (
            e.logprob is None and e.options is None and e.trace is None) or (
            self.trace_logprobs and not (self.answer_logprobs or self.top_logprobs)
            and e.trace is None))


HARD = Requests()  # the hard answer alone: every counting rule


@dataclass(frozen=True)
class TraceSummary:
    """A reply's token logprobs, summarised: `tokens` counted, their `mean_logprob`, and
    DeepConf's token confidence (−mean of the top-k logprobs at a token) averaged over the
    reply (`confidence`), over its lowest sliding group (`lowest_group`) and over its tail
    (`tail`), where the logprobs came with their top-k (`ensemble.sampling.logprobs`)."""

    tokens: int
    mean_logprob: float
    confidence: float | None = None
    lowest_group: float | None = None
    tail: float | None = None


@dataclass(frozen=True)
class Evidence:
    """What one sample says about itself beyond its hard answer (what `Requests` asked for;
    None where it was not drawn), aligned with the votes of one decision.

    logprob: log P(the sampled answer) given the sample's own reasoning (the answer span's
        token logprobs summed).
    options: log P(option) at the answer position for the options found among the top
        logprobs (the other options' mass is unassigned).
    trace: the whole reply's token logprobs, summarised.
    """

    logprob: float | None = None
    options: Mapping[str, float] | None = None
    trace: TraceSummary | None = None


@dataclass(frozen=True)
class Ballots:
    """How each sample of one decision counts: sample i adds `weights[i] * shares[i][a]` to
    answer a's score, all of `weights[i]` to its own answer where `shares` (or `shares[i]`) is
    None. The highest score decides. `notes`: what a reader should know (e.g. a fall back
    towards the hard vote). `rank` and `keep`: of the m samples voting, only the
    ceil(keep × m) of highest rank count (`kept`; DeepConf's filter). Each sample's weight and
    shares are its own, so the vote of any subset of the samples is the subset's ballots (the
    evals score a rule at n from one weighing of each question's samples)."""

    weights: tuple[float, ...]
    shares: tuple[Mapping[str, float] | None, ...] | None = None
    notes: tuple[str, ...] = ()
    rank: tuple[float, ...] | None = None
    keep: float = 1.0

    def __post_init__(self) -> None:
        bad = [w for w in self.weights if not (w >= 0 and math.isfinite(w))]
        if bad:
            raise InputError(f"a rule's weights are finite numbers >= 0, got {bad[:3]}")
        if self.shares is not None and len(self.shares) != len(self.weights):
            raise InputError(f"a rule gave {len(self.shares)} shares for "
                             f"{len(self.weights)} weights (one per sample)")
        if self.rank is not None and len(self.rank) != len(self.weights):
            raise InputError(f"a rule gave {len(self.rank)} ranks for "
                             f"{len(self.weights)} weights (one per sample)")
        if not 0 < self.keep <= 1:
            raise InputError(f"a rule keeps a share of its samples in (0, 1], got {self.keep!r}")

    def kept(self) -> list[int]:
        """The samples that count: all of them, or with `rank` the ceil(keep × m) of the m
        samples with the highest rank (ties: the earlier sample): DeepConf's filter, which
        the evals apply to every subset of samples they score."""
        m = len(self.weights)
        if self.rank is None or self.keep >= 1:
            return list(range(m))
        rank = self.rank
        return sorted(sorted(range(m), key=lambda i: -rank[i])[:max(1, math.ceil(self.keep * m))])

    def scores(self, answers: Sequence[str | None]) -> dict[str, float]:
        """answer -> its score, over the valid votes `answers` (one per sample)."""
        if len(answers) != len(self.weights):
            raise InputError(f"a rule weighed {len(self.weights)} samples for "
                             f"{len(answers)} votes")
        out: dict[str, float] = {}
        for i in self.kept():
            a, w = answers[i], self.weights[i]
            share = self.shares[i] if self.shares is not None else None
            if share is None:
                if a is not None:
                    out[a] = out.get(a, 0.0) + w
                continue
            for option, mass in share.items():
                out[option] = out.get(option, 0.0) + w * mass
        return out


@dataclass(frozen=True)
class RunBallots:
    """The ballots of every decision of a run, weighed together (`RuleBase.weigh_many`: the
    evals score a run's questions at once), and what a reader of the run should know of them
    (`notes`: e.g. a signal check that kept the samples hard, a temperature fitted)."""

    ballots: tuple[Ballots, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuleInfo:
    """What one rule is.

    name, summary: how it is called and the one line the CLI's help shows.
    build: the per-vote rule, `build(tie=, invalid=, rng=, open=, **options) -> Aggregator`.
    binary: it decides between exactly two options (refused on more).
    open: it applies to open answers (numbers, text: no fixed set of options).
    needs: what it must be given: "lam" (every member's λ, as lam= or lams=), "weights" (one
        weight per vote at call time), "structure" (the true report structure).
    requests: what it reads from each sample beyond the hard answer (`Requests`): whoever
        draws asks the provider for it, and the rule weighs the samples by it
        (`RuleBase.weigh`).
    scorable: `ensemble eval` may score it (with the form the task needs, below; a rule that
        weighs its samples by their logprobs is scored from its ballots, `evals.weighed`).
    vote: it is the main vote of a task (plurality over any options, majority over two): the
        evals score it as the task's main vote.
    baseline: it is the evals' baseline, scored at n = 1 beside every run (its value does
        not depend on n): random-follow, following one vote.
    default: the evals score it beside the main vote whenever it applies (the members' λ
        known where it needs them, two options where it is binary), without being asked.
    (`vote`, `baseline` and `default` are roles the evals give built-in rules; a plug-in's
    rule is scored when it is asked for.)
    f: f(n, λ) -> f(0..n), P(decide the first of two options | x votes for it) for one group.
    group_f: group_f(groups) -> f[x_1, ..., x_G] for groups (n_g, λ_g) (`ensemble.theory.Group`).
    credit: credit(counts, correct, lams) -> expected credit, counts of shape S + (G, k) (votes
        per group and option), correct of shape S (the right option's index), lams λ per group;
        ties share the credit (1/k each), rows without votes get 0.
    weighs: weighs(lams) -> one weight per group, for a weighted vote: each valid vote of group
        g adds weighs(lams)[g] to its answer's score, the highest score wins, ties share the
        credit (its `credit` must be that). The evals then estimate it exactly over any number
        of options (open answers) by a recursion over the options rather than by enumerating
        every subset of the votes (`ensemble.evals.weightedvotes`).
    """

    name: str
    build: Callable[..., Any]  # an `ensemble.aggregators.Aggregator`
    summary: str
    binary: bool = False
    open: bool = True
    needs: tuple[str, ...] = ()
    requests: Requests = HARD
    scorable: bool = True
    vote: bool = False
    baseline: bool = False
    default: bool = False
    f: FArray | None = None
    group_f: GroupF | None = None
    credit: Credit | None = None
    weighs: Weighs | None = None

    @property
    def needs_lam(self) -> bool:
        return "lam" in self.needs

    def f_of(self, n: int, lam: float | None = None) -> NDArray[np.float64]:
        """f(0..n) for one group (from `group_f` when the rule gives no `f`)."""
        if self.f is not None:
            return self.f(n, lam)
        if self.group_f is not None:
            from .theory import validate_groups

            return self.group_f(validate_groups([(n, 1.0 if lam is None else lam)]))
        raise InputError(f"{self.name} has no vector form f(n, λ); rules with one: "
                         f"{', '.join(aggregator_names(vector=True))}")

    @property
    def weighs_samples(self) -> bool:
        """Whether it weighs each sample by what the sample says about itself (it reads
        logprobs: `RuleBase.weigh`), rather than counting hard answers."""
        return self.requests.logprobs

    def scorable_on(self, utility: bool) -> bool:
        """Whether the evals can score it on a task: the box-ball utility needs the group form
        (or, for a rule that weighs its samples, their ballots), a vote's accuracy the credit
        (or the ballots)."""
        if not self.scorable:
            return False
        return self.weighs_samples or (self.group_f if utility else self.credit) is not None


# the built-in rules register when their modules are imported (on the first look-up)
rules: Registry[RuleInfo] = Registry("aggregator", "ensemble.rules",
                                     builtins=("ensemble.aggregators", "ensemble.soft"),
                                     adopt=lambda name, obj: register_rule(name, obj))


@overload
def register_rule(obj: C, /) -> C: ...
@overload
def register_rule(name: str, obj: C, /, *, summary: str | None = ..., binary: bool = ...,
                  open: bool = ..., needs: Sequence[str] = ..., requests: Requests | None = ...,
                  scorable: bool = ..., vote: bool = ..., baseline: bool = ...,
                  default: bool = ..., f: FArray | None = ..., group_f: GroupF | None = ...,
                  credit: Credit | None = ..., weighs: Weighs | None = ...,
                  replace: bool = ...) -> C: ...
@overload
def register_rule(name: str | None = None, /, *, summary: str | None = ...,
                  binary: bool = ..., open: bool = ..., needs: Sequence[str] = ...,
                  requests: Requests | None = ..., scorable: bool = ..., vote: bool = ...,
                  baseline: bool = ..., default: bool = ..., f: FArray | None = ...,
                  group_f: GroupF | None = ..., credit: Credit | None = ...,
                  weighs: Weighs | None = ..., replace: bool = ...) -> Callable[[C], C]: ...
def register_rule(*args: Any, name: str | None = None, summary: str | None = None,
                  binary: bool = False, open: bool = True, needs: Sequence[str] = (),
                  requests: Requests | None = None, scorable: bool = True, vote: bool = False,
                  baseline: bool = False, default: bool = False, f: FArray | None = None,
                  group_f: GroupF | None = None, credit: Credit | None = None,
                  weighs: Weighs | None = None, replace: bool = False) -> Any:
    """Register an aggregation rule: its per-vote class (a `RuleBase` subclass), named by
    its `name` attribute or the name given, with what it declares (`RuleInfo`). The one
    shape of every registering function (`ensemble.registry`): `@register_rule`,
    `@register_rule(summary=..., ...)`, `@register_rule("mine", ...)` or
    `register_rule("mine", cls)`. `summary` defaults to the class's `summary` attribute or
    the first line of its docstring; `requests` to its `requests` attribute (else the hard
    answer alone), and is set on the class, so its instances weigh by what was drawn. A rule
    of an installed plug-in is named `package/name` (`ensemble.registry`)."""
    bad = sorted(set(needs) - {"lam", "weights", "structure"})
    if bad:
        raise InputError(f"register_rule: unknown need {bad[0]!r}; a rule may need lam, "
                         "weights or structure")

    def add(cls: Any, given: str | None) -> Any:
        short = own_name(cls, given, what="register_rule")
        about = summary or getattr(cls, "summary", None) or _first_line(cls.__doc__)
        if not isinstance(about, str) or not about:
            raise InputError(f"register_rule: {short} has no summary (give summary=..., a "
                             "`summary` attribute or a docstring)")
        reads = requests if requests is not None else getattr(cls, "requests", HARD)
        if not isinstance(reads, Requests):
            raise InputError(f"register_rule: requests is an ensemble.rules.Requests, got "
                             f"{reads!r}")
        cls.requests = reads
        key = rules.key(short, cls.__module__)
        rules.add(short, RuleInfo(key, cls, about, binary=binary, open=open,
                                  needs=tuple(needs), requests=reads, scorable=scorable,
                                  vote=vote, baseline=baseline, default=default, f=f,
                                  group_f=group_f, credit=credit, weighs=weighs),
                  replace=replace, module=cls.__module__)
        return cls

    return registration(args, name, add, what="register_rule")


def _first_line(doc: str | None) -> str | None:
    return doc.strip().splitlines()[0].strip() if doc and doc.strip() else None


def aggregator_info(name: str) -> RuleInfo:
    """What rule `name` is (unknown: one line listing the known rules)."""
    return rules.get(name)


def aggregator_names(*, binary: bool | None = None, open: bool | None = None,
                     vector: bool | None = None, scorable: bool | None = None) -> Names:
    """The registered rules, optionally only those that are binary or not, apply to open
    answers, have a vector form f(n, λ) (`vector`), or can be scored in evals (`in` finds a
    plug-in's rule by its short name too)."""
    out = []
    for name, info in rules.items():
        if binary is not None and info.binary != binary:
            continue
        if open is not None and info.open != open:
            continue
        if vector is not None and (info.f is not None or info.group_f is not None) != vector:
            continue
        if scorable is not None and info.scorable != scorable:
            continue
        out.append(name)
    return Names(out, rules.resolve)


@functools.cache  # the built-ins' roles never change; the evals ask per question
def main_vote(binary: bool) -> str:
    """The task's main vote: the built-in rule declared the vote (`RuleInfo.vote`) for two
    options (majority, box-ball) or for any number (plurality)."""
    return _role(lambda info: info.vote and info.binary == binary, "main vote")


@functools.cache
def baseline() -> str:
    """The evals' baseline: the built-in rule declared it (`RuleInfo.baseline`,
    random-follow), scored at n = 1 beside every run."""
    return _role(lambda info: info.baseline, "baseline")


def is_baseline(name: str) -> bool:
    """Whether `name` is the baseline (False for a name not registered here: a run read back
    may name a plug-in that is not installed)."""
    info = declared(name)
    return info is not None and info.baseline


def default_rules(*, binary: bool, lams_known: bool) -> list[str]:
    """The rules the evals score beside the main vote without being asked (`RuleInfo.default`)
    that apply: binary ones on two options, those that weigh by λ when every λ is known."""
    return [name for name, info in rules.items()
            if info.default and rules.is_builtin(name) and (binary or not info.binary)
            and (lams_known or not info.needs_lam)]


def declared(name: str) -> RuleInfo | None:
    """What rule `name` declares, or None when it is not registered (a plug-in's rule named by
    a run folder, read where that plug-in is not installed)."""
    try:
        return rules.get(name)
    except InputError:
        return None


def reads(names: Sequence[str]) -> Requests:
    """What drawing for these rules must ask of each sample: the union of their requests."""
    out = HARD
    for name in names:
        out = out | rules.get(name).requests
    return out


def _role(test: Callable[[RuleInfo], bool], what: str) -> str:
    found = [name for name, info in rules.items() if rules.is_builtin(name) and test(info)]
    if len(found) != 1:  # pragma: no cover - the built-ins declare each role once
        raise InputError(f"the built-in rules declare {len(found)} {what} rules")
    return found[0]
