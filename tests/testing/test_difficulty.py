"""The simulated experts' shared difficulty (`difficulty_seed`): a question hard for one expert
of the seed is hard for all, their wrong answers agreeing on the question's one distractor."""

from __future__ import annotations

from collections import Counter

from ensemble.testing.expert import MCModel, SimulatedExpert

PROMPTS = [f"Item {i}: pick one. Answer with one of: red, green, blue, amber" for i in range(100)]


def _answers(expert: SimulatedExpert, prompt: str, k: int = 30) -> Counter[str]:
    msgs = [{"role": "user", "content": prompt}]
    out: Counter[str] = Counter()
    for i in range(k):
        text = expert.reply(msgs, 1.0, i).text
        out[text.split("<answer>")[1].split("</answer>")[0]] += 1
    return out


def test_shared_difficulty_correlates_the_members_errors():
    cheap = SimulatedExpert(lam1=1.5, mc_model=MCModel(3, 2), seed=1, difficulty_seed=9)
    dear = SimulatedExpert(lam1=6.0, mc_model=MCModel(12, 1), seed=2, difficulty_seed=9)
    traps = agree = dear_right = 0
    for p in PROMPTS:
        c, d = _answers(cheap, p), _answers(dear, p)
        top_d = d.most_common(1)[0][0]  # the strong expert's answer: right on nearly all
        wrong = {a: n for a, n in c.items() if a != top_d}
        if sum(wrong.values()) > 15:  # the cheap expert is wrong most of the time here
            traps += 1
            agree += max(wrong.values()) >= 0.9 * sum(wrong.values())  # on one distractor
            dear_right += d[top_d] > 15 > c[top_d]  # right where the cheap one is wrong
    # Beta(3, 2): P(ρ < 1/2) = 0.31 of the questions are traps for the cheap expert
    assert 0.2 * len(PROMPTS) < traps < 0.45 * len(PROMPTS)
    assert agree == traps and dear_right == traps
