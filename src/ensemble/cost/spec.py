"""What a run asks of the cost rule (`CostSpec`), and how it is built once pilots are in."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ..stopping.priors import PriorUsed
from ..stopping.registry import register_stop_rule
from .joint import JointPrior, fit_joint_prior, joint_grid
from .rule import CREDITS, REFERENCES, CostRule

__all__ = ["DEFAULT_PILOT_QUESTIONS", "CostSpec", "two_fixed_choices", "uniform_joint_prior"]

#: Questions that get a full pilot (every member's `pilot` votes) before the joint prior is
#: fitted; later questions are asked by the rule alone, and their counts refit the prior.
#: Until the counts of this many questions are in, the rule uses its default prior.
DEFAULT_PILOT_QUESTIONS = 30


def uniform_joint_prior(members: int) -> JointPrior:
    """The cost rule's default joint prior: each member's q uniform and independent of the
    others' (the product grid `fit_joint_prior` fits on, equal weights). It knows nothing of
    how the members' votes relate, so one member's votes say nothing of another's q: until
    the pilots teach it that, the rule buys the votes of the member whose vote the
    reference follows rather than trust the others' agreement."""
    return JointPrior.of(joint_grid(members, _GRID.get(members, 7)))


_GRID = {1: 41, 2: 21, 3: 11}  # nodes per member, as fit_joint_prior's default grid


@register_stop_rule
@dataclass(frozen=True)
class CostSpec:
    """The cost rule over members, as a run asks for it.

    value_usd: dollars one right decision is worth; or target_loss: the largest expected
    accuracy loss under the prior against `reference` ("strongest": the strongest member's one
    vote; "fixed": every member's full budget), the value solved for. Neither: target_loss
    0.005 against the strongest member alone. credit: what a decision earns, "reference"
    (agreement with the reference answer) or "qr" (P(it is right) under quantal response,
    read through the members' λ; for tasks scored by P(right), such as box-and-ball).
    pilot: votes per member on each pilot question (default 2 each); pilot_questions: how many
    questions get that full pilot before the prior is fitted (counts of later questions refit
    it); until the counts of that many are in (a fresh Ensemble's first decisions), the rule
    uses `default_prior` (None: `uniform_joint_prior`, each member's q uniform and
    independent) rather than a fit on a handful of pilots, which would believe the first
    votes. prior: a `JointPrior` to use instead (no pilot). prices: USD per vote of each member
    (default: the mean cost of the member's samples drawn so far, i.e. its token usage times
    its price, from the price table or `price_per_1k`).
    """

    value_usd: float | None = None
    target_loss: float | None = None
    reference: str = "strongest"
    credit: str = "reference"
    pilot: tuple[int, ...] | None = None
    pilot_questions: int = DEFAULT_PILOT_QUESTIONS
    prior: JointPrior | None = None
    prices: tuple[float, ...] | None = None
    default_prior: JointPrior | None = None

    stop = "cost"  # the name a Decision and a run report
    # registered with the stopping rules (by this spec, which builds the rule): it chooses
    # among an ensemble's members rather than when one question has enough votes
    name: ClassVar[str] = stop
    about: ClassVar[str] = ("whom of an ensemble's members to ask next, or stop, by dollars "
                            "per right decision")
    params: ClassVar[tuple[str, ...]] = ("value_usd", "target_loss", "reference", "credit", "pilot",
                                         "pilot_questions", "prior", "prices", "default_prior")
    needs_prior: ClassVar[bool] = True
    over_members: ClassVar[bool] = True

    @classmethod
    def default_spec(cls) -> CostSpec:
        """The spec `Ensemble(stop="cost")` runs."""
        return cls()

    def __post_init__(self) -> None:
        if self.value_usd is not None and self.target_loss is not None:
            raise InputError("give the cost rule value_usd or target_loss, not both")
        if self.value_usd is not None and not (math.isfinite(self.value_usd)
                                               and self.value_usd > 0):
            raise InputError(f"value_usd must be a number > 0 (dollars a right decision is "
                             f"worth), got {self.value_usd!r}")
        if self.target_loss is not None and not 0 < self.target_loss < 1:
            raise InputError(f"target_loss must lie in (0, 1), got {self.target_loss!r}")
        if self.reference not in REFERENCES:
            raise InputError(f"reference must be one of {', '.join(REFERENCES)}, got "
                             f"{self.reference!r}")
        if self.credit not in CREDITS[:2]:
            raise InputError(f"credit must be one of {', '.join(CREDITS[:2])}, got "
                             f"{self.credit!r}")
        if self.pilot is not None and (not self.pilot or min(self.pilot) < 0):
            raise InputError(f"pilot gives each member its votes (>= 0), got {self.pilot!r}")
        if self.pilot_questions < 1:
            raise InputError(f"pilot_questions must be >= 1, got {self.pilot_questions!r}")
        if self.default_prior is not None and not isinstance(self.default_prior, JointPrior):
            raise InputError(f"default_prior must be a JointPrior, got {self.default_prior!r}")

    def pilot_for(self, max_n: Sequence[int]) -> tuple[int, ...]:
        """Votes per member on a pilot question (at most each member's budget)."""
        pil = self.pilot or tuple(2 for _ in max_n)
        if len(pil) != len(max_n):
            raise InputError(f"pilot gives {len(pil)} members votes, the ensemble has "
                             f"{len(max_n)}")
        return tuple(min(p, n) for p, n in zip(pil, max_n, strict=True))

    def prior_for(self, a: ArrayLike | None, b: ArrayLike | None, members: int) -> PriorUsed:
        """The joint prior the rule decides with, from counts (a, b: questions x members), and
        why: the spec's own `prior` ("given"); `default_prior` while fewer than
        `pilot_questions` questions have 2 votes for their two leaders ("default"); else the
        NPMLE fit on the counts ("fitted")."""
        if self.prior is not None:
            return PriorUsed("given", self.prior, 0, 0)
        default = self.default_prior or uniform_joint_prior(members)
        if default.members != members:
            raise InputError(f"default_prior is over {default.members} members, the ensemble "
                             f"has {members}")
        if a is None or b is None:
            return PriorUsed("default", default, 0, self.pilot_questions)
        aa, bb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        informative = int(((aa + bb).sum(axis=1) >= 2).sum()) if aa.size else 0
        if informative < self.pilot_questions:
            return PriorUsed("default", default, informative, self.pilot_questions)
        return PriorUsed("fitted", fit_joint_prior(aa, bb), informative, self.pilot_questions)

    def build(self, *, a: ArrayLike | None, b: ArrayLike | None, prices: Sequence[float],
              max_n: Sequence[int], lams: Sequence[float] | None,
              two_choices: bool) -> CostRule:
        """The rule, its prior chosen from counts (a, b: questions x members) by `prior_for`
        (its `prior_used` says which); `two_choices`: the answers are two fixed choices
        (`two_fixed_choices`), which the caller knows from its answer kind and choices."""
        used = self.prior_for(a, b, len(max_n))
        value, loss = self.value_usd, self.target_loss
        if value is None and loss is None:
            loss = 0.005
        rule = CostRule(prior=used.prior, prices=self.prices or prices, max_n=max_n, lams=lams,
                        value_usd=value, target_loss=loss, reference=self.reference,
                        credit=self.credit, two_choices=two_choices)
        rule.prior_used = used
        return rule


def two_fixed_choices(choices: Sequence[str] | None, *, is_open: bool = False) -> bool:
    """Whether answers are two fixed choices (the cost rule's `two_choices`): exactly two
    `choices` and a closed answer kind; open answers, free text without choices, or more
    options are not (an answer nobody named cannot be decided)."""
    return not is_open and choices is not None and len(choices) == 2
