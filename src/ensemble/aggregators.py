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
`lams=[λ per group]` is the minimax-regret rule of the per-group counts (binary only). Which rule
applies to which task is in `RULES` (`aggregator_info`), and `get_aggregator(name,
n_options=...)` refuses a rule that cannot apply before any sample is drawn. For groups, f is an
array indexed by the per-group counts, f[x_1, ..., x_G] (`ensemble.credit.group_aggregator_f`),
and `ensemble.credit.group_utility` gives its exact expected utility under per-group report
probabilities.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from .credit import TIE_RULES, aggregator_f, as_rng, group_aggregator_f
from .errors import InputError

__all__ = [
    "INVALID_POLICIES",
    "RULES",
    "Aggregator",
    "RuleInfo",
    "Vote",
    "aggregator_info",
    "aggregator_names",
    "get_aggregator",
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
                 weights: Sequence[float] | None = None,
                 groups: Sequence[int] | None = None) -> Vote: ...


@dataclass(frozen=True)
class RuleInfo:
    """What a rule applies to: `binary` rules need exactly two options; `needs` names the
    options `get_aggregator` must be given (one of them, for "lam or lams")."""

    name: str
    binary: bool
    needs: tuple[str, ...]
    summary: str
    open: bool = True  # applies to open answers (numbers, text...): no fixed set of options


RULES: dict[str, RuleInfo] = {r.name: r for r in (
    RuleInfo("plurality", False, (), "most frequent answer over all votes; any number of options"),
    RuleInfo("majority", True, (), "binary majority over all votes; ties 1/2 or a seeded coin"),
    RuleInfo("random-follow", False, (), "follow one vote chosen at random (the baseline)"),
    RuleInfo("weighted", False, (), "plurality weighted per vote (weights= at call time, e.g. "
             "logprob confidence)"),
    RuleInfo("lam-weighted", False, ("lam", "lams"), "each vote weighs 2λ of its member "
             "(log-odds that an informed expert reports the truth); any number of options"),
    RuleInfo("robust", True, ("lam", "lams"), "minimax-regret rule from the theory engine: one "
             "group (lam=) or the per-group counts of members (lams=); binary only", False),
    RuleInfo("omniscient", True, ("structure",), "evaluation only: the best rule knowing the "
             "true report structure", False),
)}


class _Base:
    name = "base"

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
                 weights: Sequence[float] | None = None,
                 groups: Sequence[int] | None = None) -> Vote:
        labels = _check_groups(groups, len(answers))
        vote = self._aggregate(answers, choices=choices, weights=weights, groups=labels)
        if labels is None:
            return vote
        per: list[Counter[str]] = [Counter() for _ in range(max(labels, default=-1) + 1)]
        for a, g in zip(answers, labels, strict=True):
            if a is not None:
                per[g][a] += 1
        return replace(vote, group_counts=tuple(dict(c) for c in per))

    def _aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None
                   ) -> Vote:  # pragma: no cover - abstract
        raise NotImplementedError

    def _prepare(self, answers: Sequence[str | None]) -> tuple[list[str], int, int]:
        n_invalid = sum(1 for a in answers if a is None)
        if n_invalid and self.invalid == "fail":
            raise InputError(f"{n_invalid} of {len(answers)} answers are invalid "
                             "(invalid='fail'); use invalid='ignore' or 'abstain'")
        valid = [a for a in answers if a is not None]
        n = len(valid) if self.invalid == "ignore" else len(answers)
        return valid, n, n_invalid

    def _finish(self, counts: Counter, top: list[str], n: int, n_valid: int, n_invalid: int,
                notes: tuple[str, ...] = ()) -> Vote:
        ordered = counts.most_common()
        margin = ordered[0][1] - (ordered[1][1] if len(ordered) > 1 else 0) if ordered else 0
        tie = len(top) > 1
        if not top:
            return self._vote(None, counts, {}, n, n_valid, n_invalid, tie=False, margin=0,
                              notes=notes)
        if tie and self.tie == "fractional":
            credit = {a: 1.0 / len(top) for a in top}
            decision = sorted(top)[int(self.rng.integers(len(top)))]
        else:
            decision = sorted(top)[int(self.rng.integers(len(top)))] if tie else top[0]
            credit = {decision: 1.0}
        return self._vote(decision, counts, credit, n, n_valid, n_invalid, tie=tie,
                          margin=margin, notes=notes)

    def _vote(self, decision: str | None, counts: Counter[str] | dict[str, int],
              credit: dict[str, float], n: int, n_valid: int, n_invalid: int, *, tie: bool,
              margin: int, notes: tuple[str, ...] = ()) -> Vote:
        return Vote(decision=decision, counts=dict(counts), credit=credit, n=n, n_valid=n_valid,
                    n_invalid=n_invalid, tie=tie, margin=margin, rule=self.name,
                    invalid_policy=self.invalid, notes=notes)


class Plurality(_Base):
    """The most frequent valid answer (any number of options)."""

    name = "plurality"

    def _aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        valid, n, n_inv = self._prepare(answers)
        counts = Counter(valid)
        best = max(counts.values(), default=0)
        top = [a for a, c in counts.items() if c == best] if best else []
        return self._finish(counts, top, n, len(valid), n_inv)


class Majority(_Base):
    """Binary majority between choices[0] (the report "1") and choices[1]; ties ½ or a coin.

    Under the "abstain" policy an invalid vote counts in n but supports neither side, so a
    decision needs more than n/2 votes; otherwise it is a tie.
    """

    name = "majority"

    def _aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        if choices is None and self.open:
            return self._open_majority(answers)
        if not choices or len(choices) != 2:
            raise InputError("majority needs exactly two choices, e.g. choices=['L', 'R']")
        valid, n, n_inv = self._prepare(answers)
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
        return self._finish(counts, top, n, len(valid), n_inv)


    def _open_majority(self, answers: Sequence[str | None]) -> Vote:
        """Open answers: the answer with more than half of the n votes, else no decision."""
        valid, n, n_inv = self._prepare(answers)
        counts = Counter(valid)
        top = [a for a, c in counts.items() if 2 * c > n]
        vote = self._finish(counts, top, n, len(valid), n_inv)
        if not top and counts:
            return replace(vote, notes=("no answer has more than half of the votes",))
        return vote


class RandomFollow(_Base):
    """The paper's baseline: follow one valid sample chosen uniformly at random."""

    name = "random-follow"

    def _aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        valid, n, n_inv = self._prepare(answers)
        counts = Counter(valid)
        if not valid:
            return self._finish(counts, [], n, 0, n_inv)
        pick = valid[int(self.rng.integers(len(valid)))]
        vote = self._finish(counts, [pick], n, len(valid), n_inv)
        credit = {a: c / len(valid) for a, c in counts.items()}
        return self._vote(pick, counts, credit, n, len(valid), n_inv, tie=False,
                          margin=vote.margin)


class Weighted(_Base):
    """Plurality with per-sample weights (e.g. logprob confidence); weights must be >= 0."""

    name = "weighted"

    def _aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        if weights is None or len(weights) != len(answers):
            raise InputError("weighted voting needs one weight per answer")
        if any(w < 0 for w in weights):
            raise InputError("weights must be >= 0")
        valid, n, n_inv = self._prepare(answers)
        score: dict[str, float] = {}
        for a, w in zip(answers, weights, strict=True):
            if a is not None:
                score[a] = score.get(a, 0.0) + float(w)
        best = max(score.values(), default=0.0)
        top = [a for a, s in score.items() if best > 0 and abs(s - best) <= 1e-12 * max(1, best)]
        return self._finish(Counter(valid), top, n, len(valid), n_inv)


class _BinaryF(_Base):
    """A binary rule given as a vector f(0..n): P(decide choices[0] | x votes for it)."""

    def f(self, n: int) -> NDArray[np.float64]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        if not choices or len(choices) != 2:
            raise InputError(f"{self.name} needs exactly two choices, e.g. choices=['L', 'R']")
        valid, n, n_inv = self._prepare(answers)
        counts = Counter({c: 0 for c in choices})
        counts.update(a for a in valid if a in choices)
        if n == 0:
            return self._finish(counts, [], 0, 0, n_inv)
        p1 = float(self.f(n)[counts[choices[0]]])
        decision = choices[0] if self.rng.random() < p1 else choices[1]
        ordered = counts.most_common()
        margin = ordered[0][1] - ordered[1][1]
        return self._vote(decision, counts, {choices[0]: p1, choices[1]: 1 - p1}, n, len(valid),
                          n_inv, tie=0 < p1 < 1, margin=margin)


class Robust(_BinaryF):
    """The minimax-regret rule from the theory engine; randomised where the optimal f is
    fractional (a seeded coin, like every tie here).

    One group: `lam=` (ψ_λ units): f(0..n) for the n valid votes (majority when λ <= g(n)).
    Groups: `lams=[λ per group]` and votes labelled `groups=[index into lams]`: f of the
    per-group counts (x_1, ..., x_G) for the valid votes of each group (groups without a valid
    vote drop out). Binary only.
    """

    name = "robust"

    def __init__(self, *, lam: float | None = None, lams: Sequence[float] | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.lam, self.lams = _lam_options(self.name, lam, lams)

    def f(self, n: int) -> NDArray[np.float64]:
        if self.lam is None:
            raise InputError("robust with lams= (groups) decides on per-group counts; "
                             "call it with groups=[member index per vote]")
        return aggregator_f("robust", n, lam=self.lam)

    def f_groups(self, ns: Sequence[int]) -> NDArray[np.float64]:
        """f[x_1, ..., x_G] for n_g valid votes in group g (computed once, then cached)."""
        lams = self.lams if self.lams is not None else (self.lam,)
        return group_aggregator_f("robust", ns, lams)  # type: ignore[arg-type]

    def _aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        if self.lams is None:
            return super()._aggregate(answers, choices=choices, weights=weights, groups=groups)
        if not choices or len(choices) != 2:
            raise InputError(f"{self.name} needs exactly two choices, e.g. choices=['L', 'R']")
        labels = _labels_for(self.name, groups, len(answers), len(self.lams))
        valid, n, n_inv = self._prepare(answers)
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
            return self._finish(counts, [], 0, 0, n_inv)
        f = group_aggregator_f("robust", [ng[g] for g in present], [self.lams[g] for g in present])
        p1 = float(f[tuple(xg[g] for g in present)])
        decision = choices[0] if self.rng.random() < p1 else choices[1]
        margin = abs(counts[choices[0]] - counts[choices[1]])
        return self._vote(decision, counts, {choices[0]: p1, choices[1]: 1 - p1}, n, len(valid),
                          n_inv, tie=0 < p1 < 1, margin=margin)


class LamWeighted(_Base):
    """The λ-weighted vote: each valid vote of group g adds 2λ_g to its answer's score, the
    highest score wins (any number of options). 2λ is the log-odds that an expert whose signal
    reveals the answer reports it; votes of λ = ∞ outrank every finite weight (compared first),
    λ = 0 votes weigh nothing. Equal λ everywhere is plain plurality. docs/ensembles.md derives
    the weight and says when it helps.

    `lam=` (one group) or `lams=[λ per group]` with votes labelled `groups=[index into lams]`.
    """

    name = "lam-weighted"

    def __init__(self, *, lam: float | None = None, lams: Sequence[float] | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        one, many = _lam_options(self.name, lam, lams)
        self.lams: tuple[float, ...] = many if many is not None else (float(one),)  # type: ignore

    def _aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                   weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        labels = _labels_for(self.name, groups, len(answers), len(self.lams))
        valid, n, n_inv = self._prepare(answers)
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
            return self._finish(counts, [], n, 0, n_inv)
        top_hi = max(hi.values())
        cand = [a for a in counts if hi[a] == top_hi]
        best = max(lo[a] for a in cand)
        tol = 1e-12 * max(1.0, abs(best))
        top = [a for a in cand if abs(lo[a] - best) <= tol]
        vote = self._finish(counts, top, n, len(valid), n_inv)
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


_RULES: dict[str, Callable[..., Aggregator]] = {
    "plurality": Plurality, "majority": Majority, "random-follow": RandomFollow,
    "weighted": Weighted, "lam-weighted": LamWeighted, "robust": Robust,
    "omniscient": Omniscient,
}


def aggregator_names() -> list[str]:
    return sorted(_RULES)


def aggregator_info(name: str) -> RuleInfo:
    """What rule `name` applies to (binary or any number of options) and what it needs."""
    try:
        return RULES[name]
    except KeyError:
        raise InputError(f"unknown aggregator {name!r}; choose from {', '.join(aggregator_names())}"
                         ) from None


def get_aggregator(name: str, *, n_options: int | None = None,
                   choices: Sequence[str] | None = None, open: bool = False,
                   **options: Any) -> Aggregator:
    """Build a rule by name: plurality, majority, random-follow, weighted, lam-weighted, robust,
    omniscient.

    Give the task's options (`choices=` or `n_options=`) to refuse, here and in one line, a rule
    that cannot apply: robust, majority and omniscient are binary (two options; e.g. box-ball,
    not MathQA's five). Rule options: tie, invalid, rng for all; lam= or lams= for
    lam-weighted and robust; structure= for omniscient.

    `open=True`: the answers are open (numbers, text, ...: no fixed set of options); rules that
    need two options (robust, omniscient) are refused, and majority decides for the answer
    with more than half of the votes (none otherwise).
    """
    info = aggregator_info(name)
    if open and not info.open:
        raise InputError(f"{name} decides between two fixed options and the answers are open "
                         "(any number of answers): use plurality, majority, weighted or "
                         "lam-weighted")
    k = len(choices) if choices is not None else n_options
    if info.binary and k is not None and k != 2:
        opts = f" ({', '.join(choices)})" if choices is not None else ""
        raise InputError(f"{name} decides between two options; this task has {k}{opts}: use "
                         "plurality or lam-weighted")
    return _RULES[name](open=open, **options) if open else _RULES[name](**options)
