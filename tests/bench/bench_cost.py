"""Benchmark: accuracy against dollars per question, a cheap member and an expensive one.

Members (issue 31): cheap λ₁ = 1.5 at $0.15 per 1M output tokens, expensive λ₁ = 6 at $2.50,
t = 1, the same tokens per sample (the simulated replies have equal length). Their samples come
from the simulated experts (`ensemble.testing.SimulatedExpert`, in-process) with a shared
difficulty (`difficulty_seed`): each question's reading accuracy is the Beta(a, b) quantile of
one uniform shared by both members, so the questions the cheap member (Beta(5, 1): 3% of the
questions, or Beta(3, 1): 12.5%) gets wrong most of the time, its samples agreeing on the
question's one distractor, are the hardest for the expensive one (Beta(12, 1)) too, which still
reads most of them right.

Cases: MathQA-style multiple choice (5 options, 1500 questions) and box-and-ball (all 216
scenarios, both colours; a misread takes the other box's posterior; accuracy P(ω = decision)).
Each question has K_c = 10 cheap and K_e = 4 expensive stored samples; every policy is replayed
on them along the same R random orders of each member's samples:

- the expensive member alone, n = 1, and with the bayes stop (max_n = 4); the cheap member with
  the bayes stop (max_n = 10) (costs 0.001, 0.004 = default, 0.016);
- fixed mixed ensembles (n_cheap, n_dear) under the λ-weighted vote (each vote weighs 2λ);
- the cheap-first cascade (Mixture-of-Thought / FrugalGPT shape): k cheap samples; if the
  share of the most frequent answer is at least a threshold accept it, else one expensive
  sample decides; every (k, threshold) is scored and the frontier kept: tuned in hindsight on
  the questions it is scored on (which favours it);
- the cost rule (`ensemble.cost`) at several dollar values of a right decision, its joint prior
  fitted (no labels) from a pilot of 6 cheap and 4 expensive samples on 1000 further questions
  (box-and-ball: on each of its 432 questions, at sample indices not used in scoring); the pilot's
  one-off cost is reported apart.

Each case is also scored exactly on its planted truth (the simulator's q of each member on
each scored question, and p, as a JointPrior with p; `CostRule.evaluate`): the limit of endless
samples on these questions, free of the replay's noise; the cost rule run with that planted
prior (credit "planted") is the bound, Bayes-optimal among policies that see only the votes.
Frontiers are read between neighbouring values (a mix of two policies).

Every policy's accuracy and its dollars per question are means over the scored questions with
the same weights: 1 each for multiple choice, P(scenario, colour) for box-and-ball (as the
planted prior weighs its nodes, so replayed and exact costs are comparable). The cost rule is
replayed as the eval replays it (`evals.costeval.replay_scored`: the task's options, so a rule
over two fixed choices, box-and-ball's L and R, may decide the other of a lone answer; with five
options it decides only answers seen, `CostRule(two_choices=...)`).

Prints the table, the done-when check, replayed and exact (at the expensive member's n = 1
accuracy, within 0.005, the cost rule spends at most 40% of what it spends; at every accuracy
measured at most 1.1x the tuned cascade's cost) and writes docs/cost.png.

Run:  python tests/bench/bench_cost.py [--orders 4] [--questions 1500] [--cheap-a 5 3]
      (~2 min here)
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

from ensemble.cost import CostRule, JointPrior, fit_joint_prior, member_counts
from ensemble.cost.spec import two_fixed_choices
from ensemble.evals.adaptive import adaptive_eval, boxball_inputs
from ensemble.evals.costeval import replay_scored
from ensemble.evals.plan import resolve
from ensemble.evals.spec import one_model
from ensemble.stopping import StopSpec
from ensemble.testing.expert import MCModel, SimulatedExpert, question_text

ROOT = Path(__file__).resolve().parents[2]
PLOT = ROOT / "docs" / "cost.png"
LAMS = (1.5, 6.0)
PRICE_PER_M = (0.15, 2.50)  # USD per 1M output tokens
K = (10, 4)
PILOT = (6, 4)
PILOT_QUESTIONS = 1000
VALUES = (1.0, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 48)  # x the expensive member's price per sample
BAYES_COSTS = (0.001, 0.004, 0.016)
CREDIT = "reference"
_ANSWER = re.compile(r"<answer>(.*?)</answer>")


# -- samples ------------------------------------------------------------------------------------
CHEAP_A, DEAR_A = 3.0, 12.0  # reading accuracy Beta(a, 1) of each member


def experts(seed: int = 0) -> tuple[SimulatedExpert, SimulatedExpert]:
    a_cheap, a_dear = CHEAP_A, DEAR_A
    cheap = SimulatedExpert(lam1=LAMS[0], mc_model=MCModel(a_cheap, 1.0), seed=seed * 2 + 1,
                            difficulty_seed=seed + 100)
    dear = SimulatedExpert(lam1=LAMS[1], mc_model=MCModel(a_dear, 1.0), seed=seed * 2 + 2,
                           difficulty_seed=seed + 100)
    return cheap, dear


def draw(expert: SimulatedExpert, prompts: list[str], labels: list[str], first: int,
         k: int) -> tuple[np.ndarray, float]:
    """(codes (Q, k): option index or −1, mean completion tokens per sample)."""
    codes = np.full((len(prompts), k), -1, dtype=np.int64)
    tokens = []
    for qi, prompt in enumerate(prompts):
        msgs = [{"role": "user", "content": prompt}]
        for i in range(k):
            text = expert.reply(msgs, 1.0, first + i).text
            tokens.append(expert.usage(msgs, [text])[1])
            m = _ANSWER.search(text)
            if m and m.group(1) in labels:
                codes[qi, i] = labels.index(m.group(1))
    return codes, float(np.mean(tokens))


def mc_case(questions: int, seed: int = 0) -> dict:
    g = np.random.default_rng(seed)
    labels = list("ABCDE")
    total = questions + PILOT_QUESTIONS
    texts = [f"Item {i}: a worded arithmetic problem, seed {seed}." for i in range(total)]
    correct = g.integers(0, 5, size=total)
    key = {t: labels[c] for t, c in zip(texts, correct, strict=True)}
    prompts = [f"### Question: {t}\n### Options:\nA) 1\nB) 2\nC) 3\nD) 4\nE) 5\n" for t in texts]
    cheap, dear = experts(seed=seed)
    for e in (cheap, dear):
        e.answer_key = key
    values = np.zeros((total, 5))
    values[np.arange(total), correct] = 1.0
    scored = slice(0, questions)
    pilot = slice(questions, total)
    planted = planted_mc([question_text(p) for p in prompts[scored]], (cheap, dear), len(labels))
    return _case("MathQA-style multiple choice", cheap, dear, prompts, labels, values,
                 np.ones(total), scored, pilot, fresh_pilot=True, planted=planted)


def boxball_case(seed: int = 0) -> dict:
    qs = resolve(one_model("boxball", "sim", (1.0,), (1,), seed=0)).questions
    values, weights, _ = boxball_inputs(qs)
    cheap, dear = experts(seed=seed)
    prompts = [q.prompt for q in qs]
    g = np.random.default_rng(seed)
    pilot = np.sort(g.choice(len(qs), size=min(PILOT_QUESTIONS, len(qs)), replace=False))
    planted = planted_boxball(prompts, values[:, 0], weights, (cheap, dear))
    return _case("box-and-ball", cheap, dear, prompts, ["L", "R"], values, weights,
                 slice(0, len(qs)), pilot, fresh_pilot=False, planted=planted)


# -- the planted truth: each scored question's q per member, from the simulator ----------------
# (`SimulatedExpert._rho` is the question's planted reading accuracy: the bench reads the
# simulator's truth to build the bound, never to fit or tune the rule it scores)
def planted_boxball(prompts, p_left, weights, members) -> dict:
    """Each question's P(vote L) per member, ρ ψ_λ(p) + (1 − ρ) ψ_λ(1 − p) (a misread takes the
    other box's posterior), as a JointPrior weighted as the bench scores (P(scenario, colour))
    with its planted p = P(ω = L); and each question's cheap reading accuracy ρ."""
    q = np.array([[e._rho(pr) * e.prob_first(p, 1.0) + (1 - e._rho(pr)) * e.prob_first(1 - p, 1.0)
                   for e in members] for pr, p in zip(prompts, p_left, strict=True)])
    rho = np.array([members[0]._rho(pr) for pr in prompts])
    return {"prior": JointPrior.of(q, weights, p_left), "rho_cheap": rho}


def planted_mc(questions, members, options: int) -> dict:
    """Each question's top-two q per member (answer 1 the right option, answer 2 its one
    distractor: a vote for either, P(right) / (P(right) + P(distractor))), a sample reading the
    right option with probability ρ and answering by quantal response among the options."""
    q = []
    for text in questions:
        row = []
        for e in members:
            rho, z = e._rho(text), np.exp(4 * e.lam1)  # exp(2λ·1 − 2λ·(−1)) at t = 1
            read, other = z / (z + options - 1), 1 / (z + options - 1)
            right, wrong = rho * read + (1 - rho) * other, (1 - rho) * read + rho * other
            row.append(right / (right + wrong))
        q.append(row)
    rho = np.array([members[0]._rho(t) for t in questions])
    return {"prior": JointPrior.of(np.array(q), None, np.ones(len(q))), "rho_cheap": rho}


def _case(name, cheap, dear, prompts, labels, values, weights, scored, pilot, *,
          fresh_pilot: bool, planted: dict) -> dict:
    sp = prompts[scored]
    pp = [prompts[i] for i in (range(len(prompts))[pilot] if isinstance(pilot, slice)
                               else pilot)]
    codes, tokens, pil = [], [], []
    for e, k, pk in zip((cheap, dear), K, PILOT, strict=True):
        c, tok = draw(e, sp, labels, 0, k)
        # the pilot's samples: fresh questions, or indices past the scored ones
        p, _ = draw(e, pp, labels, 0 if fresh_pilot else k, pk)
        codes.append(c)
        tokens.append(tok)
        pil.append(p)
    prices = tuple(t * pm / 1e6 for t, pm in zip(tokens, PRICE_PER_M, strict=True))
    return {"name": name, "codes": codes, "pilot": pil, "pilot_questions": len(pp),
            "values": values[scored], "planted": planted,
            "weights": weights[scored], "labels": labels, "prices": prices}


# -- policies -----------------------------------------------------------------------------------
def orders(Q: int, k: int, R: int, g: np.random.Generator) -> np.ndarray:
    return np.argsort(g.random((Q, R, k)), axis=-1)


def _mean(case, per_q: np.ndarray) -> tuple[float, float]:
    """The weighted mean over questions (and its se): accuracy and dollars alike."""
    w = case["weights"] / case["weights"].sum()
    v = float(w @ per_q)
    se = float(np.sqrt(((per_q - v) ** 2 * w ** 2).sum()))
    return v, se


def _credit(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Fractional credit of the weighted plurality: counts (Q, R, n_opt) -> (Q, R)."""
    mx = counts.max(axis=-1, keepdims=True)
    top = (counts == mx) & (mx > 0)
    k = top.sum(axis=-1)
    return np.where(k > 0, (top * values[:, None, :]).sum(axis=-1) / np.maximum(k, 1), 0.0)


def onehot(codes: np.ndarray, n_opt: int) -> np.ndarray:
    return (codes[..., None] == np.arange(n_opt)).astype(float)


def fixed_mixed(case, n_c: int, n_e: int, ords) -> tuple[float, float, float]:
    n_opt = case["values"].shape[1]
    votes = 0.0
    for g, (n, lam) in enumerate(zip((n_c, n_e), LAMS, strict=True)):
        if n:
            picked = np.take_along_axis(case["codes"][g][:, None, :], ords[g][..., :n], axis=2)
            votes = votes + 2 * lam * onehot(picked, n_opt).sum(axis=2)
    acc = _credit(np.asarray(votes), case["values"]).mean(axis=1)
    cost = n_c * case["prices"][0] + n_e * case["prices"][1]
    return (*_mean(case, acc), cost)


def bayes_member(case, g: int, cost: float, ords) -> tuple[float, float, float]:
    res = adaptive_eval(case["codes"][g], StopSpec("bayes", max_n=K[g], cost=cost),
                        values=case["values"], weights=case["weights"], orders=ords[g],
                        reps=2)[0]
    acc, se = _mean(case, res.question_accuracy)
    return acc, se, _mean(case, res.question_samples)[0] * case["prices"][g]


def cascades(case, ords) -> list[tuple[int, float, float, float]]:
    """(k, threshold, accuracy, cost) for every k and agreement threshold."""
    n_opt = case["values"].shape[1]
    cheap = np.take_along_axis(case["codes"][0][:, None, :], ords[0], axis=2)
    dear_first = np.take_along_axis(case["codes"][1][:, None, :], ords[1][..., :1], axis=2)
    dear_credit = _credit(onehot(dear_first, n_opt).sum(axis=2), case["values"])
    out = []
    for k in range(1, K[0] + 1):
        counts = onehot(cheap[..., :k], n_opt).sum(axis=2)
        top = counts.max(axis=-1)
        cheap_credit = _credit(counts, case["values"])
        for j in range(1, k + 1):
            accept = top >= j
            acc = np.where(accept, cheap_credit, dear_credit).mean(axis=1)
            cost = k * case["prices"][0] + (1 - accept.mean(axis=1)) * case["prices"][1]
            out.append((k, j / k, _mean(case, acc)[0], _mean(case, cost)[0]))
    return out


def frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """(cost, accuracy) points -> the lower-cost frontier (accuracy rising with cost)."""
    best, out = -1.0, []
    for c, a in sorted(points):
        if a > best:
            out.append((c, a))
            best = a
    return out


def fit_prior(case):
    pc, pe = case["pilot"]
    a, b = [], []
    for q in range(pc.shape[0]):
        ca, cb, _ = member_counts([[None if x < 0 else str(x) for x in pc[q]],
                                   [None if x < 0 else str(x) for x in pe[q]]], LAMS)
        a.append(ca)
        b.append(cb)
    return fit_joint_prior(np.array(a), np.array(b))


def make_rule(case, prior, value_usd: float, credit: str) -> CostRule:
    """The cost rule over the case's members, at its prices, knowing its options."""
    return CostRule(prior=prior, prices=case["prices"], max_n=K, lams=LAMS,
                    value_usd=value_usd, credit=credit,
                    two_choices=two_fixed_choices(case["labels"]))


def cost_rule(case, rule: CostRule, ords) -> tuple[float, float, float, float]:
    """Replay the rule along each order as the eval does (`evals.costeval.replay_scored`,
    what `Ensemble(stop="cost")` asks): (accuracy, se, dollars per question, expensive votes
    per question)."""
    rp, credit = replay_scored(rule, case["codes"], ords, case["values"])
    acc, se = _mean(case, credit.mean(axis=1))
    return (acc, se, _mean(case, rp.spent.mean(axis=1))[0],
            _mean(case, rp.drawn[..., 1].mean(axis=1))[0])


# -- exact, under the planted truth --------------------------------------------------------------
FINE = tuple(float(x) for x in np.exp(np.linspace(0.0, np.log(64.0), 25)))  # values, exact


def exact_cascades(planted, prices) -> list[tuple[float, float]]:
    """(cost, accuracy) of every cascade (k cheap votes; accept the top answer if it has at
    least j of them, else one expensive vote decides) under the planted truth, exactly: the
    top-two reduction (answer 1 and 2 per node, as the rule sees them)."""
    from scipy.stats import binom

    q, w = planted.nodes()
    p = np.asarray(planted.p)
    dear = q[:, 1] * p + (1 - q[:, 1]) * (1 - p)
    out = []
    for k in range(1, K[0] + 1):
        a = np.arange(k + 1)
        pm = binom.pmf(a[None, :], k, q[:, :1])  # (nodes, a)
        top = np.maximum(a, k - a)
        right = np.where(a > k - a, p[:, None], np.where(a < k - a, 1 - p[:, None], 0.5))
        for j in range(1, k + 1):
            acc_ = (top >= j)
            acc = w @ (pm * np.where(acc_, right, dear[:, None])).sum(axis=1)
            esc = w @ (pm * ~acc_).sum(axis=1)
            out.append((k * prices[0] + esc * prices[1], float(acc)))
    return out


def exact_frontier(case, prior, credit, planted) -> list[tuple[float, float, float]]:
    """(value, cost, accuracy) of the cost rule (its prior, its credit) at each FINE value,
    evaluated exactly on the planted truth."""
    out = []
    for v in FINE:
        rule = make_rule(case, prior, v * case["prices"][1], credit)
        e = rule.evaluate(planted)
        out.append((v, e.mean_cost_usd, e.accuracy))
    return out


def interpolate(front: list[tuple[float, float]], accuracy: float) -> float | None:
    """The least cost reaching `accuracy` on a frontier's points or between two of them (a
    policy that runs one with probability α, the other otherwise, earns and spends the mix)."""
    pts = frontier(front)
    for (c0, a0), (c1, a1) in zip(pts, pts[1:], strict=False):
        if a0 >= accuracy:
            return c0
        if a1 >= accuracy:
            return c0 + (c1 - c0) * (accuracy - a0) / (a1 - a0)
    return pts[-1][0] if pts and pts[-1][1] >= accuracy else None


# -- the bench ----------------------------------------------------------------------------------
def bench(case, R: int, seed: int = 0) -> dict:
    g = np.random.default_rng(seed)
    Q = case["codes"][0].shape[0]
    ords = [orders(Q, K[0], R, g), orders(Q, K[1], R, g)]
    pc, pe = case["prices"]
    rows: list[tuple[str, float, float, float]] = []
    dear1 = fixed_mixed(case, 0, 1, ords)
    rows.append(("expensive alone, n = 1", *dear1))
    for c in BAYES_COSTS:
        rows.append((f"expensive, bayes stop (cost {c:g})", *bayes_member(case, 1, c, ords)))
    for c in BAYES_COSTS:
        rows.append((f"cheap, bayes stop (cost {c:g})", *bayes_member(case, 0, c, ords)))
    rows.append(("cheap alone, n = 10", *fixed_mixed(case, 10, 0, ords)))
    for n_c, n_e in ((2, 1), (3, 1), (5, 1), (4, 2)):
        rows.append((f"fixed mixed ({n_c} cheap + {n_e} expensive, λ-weighted)",
                     *fixed_mixed(case, n_c, n_e, ords)))
    casc = cascades(case, ords)
    cfront = frontier([(c, a) for _, _, a, c in casc])
    t0 = time.perf_counter()
    prior = fit_prior(case)
    fit_s = time.perf_counter() - t0
    planted = case["planted"]["prior"]
    rule_rows = []
    for v in VALUES:
        rule = make_rule(case, prior, v * pe, CREDIT)
        acc, se, cost, dear = cost_rule(case, rule, ords)
        rule_rows.append((v, acc, se, cost, dear, rule.summary, rule.evaluate(planted)))
    # exactly, under the planted truth (the limit of endless stored samples on these questions)
    prices = case["prices"]
    dear1_exact = make_rule(case, planted, pe, "planted").summary.reference_accuracy
    exact = {"dear1": dear1_exact,
             "rule": exact_frontier(case, prior, CREDIT, planted),
             "bound": exact_frontier(case, planted, "planted", planted),
             "cascade": exact_cascades(planted, prices)}
    traps = case["planted"]["rho_cheap"] < 0.5
    cheap = case["codes"][0]
    unanimous = {k: float((cheap[traps, :k] == cheap[traps, :1]).all(axis=1).mean())
                 if traps.any() else float("nan") for k in (3, K[0])}
    return {"case": case, "rows": rows, "cascades": casc, "cascade_front": cfront,
            "rules": rule_rows, "exact": exact, "traps": float(traps.mean()),
            "unanimous": unanimous, "dear1": dear1, "fit_s": fit_s, "prior_nodes": len(prior.w),
            "pilot_cost": case["pilot_questions"] * (PILOT[0] * pc + PILOT[1] * pe)}


def report(res: dict) -> tuple[str, bool]:
    case = res["case"]
    pe = case["prices"][1]
    lines = [f"### {case['name']} ({case['codes'][0].shape[0]} questions; dollars per question "
             f"in units of one expensive sample, ${pe:.3g})", "",
             "| policy | accuracy (± se) | cost / expensive sample |", "|---|---|---|"]
    for name, acc, se, cost in res["rows"]:
        lines.append(f"| {name} | {acc:.4f} ± {se:.4f} | {cost / pe:.3f} |")
    front = res["cascade_front"]
    best = {}
    for k, thr, acc, cost in res["cascades"]:
        if (cost, acc) in front:
            best[(cost, acc)] = (k, thr)
    for cost, acc in front[:: max(1, len(front) // 6)]:
        k, thr = best[(cost, acc)]
        lines.append(f"| cascade k = {k}, agreement >= {thr:.2f} (hindsight) | {acc:.4f} | "
                     f"{cost / pe:.3f} |")
    under = True
    target = res["dear1"][0]
    for v, acc, se, cost, dear, summ, ex in res["rules"]:
        casc = interpolate(front, acc)
        ratio = None if casc is None else cost / casc
        if ratio is not None and ratio > 1.1:
            under = False
        lines.append(f"| cost rule, value = {v:g} expensive samples | {acc:.4f} ± {se:.4f} | "
                     f"{cost / pe:.3f} (expensive votes {dear:.2f}; vs cascade "
                     f"{'—' if ratio is None else f'{ratio:.2f}x'}; expects {summ.accuracy:.3f}"
                     f" at {summ.mean_cost_usd / pe:.3f}; exact on the planted truth "
                     f"{ex.accuracy:.4f} at {ex.mean_cost_usd / pe:.3f}) |")
    reached = interpolate([(c, a) for _, a, _, c, _, _, _ in res["rules"]], target - 0.005)
    spend = None if reached is None else reached / res["dear1"][2]
    ok_replay = under and spend is not None and spend <= 0.4
    ex = res["exact"]
    d1 = ex["dear1"]
    rule_pts = [(c, a) for _, c, a in ex["rule"]]
    bound_pts = [(c, a) for _, c, a in ex["bound"]]
    c_rule = interpolate(rule_pts, d1 - 0.005)
    c_bound = interpolate(bound_pts, d1 - 0.005)
    worst = max((c / cc for c, a in rule_pts if a <= max(x for _, x in ex["cascade"])
                 and c > 1.001 * case["prices"][0]  # above one cheap vote (both are that)
                 for cc in [interpolate(ex["cascade"], a)] if cc), default=float("nan"))
    ok_exact = c_rule is not None and c_rule <= 0.4 * pe and worst <= 1.1

    def frac(c: float | None) -> str:
        return "—" if c is None else f"{c / pe:.2f}"

    lines += ["", f"Joint prior: {res['prior_nodes']} nodes, fitted in {res['fit_s']:.2f} s from "
              f"{case['pilot_questions']} pilot questions ({PILOT[0]} cheap + {PILOT[1]} expensive "
              f"samples each; one-off cost {res['pilot_cost'] / pe:.0f} expensive samples).",
              f"Replayed ({len(res['rules'])} values, the stored samples): "
              f"at the expensive member's n = 1 accuracy {target:.4f} ± {res['dear1'][1]:.4f} "
              f"(within 0.005) the cost rule spends {'—' if spend is None else f'{spend:.2f}'} "
              "of what it spends (target <= 0.40); every cost-rule point within 1.1x of the "
              f"tuned cascade's cost at its accuracy: {'yes' if under else 'no'}.",
              f"Exact on the planted truth (these questions, endless samples; {len(FINE)} "
              f"values, mixes of neighbours): the expensive member's n = 1 accuracy {d1:.4f}; "
              f"at {d1 - 0.005:.4f} the cost rule spends {frac(c_rule)} of its cost "
              f"(target <= 0.40); at most {worst:.2f}x the cascade tuned on the truth at every "
              f"accuracy the cascade reaches above one cheap vote (target <= 1.1).",
              f"Best any vote-based policy can do here (the cost rule with the planted joint "
              f"prior and credit: Bayes-optimal among policies that see only the votes, up to "
              f"the value grid): {frac(c_bound)} at {d1 - 0.005:.4f}. Traps (cheap reading "
              f"accuracy < 1/2): {res['traps']:.3f} of the questions; of them, "
              f"{res['unanimous'][3]:.2f} have their first 3 cheap votes unanimous, "
              f"{res['unanimous'][K[0]]:.2f} all {K[0]}.",
              f"Done-when: replayed {'met' if ok_replay else 'NOT met'}; exact "
              f"{'met' if ok_exact else 'NOT met'}"
              + ("" if c_bound is None or c_bound <= 0.4 * pe else
                 " (unreachable here: the bound is above 0.40)") + "."]
    return "\n".join(lines), ok_exact


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 2
    rows_n = (len(results) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(6.5 * cols, 4.4 * rows_n), squeeze=False)
    for ax in axes.ravel()[len(results):]:
        ax.axis("off")
    for ax, res in zip(axes.ravel(), results, strict=False):
        pe = res["case"]["prices"][1]
        fc = np.array(res["cascade_front"])
        ax.plot(fc[:, 0] / pe, fc[:, 1], "-", color="tab:orange",
                label="cascade (tuned in hindsight)")
        rr = np.array([(c, a) for _, a, _, c, _, _, _ in res["rules"]])
        ax.plot(rr[:, 0] / pe, rr[:, 1], "o-", color="tab:blue", label="cost rule")
        ex = res["exact"]
        for key, style, label in (("rule", "--", "cost rule, exact on the planted truth"),
                                  ("bound", ":", "bound: planted prior, exact")):
            pts = np.array(frontier([(c, a) for _, c, a in ex[key]]))
            ax.plot(pts[:, 0] / pe, pts[:, 1], style, color="tab:blue" if key == "rule"
                    else "black", lw=1, label=label)
        for name, acc, _se, cost in res["rows"]:
            marker = ("x" if "mixed" in name else "s" if "expensive" in name else "^")
            color = ("tab:red" if marker == "s" else "tab:green" if marker == "^"
                     else "grey")
            ax.plot([cost / pe], [acc], marker, color=color)
        ax.axhline(res["dear1"][0], ls=":", color="tab:red", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("dollars per question / price of one expensive sample")
        ax.set_ylabel("accuracy")
        ax.set_title(res["case"]["name"], fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("red squares: expensive alone (n = 1, bayes); green triangles: cheap "
                 "(bayes, n = 10); grey x: fixed mixed", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    global CHEAP_A, PILOT_QUESTIONS, CREDIT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, default=4)
    ap.add_argument("--questions", type=int, default=1500)
    ap.add_argument("--cheap-a", type=float, nargs="+", default=[5.0, 3.0],
                    help="the cheap member's reading accuracy Beta(a, 1), one run per value "
                         "(default 5: 3%% of questions are traps; 3: 12.5%%)")
    ap.add_argument("--cases", nargs="+", default=["mc", "boxball"])
    ap.add_argument("--pilot-questions", type=int, default=1000)
    ap.add_argument("--credit", choices=["reference", "qr"], default=CREDIT)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    PILOT_QUESTIONS = args.pilot_questions
    CREDIT = args.credit
    t0 = time.perf_counter()
    results, all_ok = [], True
    for a in args.cheap_a:
        CHEAP_A = a
        makers = {"mc": lambda: mc_case(args.questions), "boxball": boxball_case}
        for name in args.cases:
            case = makers[name]()
            case["name"] += f", cheap Beta({a:g}, 1)"
            res = bench(case, args.orders)
            text, ok = report(res)
            print(text, "\n", flush=True)
            results.append(res)
            all_ok = all_ok and ok
    if not args.no_plot:
        plot(results, PLOT)
        print(f"wrote {PLOT}")
    print(f"{time.perf_counter() - t0:.0f} s")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
