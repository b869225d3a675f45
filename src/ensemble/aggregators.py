"""Aggregation rules over samples: one small protocol, looked up by name.

Every rule maps the votes of one group (answers, some possibly invalid) to a `Vote`. Ties are
broken by an explicit rule, never by list order: "random" (a seeded coin among the tied
answers) or, for evaluation, "fractional" (each tied answer gets 1/k of the credit). Invalid
answers follow an explicit policy: "ignore" (dropped, the group shrinks), "abstain" (they stay in
the group but support no answer) or "fail" (raise).

Binary rules are also available as vectors f(0..n) (the probability of deciding the first
choice given x votes for it), matching `ensemble.theory`, and vectorised forms score many
items and bootstrap draws at once for the evals: those live in `ensemble.credit`.

Mixed ensembles. Votes may carry a group label (`groups=[member index per vote]`). Pooled rules
(plurality, majority, random-follow, weighted) ignore the labels and only report the counts per
group; `lam-weighted` weighs each vote by 2λ of its group (any number of options); `robust` with
`lams=[λ per group]` is the minimax-regret rule of the per-group counts (binary only). Each rule
is registered (`ensemble.rules.register_rule`) with what it applies to (`aggregator_info`), and
`get_aggregator(name, n_options=...)` refuses a rule that cannot apply before any sample is
drawn. A new rule subclasses `RuleBase` (its `aggregate`, with `prepare` and `finish`). For
groups, f is an array indexed by the per-group counts, f[x_1, ..., x_G]
(`ensemble.credit.group_aggregator_f`), and `ensemble.credit.group_utility` gives its exact
expected utility under per-group report probabilities.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from .credit import (
    TIE_RULES,
    as_rng,
    binary_credit,
    group_aggregator_f,
    lam_weighted_credit,
    plurality_credit,
)
from .errors import InputError
from .rules import (
    HARD,
    LAM_WEIGHTED,
    MAJORITY,
    PLURALITY,
    RANDOM_FOLLOW,
    ROBUST,
    WEIGHTED,
    Ballots,
    Evidence,
    Requests,
    RuleInfo,
    RunBallots,
    aggregator_info,
    aggregator_names,
    register_rule,
)

__all__ = [
    "INVALID_POLICIES",
    "Aggregator",
    "Ballots",
    "Evidence",
    "Requests",
    "RuleBase",
    "RuleInfo",
    "Vote",
    "aggregator_info",
    "aggregator_names",
    "binary_credit",
    "get_aggregator",
    "register_rule",
]

INVALID_POLICIES = ("ignore", "abstain", "fail")


@dataclass(frozen=True, kw_only=True)
class Vote:
    """The outcome of one aggregation.

    `decision` is the chosen answer (None if no valid vote); `credit` maps answers to their share
    of the decision (1.0 for a clear winner; 1/k each under the fractional tie rule; for a
    randomised rule such as robust, the probability of each answer).
    """

    decision: str | None
    counts: dict[str, int]
    credit: dict[str, float]
    n: int
    n_valid: int
    n_invalid: int
    tie: bool
    margin: int
    rule: str
    invalid_policy: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    # valid answers per group (member index 0, 1, ...) when the votes were labelled
    group_counts: tuple[dict[str, int], ...] = field(default_factory=tuple)
    # open answers: per canonical answer, the raw spellings that voted for it; and the typed
    # decision (a float for numbers, a field's value for structured outputs)
    spellings: dict[str, dict[str, int]] = field(default_factory=dict)
    value: Any = None
    # a rule that weighs its samples (`RuleInfo.requests`): the weight each sample counted
    # with, in the order of the answers, and each answer's summed score (empty otherwise)
    weights: tuple[float, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def votes(self) -> dict[str, int]:
        """Valid votes per answer (the same as `counts`)."""
        return self.counts

    @property
    def invalid(self) -> int:
        """Invalid votes (the same as `n_invalid`)."""
        return self.n_invalid


class Aggregator(Protocol):
    name: str

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None, groups: Sequence[int] | None = None,
                 evidence: Sequence[Evidence | None] | None = None) -> Vote: ...


# -- the built-ins' vector, group and credit forms (what `register_rule` declares) -------------
def _majority_f(n: int, lam: float | None) -> NDArray[np.float64]:
    from .theory import majority_f

    return np.asarray(majority_f(n))


def _majority_groups(groups: Sequence[Any]) -> NDArray[np.float64]:
    from .theory import group_majority_f

    return np.asarray(group_majority_f(groups))


def _random_follow_f(n: int, lam: float | None) -> NDArray[np.float64]:
    from .theory import random_follow_f

    return np.asarray(random_follow_f(n))


def _random_follow_groups(groups: Sequence[Any]) -> NDArray[np.float64]:
    from .theory import group_random_follow_f

    return np.asarray(group_random_follow_f(groups))


def _lam_weighted_groups(groups: Sequence[Any]) -> NDArray[np.float64]:
    from .theory import lam_weighted_f

    return np.asarray(lam_weighted_f(groups))


def _robust_f(n: int, lam: float | None) -> NDArray[np.float64]:
    from .theory import robust_aggregator

    if lam is None:
        raise InputError("the robust rule needs lam")
    return np.asarray(robust_aggregator(n, lam).f)


def _robust_groups(groups: Sequence[Any]) -> NDArray[np.float64]:
    from .theory import group_robust_aggregator

    return np.asarray(group_robust_aggregator(groups).f)


def _pooled_credit(counts: Any, correct: Any, lams: Sequence[float | None]
                   ) -> NDArray[np.float64]:
    return plurality_credit(np.asarray(counts).sum(axis=-2), correct)


def _lam_weighted_credit(counts: Any, correct: Any, lams: Sequence[float | None]
                         ) -> NDArray[np.float64]:
    return lam_weighted_credit(counts, correct, [float(x) for x in lams])  # type: ignore[arg-type]


def _equal_weights(lams: Sequence[float | None]) -> list[float]:
    """Plurality and majority as weighted votes: every vote weighs 1."""
    return [1.0] * len(lams)


def _lam_vote_weights(lams: Sequence[float | None]) -> list[float]:
    """The λ-weighted vote's weights: 2λ per group (`lam_weights`; ∞ for λ = ∞)."""
    from .theory import lam_weights

    return [float(x) for x in lam_weights([float(x) for x in lams])]  # type: ignore[arg-type]



class RuleBase:
    """A rule's per-vote form. A counting rule implements `aggregate`; a rule that weighs its
    samples by what they say about themselves declares `requests` (`register_rule`) and
    implements `weigh` alone: the highest summed score decides (`Ballots`)."""

    name = "base"
    requests: Requests = HARD

    def __init__(self, *, tie: str = "random", invalid: str = "ignore", rng: Any = None,
                 open: bool = False) -> None:
        if tie not in TIE_RULES:
            raise InputError(f"tie must be one of {TIE_RULES}, got {tie!r}")
        if invalid not in INVALID_POLICIES:
            raise InputError(f"invalid must be one of {INVALID_POLICIES}, got {invalid!r}")
        self.tie = tie
        self.invalid = invalid
        self.rng = as_rng(rng)
        self.open = bool(open)

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None, groups: Sequence[int] | None = None,
                 evidence: Sequence[Evidence | None] | None = None) -> Vote:
        labels = _check_groups(groups, len(answers))
        if self.requests.logprobs:
            ballots = self._ballots(len(answers), weights, evidence, labels)
            vote = self.by_scores(answers, ballots, choices=choices)
        else:
            vote = self.aggregate(answers, choices=choices, weights=weights, groups=labels)
        if labels is None:
            return vote
        per: list[Counter[str]] = [Counter() for _ in range(max(labels, default=-1) + 1)]
        for a, g in zip(answers, labels, strict=True):
            if a is not None:
                per[g][a] += 1
        return replace(vote, group_counts=tuple(dict(c) for c in per))

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None
                   ) -> Vote:  # pragma: no cover - abstract
        raise NotImplementedError

    def weigh(self, evidence: Sequence[Evidence], *, groups: list[int] | None
              ) -> Ballots:  # pragma: no cover - abstract
        """How each sample counts, from what it says about itself (`evidence`, one per
        sample, holding at least what `requests` asks for)."""
        raise NotImplementedError(f"{self.name} declares requests but no weigh()")

    def weigh_many(self, answers: Sequence[Sequence[str | None]],
                   evidence: Sequence[Sequence[Evidence | None]]) -> RunBallots:
        """The ballots of many decisions weighed together, each over all of its samples
        (`answers[d]`, `evidence[d]`: one per sample of decision d): the evals score every
        question of a run at once. Evidence that cannot meet the rule's requests is refused
        in one line counting the run's replies without it. A rule whose weighing learns from
        the run (a signal check, a fitted temperature: `ensemble.soft`) overrides it to decide
        once for the run."""
        self.check_evidence(evidence)
        out = []
        for a, e in zip(answers, evidence, strict=True):
            ballots = self.weigh(e, groups=None)  # type: ignore[arg-type]
            if len(ballots.weights) != len(a):
                raise InputError(f"{self.name}.weigh gave {len(ballots.weights)} weights for "
                                 f"{len(a)} votes")
            out.append(ballots)
        return RunBallots(tuple(out))

    def check_evidence(self, evidence: Sequence[Sequence[Evidence | None]]) -> None:
        """One line when some sample of these decisions lacks what the rule reads."""
        lacking = sum(self.requests.lacking(e) for e in evidence)
        if lacking:
            total = sum(len(e) for e in evidence)
            raise InputError(f"{self.name} weighs each vote by {self.requests.describe()} and "
                             f"{lacking} of {total} replies came without it: draw with a "
                             "provider that returns logprobs, or choose a rule that counts "
                             "hard answers")

    def _ballots(self, k: int, weights: Sequence[float] | None,
                 evidence: Sequence[Evidence | None] | None, labels: list[int] | None
                 ) -> Ballots:
        """The ballots of a weighing rule: the weights given (one per vote), else weighed from
        the evidence, which must hold what the rule requests (never a plain count instead)."""
        if weights is not None:
            if isinstance(weights, (str, bytes)) or len(weights) != k:
                raise InputError(f"{self.name}: weights= gives one weight per vote; got "
                                 f"{len(weights)} for {k} votes")
            return Ballots(tuple(float(w) for w in weights))
        if evidence is None:
            raise InputError(f"{self.name} weighs each vote by {self.requests.describe()}: "
                             "give evidence= (one per vote; Ensemble and the evals draw it) "
                             "or weights=")
        if len(evidence) != k:
            raise InputError(f"{self.name}: evidence= gives one entry per vote; got "
                             f"{len(evidence)} for {k} votes")
        missing = self.requests.missing(evidence)
        if missing:
            raise InputError(f"{self.name} weighs each vote by {self.requests.describe()} and "
                             f"{missing}: draw with a provider that returns logprobs, or "
                             "choose a rule that counts hard answers")
        ballots = self.weigh(evidence, groups=labels)  # type: ignore[arg-type]
        if len(ballots.weights) != k:
            raise InputError(f"{self.name}.weigh gave {len(ballots.weights)} weights for {k} "
                             "votes")
        return ballots

    def by_scores(self, answers: Sequence[str | None], ballots: Ballots, *,
                  choices: Sequence[str] | None) -> Vote:
        """The vote of weighed samples: the answer of the highest summed score (ties within
        1e-12 relative by the tie rule); counts and margin stay the hard votes'."""
        valid, n, n_inv = self.prepare(answers)
        if choices is not None:
            bad = [a for a in valid if a not in choices]
            if bad:
                raise InputError(f"answer {bad[0]!r} is not one of the choices {list(choices)}")
        scores = ballots.scores(answers)
        best = max(scores.values(), default=0.0)
        top = [a for a, v in scores.items() if best > 0 and abs(v - best) <= 1e-12 * max(1, best)]
        vote = self.finish(Counter(valid), top, n, len(valid), n_inv, notes=ballots.notes)
        return replace(vote, weights=ballots.weights, scores=scores)

    def prepare(self, answers: Sequence[str | None]) -> tuple[list[str], int, int]:
        n_invalid = sum(1 for a in answers if a is None)
        if n_invalid and self.invalid == "fail":
            raise InputError(f"{n_invalid} of {len(answers)} answers are invalid "
                             "(invalid='fail'); use invalid='ignore' or 'abstain'")
        valid = [a for a in answers if a is not None]
        n = len(valid) if self.invalid == "ignore" else len(answers)
        return valid, n, n_invalid

    def finish(self, counts: Counter, top: list[str], n: int, n_valid: int, n_invalid: int,
                notes: tuple[str, ...] = ()) -> Vote:
        ordered = counts.most_common()
        margin = ordered[0][1] - (ordered[1][1] if len(ordered) > 1 else 0) if ordered else 0
        tie = len(top) > 1
        if not top:
            return self.make_vote(None, counts, {}, n, n_valid, n_invalid, tie=False, margin=0,
                              notes=notes)
        if tie and self.tie == "fractional":
            credit = {a: 1.0 / len(top) for a in top}
            decision = sorted(top)[int(self.rng.integers(len(top)))]
        else:
            decision = sorted(top)[int(self.rng.integers(len(top)))] if tie else top[0]
            credit = {decision: 1.0}
        return self.make_vote(decision, counts, credit, n, n_valid, n_invalid, tie=tie,
                          margin=margin, notes=notes)

    def make_vote(self, decision: str | None, counts: Counter[str] | dict[str, int],
              credit: dict[str, float], n: int, n_valid: int, n_invalid: int, *, tie: bool,
              margin: int, notes: tuple[str, ...] = ()) -> Vote:
        return Vote(decision=decision, counts=dict(counts), credit=credit, n=n, n_valid=n_valid,
                    n_invalid=n_invalid, tie=tie, margin=margin, rule=self.name,
                    invalid_policy=self.invalid, notes=notes)


@register_rule(summary="most frequent answer over all votes; any number of options",
               vote=True, f=_majority_f, group_f=_majority_groups, credit=_pooled_credit,
               weighs=_equal_weights)
class Plurality(RuleBase):
    """The most frequent valid answer (any number of options)."""

    name = PLURALITY

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        valid, n, n_inv = self.prepare(answers)
        counts = Counter(valid)
        best = max(counts.values(), default=0)
        top = [a for a, c in counts.items() if c == best] if best else []
        return self.finish(counts, top, n, len(valid), n_inv)


@register_rule(summary="binary majority over all votes; ties 1/2 or a seeded coin",
               binary=True, vote=True, f=_majority_f, group_f=_majority_groups,
               credit=_pooled_credit, weighs=_equal_weights)
class Majority(RuleBase):
    """Binary majority between choices[0] (the report "1") and choices[1]; ties ½ or a coin.

    Under the "abstain" policy an invalid vote counts in n but supports neither side, so a
    decision needs more than n/2 votes; otherwise it is a tie.
    """

    name = MAJORITY

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        if choices is None and self.open:
            return self._open_majority(answers)
        if not choices or len(choices) != 2:
            raise InputError("majority needs exactly two choices, e.g. choices=['L', 'R']")
        valid, n, n_inv = self.prepare(answers)
        bad = [a for a in valid if a not in choices]
        if bad:
            raise InputError(f"answer {bad[0]!r} is not one of the choices {list(choices)}")
        counts = Counter({c: 0 for c in choices})
        counts.update(valid)
        a, b = counts[choices[0]], counts[choices[1]]
        if 2 * a > n:
            top = [choices[0]]
        elif 2 * b > n:
            top = [choices[1]]
        elif n == 0:
            top = []
        else:
            top = list(choices)
        return self.finish(counts, top, n, len(valid), n_inv)


    def _open_majority(self, answers: Sequence[str | None]) -> Vote:
        """Open answers: the answer with more than half of the n votes, else no decision."""
        valid, n, n_inv = self.prepare(answers)
        counts = Counter(valid)
        top = [a for a, c in counts.items() if 2 * c > n]
        vote = self.finish(counts, top, n, len(valid), n_inv)
        if not top and counts:
            return replace(vote, notes=("no answer has more than half of the votes",))
        return vote


@register_rule(summary="follow one vote chosen at random (the baseline, scored at n = 1 in "
               "every eval)", scorable=False, baseline=True, f=_random_follow_f,
               group_f=_random_follow_groups)
class RandomFollow(RuleBase):
    """The paper's baseline: follow one valid sample chosen uniformly at random."""

    name = RANDOM_FOLLOW

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        valid, n, n_inv = self.prepare(answers)
        counts = Counter(valid)
        if not valid:
            return self.finish(counts, [], n, 0, n_inv)
        pick = valid[int(self.rng.integers(len(valid)))]
        vote = self.finish(counts, [pick], n, len(valid), n_inv)
        credit = {a: c / len(valid) for a, c in counts.items()}
        return self.make_vote(pick, counts, credit, n, len(valid), n_inv, tie=False,
                          margin=vote.margin)


@register_rule(summary="plurality with each vote weighed by its reply's confidence, exp(mean "
               "token logprob) (draws the replies' logprobs)",
               requests=Requests(trace_logprobs=True))
class Weighted(RuleBase):
    """Plurality with each vote weighed by its reply's confidence: exp(mean token logprob over
    the reply), in (0, 1]. Drawing through `Ensemble` asks the provider for the logprobs; a
    reply without them is refused, never counted as one plain vote. Explicit `weights=`
    (one >= 0 per vote) replace the confidences."""

    name = WEIGHTED

    def weigh(self, evidence: Sequence[Evidence], *, groups: list[int] | None) -> Ballots:
        return Ballots(tuple(math.exp(e.trace.mean_logprob)  # type: ignore[union-attr]
                             for e in evidence))


class _BinaryF(RuleBase):
    """A binary rule given as a vector f(0..n): P(decide choices[0] | x votes for it)."""

    def f(self, n: int) -> NDArray[np.float64]:  # pragma: no cover - abstract
        raise NotImplementedError

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        if not choices or len(choices) != 2:
            raise InputError(f"{self.name} needs exactly two choices, e.g. choices=['L', 'R']")
        valid, n, n_inv = self.prepare(answers)
        counts = Counter({c: 0 for c in choices})
        counts.update(a for a in valid if a in choices)
        if n == 0:
            return self.finish(counts, [], 0, 0, n_inv)
        p1 = float(self.f(n)[counts[choices[0]]])
        decision = choices[0] if self.rng.random() < p1 else choices[1]
        ordered = counts.most_common()
        margin = ordered[0][1] - ordered[1][1]
        return self.make_vote(decision, counts, {choices[0]: p1, choices[1]: 1 - p1}, n, len(valid),
                          n_inv, tie=0 < p1 < 1, margin=margin)


@register_rule(summary="minimax-regret rule from the theory engine: one group (lam=) or the "
               "per-group counts of members (lams=); binary only", binary=True, open=False,
               needs=("lam",), default=True, f=_robust_f, group_f=_robust_groups,
               credit=binary_credit(_robust_groups))
class Robust(_BinaryF):
    """The minimax-regret rule from the theory engine; randomised where the optimal f is
    fractional (a seeded coin, like every tie here).

    One group: `lam=` (ψ_λ units): f(0..n) for the n valid votes (majority when λ <= g(n)).
    Groups: `lams=[λ per group]` and votes labelled `groups=[index into lams]`: f of the
    per-group counts (x_1, ..., x_G) for the valid votes of each group (groups without a valid
    vote drop out). Binary only.
    """

    name = ROBUST

    def __init__(self, *, lam: float | None = None, lams: Sequence[float] | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.lam, self.lams = _lam_options(self.name, lam, lams)

    def f(self, n: int) -> NDArray[np.float64]:
        if self.lam is None:
            raise InputError("robust with lams= (groups) decides on per-group counts; "
                             "call it with groups=[member index per vote]")
        return _robust_f(n, self.lam)

    def f_groups(self, ns: Sequence[int]) -> NDArray[np.float64]:
        """f[x_1, ..., x_G] for n_g valid votes in group g (computed once, then cached)."""
        lams = self.lams if self.lams is not None else (self.lam,)
        return group_aggregator_f(self.name, ns, lams)  # type: ignore[arg-type]

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        if self.lams is None:
            return super().aggregate(answers, choices=choices, weights=weights, groups=groups)
        if not choices or len(choices) != 2:
            raise InputError(f"{self.name} needs exactly two choices, e.g. choices=['L', 'R']")
        labels = _labels_for(self.name, groups, len(answers), len(self.lams))
        valid, n, n_inv = self.prepare(answers)
        bad = [a for a in valid if a not in choices]
        if bad:
            raise InputError(f"answer {bad[0]!r} is not one of the choices {list(choices)}")
        counts = Counter({c: 0 for c in choices})
        counts.update(valid)
        ng = [0] * len(self.lams)
        xg = [0] * len(self.lams)
        for a, g in zip(answers, labels, strict=True):
            if a is not None or self.invalid == "abstain":
                ng[g] += 1
            if a == choices[0]:
                xg[g] += 1
        present = [g for g in range(len(self.lams)) if ng[g] > 0]
        if not present:
            return self.finish(counts, [], 0, 0, n_inv)
        f = group_aggregator_f(self.name, [ng[g] for g in present],
                               [self.lams[g] for g in present])
        p1 = float(f[tuple(xg[g] for g in present)])
        decision = choices[0] if self.rng.random() < p1 else choices[1]
        margin = abs(counts[choices[0]] - counts[choices[1]])
        return self.make_vote(decision, counts, {choices[0]: p1, choices[1]: 1 - p1}, n, len(valid),
                          n_inv, tie=0 < p1 < 1, margin=margin)


@register_rule(summary="each vote weighs 2λ of its member (log-odds that an informed expert "
               "reports the truth); any number of options", needs=("lam",), default=True,
               f=_majority_f,
               group_f=_lam_weighted_groups, credit=_lam_weighted_credit,
               weighs=_lam_vote_weights)
class LamWeighted(RuleBase):
    """The λ-weighted vote: each valid vote of group g adds 2λ_g to its answer's score, the
    highest score wins (any number of options). 2λ is the log-odds that an expert whose signal
    reveals the answer reports it; votes of λ = ∞ outrank every finite weight (compared first),
    λ = 0 votes weigh nothing. Equal λ everywhere is plain plurality. docs/ensembles.md derives
    the weight and says when it helps.

    `lam=` (one group) or `lams=[λ per group]` with votes labelled `groups=[index into lams]`.
    """

    name = LAM_WEIGHTED

    def __init__(self, *, lam: float | None = None, lams: Sequence[float] | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        one, many = _lam_options(self.name, lam, lams)
        self.lams: tuple[float, ...] = many if many is not None else (float(one),)  # type: ignore

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        labels = _labels_for(self.name, groups, len(answers), len(self.lams))
        valid, n, n_inv = self.prepare(answers)
        if choices is not None:
            bad = [a for a in valid if a not in choices]
            if bad:
                raise InputError(f"answer {bad[0]!r} is not one of the choices {list(choices)}")
        hi: dict[str, float] = {}
        lo: dict[str, float] = {}
        for a, g in zip(answers, labels, strict=True):
            if a is None:
                continue
            lam = self.lams[g]
            hi[a] = hi.get(a, 0.0) + (1.0 if math.isinf(lam) else 0.0)
            lo[a] = lo.get(a, 0.0) + (0.0 if math.isinf(lam) else 2.0 * lam)
        counts = Counter(valid)
        if not counts:
            return self.finish(counts, [], n, 0, n_inv)
        top_hi = max(hi.values())
        cand = [a for a in counts if hi[a] == top_hi]
        best = max(lo[a] for a in cand)
        tol = 1e-12 * max(1.0, abs(best))
        top = [a for a in cand if abs(lo[a] - best) <= tol]
        vote = self.finish(counts, top, n, len(valid), n_inv)
        return vote


def _lam_options(name: str, lam: float | None, lams: Sequence[float] | None
                 ) -> tuple[float | None, tuple[float, ...] | None]:
    from .qr import validate_lam

    if lam is not None and lams is not None:
        raise InputError(f"{name}: give lam= (one group) or lams= (one λ per group), not both")
    if lam is None and lams is None:
        raise InputError(f"{name} needs the experts' rationality: lam=λ for one group, or "
                         "lams=[λ per member] for a mixed ensemble (e.g. from calibration "
                         "profiles)")
    if lams is not None:
        if isinstance(lams, (str, bytes)) or len(lams) == 0:
            raise InputError(f"{name}: lams must be a non-empty list of λ, one per group")
        return None, tuple(validate_lam(v, name="lams[i]") for v in lams)
    return validate_lam(lam), None  # type: ignore[arg-type]


def _check_groups(groups: Sequence[int] | None, n_answers: int) -> list[int] | None:
    if groups is None:
        return None
    labels = list(groups)
    if len(labels) != n_answers:
        raise InputError(f"groups must label every vote: {len(labels)} labels for "
                         f"{n_answers} answers")
    for g in labels:
        if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 0:
            raise InputError(f"group labels must be integers >= 0 (member indices), got {g!r}")
    return [int(g) for g in labels]


def _labels_for(name: str, labels: list[int] | None, n_answers: int, n_groups: int
                ) -> list[int]:
    if labels is None:
        if n_groups == 1:
            return [0] * n_answers
        raise InputError(f"{name} with {n_groups} groups needs groups=[member index per vote]")
    if labels and max(labels) >= n_groups:
        raise InputError(f"group label {max(labels)} out of range: {name} has {n_groups} "
                         "groups (lams)")
    return labels


@register_rule(summary="evaluation only: the best rule knowing the true report structure",
               binary=True, open=False, needs=("structure",), scorable=False)
class Omniscient(_BinaryF):
    """Evaluation only: the best rule knowing the true report structure (μ, q0, q1)."""

    name = "omniscient"

    def __init__(self, *, structure: Any = None, **kw: Any) -> None:
        super().__init__(**kw)
        if structure is None:
            raise InputError("the omniscient aggregator needs the true report structure "
                             "(ensemble.theory.ReportStructure)")
        self.structure = structure

    def f(self, n: int) -> NDArray[np.float64]:
        from .theory import omniscient

        return omniscient(self.structure, n)


def get_aggregator(name: str, *, n_options: int | None = None,
                   choices: Sequence[str] | None = None, open: bool = False,
                   **options: Any) -> Aggregator:
    """Build a registered rule by name (`aggregator_names()`: plurality, majority,
    random-follow, weighted, lam-weighted, robust, omniscient and any registered by
    `register_rule`).

    Give the task's options (`choices=` or `n_options=`) to refuse, here and in one line, a rule
    that cannot apply: a binary rule (robust, majority, omniscient) on more than two options
    (e.g. MathQA's five). Rule options: tie, invalid, rng for all; lam= or lams= for
    lam-weighted and robust; structure= for omniscient.

    `open=True`: the answers are open (numbers, text, ...: no fixed set of options); rules that
    need two fixed options (robust, omniscient) are refused, and majority decides for the
    answer with more than half of the votes (none otherwise).
    """
    info = aggregator_info(name)
    if open and not info.open:
        raise InputError(f"{name} decides between two fixed options and the answers are open "
                         f"(any number of answers): use {_or(aggregator_names(open=True))}")
    k = len(choices) if choices is not None else n_options
    if info.binary and k is not None and k != 2:
        opts = f" ({', '.join(choices)})" if choices is not None else ""
        raise InputError(f"{name} decides between two options; this task has {k}{opts}: use "
                         f"{_or(aggregator_names(binary=False))}")
    rule = info.build(open=open, **options) if open else info.build(**options)
    if getattr(rule, "name", None) != info.name:
        rule.name = info.name  # a plug-in's rule votes under its full name (package/name)
    return rule


def _or(names: Sequence[str]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)
