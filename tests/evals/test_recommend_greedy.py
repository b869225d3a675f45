"""Issue 41 item 26: at t = 0 (greedy decoding) the n samples of a vote are n copies of one
reply, so a calibration never recommends n > 1 there, and a t = 0 option is weighed as what
it is (one expert's answer, followed by every copy), not as n independent rational experts."""

from __future__ import annotations

import math

import pytest

from ensemble.calibration import LambdaFit
from ensemble.evals.calibrate import recommend
from ensemble.theory import random_follow_f, worst_case_regret


def _fit(t: float, lam: float) -> LambdaFit:
    return LambdaFit(lam=lam, se=None if math.isinf(lam) else 0.5,
                     ci=(13.7, math.inf) if math.isinf(lam) else (lam - 1, lam + 1),
                     bias=None, bias_se=None, separated=math.isinf(lam), n_questions=40,
                     n_valid=120, deviance=0.0, df=39, gof_pvalue=None, dispersion=None, t=t)


def _ensemble(line: str):
    ns: dict = {}
    exec("from ensemble import Ensemble\nens = " + line, ns)
    return ns["ens"]


@pytest.mark.parametrize("n", [3, 5])
def test_greedy_decoding_alone_is_recommended_with_one_sample(n):
    """`calibrate --t 0 --samples 3` recommended `temperature=0, n=5, aggregator='robust'`."""
    rec = recommend([_fit(0.0, math.inf)], n, model="m", choices=("L", "R"))
    assert rec is not None and rec.t == 0
    ens = _ensemble(rec.ensemble)
    assert (ens.temperature, ens.n) == (0, 1), rec.ensemble
    assert rec.n == 1 and f"budget of n = {n}" in rec.summary and "n = 1" in rec.summary
    # its regret is the honest one: n copies of one greedy reply vote as following one
    # rational expert (f(x) = x/n), against an all-knowing aggregator of n experts
    follow = worst_case_regret(random_follow_f(n), math.inf).value
    assert rec.worst_regret == pytest.approx(follow, abs=1e-6)
    assert rec.options[0].worst_regret == pytest.approx(follow, abs=1e-6)


def test_a_vote_at_a_positive_temperature_is_weighed_against_greedy_copies():
    """With t = 0 and t = 1 calibrated, the t = 0 option no longer counts five greedy copies as
    five independent experts (worst-case regret 0.625 for the robust rule at λ = ∞, 0.653 for
    following one expert): at λ = 13 the vote of five at t = 1 (0.512) is recommended."""
    rec = recommend([_fit(0.0, math.inf), _fit(1.0, 13.0)], 5, model="m", choices=("L", "R"))
    assert rec is not None
    greedy = next(o for o in rec.options if o.t == 0)
    assert greedy.worst_regret == pytest.approx(
        worst_case_regret(random_follow_f(5), math.inf).value, abs=1e-6)  # 0.653 > 0.512
    assert rec.t == 1 and _ensemble(rec.ensemble).n == 5, rec.ensemble


def test_with_one_sample_per_decision_greedy_stays_as_it_was():
    rec = recommend([_fit(0.0, math.inf), _fit(1.0, 3.0)], 1, model="m")
    assert rec is not None and rec.n == 1 and "n=1" in rec.ensemble
