"""Decision-aggregation theory (the paper's sections 2-3), with λ in ψ_λ units, utility in ±1.

- structures: signal and report structures, the three-signal family {0, p, 1}, K posteriors
- groups: groups (n_g, λ_g) of experts, count vectors, majority / λ-weighted rules for groups
- utility: expected utility, omniscient aggregator, regret (one group and count vectors)
- regret: worst-case regret over all c.i.i.d. structures (global search + refinement)
- robust: the minimax-regret aggregator by LP with constraint generation (one group or groups)
- threshold: g(n) of the main theorem
- advantage: utility of majority / omniscient under a given structure

The names below are loaded on first use, so `ensemble theory threshold` does not import the
LP solver or scipy; type checkers see them through the imports at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

# public name -> submodule that defines it (relative to this package)
_EXPORTS: dict[str, str] = {
    "UtilityComparison": ".advantage",
    "utility_under": ".advantage",
    "Group": ".groups",
    "count_shape": ".groups",
    "group_majority_f": ".groups",
    "group_random_follow_f": ".groups",
    "lam_weighted_f": ".groups",
    "lam_weights": ".groups",
    "parse_group": ".groups",
    "validate_groups": ".groups",
    "GroupWorstCase": ".regret",
    "WorstCase": ".regret",
    "group_worst_case_regret": ".regret",
    "worst_case_regret": ".regret",
    "GroupRobustResult": ".robust",
    "RobustResult": ".robust",
    "group_robust_aggregator": ".robust",
    "robust_aggregator": ".robust",
    "ReportStructure": ".structures",
    "posteriors": ".structures",
    "report_structure": ".structures",
    "report_structure_from_probs": ".structures",
    "signal_reports": ".structures",
    "three_signal_group_reports": ".structures",
    "three_signal_reports": ".structures",
    "validate_joint": ".structures",
    "threshold": ".threshold",
    "count_weights": ".utility",
    "expected_utility": ".utility",
    "group_regret": ".utility",
    "group_utility": ".utility",
    "group_weights": ".utility",
    "majority_f": ".utility",
    "omniscient": ".utility",
    "omniscient_utility": ".utility",
    "random_follow_f": ".utility",
    "regret": ".utility",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - the `X as X` form marks each name as re-exported
    from .advantage import (
        UtilityComparison as UtilityComparison,
        utility_under as utility_under,
    )
    from .groups import (
        Group as Group,
        count_shape as count_shape,
        group_majority_f as group_majority_f,
        group_random_follow_f as group_random_follow_f,
        lam_weighted_f as lam_weighted_f,
        lam_weights as lam_weights,
        parse_group as parse_group,
        validate_groups as validate_groups,
    )
    from .regret import (
        GroupWorstCase as GroupWorstCase,
        WorstCase as WorstCase,
        group_worst_case_regret as group_worst_case_regret,
        worst_case_regret as worst_case_regret,
    )
    from .robust import (
        GroupRobustResult as GroupRobustResult,
        RobustResult as RobustResult,
        group_robust_aggregator as group_robust_aggregator,
        robust_aggregator as robust_aggregator,
    )
    from .structures import (
        ReportStructure as ReportStructure,
        posteriors as posteriors,
        report_structure as report_structure,
        report_structure_from_probs as report_structure_from_probs,
        signal_reports as signal_reports,
        three_signal_group_reports as three_signal_group_reports,
        three_signal_reports as three_signal_reports,
        validate_joint as validate_joint,
    )
    from .threshold import (
        threshold as threshold,
    )
    from .utility import (
        count_weights as count_weights,
        expected_utility as expected_utility,
        group_regret as group_regret,
        group_utility as group_utility,
        group_weights as group_weights,
        majority_f as majority_f,
        omniscient as omniscient,
        omniscient_utility as omniscient_utility,
        random_follow_f as random_follow_f,
        regret as regret,
    )
