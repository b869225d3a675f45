"""The cost rule's decision over one question's votes: the answer more likely to be the
reference, every member weighed through the fitted joint prior (`cost_choice`).

This is the one place that turns a `CostRule` and the votes it drew into an answer: the
Ensemble's Decision with `stop="cost"` (`ensemble.spending.CostVote`) and the replay of the
rule on a run's stored samples (`ensemble.evals.costeval`) both call it.

The rule's state is the top-two reduction: each member's votes for the two leading answers,
the leaders ranked by their votes weighed by λ (`member_counts`); other answers and invalid
replies vote for neither. Given those counts (a, b), w = `rule.win(a, b)` is the posterior
probability that leader 1 is the reference answer, and

- w > 1/2 decides leader 1, w < 1/2 leader 2 (whatever the raw or λ-weighted counts say: the
  prior knows how far a member's agreeing votes are independent evidence);
- w = 1/2 (within 1e-9: a state symmetric in the two) is a tie between them;
- one answer seen (no second leader): w below 1/2 says the prior expects the reference to be
  another answer, which no vote named. With two fixed choices (a rule built with
  `two_choices`; `options` names them) that answer is known: the other option is decided, with
  posterior 1 − w. Otherwise the one answer seen is the decision, w its posterior (which may
  lie below 1/2), as the rule's induction valued stopping there (`CostRule`'s terminal value w:
  it stops on such a state only when more votes are worth less than they cost);
- no valid vote: no decision.

When the leaders are not all there is, i.e. answers beyond the first two have the second
leader's λ-weighted score (a tie in the ranks, which the leaders' "first seen" order would
otherwise settle), which two the rule compares is arbitrary, so every answer of that top group
is compared with every other by the same rule (each pair's own counts, the rest voting for
neither): the decision is the answer no other beats (w > 1/2 against it); several unbeaten
answers are a tie among them. Answers ranked strictly below the second are never decided: their
votes only used up budget. An answer's `win` is then its smallest w against the others of the
group (its posterior against its strongest rival); with two leaders, w and 1 − w.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InputError
from .rule import CostRule

__all__ = ["TIE_TOLERANCE", "CostChoice", "cost_choice"]

#: |w − 1/2| at or below which the rule cannot tell two answers apart (a tie).
TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class CostChoice:
    """The cost rule's decision over one question's votes (`cost_choice`).

    decision: the answer decided, None when no vote was valid or the rule ties (`tied`);
    tied: the answers the rule cannot tell apart (two or more; () otherwise);
    win: answer -> its posterior probability of being the reference answer given every vote
    (against its strongest rival in the compared group), for each compared answer;
    leaders: the two leading answers of the rule's state (λ-weighted ranks; None: absent).
    """

    decision: str | None
    tied: tuple[str, ...]
    win: dict[str, float]
    leaders: tuple[str | None, str | None]

    @property
    def candidates(self) -> tuple[str, ...]:
        """The decision alone, or the tied answers (what a tie-break chooses among)."""
        return (self.decision,) if self.decision is not None else self.tied


def cost_choice(rule: CostRule, answers: Sequence[Sequence[str | None]], *,
                options: Sequence[str] | None = None) -> CostChoice:
    """The rule's decision over `answers[g]`, member g's parsed answers in the order drawn
    (None: invalid), as the module docstring defines it; `options`: the answers allowed, when
    they are fixed: with a rule built for two choices (`rule.two_choices`) they name the other
    option of a lone answer (give the two)."""
    # (imported here: `ensemble.stopping` registers the cost rule's spec on its first import,
    # which imports this package; a module-level import would run that before this module is)
    from ..stopping.drawn import member_counts

    a, b, (one, two) = member_counts(answers, rule.lams)
    if one is None:
        return CostChoice(None, (), {}, (None, None))
    if two is None:
        w = rule.win(a, b)
        if rule.two_choices and len(options or ()) != 2:
            raise InputError("the cost rule was built for two fixed choices (two_choices): give "
                             f"the two as options, got {options!r}")
        other = [x for x in options or () if x != one]
        if rule.two_choices and len(other) == 1:
            wins = {one: w, other[0]: 1 - w}
            if abs(w - 0.5) <= TIE_TOLERANCE:
                return CostChoice(None, (one, other[0]), wins, (one, None))
            return CostChoice(one if w > 0.5 else other[0], (), wins, (one, None))
        return CostChoice(one, (), {one: w}, (one, None))
    G = len(answers)
    per: dict[str, list[int]] = {}
    for g, row in enumerate(answers):
        for x in row:
            if x is not None:
                per.setdefault(x, [0] * G)[g] += 1
    score = {x: sum(c * lw for c, lw in zip(v, rule.lams, strict=True)) for x, v in per.items()}
    bar = score[two] * (1 - 1e-12)
    group = [x for x in per if score[x] >= bar]  # first seen first
    if len(group) == 2:
        w = rule.win(a, b)
        wins = {one: w, two: 1 - w}
    else:
        pair = {(x, y): rule.win(per[x], per[y]) for x in group for y in group if x != y}
        wins = {x: min(pair[x, y] for y in group if y != x) for x in group}
    unbeaten = [x for x in group if wins[x] >= 0.5 - TIE_TOLERANCE]
    if not unbeaten:  # a cycle among three or more: none stands out
        unbeaten = group
    if len(unbeaten) == 1:
        return CostChoice(unbeaten[0], (), wins, (one, two))
    return CostChoice(None, tuple(unbeaten), wins, (one, two))
