"""What the theory predicts for mixed ensembles on box-ball (a script; prints a Markdown table).

    python tests/theory/boxball_prediction.py

Experts answer as the simulated expert server does (`ensemble testing serve`): "L" with
probability ψ_λ(posterior of the left box) for the colour drawn. For each configuration of
groups (n_g experts at λ_g, i.e. λ₁ / t for a model of rationality λ₁ sampled at temperature
t) it gives, for majority over all votes, the λ-weighted vote and the group-robust rule:
- the exact expected utility (±1 units) averaged over the task's 216 scenarios, as
  `ensemble eval boxball` computes it from answer frequencies (here the frequencies are the
  model's own probabilities, so there is no sampling noise);
- the worst-case regret over all c.i.i.d. structures (the theory's criterion);
and each member alone (majority of its own n votes), for comparison of utility (a member's
worst-case regret alone is measured against its own omniscient rule, so it is left out).
"""

from __future__ import annotations

import numpy as np

from ensemble.credit import group_aggregator_f, group_utility
from ensemble.qr import psi
from ensemble.tasks.boxball import BoxBallTask
from ensemble.theory import group_worst_case_regret

CONFIGS = [
    [(1, 2.0), (1, 8.0)],
    [(3, 2.0), (2, 8.0)],
    [(2, 2.0), (1, 8.0)],
    [(3, 0.5), (1, 8.0)],
    [(2, 1.0), (1, 8.0)],
    [(3, 1.0), (2, 8.0)],
]
RULES = ("majority", "lam-weighted", "robust")


def report_probs(lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(μ, q0, q1) per scenario for experts of rationality λ."""
    scenarios = BoxBallTask().scenarios
    mu = np.array([float(s.prior_left) for s in scenarios])
    q0 = np.zeros(len(scenarios))
    q1 = np.zeros(len(scenarios))
    for i, s in enumerate(scenarios):
        for colour in ("red", "blue"):
            if s.p_colour(colour) == 0:
                continue
            answer_left = psi(float(s.posterior(colour)), lam)
            q1[i] += float(s.p_colour_given(colour, 1)) * answer_left
            q0[i] += float(s.p_colour_given(colour, 0)) * answer_left
    return mu, q0, q1


def main() -> None:
    print("| groups (n:λ) | rule | box-ball utility | worst-case regret |")
    print("|---|---|---|---|")
    for groups in CONFIGS:
        ns = [n for n, _ in groups]
        lams = [lam for _, lam in groups]
        probs = [report_probs(lam) for lam in lams]
        mu = probs[0][0]
        q0 = np.stack([p[1] for p in probs], axis=-1)
        q1 = np.stack([p[2] for p in probs], axis=-1)
        name = " + ".join(f"{n}:{lam:g}" for n, lam in groups)
        for rule in RULES:
            f = group_aggregator_f(rule, ns, lams)
            u = float(group_utility(f, mu, q0, q1, ns).mean())
            wc = group_worst_case_regret(f, groups).value
            print(f"| {name} | {rule} | {u:.4f} | {wc:.4f} |")
        for g, (n, lam) in enumerate(groups):
            f = group_aggregator_f("majority", [n], [lam])
            u = float(group_utility(f, mu, q0[:, g:g + 1], q1[:, g:g + 1], [n]).mean())
            # (its worst-case regret is against its own omniscient rule: not comparable)
            print(f"| {name} | {n}:{lam:g} alone | {u:.4f} | |")


if __name__ == "__main__":
    main()
