"""The paper's box-and-ball calibration task, generated exactly.

Left box (ω = 1) and right box (ω = 0), `balls` balls each, red or blue. The prior of the left
box and the red-ball rates of both boxes lie on the grid {0, 1/N, ..., N/N} (N = 5 in the
paper). One ball is drawn and its colour shown. Dropping (scenario, colour) pairs of zero
probability leaves 400 questions for N = 5, each with its exact posterior P(left | colour).
Answering "L" is the report X = 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from ensemble.errors import InputError
from ensemble.sampling.parsing import extract_answer

from .base import Question, register_task

__all__ = ["PROMPT_TEMPLATE", "BoxBallTask", "Scenario", "parse_prompt", "posterior_from_prompt"]

CHOICES = ("L", "R")
COLOURS = ("red", "blue")

# The paper's user prompt (appendix "Prompts for LLMs", Bayesian decision-making study).
PROMPT_TEMPLATE = """### Scenario:
You are given two boxes of balls. Each box contains {balls} balls, which can be either red or blue. A box is selected at random, and one ball is drawn from the selected box. However, the identity of the selected box is not revealed.

You are provided with the following information:
- Left Box contains {left_red} red balls and {left_blue} blue balls.
- Right Box contains {right_red} red balls and {right_blue} blue balls.
- The probability of selecting the Left Box is {left_probability}%.
- The probability of selecting the Right Box is {right_probability}%.

### Question:
If the ball drawn is {color}, which box has been selected?

Please first briefly show the calculations in the <reason></reason> section, and then provide your final answer in the <answer></answer> section. 
Your answer in <answer></answer> should **strictly** be a single uppercase letter: "L" for the Left Box or "R" for the Right Box. No additional text, no explanations.
Your response must contain <answer></answer> section with a definitive answer of either "L" or "R" in it.

Example response:
<reason># Briefly show your calculations here, using the provided information.</reason>
<answer># A single uppercase letter: L or R</answer>"""

_PARSE = re.compile(
    r"Left Box contains (\d+) red balls and (\d+) blue balls\..*?"
    r"Right Box contains (\d+) red balls and (\d+) blue balls\..*?"
    r"probability of selecting the Left Box is ([\d.]+)%.*?"
    r"If the ball drawn is (red|blue)",
    re.DOTALL,
)


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
    choices = CHOICES

    def __init__(self, *, denominator: int = 5, balls: int = 100) -> None:
        if not isinstance(denominator, int) or denominator < 1:
            raise InputError(f"denominator must be an integer >= 1, got {denominator!r}")
        if not isinstance(balls, int) or balls < 1 or balls % denominator:
            raise InputError(
                f"balls must be a positive multiple of the denominator {denominator}, got {balls!r}")
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


def parse_prompt(text: str) -> dict[str, float | str] | None:
    """Read a box-and-ball prompt back: box contents, prior and colour; None if it is not one."""
    m = _PARSE.search(text)
    if m is None:
        return None
    lr, lb, rr, rb = (int(m.group(i)) for i in range(1, 5))
    return {
        "left_red": lr, "left_blue": lb, "right_red": rr, "right_blue": rb,
        "prior_left": float(m.group(5)) / 100.0, "colour": m.group(6),
    }


def posterior_from_prompt(text: str) -> float | None:
    """The exact posterior P(left | colour) a box-and-ball prompt implies, or None."""
    info = parse_prompt(text)
    if info is None:
        return None
    colour = info["colour"]
    pl = float(info["prior_left"])
    left_n = info["left_red"] + info["left_blue"]  # type: ignore[operator]
    right_n = info["right_red"] + info["right_blue"]  # type: ignore[operator]
    key = "red" if colour == "red" else "blue"
    p1 = float(info[f"left_{key}"]) / float(left_n)
    p0 = float(info[f"right_{key}"]) / float(right_n)
    den = pl * p1 + (1 - pl) * p0
    if den <= 0:
        return None
    return pl * p1 / den
