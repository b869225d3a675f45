"""What a stopping rule reads: the samples one question has drawn so far, member by member.

Every stopping rule (bayes, beta, fixed, a plug-in, and the cost rule over members) decides from
a `Drawn`: each member's samples so far, in the order drawn, each an `Observation`:

- `key`: the answer as the decision counts it (open answers merged as the answer kind merges
  them, e.g. 1,250 and $1,250 one answer), None for a reply that could not be read;
- `weight` and `shares`: how much the sample counts and for what (soft evidence, issue 37): it
  adds `weight * shares[a]` to answer a (`shares` None: all of its weight to `key`). A hard
  vote is weight 1, no shares. Drawn with logprobs (the Ensemble's aggregator or its stopping
  rule `requests` them), a sample of fixed choices has as shares its own P(option) at the
  answer position (the options among the top logprobs; the rest of its mass unassigned), and
  `evidence` is all it says about itself (`ensemble.rules.Evidence`: the answer's logprob,
  the options', the trace's confidences), for rules that weigh it otherwise;
- `tokens` and `cost_usd`: what the sample cost (completion tokens, dollars; None: unknown),
  for rules that count tokens or dollars rather than samples (issue 40.3);

and each member's budget (the most samples it may give the question), and the question's key
(`question`: the digest of the Ensemble's prompt, an eval's question id; None: unknown), for
a rule whose policy is randomised per question (the cost rule's target, `ensemble.cost.rule`).
`Drawn` reduces that to what rules read: the pooled counts of the two leading answers
(`top_two`), each member's votes for the two leaders (`member_counts`, the cost rule's state),
the weighted tallies of soft evidence (`tallies`), the tokens and dollars spent so far, and the
budget left. The draw loop that builds it (`ensemble.drawing`) is the same for fixed n,
adaptive stopping and the cost rule; rules never see a provider's sample.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..errors import InputError

if TYPE_CHECKING:
    from ..rules import Evidence

__all__ = ["Drawn", "Observation", "Prefixes", "member_counts"]


def member_counts(answers: Sequence[Sequence[str | None]], weights: Sequence[float]
                  ) -> tuple[list[int], list[int], tuple[str | None, str | None]]:
    """(a, b, (answer 1, answer 2)): each member's votes for the two leading answers, the
    leaders ranked by their votes weighed by `weights` (λ) over the pooled votes (ties: the
    answer seen first). None answers (invalid) vote for nothing. (Also
    `ensemble.cost.member_counts`: the cost rule's state.)"""
    score: dict[str, float] = {}
    first: dict[str, int] = {}
    for g, row in enumerate(answers):
        w = float(weights[g])
        for x in row:
            if x is not None:
                score[x] = score.get(x, 0.0) + w
                first.setdefault(x, len(first))
    ranked = sorted(score, key=lambda x: (-score[x], first[x]))
    one = ranked[0] if ranked else None
    two = ranked[1] if len(ranked) > 1 else None
    a = [sum(1 for x in row if x is not None and x == one) for row in answers]
    b = [sum(1 for x in row if x is not None and x == two) for row in answers]
    return a, b, (one, two)


@dataclass(frozen=True, slots=True)
class Observation:
    """One drawn sample as a stopping rule sees it (see the module docstring)."""

    key: str | None
    weight: float = 1.0
    shares: Mapping[str, float] | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    evidence: Evidence | None = None

    def credit(self) -> dict[str, float]:
        """What this sample adds to each answer: `weight * shares`, or `weight` to its key."""
        if self.shares is not None:
            return {a: self.weight * float(s) for a, s in self.shares.items()}
        return {} if self.key is None else {self.key: self.weight}


@dataclass(frozen=True)
class Drawn:
    """One question's samples so far: `members[g]` member g's, in the order drawn; `budgets[g]`
    the most samples member g may give it (one member: the rule's max_n); `question` its key
    (the same every time the question is asked; None: unknown)."""

    members: tuple[tuple[Observation, ...], ...]
    budgets: tuple[int, ...]
    question: str | None = None

    def __post_init__(self) -> None:
        if len(self.members) != len(self.budgets) or not self.members:
            raise InputError(f"give each member's samples and budget: {len(self.members)} "
                             f"members, {len(self.budgets)} budgets")

    @classmethod
    def of(cls, keys: Sequence[Sequence[str | None]], budgets: Sequence[int],
           question: str | None = None) -> Drawn:
        """Hard votes (answer keys per member, None invalid), unpriced: for tests and replays."""
        return cls(tuple(tuple(Observation(k) for k in row) for row in keys),
                   tuple(int(b) for b in budgets), question)

    # -- sizes -------------------------------------------------------------------------------
    @property
    def drawn(self) -> int:
        """Samples drawn, every member's (invalid replies included)."""
        return sum(len(m) for m in self.members)

    def counts(self) -> tuple[int, ...]:
        """Samples drawn per member."""
        return tuple(len(m) for m in self.members)

    def left(self) -> tuple[int, ...]:
        """Samples each member may still give (its budget minus those drawn, at least 0)."""
        return tuple(max(0, b - len(m)) for m, b in zip(self.members, self.budgets, strict=True))

    @property
    def budget(self) -> int:
        """The most samples the question may get, every member's."""
        return sum(self.budgets)

    # -- what the votes say -------------------------------------------------------------------
    def pooled(self) -> list[str | None]:
        """Every member's answer keys, member by member."""
        return [o.key for m in self.members for o in m]

    def top_two(self, *, count_invalid: bool = False) -> tuple[int, int, int]:
        """(drawn, top, second) over the pooled hard votes: samples drawn and the counts of
        the two most frequent answers (invalid replies count as drawn and vote for nothing,
        unless `count_invalid`, which counts them as one more answer)."""
        c = Counter(k for k in self.pooled() if count_invalid or k is not None)
        best = c.most_common(2)
        return (self.drawn, best[0][1] if best else 0, best[1][1] if len(best) > 1 else 0)

    def tallies(self) -> dict[str, float]:
        """Each answer's summed credit over the pooled samples (`Observation.credit`): the
        hard counts for hard votes, the soft vote's totals for soft evidence."""
        out: dict[str, float] = {}
        for m in self.members:
            for o in m:
                for a, x in o.credit().items():
                    out[a] = out.get(a, 0.0) + x
        return out

    def member_counts(self, weights: Sequence[float]
                      ) -> tuple[list[int], list[int], tuple[str | None, str | None]]:
        """(a, b, leaders): each member's votes for the question's two leading answers, the
        leaders ranked by their votes weighed by `weights` (one per member, e.g. λ) over the
        pooled votes (ties: the answer seen first); invalid replies vote for neither. The
        cost rule's state (`member_counts` over the keys)."""
        return member_counts([[o.key for o in m] for m in self.members], weights)

    # -- what it cost --------------------------------------------------------------------------
    @property
    def tokens(self) -> int | None:
        """Completion tokens of every sample drawn (None: some sample's are unknown)."""
        ts = [o.tokens for m in self.members for o in m]
        return None if any(t is None for t in ts) else sum(t or 0 for t in ts)

    @property
    def cost_usd(self) -> float | None:
        """Dollars of every sample drawn (None: some sample's price is unknown)."""
        cs = [o.cost_usd for m in self.members for o in m]
        return None if any(c is None for c in cs) else float(sum(c or 0.0 for c in cs))

    def head(self, counts: Sequence[int]) -> Drawn:
        """The first `counts[g]` samples of each member (e.g. a question's pilot)."""
        return Drawn(tuple(m[:n] for m, n in zip(self.members, counts, strict=True)),
                     self.budgets, self.question)


@dataclass(frozen=True)
class Prefixes:
    """Every prefix of many questions' samples along given orders (one member), as arrays:
    what a policy reads to say at once where it stops along each (`plan.PrefixPolicy`), the
    same as `Drawn` says of one prefix. Leading axes (...) index questions and orders; m the
    prefix length, 0..budget.

    counts[..., m, o]: hard votes for option o among the first m samples; invalid[..., m]:
    replies among them that could not be read; tallies[..., m, o]: the summed credit of the
    first m (`Drawn.tallies`: each sample's shares where it has them, else 1 to its answer),
    accumulated in draw order (so equal, to the last bit, to what `Drawn` sums); None when
    no sample has shares.
    """

    counts: NDArray[np.int16]
    invalid: NDArray[np.int16]
    tallies: NDArray[np.float64] | None
    budget: int

    @property
    def drawn(self) -> NDArray[np.int64]:
        """The prefix lengths 0..budget (the last axis of `invalid`)."""
        return np.arange(self.budget + 1)

    def top_two(self, *, count_invalid: bool = False
                ) -> tuple[NDArray[np.int16], NDArray[np.int16]]:
        """(top, second)[..., m]: `Drawn.top_two`'s counts of the two leading answers of each
        prefix (invalid replies one more answer with `count_invalid`)."""
        c = self.counts
        if count_invalid:
            c = np.concatenate([c, self.invalid[..., None]], axis=-1)
        return top_two_of(c)

    def leading_tallies(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(lead, second)[..., m]: the two highest `tallies` of each prefix (0 where fewer)."""
        if self.tallies is None:
            raise InputError("these prefixes carry no soft evidence (tallies)")
        return top_two_of(self.tallies)


def top_two_of(x: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    """The highest and second-highest value along the last axis (0 where it has one entry)."""
    if x.shape[-1] == 1:
        return x[..., 0], np.zeros_like(x[..., 0])
    part = np.partition(x, x.shape[-1] - 2, axis=-1)
    return part[..., -1], part[..., -2]
