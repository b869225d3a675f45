"""`ensemble calibrate --mode logprob`: its 95% interval covers the planted λ (issue 37's
leftover). The fit reads one belief P(L) per question; under the simulator's chain beliefs
(b ~ Dirichlet(κ·π), piled near 0 and 1 at κ = 1) the old Wald interval with Pearson's scale
covered ~74% at λ = 4 with 100 questions and ~60% at λ = 8 with 50 (these tests fail on it).

The coverage tests draw the beliefs with the simulator's own generative model
(`SimulatedExpert.prob_first` and its `ChainBeliefs.draw`, as `SimulatedExpert._binary` draws a
box-ball reply's logprobs), fed to the fit directly: through the wire a reply costs ~1.3 ms, so
200 refits would cost a minute. tests/test_calibration.py's end-to-end calibration checks,
through the real wire, that a run says what its interval is. The grid (κ 1, 10, ∞; λ₁ 0.5,
2, 4; t 0.5, 1; 50-400 questions) is tests/bench/bench_logprob_coverage.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ensemble.calibration import (
    PROFILE_INTERVAL,
    fit_lambda,
    fit_probabilities,
)
from ensemble.tasks import get_task
from ensemble.testing.expert import ChainBeliefs, SimulatedExpert

P = np.array([q.posterior for q in get_task("boxball").questions()])


def beliefs(expert: SimulatedExpert, p: np.ndarray, t: float, rng: np.random.Generator
            ) -> np.ndarray:
    """One P(L) per question, drawn as the simulator draws a reply's answer-token logprobs:
    the answer from ψ, then the chain's belief given the answer."""
    out = np.empty(p.size)
    for i, post in enumerate(p):
        prob_l = expert.prob_first(float(post), t)
        answer = 0 if rng.random() < prob_l else 1
        out[i] = expert.beliefs.draw([prob_l, 1.0 - prob_l], answer, rng)[0]
    return out


@pytest.mark.parametrize(("lam1", "t", "kappa", "questions"),
                         [(2.0, 0.5, 1.0, 100), (4.0, 0.5, 10.0, 50)])
def test_the_interval_covers_the_planted_lambda(lam1, t, kappa, questions):
    # 120 refits: a 95% interval covers 114 ± 5; this one 119 and 118, the old one 86 and 73
    rng = np.random.default_rng(37)
    expert = SimulatedExpert(lam1=lam1, beliefs=ChainBeliefs(kappa=kappa))
    reps, hits = 120, 0
    for _ in range(reps):
        idx = rng.choice(P.size, questions, replace=False)
        fit = fit_probabilities(P[idx], beliefs(expert, P[idx], t, rng), t=t)
        hits += fit.ci[0] <= lam1 / t <= fit.ci[1]
    assert 0.9 <= hits / reps < 1.0, hits


def test_beliefs_that_are_the_quantal_response_itself_give_lambda_exactly():
    # κ = ∞: every belief is ψ: λ recovered to the fit's precision, the interval that narrow
    fit = fit_probabilities(P, beliefs(SimulatedExpert(lam1=3.0, beliefs=ChainBeliefs(
        kappa=math.inf)), P, 1.0, np.random.default_rng(0)))
    assert fit.ci[0] <= 3.0 <= fit.ci[1] and fit.ci[1] - fit.ci[0] < 1e-4


def test_sampled_answers_keep_their_profile_likelihood_interval():
    rng = np.random.default_rng(3)
    expert = SimulatedExpert(lam1=2.0)
    ones = np.array([rng.binomial(10, expert.prob_first(float(p), 1.0)) for p in P])
    assert fit_lambda(P, ones, np.full(P.size, 10), gof_reps=0).interval == PROFILE_INTERVAL
