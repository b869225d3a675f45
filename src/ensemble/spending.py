"""The cost rule's decision in an Ensemble (`Ensemble(stop="cost")`): `CostVote`.

The cost rule is drawn by the Python API's one draw loop (`ensemble.drawing`) like every
stopping rule: its plan (`ensemble.cost.spec.CostSpec`) pilots the first questions, fits the
rule on them and on the Ensemble's earlier decisions (`CostMemory`), and the rule asks one
member at a time until it stops. Unlike the other rules it also decides: the Decision is the
rule's own (`CostVote`, through `ensemble.cost.choice.cost_choice`), the answer more likely to
be the reference given every vote drawn, the members weighed through the prior by which that
same rule chose whom to ask (the draw returns it with the samples, so a concurrent call that
refits the rule cannot change what this one decides by).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from .aggregators import RuleBase, Vote
from .cost.choice import CostChoice, cost_choice
from .cost.spec import CostMemory

__all__ = ["CostMemory", "CostVote"]

#: A deciding rule's choice over each member's answers (`CostSpec.choose`).
Choose = Callable[[Any, Sequence[Sequence[str | None]], Sequence[str] | None], CostChoice]


def _cost_choice(rule: Any, answers: Sequence[Sequence[str | None]],
                 options: Sequence[str] | None) -> CostChoice:
    return cost_choice(rule, answers, options=options)


class CostVote(RuleBase):
    """The cost rule's decision as a `Vote` (rule "cost"): `choose(rule, per-member answers,
    options)` (`CostSpec.choose`, i.e. `cost_choice`) over each member's votes (`groups`: the
    member of each vote; None for a one-member ensemble). Its ties (the answers the rule
    cannot tell apart) are broken by the Ensemble's tie rule ("random": a seeded coin among
    them; "fractional": each gets 1/k of the credit), invalid replies follow its invalid policy
    ("fail" raises; otherwise they vote for no answer, as in the rule's state). One object per
    decision: `made` keeps each call's `CostChoice` (the first is the whole answer's; an answer
    voted part by part adds one per part)."""

    name = "cost"

    def __init__(self, rule: Any, choose: Choose | None = None, *, tie: str = "random",
                 invalid: str = "ignore", rng: Any = None, open: bool = False) -> None:
        super().__init__(tie=tie, invalid=invalid, rng=rng, open=open)
        self.rule = rule
        self.choose: Choose = choose or _cost_choice
        self.made: list[tuple[CostChoice, Vote]] = []

    def aggregate(self, answers: Sequence[str | None], *, choices: Sequence[str] | None,
                  weights: Sequence[float] | None, groups: list[int] | None) -> Vote:
        valid, n, n_inv = self.prepare(answers)
        G = len(self.rule.max_n)
        per: list[list[str | None]] = [[] for _ in range(G)]
        for i, x in enumerate(answers):
            per[groups[i] if groups is not None else 0].append(x)
        choice = self.choose(self.rule, per, choices)
        vote = self.finish(Counter(valid), list(choice.candidates), n, len(valid), n_inv)
        self.made.append((choice, vote))
        return vote
