"""The paper's box-and-ball calibration task, generated exactly.

Left box (ω = 1) and right box (ω = 0), `balls` balls each, red or blue. The prior of the left
box and the red-ball rates of both boxes lie on the grid {0, 1/N, ..., N/N} (N = 5 in the
paper). One ball is drawn and its colour shown. Dropping (scenario, colour) pairs of zero
probability leaves 400 questions for N = 5, each with its exact posterior P(left | colour).
Answering "L" is the report X = 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from ensemble.boxball import PROMPT_TEMPLATE, parse_prompt, posterior_from_prompt
from ensemble.errors import InputError
from ensemble.sampling.parsing import extract_answer

from .base import Question, TaskLayout, register_task

__all__ = ["PROMPT_TEMPLATE", "BoxBallTask", "Scenario", "parse_prompt", "posterior_from_prompt"]

CHOICES = ("L", "R")
COLOURS = ("red", "blue")


@dataclass(frozen=True)
class Scenario:
    """Prior of the left box and red-ball rates, as exact fractions."""

    prior_left: Fraction
    red_left: Fraction
    red_right: Fraction

    def p_colour_given(self, colour: str, omega: int) -> Fraction:
        red = self.red_left if omega == 1 else self.red_right
        return red if colour == "red" else 1 - red

    def joint(self, colour: str, omega: int) -> Fraction:
        """P(colour, ω)."""
        prior = self.prior_left if omega == 1 else 1 - self.prior_left
        return prior * self.p_colour_given(colour, omega)

    def p_colour(self, colour: str) -> Fraction:
        return self.joint(colour, 0) + self.joint(colour, 1)

    def posterior(self, colour: str) -> Fraction:
        """P(left | colour); the colour must have positive probability."""
        return self.joint(colour, 1) / self.p_colour(colour)

    @property
    def id(self) -> str:
        return f"mu{self.prior_left}-l{self.red_left}-r{self.red_right}".replace("/", "_")


@register_task("boxball")
class BoxBallTask:
    """The box-and-ball task on the grid {0, 1/N, ..., N/N} (N = `denominator`)."""

    name = "boxball"
    layout = TaskLayout(metric="utility", group="scenario", unit="scenarios", chance=0.0,
                        calibrates=True)
    max_tokens: int | None = 512  # room for a brief calculation and the answer
    answer_kind = None  # each question's choices, L and R
    choices = CHOICES

    def __init__(self, *, denominator: int = 5, balls: int = 100) -> None:
        self.skipped: list[tuple[int, str]] = []
        self.issues: dict[str, list[int]] = {}
        if not isinstance(denominator, int) or denominator < 1:
            raise InputError(f"denominator must be an integer >= 1, got {denominator!r}")
        if not isinstance(balls, int) or balls < 1 or balls % denominator:
            raise InputError(f"balls must be a positive multiple of the denominator "
                             f"{denominator}, got {balls!r}")
        self.denominator = denominator
        self.balls = balls

    @cached_property
    def scenarios(self) -> tuple[Scenario, ...]:
        grid = [Fraction(i, self.denominator) for i in range(self.denominator + 1)]
        return tuple(Scenario(mu, a, b) for mu in grid for a in grid for b in grid)

    def questions(self) -> list[Question]:
        out = []
        for sc in self.scenarios:
            for colour in COLOURS:
                if sc.p_colour(colour) == 0:
                    continue
                out.append(self._question(sc, colour))
        return out

    def population(self) -> int:
        """The number of scenarios (216 on the paper's grid): each is one scored item."""
        return len(self.scenarios)

    def data_notes(self) -> dict[str, Any]:
        """Nothing beyond the grid: the task is generated."""
        return {}

    def _question(self, sc: Scenario, colour: str) -> Question:
        left_red = int(sc.red_left * self.balls)
        right_red = int(sc.red_right * self.balls)
        prompt = PROMPT_TEMPLATE.format(
            balls=self.balls,
            left_red=left_red,
            left_blue=self.balls - left_red,
            right_red=right_red,
            right_blue=self.balls - right_red,
            left_probability=f"{float(sc.prior_left) * 100:.1f}",
            right_probability=f"{float(1 - sc.prior_left) * 100:.1f}",
            color=colour,
        )
        post = sc.posterior(colour)
        return Question(
            id=f"{sc.id}-{colour}",
            prompt=prompt,
            choices=CHOICES,
            correct="L" if post > Fraction(1, 2) else ("R" if post < Fraction(1, 2) else None),
            posterior=float(post),
            meta={
                "scenario": sc.id,
                "colour": colour,
                "prior_left": float(sc.prior_left),
                "red_left": float(sc.red_left),
                "red_right": float(sc.red_right),
                "p_colour": float(sc.p_colour(colour)),
                # P(colour, ω=0), P(colour, ω=1): the signal structure of one expert's ball.
                "joint": (float(sc.joint(colour, 0)), float(sc.joint(colour, 1))),
            },
        )

    def parse(self, text: str) -> str | None:
        return extract_answer(text, CHOICES)

    def parse_for(self, question: Question, text: str | None) -> str | None:
        return extract_answer(text, CHOICES)
