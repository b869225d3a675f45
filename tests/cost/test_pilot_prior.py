"""The cost rule fits its joint prior once `pilot_questions` questions' pilots are in, even if a
few of them said nothing (every vote invalid): it counted only informative ones, so a batch
whose 30 pilots held one all-invalid question (GSM8K, Llama-2-13B/GPT-4 on the MoT
recordings: 29 of 30) decided every question with the default prior, which takes members of
unknown λ alike: 0.36 accuracy at 0.28x GPT-4's dollars, against GPT-4's 0.945 (0.93 at 1.08x
now, through `Ensemble(stop="cost")` on those recordings, `/tmp`-only script in the notes)."""

from __future__ import annotations

import pytest

from ensemble.cost.spec import CostSpec
from ensemble.stopping import Drawn, FitContext, Observation, StopMemory

CONTEXT = FitContext(budgets=(6, 2), lams=(None, None), two_choices=False)


def _pilot(keys: list[list[str | None]]) -> Drawn:
    return Drawn(tuple(tuple(Observation(k, cost_usd=c) for k in row)
                       for row, c in zip(keys, (1e-5, 2e-4), strict=True)), budgets=(6, 2))


def _pilots(informative: int, silent: int) -> list[Drawn]:
    """`informative` pilots with 2 votes of each member (agreeing on most questions, the
    cheap member trapped on some), `silent` whose votes were all invalid."""
    out = []
    for i in range(informative):
        cheap = ["A", "A"] if i % 5 else ["B", "B"]
        out.append(_pilot([cheap, ["A", "A"]]))
    out += [_pilot([[None, None], [None, None]]) for _ in range(silent)]
    return out


@pytest.mark.parametrize("informative, silent, source", [
    (29, 1, "fitted"),    # a pilot that said nothing does not hold the fit back
    (30, 0, "fitted"),
    (29, 0, "default"),   # fewer than 30 questions' pilots in
    (14, 16, "default"),  # most of them said nothing: too little to fit on
    (15, 15, "fitted"),
])
def test_the_prior_is_fitted_once_the_pilot_questions_are_in(informative, silent, source):
    rule = CostSpec(value_usd=0.01).fit(_pilots(informative, silent), StopMemory(), CONTEXT)
    used = rule.prior_used
    assert used.source == source and used.needed == 30
    assert used.questions == informative + silent
