"""What a run asks of the cost rule (`CostSpec`), and how it is built once pilots are in."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ..rules import HARD, Requests
from ..stopping.drawn import Drawn
from ..stopping.plan import HISTORY_MAX, FitContext, StopMemory
from ..stopping.priors import PriorUsed
from ..stopping.registry import register_stop_rule
from .choice import CostChoice, cost_choice
from .joint import JointPrior, fit_joint_prior, joint_grid
from .rule import CREDITS, REFERENCES, CostRule

__all__ = ["DEFAULT_PILOT_QUESTIONS", "CostMemory", "CostSpec", "same_question_prior",
           "two_fixed_choices", "uniform_joint_prior"]

#: Questions that get a full pilot (every member's `pilot` votes) before the joint prior is
#: fitted; later questions are asked by the rule alone, and their counts refit the prior.
#: Until the counts of this many questions are in, the rule uses its default prior.
DEFAULT_PILOT_QUESTIONS = 30


def uniform_joint_prior(members: int) -> JointPrior:
    """Each member's q uniform and independent of the others' (the product grid
    `fit_joint_prior` fits on, equal weights): a prior that knows nothing of how the members'
    votes relate, so one member's votes say nothing of another's q (pass it as
    `CostSpec(default_prior=...)` for members that may read different questions)."""
    return JointPrior.of(joint_grid(members, _GRID.get(members, 7)))


def same_question_prior(lams: Sequence[float | None], nodes: int = 41) -> JointPrior:
    """The cost rule's default joint prior: the members read the same question, each at its
    own λ. The strongest member's q is uniform (the bayes rule's default, `UNIFORM`), and
    under quantal response (logit q_g = 2λ_g(2p − 1)) every other member's q follows from it:
    logit q_g = (λ_g / λ_max) logit q_max. So a weak member's agreement is weak evidence of
    the strong member's answer, and the rule may buy the cheap votes first. With some λ
    unknown the members are taken alike (q_g = q for all). `nodes` points of the strongest
    member's q, evenly spaced, equal weights."""
    lw = np.array([1.0 if x is None else float(x) for x in lams])
    if any(x is None for x in lams) or not (lw > 0).any():
        lw = np.ones(len(lams))
    top = lw.max()
    ratio = (np.where(np.isinf(lw), 1.0, 0.0) if math.isinf(top) else lw / top)
    u = (np.arange(nodes) + 0.5) / nodes
    logit = np.log(u) - np.log1p(-u)
    q = 1.0 / (1.0 + np.exp(-np.outer(logit, ratio)))
    return JointPrior.of(q)


_GRID = {1: 41, 2: 21, 3: 11}  # nodes per member, as fit_joint_prior's default grid


@dataclass
class CostMemory:
    """What an Ensemble keeps between calls for its cost rule: every decision's per-member
    counts (the prior's data), each member's spend and votes (its price per vote) and the
    last rule, with the number of decisions it was fitted on."""

    counts: deque[tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=lambda: deque(maxlen=HISTORY_MAX))
    spent: list[float] = field(default_factory=list)
    votes: list[int] = field(default_factory=list)
    rule: CostRule | None = None
    fitted_on: int = 0  # the decisions the rule's prior was fitted on
    #: completion tokens of every sample whose count is known, and how many: the length of a
    #: vote, which prices a member none of whose samples has been paid for yet
    tokens: float = 0.0
    counted: int = 0

    def price(self, g: int) -> float | None:
        return self.spent[g] / self.votes[g] if self.votes and self.votes[g] else None

    def mean_tokens(self) -> float | None:
        """Mean completion tokens of a sample, every member's (None: none counted)."""
        return self.tokens / self.counted if self.counted else None

    def paid(self, drawn: Drawn, skip: Sequence[int] | None = None) -> None:
        """Count what each member's samples cost (those after `skip[g]` of member g's): a
        member's price per vote is its mean. A sample without a price tells none, and a stored
        sample tells the price as well as a new one. Their completion tokens are counted too."""
        if not self.spent:
            self.spent, self.votes = [0.0] * len(drawn.members), [0] * len(drawn.members)
        for g, obs in enumerate(drawn.members):
            new = obs[skip[g]:] if skip is not None else obs
            costs = [o.cost_usd for o in new]
            if None not in costs:
                self.spent[g] += float(sum(c or 0.0 for c in costs))
                self.votes[g] += len(new)
            known = [o.tokens for o in new if o.tokens is not None]
            self.tokens += float(sum(known))
            self.counted += len(known)

    def still_fits(self, decisions: int, prices: Sequence[float]) -> bool:
        """The rule built last time serves again until the data grew by a tenth or a price
        moved by 5% (a served Ensemble decides one prompt per call: refitting the prior and
        the induction on every call would cost ~0.1 s each), or, on its default prior,
        until enough decisions are in to fit one."""
        rule = self.rule
        if rule is None or decisions > 1.1 * self.fitted_on:
            return False
        used = rule.prior_used  # the default prior gives way to a fit once enough are seen
        if used is not None and used.source == "default" and decisions >= used.needed:
            return False
        return all(abs(p - q) <= 0.05 * max(q, 1e-300) for p, q in zip(prices, rule.prices,
                                                                      strict=True))


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
    uses `default_prior` (None: `same_question_prior(λ)`: the strongest member's q uniform,
    the others' following from it under quantal response) rather than a fit on a handful of
    pilots, which would believe the first votes. prior: a `JointPrior` to use instead (no
    pilot). prices: USD per vote of each member (default: the mean cost of the member's
    samples drawn so far, i.e. its token usage times its price, from the price table or
    `price_per_1k`; for a member none of whose samples is in yet, e.g. one the pilot gives no
    vote, one vote of the others' mean length at its own price on the call's prompts, until
    its own samples replace it).
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
    #: the rule decides the answer too (`choose`): the Decision is the rule's, not a count
    decides: ClassVar[bool] = True
    #: it reads the hard answers (the top-two reduction of each member's votes)
    requests: ClassVar[Requests] = HARD

    @classmethod
    def default_spec(cls) -> CostSpec:
        """The spec `Ensemble(stop="cost")` runs."""
        return cls()

    @classmethod
    def default_plan(cls, *, max_n: int | None = None, **options: Any) -> CostSpec:
        """The plan `stop="cost"` stands for (`ensemble.stopping.plan_for`): the spec with
        `options` as its fields (each member draws up to its own n; `max_n` does not
        apply)."""
        return cls(**options)

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
        if self.pilot is not None and not any(self.pilot) and self.prior is None and \
                self.prices is None:
            raise InputError(f"pilot={self.pilot!r} gives no member a vote, and the pilot is "
                             "what prices the members' votes and fits the prior: give each "
                             "member one or more (default 2 each), or prices=(USD per vote of "
                             "each member)")
        if self.pilot_questions < 1:
            raise InputError(f"pilot_questions must be >= 1, got {self.pilot_questions!r}")
        if self.default_prior is not None and not isinstance(self.default_prior, JointPrior):
            raise InputError(f"default_prior must be a JointPrior, got {self.default_prior!r}")

    def check_members(self, members: int) -> None:
        """InputError unless the spec fits an ensemble of `members` (checked when the
        Ensemble is made, not at its first decision): one price and one pilot per member, and
        prices with a given prior (no pilot draws a sample that tells a vote's length). A
        member the pilot gives no vote is priced at its own rates for the others' votes'
        length (`fit`)."""
        for what, given in (("prices", self.prices), ("pilot", self.pilot)):
            if given is not None and len(given) != members:
                raise InputError(f"CostSpec({what}={tuple(given)!r}) gives {len(given)} "
                                 f"members, the ensemble has {members} members: give one "
                                 "per member, in the members' order")
        if self.prices is None and self.prior is not None:
            raise InputError(f"the cost rule cannot price the {members} members' votes at the "
                             "first decision (a given prior draws no pilot, so no sample "
                             "tells a vote's length): give CostSpec(prices=(USD per vote of "
                             "each member)), or a pilot instead of the prior")

    def pilot_for(self, max_n: Sequence[int]) -> tuple[int, ...]:
        """Votes per member on a pilot question (at most each member's budget)."""
        pil = self.pilot or tuple(2 for _ in max_n)
        if len(pil) != len(max_n):
            raise InputError(f"pilot gives {len(pil)} members votes, the ensemble has "
                             f"{len(max_n)}")
        return tuple(min(p, n) for p, n in zip(pil, max_n, strict=True))

    def prior_for(self, a: ArrayLike | None, b: ArrayLike | None, members: int,
                  lams: Sequence[float | None] | None = None) -> PriorUsed:
        """The joint prior the rule decides with, from counts (a, b: questions x members), and
        why: the spec's own `prior` ("given"); `default_prior` (None: `same_question_prior`
        of the members' λ) while fewer than `pilot_questions` questions' counts are in, or
        fewer than half of them have 2 votes for their two leaders ("default"); else the NPMLE
        fit on the counts ("fitted", on the questions with 2 such votes). A pilot whose votes
        were all invalid leaves its question uninformative: counting only informative ones
        against `pilot_questions`, a batch whose first 30 pilots held one such question (GSM8K,
        Llama-2/GPT-4: 29 of 30) decided all of its questions with the default prior, which
        takes members of unknown λ alike (0.37 accuracy against GPT-4's 0.945)."""
        if self.prior is not None:
            return PriorUsed("given", self.prior, 0, 0)
        default = self.default_prior or same_question_prior(
            lams if lams is not None else [None] * members)
        if default.members != members:
            raise InputError(f"default_prior is over {default.members} members, the ensemble "
                             f"has {members}")
        if a is None or b is None:
            return PriorUsed("default", default, 0, self.pilot_questions)
        aa, bb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        seen = int(aa.shape[0]) if aa.size else 0
        informative = int(((aa + bb).sum(axis=1) >= 2).sum()) if aa.size else 0
        if seen < self.pilot_questions or 2 * informative < self.pilot_questions:
            return PriorUsed("default", default, seen, self.pilot_questions)
        return PriorUsed("fitted", fit_joint_prior(aa, bb), seen, self.pilot_questions)

    def build(self, *, a: ArrayLike | None, b: ArrayLike | None, prices: Sequence[float],
              max_n: Sequence[int], lams: Sequence[float] | None,
              two_choices: bool) -> CostRule:
        """The rule, its prior chosen from counts (a, b: questions x members) by `prior_for`
        (its `prior_used` says which); `two_choices`: the answers are two fixed choices
        (`two_fixed_choices`), which the caller knows from its answer kind and choices."""
        used = self.prior_for(a, b, len(max_n), lams)
        value, loss = self.value_usd, self.target_loss
        if value is None and loss is None:
            loss = 0.005
        rule = CostRule(prior=used.prior, prices=self.prices or prices, max_n=max_n, lams=lams,
                        value_usd=value, target_loss=loss, reference=self.reference,
                        credit=self.credit, two_choices=two_choices)
        rule.prior_used = used
        return rule


    # -- the stop-rule interface (`StopPlan`) ------------------------------------------------
    def budgets(self, ns: Sequence[int]) -> tuple[int, ...]:
        """Each member's own n."""
        return tuple(int(n) for n in ns)

    def pilot_draw(self, i: int, budgets: Sequence[int], memory: StopMemory) -> tuple[int, ...]:
        """Every member's `pilot` votes on question i while fewer than `pilot_questions`
        decisions are in (this call's first ones and the memory's together); none after, nor
        with a prior given: the rule asks from the first vote."""
        seen = len(self._memory(memory).counts)
        if self.prior is not None or i >= self.pilot_questions - seen:
            return tuple(0 for _ in budgets)
        return self.pilot_for(budgets)

    def fit(self, pilots: Sequence[Drawn | None], memory: StopMemory,
            context: FitContext) -> CostRule:
        """The rule, from this call's pilots and every earlier decision's counts: its prior by
        `prior_for`, each member's price per vote the mean cost of its samples so far (or
        `prices`); the last rule again while it still fits (`CostMemory.still_fits`)."""
        mem = self._memory(memory)
        lams = context.lams
        weights = None if any(x is None for x in lams) else [float(x) for x in lams]  # type: ignore[arg-type]
        drawn = [d for d in pilots if d is not None and d.drawn]
        for d in drawn:
            mem.paid(d)
        G = len(lams)
        prices = []
        for g in range(G):
            price = mem.price(g) if mem.spent else None
            if price is None and self.prices is None:
                price = self._estimate(g, mem, context)
            prices.append(price or 0.0)
        # the pilots' leaders ranked as the rule ranks them: by λ, else by price
        rank = weights or list(self.prices or prices)
        data = list(mem.counts)
        for d in drawn:
            a, b, _ = d.member_counts(rank)
            data.append((tuple(a), tuple(b)))
        rule = mem.rule if mem.still_fits(len(data), prices) else None
        if rule is None:
            rule = self.build(a=[d[0] for d in data] if data else None,
                              b=[d[1] for d in data] if data else None,
                              prices=prices, max_n=context.budgets, lams=weights,
                              two_choices=context.two_choices)
            mem.rule, mem.fitted_on = rule, len(data)
        return rule

    @staticmethod
    def _estimate(g: int, mem: CostMemory, context: FitContext) -> float:
        """Member g's price per vote before any of its samples is paid for: one vote of the
        others' mean length (completion tokens) at its own rates, on this call's prompts
        (`FitContext.vote_price`); once its samples are in, their mean cost replaces it (the
        rule is refitted when a price moves by 5%)."""
        length = mem.mean_tokens()
        rate = context.vote_price[g] if g < len(context.vote_price) else None
        price = None if length is None or rate is None else rate(length)
        if price is None and length is None and rate is not None:
            raise InputError(f"the cost rule needs member {g}'s price per vote, and no sample "
                             "drawn yet tells a vote's length: give some member a pilot vote, "
                             "or CostSpec(prices=(USD per vote of each member))")
        if price is None:
            raise InputError(f"the cost rule needs member {g}'s price per vote and its "
                             "samples have none: give the member price_per_1k=(in, out) "
                             "USD per 1,000 tokens, or CostSpec(prices=...)")
        return float(price)

    def remember(self, memory: StopMemory, pilot: Drawn, drawn: Drawn) -> None:
        """Keep a decided question's per-member counts (the next fits' data: the likelihood
        does not depend on whom the rule chose to ask) and what its later votes cost."""
        mem = self._memory(memory)
        mem.paid(drawn, skip=pilot.counts())
        rule = mem.rule
        lw = rule.lams if rule is not None else [1.0] * len(drawn.members)
        a, b, _ = drawn.member_counts(lw)
        mem.counts.append((tuple(a), tuple(b)))

    @staticmethod
    def choose(rule: CostRule, answers: Sequence[Sequence[str | None]],
               options: Sequence[str] | None = None) -> CostChoice:
        """The rule's decision over each member's answers (`cost_choice`; `options`: the
        fixed choices, when they are)."""
        return cost_choice(rule, answers, options=options)

    @staticmethod
    def _memory(memory: StopMemory) -> CostMemory:
        return memory.part("cost", CostMemory)


def two_fixed_choices(choices: Sequence[str] | None, *, is_open: bool = False) -> bool:
    """Whether answers are two fixed choices (the cost rule's `two_choices`): exactly two
    `choices` and a closed answer kind; open answers, free text without choices, or more
    options are not (an answer nobody named cannot be decided)."""
    return not is_open and choices is not None and len(choices) == 2
