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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import InputError
from .registry import Registry

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "DEFAULT_AGGREGATOR",
    "LAM_WEIGHTED",
    "MAJORITY",
    "PLURALITY",
    "RANDOM_FOLLOW",
    "ROBUST",
    "WEIGHTED",
    "RuleInfo",
    "aggregator_info",
    "aggregator_names",
    "main_vote",
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
C = TypeVar("C", bound=Callable[..., Any])


@dataclass(frozen=True)
class RuleInfo:
    """What one rule is.

    name, summary: how it is called and the one line the CLI's help shows.
    build: the per-vote rule, `build(tie=, invalid=, rng=, open=, **options) -> Aggregator`.
    binary: it decides between exactly two options (refused on more).
    open: it applies to open answers (numbers, text: no fixed set of options).
    needs: what it must be given: "lam" (every member's λ, as lam= or lams=), "weights" (one
        weight per vote at call time), "structure" (the true report structure).
    scorable: `ensemble eval` may score it (with the form the task needs, below).
    vote: it is the main vote of a task (plurality over any options, majority over two): the
        evals score it as the task's main vote.
    f: f(n, λ) -> f(0..n), P(decide the first of two options | x votes for it) for one group.
    group_f: group_f(groups) -> f[x_1, ..., x_G] for groups (n_g, λ_g) (`ensemble.theory.Group`).
    credit: credit(counts, correct, lams) -> expected credit, counts of shape S + (G, k) (votes
        per group and option), correct of shape S (the right option's index), lams λ per group;
        ties share the credit (1/k each), rows without votes get 0.
    """

    name: str
    build: Callable[..., Any]  # an `ensemble.aggregators.Aggregator`
    summary: str
    binary: bool = False
    open: bool = True
    needs: tuple[str, ...] = ()
    scorable: bool = True
    vote: bool = False
    f: FArray | None = None
    group_f: GroupF | None = None
    credit: Credit | None = None

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

    def scorable_on(self, utility: bool) -> bool:
        """Whether the evals can score it on a task: the box-ball utility needs the group form,
        a vote's accuracy needs the credit."""
        return self.scorable and (self.group_f if utility else self.credit) is not None


# the built-in rules register when ensemble.aggregators is imported
rules: Registry[RuleInfo] = Registry("aggregator", "ensemble.rules",
                                     builtins=("ensemble.aggregators",))


def register_rule(*, summary: str, name: str | None = None, binary: bool = False,
                  open: bool = True, needs: Sequence[str] = (), scorable: bool = True,
                  vote: bool = False, f: FArray | None = None, group_f: GroupF | None = None,
                  credit: Credit | None = None, replace: bool = False) -> Callable[[C], C]:
    """Class decorator: register an aggregation rule (its per-vote class, named by its `name`
    attribute or `name=`) with what it declares (`RuleInfo`)."""
    bad = sorted(set(needs) - {"lam", "weights", "structure"})
    if bad:
        raise InputError(f"register_rule: unknown need {bad[0]!r}; a rule may need lam, "
                         "weights or structure")

    def deco(cls: C) -> C:
        key = name or getattr(cls, "name", None)
        if not isinstance(key, str):
            raise InputError(f"register_rule: {cls!r} has no name (give it a `name` attribute "
                             "or name=...)")
        rules.add(key, RuleInfo(key, cls, summary, binary=binary, open=open,
                                needs=tuple(needs), scorable=scorable, vote=vote, f=f,
                                group_f=group_f, credit=credit), replace=replace,
                  module=cls.__module__)
        return cls

    return deco


def aggregator_info(name: str) -> RuleInfo:
    """What rule `name` is (unknown: one line listing the known rules)."""
    return rules.get(name)


def aggregator_names(*, binary: bool | None = None, open: bool | None = None,
                     vector: bool | None = None, scorable: bool | None = None) -> list[str]:
    """The registered rules, optionally only those that are binary or not, apply to open
    answers, have a vector form f(n, λ) (`vector`), or can be scored in evals."""
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
    return out


def main_vote(binary: bool) -> str:
    """The task's main vote: majority over two options (box-ball), plurality otherwise."""
    return MAJORITY if binary else PLURALITY
