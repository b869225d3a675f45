"""The Bayes rule counting dollars or tokens, not samples (`stop="bayes-tokens"`, issue 40.3).

Real samples differ in length (a hosted model's grade-school math: 90 to 800 completion tokens
a sample), and what a run pays is their tokens, at each model's price. The bayes rule stops
when one more sample is worth less than its cost in accuracy units, `cost`, the same for every
sample of every question. This rule prices each question's next sample by how long that
question's samples have been: a sample costs `cost` x (the mean completion tokens of the
question's samples so far) / `ref_tokens` (the mean tokens per sample over the run's pilots
unless given), so a sample of average length costs what it costs the bayes rule, a long
question's samples more (it stops sooner) and a short one's less (it draws on). Under its prior
the rule is then Bayes-optimal for accuracy minus `cost / ref_tokens` per token spent, given
that a question's next sample will be as long as its samples so far: each question's decision
is the bayes rule's table at its own cost (tables on a grid of costs 2^(1/4) apart, computed
once each and cached).

Where the run knows every sample's dollars (`Observation.cost_usd`: a priced member's usage), the
rule counts dollars the same way: a sample costs `cost` x (the question's mean dollars per
sample so far) / `ref_usd` (the pilots' mean dollars per sample), so members of different price
and prompts of different length count too; otherwise tokens. A question whose samples' tokens
and dollars are unknown (a provider that does not report usage), and every question before its
first sample, is priced as a sample of average length: the rule is then the bayes rule. The
pilot is the bayes rule's; the prior is fitted as its (`StopSpec`).
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
    """The bayes rule with each sample priced by its question's dollars or tokens (see the
    module docstring): `cost` is the price of a sample of `ref_usd` dollars, or else of
    `ref_tokens` completion tokens (None: the mean over the pilots the prior is fitted on)."""

    name = "bayes-tokens"
    about = ("the bayes rule counting dollars or tokens: a question's next sample costs in "
             "proportion to its samples' dollars (or length) so far")
    params: ClassVar[tuple[str, ...]] = ("cost", "target_loss", "pilot", "ref_tokens")
    needs_prior = True

    def __init__(self, *, max_n: int, prior: Prior, cost: float | None = None,
                 target_loss: float | None = None, pilot: int = DEFAULT_PILOT,
                 ref_tokens: float | None = None, ref_usd: float | None = None) -> None:
        super().__init__(max_n=max_n, prior=prior, cost=cost, target_loss=target_loss,
                         pilot=pilot)
        if ref_tokens is not None and not (isinstance(ref_tokens, (int, float))
                                           and math.isfinite(ref_tokens) and ref_tokens > 0):
            raise InputError(f"ref_tokens must be a number > 0 (completion tokens of a sample "
                             f"of average length), got {ref_tokens!r}")
        self.ref_tokens = None if ref_tokens is None else float(ref_tokens)
        self.ref_usd = ref_usd  # set from the pilots (`fit_pilots`), or by a plan

    def fit_pilots(self, pilots: Sequence[Drawn | None]) -> TokenBayesRule:
        """The rule with `ref_tokens` (unless given) and `ref_usd` from the pilots: the mean
        tokens and dollars per sample over those whose tokens, dollars are known (None where
        none are); itself when nothing changes."""
        drawn = [d for d in pilots if d is not None and d.drawn]
        toks = [d.tokens / d.drawn for d in drawn if d.tokens is not None]
        usd = [d.cost_usd / d.drawn for d in drawn if d.cost_usd is not None]
        ref_tokens = self.ref_tokens
        if ref_tokens is None and toks:
            ref_tokens = max(float(np.mean(toks)), 1e-9)
        ref_usd = self.ref_usd
        if ref_usd is None and usd and float(np.mean(usd)) > 0:
            ref_usd = float(np.mean(usd))
        if (ref_tokens, ref_usd) == (self.ref_tokens, self.ref_usd):
            return self
        out = TokenBayesRule(max_n=self.max_n, prior=self.prior, cost=self.cost,
                             pilot=self.pilot, ref_tokens=ref_tokens, ref_usd=ref_usd)
        out.prior_used = self.prior_used
        return out

    def cost_for(self, drawn: Drawn) -> float:
        """The cost of this question's next sample: `cost` x its samples' mean dollars /
        `ref_usd` where every sample's dollars are known, else x their mean tokens /
        `ref_tokens`, on the grid of levels; `cost` when neither is known."""
        if not drawn.drawn or self.cost <= 0:
            return self.cost
        usd, tokens = drawn.cost_usd, drawn.tokens
        if usd is not None and self.ref_usd is not None:
            ratio = max(usd / drawn.drawn / self.ref_usd, 1e-9)
        elif tokens is not None and self.ref_tokens is not None:
            ratio = max(tokens / drawn.drawn, 1e-9) / self.ref_tokens
        else:
            return self.cost
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
                f"ref_tokens={self.ref_tokens}, ref_usd={self.ref_usd}, pilot={self.pilot})")
