"""Deciding with the fewest dollars: the cost-aware rule over members and its joint prior.

    from ensemble.cost import CostRule, fit_joint_prior

    prior = fit_joint_prior(a, b)          # (questions, members) pilot counts of the top two
    rule = CostRule(prior=prior, prices=[1.5e-5, 2.5e-4], max_n=[10, 3], lams=[1.5, 6],
                    value_usd=0.01)        # or target_loss=0.005
    rule.next_member(a_q, b_q)             # the member to ask next, or None: decide
    rule.decide(a_q, b_q)                  # 1 or 2; rule.summary: what it expects under π
    cost_choice(rule, answers)             # the answer it decides over each member's votes

See docs/adaptive.md ("Whom to ask next: the cost rule").
"""

from .choice import CostChoice, cost_choice
from .joint import JointPrior, fit_joint_prior, joint_grid
from .rule import CostRule, CostSummary

# isort: split
# last: importing `ensemble.stopping` loads the built-in stopping rules, this package's spec
# among them, which needs the modules above complete
from ..stopping.drawn import member_counts

__all__ = ["CostChoice", "CostRule", "CostSummary", "JointPrior", "cost_choice",
           "fit_joint_prior", "joint_grid", "member_counts"]
