"""Aggregation rules over samples: one small protocol, looked up by name.

Every rule maps the votes of one group (answers, some possibly invalid) to a `Vote`. Ties are
broken by an explicit rule, never by list order: "random" (a seeded coin among the tied
answers) or, for evaluation, "fractional" (each tied answer gets 1/k of the credit). Invalid
answers follow an explicit policy: "ignore" (dropped, the group shrinks), "abstain" (they stay in
the group but support no answer) or "fail" (raise).

Binary rules are also available as vectors f(0..n) (the probability of deciding the first
choice given x votes for it), matching `ensemble.theory`, and vectorised forms score many
items and bootstrap draws at once for the evals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import InputError

__all__ = [
    "INVALID_POLICIES",
    "TIE_RULES",
    "Aggregator",
    "Vote",
    "aggregator_f",
    "aggregator_names",
    "get_aggregator",
    "majority_credit",
    "plurality_credit",
    "plurality_winner",
]

INVALID_POLICIES = ("ignore", "abstain", "fail")
TIE_RULES = ("random", "fractional")


@dataclass(frozen=True)
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


class Aggregator(Protocol):
    name: str

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None) -> Vote: ...


def _rng(rng: Any) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


class _Base:
    name = "base"

    def __init__(self, *, tie: str = "random", invalid: str = "ignore", rng: Any = None) -> None:
        if tie not in TIE_RULES:
            raise InputError(f"tie must be one of {TIE_RULES}, got {tie!r}")
        if invalid not in INVALID_POLICIES:
            raise InputError(f"invalid must be one of {INVALID_POLICIES}, got {invalid!r}")
        self.tie = tie
        self.invalid = invalid
        self.rng = _rng(rng)

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
            return Vote(None, dict(counts), {}, n, n_valid, n_invalid, False, 0, self.name,
                        self.invalid, notes)
        if tie and self.tie == "fractional":
            credit = {a: 1.0 / len(top) for a in top}
            decision = sorted(top)[int(self.rng.integers(len(top)))]
        else:
            decision = sorted(top)[int(self.rng.integers(len(top)))] if tie else top[0]
            credit = {decision: 1.0}
        return Vote(decision, dict(counts), credit, n, n_valid, n_invalid, tie, margin, self.name,
                    self.invalid, notes)


class Plurality(_Base):
    """The most frequent valid answer (any number of options)."""

    name = "plurality"

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None) -> Vote:
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

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None) -> Vote:
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


class RandomFollow(_Base):
    """The paper's baseline: follow one valid sample chosen uniformly at random."""

    name = "random-follow"

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None) -> Vote:
        valid, n, n_inv = self._prepare(answers)
        counts = Counter(valid)
        if not valid:
            return self._finish(counts, [], n, 0, n_inv)
        pick = valid[int(self.rng.integers(len(valid)))]
        vote = self._finish(counts, [pick], n, len(valid), n_inv)
        credit = {a: c / len(valid) for a, c in counts.items()}
        return Vote(pick, dict(counts), credit, n, len(valid), n_inv, False, vote.margin,
                    self.name, self.invalid)


class Weighted(_Base):
    """Plurality with per-sample weights (e.g. logprob confidence); weights must be >= 0."""

    name = "weighted"

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None) -> Vote:
        if weights is None or len(weights) != len(answers):
            raise InputError("weighted voting needs one weight per answer")
        if any(w < 0 for w in weights):
            raise InputError("weights must be >= 0")
        valid, n, n_inv = self._prepare(answers)
        score: dict[str, float] = {}
        for a, w in zip(answers, weights):
            if a is not None:
                score[a] = score.get(a, 0.0) + float(w)
        best = max(score.values(), default=0.0)
        top = [a for a, s in score.items() if best > 0 and abs(s - best) <= 1e-12 * max(1, best)]
        return self._finish(Counter(valid), top, n, len(valid), n_inv)


class _BinaryF(_Base):
    """A binary rule given as a vector f(0..n): P(decide choices[0] | x votes for it)."""

    def f(self, n: int) -> NDArray[np.float64]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None) -> Vote:
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
        return Vote(decision, dict(counts), {choices[0]: p1, choices[1]: 1 - p1}, n, len(valid),
                    n_inv, 0 < p1 < 1, margin, self.name, self.invalid)


class Robust(_BinaryF):
    """The minimax-regret rule for the group's n and rationality λ (ψ_λ units), from the theory
    engine (majority when λ <= g(n)); randomised where the optimal f(x) is fractional."""

    name = "robust"

    def __init__(self, *, lam: float | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        if lam is None:
            raise InputError("the robust aggregator needs the experts' rationality: lam=...")
        from .qr import validate_lam

        self.lam = validate_lam(lam)

    def f(self, n: int) -> NDArray[np.float64]:
        return aggregator_f("robust", n, lam=self.lam)


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
    "weighted": Weighted, "robust": Robust, "omniscient": Omniscient,
}


def aggregator_names() -> list[str]:
    return sorted(_RULES)


def get_aggregator(name: str, **options: Any) -> Aggregator:
    """Build a rule by name: plurality, majority, random-follow, weighted, robust, omniscient."""
    try:
        cls = _RULES[name]
    except KeyError:
        raise InputError(f"unknown aggregator {name!r}; choose from {', '.join(aggregator_names())}"
                         ) from None
    return cls(**options)


def aggregator_f(name: str, n: int, *, lam: float | None = None) -> NDArray[np.float64]:
    """A binary rule as the vector f(0..n): majority, random-follow or robust (needs λ)."""
    from .theory import majority_f, random_follow_f, robust_aggregator

    if name == "majority":
        return majority_f(n)
    if name == "random-follow":
        return random_follow_f(n)
    if name == "robust":
        if lam is None:
            raise InputError("the robust rule needs lam")
        return np.asarray(robust_aggregator(n, lam).f)
    raise InputError(f"{name!r} has no vector form; use majority, random-follow or robust")


# -- vectorised forms for evaluation -----------------------------------------------------------
def plurality_winner(counts: ArrayLike, *, rng: Any = None) -> NDArray[np.int64]:
    """Index of the plurality winner along the last axis, ties broken uniformly at random."""
    c = np.asarray(counts)
    g = _rng(rng)
    top = c == c.max(axis=-1, keepdims=True)
    noise = g.random(c.shape)
    return np.argmax(np.where(top, noise, -1.0), axis=-1)


def plurality_credit(counts: ArrayLike, correct: ArrayLike, *, tie: str = "fractional",
                     rng: Any = None) -> NDArray[np.float64]:
    """Credit of the plurality vote: 1 for a unique correct winner; with a k-way tie that
    includes the correct option, 1/k ("fractional") or a seeded random tie-break ("random").
    Rows with no votes at all get 0."""
    c = np.asarray(counts)
    corr = np.asarray(correct)
    if tie == "random":
        win = plurality_winner(c, rng=rng)
        return ((win == corr) & (c.max(axis=-1) > 0)).astype(float)
    if tie != "fractional":
        raise InputError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    mx = c.max(axis=-1)
    top = c == mx[..., None]
    k = top.sum(axis=-1)
    is_top = np.take_along_axis(top, corr[..., None].astype(int), axis=-1)[..., 0]
    return np.where(is_top & (mx > 0), 1.0 / k, 0.0)


def majority_credit(ones: ArrayLike, n: ArrayLike, truth: ArrayLike, *, tie: str = "fractional",
                    rng: Any = None) -> NDArray[np.float64]:
    """Credit of a binary majority with `ones` votes for 1 out of `n` valid votes; truth 0/1.
    Ties give ½ ("fractional") or a seeded coin ("random"); n = 0 counts as a tie."""
    o = np.asarray(ones, dtype=float)
    nn = np.asarray(n, dtype=float)
    t = np.asarray(truth)
    p1 = np.where(2 * o > nn, 1.0, np.where(2 * o < nn, 0.0, 0.5))
    if tie == "random":
        coin = _rng(rng).random(np.broadcast(o, nn, t).shape) < 0.5
        p1 = np.where(p1 == 0.5, coin.astype(float), p1)
    elif tie != "fractional":
        raise InputError(f"tie must be one of {TIE_RULES}, got {tie!r}")
    return np.where(t == 1, p1, 1.0 - p1)
