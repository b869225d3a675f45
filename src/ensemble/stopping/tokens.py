"""The Bayes rule counting tokens, not samples (`stop="bayes-tokens"`, issue 40.3).

Real samples differ in length (a hosted model's grade-school math: 90 to 800 completion tokens a
sample), and what a run pays is their tokens. The bayes rule stops when one more sample is worth
less than its cost in accuracy units, `cost`, the same for every sample of every question. This
rule prices each question's next sample by how long that question's samples have been: a
sample costs `cost` x (the mean completion tokens of the question's samples so far) / `ref_tokens`
(the mean tokens per sample over the run's pilots unless given), so a sample of average length
costs what it costs the bayes rule, a long question's samples more (it stops sooner) and a short
one's less (it draws on). Under its prior the rule is then Bayes-optimal for accuracy minus
`cost / ref_tokens` per token spent, given that a question's next sample will be as long as its
samples so far: each question's decision is the bayes rule's table at its own cost (tables on a
grid of costs 2^(1/4) apart, computed once each and cached).

A question whose samples' tokens are unknown (a provider that does not report usage), and every
question before its first sample, is priced as a sample of average length: the rule is then the
bayes rule. The pilot is the bayes rule's; the prior is fitted as its (`StopSpec`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..errors import InputError
from .bayes import DEFAULT_PILOT, BayesRule
from .registry import register_stop_rule

if TYPE_CHECKING:
    from .drawn import Drawn
    from .priors import Prior

__all__ = ["TokenBayesRule"]

_STEPS = 4  # cost levels per doubling


@register_stop_rule
class TokenBayesRule(BayesRule):
    """The bayes rule with each sample priced by its question's tokens (see the module
    docstring): `cost` is the price of a sample of `ref_tokens` completion tokens (None: the
    mean over the pilots the prior is fitted on)."""

    name = "bayes-tokens"
    about = ("the bayes rule counting tokens: a question's next sample costs in proportion to "
             "its samples' length so far")
    params: ClassVar[tuple[str, ...]] = ("cost", "target_loss", "pilot", "ref_tokens")
    needs_prior = True

    def __init__(self, *, max_n: int, prior: Prior, cost: float | None = None,
                 target_loss: float | None = None, pilot: int = DEFAULT_PILOT,
                 ref_tokens: float | None = None) -> None:
        super().__init__(max_n=max_n, prior=prior, cost=cost, target_loss=target_loss,
                         pilot=pilot)
        if ref_tokens is not None and not (isinstance(ref_tokens, (int, float))
                                           and math.isfinite(ref_tokens) and ref_tokens > 0):
            raise InputError(f"ref_tokens must be a number > 0 (completion tokens of a sample "
                             f"of average length), got {ref_tokens!r}")
        self.ref_tokens = None if ref_tokens is None else float(ref_tokens)

    def fit_pilots(self, pilots: Sequence[Drawn | None]) -> TokenBayesRule:
        """The rule with `ref_tokens` from the pilots (the mean tokens per sample over those
        whose tokens are known), unless given; itself when none are known."""
        if self.ref_tokens is not None:
            return self
        known = [d.tokens / d.drawn for d in pilots
                 if d is not None and d.drawn and d.tokens is not None]
        if not known:
            return self
        out = TokenBayesRule(max_n=self.max_n, prior=self.prior, cost=self.cost,
                             pilot=self.pilot, ref_tokens=max(float(np.mean(known)), 1e-9))
        out.prior_used = self.prior_used
        return out

    def cost_for(self, drawn: Drawn) -> float:
        """The cost of this question's next sample: `cost` x its samples' mean tokens /
        `ref_tokens`, on the grid of levels; `cost` when either is unknown."""
        tokens = drawn.tokens
        if tokens is None or not drawn.drawn or self.ref_tokens is None or self.cost <= 0:
            return self.cost
        ratio = max(tokens / drawn.drawn, 1e-9) / self.ref_tokens
        level = round(_STEPS * math.log2(ratio)) / _STEPS
        return self.cost * 2.0 ** level

    def next(self, drawn: Drawn) -> tuple[int, ...]:
        """The bayes rule's decision at this question's own cost (`cost_for`); over several
        members, a round of one vote from each with budget left while it goes on."""
        from .bayes import bayes_table

        left = drawn.left()
        n, top, second = drawn.top_two(count_invalid=self.count_invalid)
        if n >= self.max_n:
            k = 0
        else:
            table = bayes_table(self.prior, self.max_n, self.cost_for(drawn), self.pilot)
            k = int(table[n, top, second])
        if len(left) == 1:
            return (min(k, left[0]),)
        return tuple(1 if k > 0 and m > 0 else 0 for m in left)

    def __repr__(self) -> str:
        return (f"TokenBayesRule(max_n={self.max_n}, prior={self.prior!r}, cost={self.cost:.3g}, "
                f"ref_tokens={self.ref_tokens}, pilot={self.pilot})")
