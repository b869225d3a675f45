"""What a run asks for: a stopping rule by name, its budget and its options (`StopSpec`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numpy.typing import ArrayLike

from ..errors import InputError
from .bayes import DEFAULT_PILOT
from .priors import ALPHA_MAX, PRIOR_FAMILIES, BetaPrior, Prior, counts_arrays, fit_prior
from .registry import stop_rules
from .rules import DEFAULT_THRESHOLD, FixedRule
from .table import StoppingRule, answer_counts, validate_max_n

__all__ = ["UNINFORMED", "StopSpec"]

#: The prior of a pilot that says nothing about the spread (the Beta fit at its upper end).
UNINFORMED = BetaPrior(1.0)


@dataclass(frozen=True)
class StopSpec:
    """What a run asks for: the rule (a registered name, `stop_rule_names()`), its budget and
    options. A rule that needs a prior (bayes) and is given none first gets `pilot` samples for
    every question, and the prior is fitted across questions from them (`rule(pilot_answers)`
    or `rule_from_counts`); the other rules need no pilot. A plug-in rule's own parameters go in
    `options` (name -> value), read like the fields named in its `params`.

    The sampler's loop: draw `spec.first_draw()` samples for every question; build
    `rule = spec.rule(answers_so_far)`; then for each question draw `rule.more(answers)` more
    whenever its answers arrive, until it returns 0.
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

    def __post_init__(self) -> None:
        rule = stop_rules.get(self.stop)  # unknown: one line listing the known rules
        if getattr(rule, "over_members", False):
            raise InputError(f"the {self.stop} rule chooses among an ensemble's members: give "
                             f"Ensemble(stop={self.stop!r}) or its own spec, not a StopSpec")
        validate_max_n(self.max_n)
        if self.family not in PRIOR_FAMILIES:
            raise InputError(f"unknown prior family {self.family!r}; choose from "
                             f"{', '.join(PRIOR_FAMILIES)}")
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
        """The rule, the prior (if needed) fitted from per-question top-two counts.

        When no question's pilot has 2 valid votes among its two leading answers (all invalid,
        or a single question whose pilot failed to parse), there is nothing to fit a prior on:
        the rule is then the fixed one, drawing the whole budget, the cautious choice when
        nothing is known about how hard the questions are. So too when the Beta fit reaches its
        upper end (`ALPHA_MAX`: half or more of the pilots of 2 split): the prior would put
        every question at q = 1/2, where no further sample is worth anything, and the rule
        would stop at the pilot. No spread over q makes pilots split more often than that;
        they do when the two answers a pilot sees are often not a question's two leaders (open
        answers with many distinct values: issue 31's arithmetic recording, where stopping
        there lost 0.036 accuracy against fixed 20), so the pilot says nothing about the
        spread, and the rule takes the uniform prior Beta(1, 1) (`UNINFORMED`), the one
        Adaptive-Consistency's criterion assumes too: on that recording 15.5 samples at 0.2438,
        against fixed 20's 0.2440 and `beta(0.95)`'s 17.8 at 0.2435.
        """
        if not self.needs_pilot:
            return self.build()
        t, s = counts_arrays(top, second)
        if not ((t + s) >= 2).any():
            return FixedRule(max_n=self.max_n)
        prior = fit_prior(top, second, family=self.family)
        if isinstance(prior, BetaPrior) and prior.alpha >= ALPHA_MAX * (1 - 1e-6):
            prior = UNINFORMED
        return self.build(prior)


_FIELDS = frozenset(f for f in StopSpec.__dataclass_fields__ if f not in ("stop", "max_n",
                                                                          "options"))
