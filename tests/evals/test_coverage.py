"""A small version of tests/bench/coverage.py: every interval the project prints covers its
planted truth in at least 85% of a few dozen simulated runs (95% nominal), and the eval's
estimates are unbiased. The full version (300 runs each) is in docs/statistics.md."""

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "bench" / "coverage.py"
_spec = importlib.util.spec_from_file_location("coverage_suite", _PATH)
assert _spec is not None and _spec.loader is not None
cov = importlib.util.module_from_spec(_spec)
sys.modules["coverage_suite"] = cov  # dataclasses look their module up while it loads
_spec.loader.exec_module(cov)

REPS = 40
FLOOR = 0.85


def _assert_covers(tallies):
    low = [(t.name, t.setting, t.hits, t.reps) for t in tallies if t.coverage < FLOOR]
    assert not low, low


def test_boxball_eval_intervals_cover_and_estimates_are_unbiased():
    tallies = cov.check_box_eval(REPS, seed0=1000)
    _assert_covers(tallies)
    for t in tallies:
        if "for these" in t.name:  # error against the run's own exact value
            mean, se = t.bias()
            assert abs(mean) < 4 * se + 1e-4, (t.name, mean, se)


def test_boxball_contrasts_and_full_task_cover():
    _assert_covers(cov.check_box_contrasts(REPS, seed0=1000))
    _assert_covers(cov.check_box_eval(REPS // 2, limit=None, invalid_rate=0.1, seed0=1000))


def test_multiple_choice_eval_and_contrasts_cover():
    _assert_covers(cov.check_mc_eval(REPS, seed0=1000, size=400, limit=100))


def test_compare_covers_the_planted_difference():
    _assert_covers(cov.check_compare(REPS, seed0=1000))


def test_calibration_intervals_cover_the_planted_lambda():
    _assert_covers(cov.check_calibration(REPS, seed0=1000))


def test_the_source_seam_takes_any_answer_drawer():
    # a source is any callable(questions, t, samples, rng) -> (Q, samples) answers
    expert = cov.PlantedExpert(lam1=3.0)
    calls = []

    def source(questions, t, samples, rng):
        calls.append((len(questions), t, samples))
        return expert(questions, t, samples, rng)

    tallies = cov.check_box_eval(3, source, seed0=7)
    # 40 scenarios, each with one or two questions (a colour that cannot show is not asked)
    assert len(calls) == 3 and all(40 < q <= 80 and t == 1.0 and k == 10 for q, t, k in calls)
    assert all(t.reps == 3 for t in tallies)


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_planted_expert_draws_its_probabilities(link):
    import numpy as np

    expert = cov.PlantedExpert(lam1=2.0, link=link)
    q = next(q for q in cov.BOX if 0.6 < q.posterior < 0.8)
    got = expert([q], 1.0, 20000, np.random.default_rng(0))
    share = float(np.mean(got == "L"))
    assert share == pytest.approx(float(expert.p_left(q.posterior, 1.0)), abs=0.01)
