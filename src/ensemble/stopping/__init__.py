"""Stopping rules for adaptive sampling: after each batch of answers to one question, stop or
draw k more.

State: the answers drawn so far for one question (normalised answers, None = invalid) and the
most samples a question may get, `max_n`. A rule answers `more(answers)`: the number of samples
to draw next, 0 meaning stop. Every rule is a precomputed table over the states (samples drawn,
count of the leading answer, count of the runner-up), so a decision is one lookup
(`more_counts`); `more` counts the answers first.

The k returned is *lossless*: no outcome of the next k − 1 draws could let the rule stop
earlier, so a sampler may request k samples at once (through the provider's `n`) and spend
exactly what one-at-a-time drawing would. k is the smallest j ≥ 1 for which some state the
question can reach after j more draws is a stopping state.

Three rules:

- `fixed`: draw up to `max_n` (today's behaviour; k = max_n − drawn in one go).
- `beta`: Adaptive-Consistency's rule (Aggarwal et al., EMNLP 2023), reproducing the
  `adaptiveconsistency` package's `BetaStoppingCriteria(conf_thresh)`: with a and b the counts
  of the two most frequent answers (any further answers are ignored), stop when
  P(x > 1/2) ≥ threshold for x ~ Beta(a + 1, b + 1). That probability is P(Bin(a+b+1, 1/2) ≤ a),
  computed here exactly (the package integrates numerically). There is no explicit minimum: at
  0.95 the first possible stop is 4 agreeing answers (1 − 2⁻⁵ ≥ 0.95 > 1 − 2⁻⁴). The package
  counts None as an answer like any other; here invalid answers are ignored (the project's
  abstention policy) unless `count_invalid=True`, which reproduces the package on them too.
- `bayes`: the Bayes-optimal rule. Each question has an unknown report probability q of the
  leading answer against the runner-up, with a prior over q across the task's questions. The
  terminal reward is the probability that the decision (the current leader) is the answer the
  vote would reach with unlimited samples, P(q > 1/2 | counts) (accuracy, when the modal answer
  is right); each sample costs `cost` accuracy units. Exact backward induction over (samples
  left, counts) gives the optimal policy: stop when the expected gain in accuracy from going on
  is worth less than the samples it needs. Several answers are reduced to the top two: the
  state is the counts of the two leading answers, other and invalid answers only use up the
  budget (samples left = max_n − drawn), so the prior over q is symmetric (which of the two leads
  is data, not a label).

The prior: `BetaPrior(alpha)` (symmetric Beta(α, α) over q), fitted across questions from a
small pilot by `fit_prior` (empirical Bayes, maximum marginal likelihood of the beta-binomial)
once the pilots of `FIT_AFTER` (30) questions are in, the uniform Beta(1, 1) (`UNIFORM`, or the
spec's `default_prior`) until then (`PriorUsed` says which a rule decides with);
`GridPrior` for any discrete prior (an NPMLE fit with `family="grid"`, or the quantal-response
prior `prior_from_calibration(lam, posteriors)`: q = ψ_λ(p) over the task's posteriors).
`StopSpec` is what a run asks for; it builds the rule once the pilot is in.

Rules are registered by name (`register_stop_rule`, the entry-point group
`ensemble.stop_rules`); every consumer asks the registry (`stop_rule_names`, `StopSpec`).
The stop-rule interface every consumer uses (`plan`): a run's plan (`StopPlan`: `StopSpec`
here, `ensemble.cost.spec.CostSpec` for the cost rule over members) pilots, fits and remembers;
its policy (`StopPolicy`: every `StoppingRule`, `CostRule`) says after each batch what to draw
next from each member, reading a question's `Drawn` (each sample's answer, weight and shares,
tokens and dollars, per member: `drawn`). The package: `table` (the state and the table every
rule is), `priors` (priors and their fits), `rules` (fixed, beta), `bayes` (the Bayes rule and
`expected_performance`), `registry`, `spec` (`StopSpec`), `drawn`, `plan`.

Tables are cached per (prior, max_n, cost, pilot): building one takes milliseconds for
max_n = 20 (~0.2 s at max_n = 200, the largest supported).
"""

from .bayes import DEFAULT_COST, DEFAULT_PILOT, BayesRule, PolicySummary, expected_performance
from .drawn import Drawn, Observation
from .plan import HISTORY_MAX, FitContext, StopMemory, StopPlan, StopPolicy, fixed_plan
from .priors import BetaPrior, GridPrior, Prior, PriorUsed, fit_prior, prior_from_calibration
from .registry import (
    get_stopping_rule,
    is_over_members,
    register_stop_rule,
    stop_rule_names,
    stop_rules,
)
from .rules import DEFAULT_THRESHOLD, BetaRule, FixedRule
from .spec import FIT_AFTER, UNIFORM, StopSpec, plan_for
from .table import MAX_N_LIMIT, StoppingRule, answer_counts, lookahead

__all__ = [
    "DEFAULT_COST",
    "DEFAULT_PILOT",
    "DEFAULT_THRESHOLD",
    "FIT_AFTER",
    "HISTORY_MAX",
    "MAX_N_LIMIT",
    "UNIFORM",
    "BayesRule",
    "BetaPrior",
    "BetaRule",
    "Drawn",
    "FitContext",
    "FixedRule",
    "GridPrior",
    "Observation",
    "PolicySummary",
    "Prior",
    "PriorUsed",
    "StopMemory",
    "StopPlan",
    "StopPolicy",
    "StopSpec",
    "StoppingRule",
    "answer_counts",
    "expected_performance",
    "fit_prior",
    "fixed_plan",
    "get_stopping_rule",
    "is_over_members",
    "lookahead",
    "plan_for",
    "prior_from_calibration",
    "register_stop_rule",
    "stop_rule_names",
    "stop_rules",
]
