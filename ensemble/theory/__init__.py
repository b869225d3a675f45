"""Decision-aggregation theory (the paper's sections 2-3), with λ in ψ_λ units, utility in ±1.

- structures: signal and report structures, the three-signal family {0, p, 1}
- utility: expected utility, omniscient aggregator, regret, majority / random-follow rules
- regret: worst-case regret over all c.i.i.d. structures (global search + refinement)
- robust: the minimax-regret aggregator by LP with constraint generation
- threshold: g(n) of the main theorem
- advantage: utility of majority / omniscient under a given structure
"""

from .advantage import UtilityComparison, utility_under
from .regret import WorstCase, worst_case_regret
from .robust import RobustResult, robust_aggregator
from .structures import (
    ReportStructure,
    posteriors,
    report_structure,
    report_structure_from_probs,
    three_signal_reports,
    validate_joint,
)
from .threshold import threshold
from .utility import (
    count_weights,
    expected_utility,
    majority_f,
    omniscient,
    omniscient_utility,
    random_follow_f,
    regret,
)

__all__ = [
    "ReportStructure",
    "RobustResult",
    "UtilityComparison",
    "WorstCase",
    "count_weights",
    "expected_utility",
    "majority_f",
    "omniscient",
    "omniscient_utility",
    "posteriors",
    "random_follow_f",
    "regret",
    "report_structure",
    "report_structure_from_probs",
    "robust_aggregator",
    "three_signal_reports",
    "threshold",
    "utility_under",
    "validate_joint",
    "worst_case_regret",
]
