"""The robust rule for n >= 9 is not monotone in the reports of 1, and the best monotone rule
is certifiably worse (issue 32 item 11; docs/theory.md)."""

import numpy as np
import pytest

from ensemble.theory import robust_aggregator, worst_case_regret


def test_the_robust_rule_at_n_15_is_not_monotone_and_no_monotone_rule_is_as_good():
    free = robust_aggregator(15, 3.0)
    f = np.array(free.f)
    assert f[7] == pytest.approx(1.0) and f[8] == pytest.approx(0.0)  # as docs/theory.md says
    mono = robust_aggregator(15, 3.0, monotone=True)
    g = np.array(mono.f)
    assert (np.diff(g) >= -1e-9).all()
    # the monotone LP's lower bound (a certificate) lies above the free rule's worst case
    assert mono.lower_bound > free.worst_regret + 1e-3
    assert mono.worst_regret == pytest.approx(worst_case_regret(g, 3.0, n=15).value, abs=1e-6)
    assert f"{free.worst_regret:.6f}" == "0.394987" and f"{mono.lower_bound:.6f}" == "0.398789"
