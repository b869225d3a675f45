"""Decision-aggregation theory (the paper's sections 2-3), with λ in ψ_λ units, utility in ±1.

- structures: signal and report structures, the three-signal family {0, p, 1}, K posteriors
- groups: groups (n_g, λ_g) of experts, count vectors, majority / λ-weighted rules for groups
- utility: expected utility, omniscient aggregator, regret (one group and count vectors)
- regret: worst-case regret over all c.i.i.d. structures (global search + refinement)
- robust: the minimax-regret aggregator by LP with constraint generation (one group or groups)
- threshold: g(n) of the main theorem
- advantage: utility of majority / omniscient under a given structure
"""

from .advantage import UtilityComparison, utility_under
from .groups import (
    Group,
    count_shape,
    group_majority_f,
    group_random_follow_f,
    lam_weighted_f,
    lam_weights,
    parse_group,
    validate_groups,
)
from .regret import GroupWorstCase, WorstCase, group_worst_case_regret, worst_case_regret
from .robust import GroupRobustResult, RobustResult, group_robust_aggregator, robust_aggregator
from .structures import (
    ReportStructure,
    posteriors,
    report_structure,
    report_structure_from_probs,
    signal_reports,
    three_signal_group_reports,
    three_signal_reports,
    validate_joint,
)
from .threshold import threshold
from .utility import (
    count_weights,
    expected_utility,
    group_regret,
    group_utility,
    group_weights,
    majority_f,
    omniscient,
    omniscient_utility,
    random_follow_f,
    regret,
)

__all__ = [
    "Group",
    "GroupRobustResult",
    "GroupWorstCase",
    "ReportStructure",
    "RobustResult",
    "UtilityComparison",
    "WorstCase",
    "count_shape",
    "count_weights",
    "expected_utility",
    "group_majority_f",
    "group_random_follow_f",
    "group_regret",
    "group_robust_aggregator",
    "group_utility",
    "group_weights",
    "group_worst_case_regret",
    "lam_weighted_f",
    "lam_weights",
    "majority_f",
    "omniscient",
    "omniscient_utility",
    "parse_group",
    "posteriors",
    "random_follow_f",
    "regret",
    "report_structure",
    "report_structure_from_probs",
    "robust_aggregator",
    "signal_reports",
    "three_signal_group_reports",
    "three_signal_reports",
    "threshold",
    "utility_under",
    "validate_groups",
    "validate_joint",
    "worst_case_regret",
]
