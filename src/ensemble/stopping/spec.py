"""What a run asks for: a stopping rule by name, its budget and its options (`StopSpec`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numpy.typing import ArrayLike

from ..errors import InputError
from ..rules import Requests
from .bayes import DEFAULT_PILOT
from .drawn import Drawn
from .plan import HISTORY_MAX, FitContext, StopMemory, StopPlan, StopPolicy
from .priors import (
    ALPHA_MAX,
    PRIOR_FAMILIES,
    BetaPrior,
    GridPrior,
    Prior,
    PriorUsed,
    counts_arrays,
    fit_prior,
)
from .registry import stop_rules
from .rules import DEFAULT_THRESHOLD
from .table import StoppingRule, answer_counts, validate_max_n

__all__ = ["FIT_AFTER", "UNIFORM", "UNINFORMED", "StopSpec", "plan_for"]

#: The default prior of a rule fitted from pilots, until enough pilots are seen, and when they
#: say nothing about the spread: the uniform Beta(1, 1), the prior Adaptive-Consistency's
#: criterion assumes. (`UNINFORMED` is its older name.)
UNIFORM = UNINFORMED = BetaPrior(1.0)
#: The questions with an informative pilot (2 valid votes among its two leading answers) a
#: prior is fitted on at the least: with fewer, the rule takes its spec's default prior. A fit
#: on a handful of pilots that happen to agree puts every question at q = 0 or 1, and the rule
#: then stops on 2 agreeing votes whatever the question (issue 40.4: a fresh Ensemble stopped
#: at 2 samples on a question 11 to 9 at n = 20). 30, as the cost rule's pilot questions.
FIT_AFTER = 30


@dataclass(frozen=True)
class StopSpec:
    """What a run asks for: the rule (a registered name, `stop_rule_names()`), its budget and
    options. A rule that needs a prior (bayes) and is given none first gets `pilot` samples for
    every question, and the prior is fitted across questions from them (`rule(pilot_answers)`
    or `rule_from_counts`); the other rules need no pilot. A plug-in rule's own parameters go in
    `options` (name -> value), read like the fields named in its `params`.

    The prior of such a rule is fitted (empirical Bayes, `family`) only once the pilots of
    `fit_after` questions with 2 valid votes (default 30, `FIT_AFTER`; an Ensemble counts its
    earlier decisions' pilots too) are in; until then, and when the pilots split as often as
    coin flips (they then say nothing about the spread), the rule uses `default_prior` (the
    uniform Beta(1, 1), `UNIFORM`; or e.g. `prior_from_calibration(...)`, or a prior fitted on
    an earlier run's counts). `prior_for` says which, and why (`PriorUsed`).

    The sampler's loop: draw `spec.first_draw()` samples for every question; build
    `rule = spec.rule(answers_so_far)`; then for each question draw `rule.more(answers)` more
    whenever its answers arrive, until it returns 0. As a `StopPlan` (`ensemble.stopping.plan`,
    what the Python API's draw loop asks): one member draws up to `max_n`; several members
    each up to their own n, the rule reading their pooled votes, in rounds of one vote each;
    the pilot of a rule that needs a prior is fitted on together with the pilots an Ensemble
    kept of its earlier decisions (`StopMemory`).
    """

    stop: str
    max_n: int
    cost: float | None = None
    target_loss: float | None = None
    threshold: float = DEFAULT_THRESHOLD
    pilot: int = DEFAULT_PILOT
    prior: Prior | None = None
    family: str = PRIOR_FAMILIES[0]
    count_invalid: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    default_prior: Prior = UNIFORM
    fit_after: int = FIT_AFTER

    def __post_init__(self) -> None:
        rule = stop_rules.get(self.stop)  # unknown: one line listing the known rules
        if getattr(rule, "over_members", False):
            raise InputError(f"the {self.stop} rule chooses among an ensemble's members: give "
                             f"Ensemble(stop={self.stop!r}) or its own spec, not a StopSpec")
        validate_max_n(self.max_n)
        if self.family not in PRIOR_FAMILIES:
            raise InputError(f"unknown prior family {self.family!r}; choose from "
                             f"{', '.join(PRIOR_FAMILIES)}")
        if not isinstance(self.default_prior, (BetaPrior, GridPrior)):
            raise InputError("default_prior must be a BetaPrior or a GridPrior (e.g. "
                             f"prior_from_calibration(...)), got {self.default_prior!r}")
        if isinstance(self.fit_after, bool) or not isinstance(self.fit_after, int) \
                or self.fit_after < 1:
            raise InputError(f"fit_after must be an integer >= 1 (questions with a pilot "
                             f"before the prior is fitted), got {self.fit_after!r}")
        unknown = sorted(set(self.options) - set(rule.params))
        if unknown:
            takes = ", ".join(rule.params) or "no options"
            raise InputError(f"the {self.stop} rule has no option {unknown[0]!r} (it takes "
                             f"{takes})")

    @property
    def rule_class(self) -> type[StoppingRule]:
        """The registered class of the rule this spec names."""
        return stop_rules.get(self.stop)

    def params_for(self, names: Sequence[str]) -> dict[str, Any]:
        """The values of the parameters `names`: the spec's fields, or its `options`."""
        out: dict[str, Any] = {}
        for name in names:
            if name in self.options:
                out[name] = self.options[name]
            elif name in _FIELDS:
                out[name] = getattr(self, name)
        return out

    @property
    def requests(self) -> Requests:
        """What the rule reads from each sample beyond its hard answer (its class's
        `requests`): whoever draws asks for it."""
        return self.rule_class.requests

    @property
    def needs_pilot(self) -> bool:
        """True when the rule can only be built after a pilot (it needs a prior, none given)."""
        return self.rule_class.needs_prior and self.prior is None

    def first_draw(self) -> int:
        """Samples every question gets before the rule is consulted."""
        if self.needs_pilot:
            return min(self.pilot, self.max_n)
        return max(1, self.build().more([]))

    def build(self, prior: Prior | None = None) -> StoppingRule:
        """The rule, with `prior` (or the spec's own) for a rule that needs one."""
        return self.rule_class.from_spec(self, prior)

    def rule(self, answers: Sequence[Sequence[str | None]] | None = None) -> StoppingRule:
        """The rule; for a rule that needs a prior and has none, fitted from each question's
        answers so far (the pilot)."""
        if not self.needs_pilot:
            return self.build()
        if answers is None:
            raise InputError(f"this {self.stop} rule fits its prior from the pilot: pass every "
                             "question's pilot answers")
        counts = [answer_counts(list(a)) for a in answers]
        return self.rule_from_counts([c[1] for c in counts], [c[2] for c in counts])

    def rule_from_counts(self, top: ArrayLike, second: ArrayLike) -> StoppingRule:
        """The rule, its prior (if it needs one) chosen from per-question top-two counts by
        `prior_for`; the rule's `prior_used` says which."""
        if not self.needs_pilot:
            return self.build()
        used = self.prior_for(top, second)
        rule = self.build(used.prior)
        rule.prior_used = used
        return rule

    def prior_for(self, top: ArrayLike, second: ArrayLike) -> PriorUsed:
        """The prior a rule that needs one decides with, from per-question top-two counts
        (pilots; an Ensemble adds its earlier decisions'), and why.

        - The spec's own `prior`: "given".
        - Fewer than `fit_after` questions with 2 valid votes among their two leading
          answers: `default_prior` ("default"). The few pilots of a fresh Ensemble's first
          decision (or of a run of a handful of questions) cannot say how hard its questions
          are: two that agree would make every question look settled.
        - The Beta fit at its upper end (`ALPHA_MAX`: half or more of the pilots of 2 split):
          the prior would put every question at q = 1/2, where no further sample is worth
          anything, and the rule would stop at the pilot. No spread over q makes pilots split
          more often than that; they do when the two answers a pilot sees are often not a
          question's two leaders (open answers with many distinct values: issue 31's
          arithmetic recording, where stopping there lost 0.036 accuracy against fixed 20), so
          the pilot says nothing about the spread: `default_prior` ("uninformative"; with the
          uniform one, on that recording 15.5 samples at 0.2438, against fixed 20's 0.2440 and
          `beta(0.95)`'s 17.8 at 0.2435).
        - Otherwise the prior fitted on the counts (`fit_prior`, `family`): "fitted".
        """
        if self.prior is not None:
            return PriorUsed("given", self.prior, 0, 0)
        t, s = counts_arrays(top, second)
        informative = int(((t + s) >= 2).sum())
        if informative < self.fit_after:
            return PriorUsed("default", self.default_prior, informative, self.fit_after)
        prior = fit_prior(t, s, family=self.family)
        if isinstance(prior, BetaPrior) and prior.alpha >= ALPHA_MAX * (1 - 1e-6):
            return PriorUsed("uninformative", self.default_prior, informative, self.fit_after)
        return PriorUsed("fitted", prior, informative, self.fit_after)


    # -- the stop-rule interface (`StopPlan`) ------------------------------------------------
    def budgets(self, ns: Sequence[int]) -> tuple[int, ...]:
        """One member: `max_n`; several: each member's own n (the rule reads their pooled
        votes, at most max_n of them)."""
        return (self.max_n,) if len(ns) == 1 else tuple(int(n) for n in ns)

    def pilot_draw(self, i: int, budgets: Sequence[int], memory: StopMemory) -> tuple[int, ...]:
        """Every question's first draw (`first_draw`): over several members, rounds of one
        vote each until the pooled votes reach it (each member within its budget)."""
        first = self.first_draw()
        if len(budgets) == 1:
            return (min(first, int(budgets[0])),)
        rounds = 0
        while sum(min(rounds, b) for b in budgets) < first and rounds < max(budgets):
            rounds += 1
        return tuple(min(rounds, int(b)) for b in budgets)

    def fit(self, pilots: Sequence[Drawn | None], memory: StopMemory,
            context: FitContext) -> StopPolicy:
        """The rule; a prior it needs is chosen by `prior_for` from the pooled top-two counts
        of this call's pilots (None: a question whose pilot failed) and of the pilots the
        memory kept; completed by what the rule reads of the pilots beyond their counts
        (`StoppingRule.fit_pilots`: the token-aware rule's mean tokens per sample)."""
        if not self.needs_pilot:
            return self.build().fit_pilots(pilots)
        kept = self._history(memory)
        counts = [d.top_two()[1:] for d in pilots if d is not None] + list(kept)
        rule = self.rule_from_counts([c[0] for c in counts], [c[1] for c in counts])
        if getattr(rule, "fits_evidence", False):  # a rule on soft evidence (bayes-soft)
            cls: Any = self.rule_class
            rule.fit_evidence([cls.pilot_evidence(d) for d in pilots if d is not None]  # type: ignore[attr-defined]
                              + list(self._evidence(memory)))
        return rule.fit_pilots(pilots)

    def remember(self, memory: StopMemory, pilot: Drawn, drawn: Drawn) -> None:
        """Keep a decided question's pilot counts (a complete pilot only): the next calls'
        prior is fitted on them too."""
        if self.needs_pilot and pilot.drawn == sum(self.pilot_draw(0, pilot.budgets, memory)):
            self._history(memory).append(pilot.top_two()[1:])
            cls: Any = self.rule_class
            if getattr(cls, "fits_evidence", False):
                self._evidence(memory).append(cls.pilot_evidence(pilot))

    def _history(self, memory: StopMemory) -> deque[tuple[int, int]]:
        return memory.part(f"pilots:{self.stop}",
                           lambda: deque[tuple[int, int]](maxlen=HISTORY_MAX))

    def _evidence(self, memory: StopMemory) -> deque[Any]:
        """What a rule on soft evidence keeps of each pilot (`pilot_evidence`)."""
        return memory.part(f"evidence:{self.stop}", lambda: deque[Any](maxlen=HISTORY_MAX))


def plan_for(stop: str, *, max_n: int, **options: Any) -> StopPlan:
    """The plan a registered rule's name stands for: the rule's own `default_plan(max_n=...)`
    (a plan class, e.g. the cost rule's spec), else `StopSpec(stop, max_n=max_n, ...)` with
    `options` (its fields, e.g. cost=0.002; a plug-in rule's own parameters go to its
    `options`). An unknown name is one line listing the known rules."""
    cls = stop_rules.get(stop)
    make = getattr(cls, "default_plan", None)
    if make is not None:
        return make(max_n=max_n, **options)
    fields = {k: v for k, v in options.items() if k in _FIELDS or k in _SPEC_ONLY}
    own = {k: v for k, v in options.items() if k not in fields}
    return StopSpec(stop=stop, max_n=max_n, options=own, **fields)


_FIELDS = frozenset(f for f in StopSpec.__dataclass_fields__
                    if f not in ("stop", "max_n", "options", "default_prior", "fit_after"))
_SPEC_ONLY = frozenset(("default_prior", "fit_after"))
