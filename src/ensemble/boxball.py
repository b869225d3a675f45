"""The box-and-ball prompt of the paper's calibration study, and reading it back.

The prompt format is part of the product's core: `ensemble calibrate` asks it, the simulated
expert (`ensemble.testing`) recognises it to compute the exact posterior it answers from, and
`tasks.boxball` builds the 400 questions with it. Keeping it here lets the simulated expert
read prompts without importing the task layer.
"""

from __future__ import annotations

import re

__all__ = ["PROMPT_TEMPLATE", "parse_prompt", "posterior_from_prompt"]

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
