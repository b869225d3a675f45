from fractions import Fraction

import pytest

from ensemble.tasks import get_task
from ensemble.tasks.boxball import BoxBallTask, Scenario, posterior_from_prompt


def test_paper_grid_has_400_questions_with_exact_posteriors():
    qs = get_task("boxball").questions()
    assert len(qs) == 400
    assert len({q.id for q in qs}) == 400
    for q in qs:
        sc = Scenario(Fraction(q.meta["prior_left"]).limit_denominator(5),
                      Fraction(q.meta["red_left"]).limit_denominator(5),
                      Fraction(q.meta["red_right"]).limit_denominator(5))
        assert q.posterior == pytest.approx(float(sc.posterior(q.meta["colour"])), abs=0)
        # the prompt carries the same numbers back
        assert posterior_from_prompt(q.prompt) == pytest.approx(q.posterior, abs=1e-12)


def test_paper_example_prompt():
    # Appendix example: left 100 red, right 50/50, prior 20%, red drawn -> P(L|red) = 1/3.
    task = BoxBallTask(denominator=10)
    q = next(q for q in task.questions() if q.id == "mu1_5-l1-r1_2-red")
    assert q.posterior == pytest.approx(1 / 3)
    assert "Left Box contains 100 red balls and 0 blue balls." in q.prompt
    assert "The probability of selecting the Left Box is 20.0%." in q.prompt
    assert q.correct == "R"


def test_parser_keeps_letters():
    t = get_task("boxball")
    assert t.parse("<reason>..</reason><answer>L</answer>") == "L"
    assert t.parse("<answer>r</answer>") == "R"
    assert t.parse("I think the left one") is None


def test_unknown_task_is_clear():
    from ensemble.errors import InputError

    with pytest.raises(InputError, match="unknown task 'nope'; choose from .*boxball"):
        get_task("nope")
