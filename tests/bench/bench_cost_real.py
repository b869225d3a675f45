"""Benchmark: the cost rule (`stop="cost"`) on real recorded samples (issue 31's caution).

The cost rule has been judged on simulated members (tests/bench/bench_cost.py), whose votes obey
its model. Here its members are real recordings: SmolLM2-135M-Instruct on the 250 arithmetic
questions of tests/bench/data/smollm2-arith (open numeric answers), the **cheap** member at
t = 0.7 (20 samples a question, that folder) and the **expensive** one at t = 0.2 (6 samples a
question, tests/bench/data/smollm2-arith-t02). Both members are ONE model: the same model at a
lower temperature is a more rational member under the paper's model (λ(t) = λ₁ / t), so the
rule weighs them λ₁/0.7 and λ₁/0.2 (λ₁ = 1), and their errors correlate strongly (the joint
prior must learn that). The price gap is PLANTED, the bench's: $0.15 and $2.50 per 1M
completion tokens (each sample priced by its own recorded completion tokens).

Each recording goes through the user's path first: `ensemble eval TASK --model replay/REC --t T
--n 1 --samples K --json` (a subprocess, no request leaves the machine), so its answers are
parsed by the project's own parsing. A mixed `ensemble eval --spec` refuses open answers (mixed
runs score fixed choices), so the two replayed runs' parsed answers are joined here per question
(answers equal as numbers are one answer) and the cost rule's row is computed by
`evals.costeval.cost_rows`, the function the eval's `"adaptive": ["cost"]` row comes from: its
joint prior fitted without labels on every stored sample, replayed one vote at a time along R
random orders of each member's samples, member budgets n = 10 cheap and 4 expensive.

Printed, on the same orders, with 95% bootstrap intervals over questions:
- accuracy on the right answer, and agreement with the reference (the expensive member's
  plurality over its 6 recorded samples, ties split: a finite stand-in for the rule's reference,
  the λ-weighted vote of unlimited samples, which here is the expensive member's);
- the expensive member alone (n = 1; fixed n = 4), the cheap member alone (n = 1, 10, 20), the
  fixed mixed ensemble (10 + 4, λ-weighted), a cheap-first cascade (k cheap samples, accept the
  leading answer if it has at least j of them, else one expensive sample decides; every (k, j)
  scored and its frontier on the right answer kept: tuned in hindsight), and the cost rule at its
  default (target_loss 0.005 against the expensive member's one vote) and at several value_usd;
- the rule's own expectation under its fitted prior (`rule.summary`: votes per member, dollars,
  agreement with the reference) beside what the replay measures.

Run:  python tests/bench/bench_cost_real.py [--orders 20] [--reps 1000]   (~2 min here)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from ensemble.cost import fit_joint_prior, member_counts  # noqa: E402
from ensemble.cost.spec import CostSpec, two_fixed_choices  # noqa: E402
from ensemble.evals.costeval import cost_rows, replay_cost, replay_credit  # noqa: E402
from ensemble.evals.records import read_questions, read_samples  # noqa: E402

DATA = ROOT / "tests" / "bench" / "data"
MEMBERS = (("cheap", DATA / "smollm2-arith", 0.7, 20),
           ("expensive", DATA / "smollm2-arith-t02", 0.2, 6))
LAM1 = 1.0
LAMS = tuple(LAM1 / t for _, _, t, _ in MEMBERS)
PRICE_PER_M = (0.15, 2.50)  # USD per 1M completion tokens: planted
BUDGETS = (10, 4)
VALUES = (2, 4, 8, 16, 32, 64, 128)  # x the expensive member's mean price per sample


def replayed(folder: Path, t: float, k: int, out: Path) -> dict[str, list[tuple]]:
    """The user's path: `ensemble eval task.yaml --model replay/recording.jsonl ...`; returns
    per question id its K samples as (answer or None, completion tokens), and the right answer."""
    cmd = [sys.executable, "-m", "ensemble", "eval", str(folder / "task.yaml"), "--model",
           f"replay/{folder / 'recording.jsonl'}", "--t", f"{t:g}", "--n", "1", "--samples",
           str(k), "--out", str(out), "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])}
    got = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if got.returncode != 0:
        raise SystemExit(f"replay failed ({' '.join(cmd)}):\n{got.stderr.strip()}")
    rows: dict[str, list] = {}
    for s in read_samples(out):
        rows.setdefault(s.id, [None] * k)[s.sample] = (s.answer, s.tokens)
    return rows


def key(answer: str | None) -> str | None:
    """Answers equal as numbers are one answer (the task's Number kind, rel_tol 1e-3)."""
    if answer is None:
        return None
    try:
        return f"{float(answer):.6g}"
    except ValueError:
        return answer.strip()


def join(tmp: Path):
    """(codes per member (Q, K_g), tokens per member (Q, K_g), right (Q, n_opt), reference
    (Q, n_opt), question ids: the rule's per-question key) with each question's answers coded
    over the union of both members' answers and the right one (−1: invalid)."""
    runs = [replayed(folder, t, k, tmp / name) for name, folder, t, k in MEMBERS]
    questions = list(read_questions(tmp / MEMBERS[0][0]))
    ids = [q.id for q in questions]
    opts: list[list[str]] = []
    for q in questions:
        seen: list[str] = []
        for run in runs:
            for a, _ in run[q.id]:
                if key(a) is not None and key(a) not in seen:
                    seen.append(key(a))
        if key(q.correct) not in seen:
            seen.append(key(q.correct))
        opts.append(seen)
    n_opt = max(map(len, opts))
    Q = len(ids)
    codes, tokens = [], []
    for run, (_, _, _, k) in zip(runs, MEMBERS, strict=True):
        c = np.full((Q, k), -1, dtype=np.int64)
        tok = np.zeros((Q, k))
        for i, qid in enumerate(ids):
            for j, (a, n) in enumerate(run[qid]):
                c[i, j] = -1 if key(a) is None else opts[i].index(key(a))
                tok[i, j] = float(n or 0)
        codes.append(c)
        tokens.append(tok)
    right = np.zeros((Q, n_opt))
    for i, q in enumerate(questions):
        right[i, opts[i].index(key(q.correct))] = 1.0
    counts = (codes[1][..., None] == np.arange(n_opt)).sum(axis=1)  # the expensive member's 6
    top = (counts == counts.max(axis=1, keepdims=True)) & (counts > 0)
    reference = top / np.maximum(top.sum(axis=1, keepdims=True), 1)
    return codes, tokens, right, reference, ids


# -- scoring helpers -----------------------------------------------------------------------------
def credit_of(votes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Fractional credit of the (weighted) plurality: votes (Q, R, n_opt) -> (Q, R)."""
    mx = votes.max(axis=-1, keepdims=True)
    top = (votes == mx) & (mx > 0)
    k = top.sum(axis=-1)
    return np.where(k > 0, (top * values[:, None, :]).sum(-1) / np.maximum(k, 1), 0.0)


def picked(codes: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    return np.take_along_axis(codes[:, None, :], order[..., :n], axis=2)


def onehot(c: np.ndarray, n_opt: int) -> np.ndarray:
    return (c[..., None] == np.arange(n_opt)).astype(float)


class Scorer:
    def __init__(self, codes, tokens, right, reference, orders: int, reps: int, seed: int = 0,
                 ids: list[str] | None = None):
        self.codes, self.right, self.reference = codes, right, reference
        self.ids = ids  # each question's key: its policy where the rule mixes two
        self.cost = [t * p / 1e6 for t, p in zip(tokens, PRICE_PER_M, strict=True)]
        self.Q, self.n_opt = right.shape
        g = np.random.default_rng(seed)
        # the orders cost_rows draws (same seed, same calls): every policy on the same orders
        self.orders = [np.argsort(g.random((self.Q, orders, c.shape[1])), axis=-1)
                       for c in codes]
        self.boot = np.random.default_rng(seed + 1).integers(0, self.Q, size=(reps, self.Q))
        self.dear_price = float(self.cost[1].mean())

    def ci(self, per_q: np.ndarray) -> tuple[float, float, float]:
        d = per_q[self.boot].mean(axis=1)
        lo, hi = np.percentile(d, [2.5, 97.5])
        return float(per_q.mean()), float(lo), float(hi)

    def spent(self, g: int, n) -> np.ndarray:
        """(Q, R) dollars of member g's first n samples along the orders (n: int or (Q, R))."""
        c = np.take_along_axis(self.cost[g][:, None, :], self.orders[g], axis=2)
        upto = np.arange(c.shape[2]) < np.asarray(n)[..., None] if not isinstance(n, int) \
            else np.arange(c.shape[2]) < n
        return (c * upto).sum(axis=2)

    def fixed(self, ns: tuple[int, int]) -> dict:
        votes = np.zeros((self.Q, self.orders[0].shape[1], self.n_opt))
        cost = np.zeros(votes.shape[:2])
        for g, n in enumerate(ns):
            if n:
                votes += 2 * LAMS[g] * onehot(picked(self.codes[g], self.orders[g], n), self.n_opt
                                              ).sum(axis=2)
                cost += self.spent(g, n)
        return self.row(credit_of(votes, self.right), credit_of(votes, self.reference), cost,
                        ns)

    def row(self, right, ref, cost, votes) -> dict:
        return {"right": self.ci(right.mean(axis=1)), "ref": self.ci(ref.mean(axis=1)),
                "usd": float(cost.mean()), "votes": tuple(float(np.mean(v)) for v in votes),
                "q_right": right.mean(axis=1), "q_ref": ref.mean(axis=1)}

    def diff(self, a: dict, b: dict) -> str:
        """a − b, paired over questions: right answer and agreement, with 95% intervals."""
        out = []
        for k in ("q_right", "q_ref"):
            v, lo, hi = self.ci(a[k] - b[k])
            out.append(f"{v:+.4f} ({lo:+.4f} to {hi:+.4f})")
        return " / ".join(out)

    def cascades(self) -> list[tuple[int, int, dict]]:
        cheap = picked(self.codes[0], self.orders[0], self.codes[0].shape[1])
        dear = onehot(picked(self.codes[1], self.orders[1], 1), self.n_opt).sum(axis=2)
        out = []
        for k in range(1, BUDGETS[0] + 1):
            counts = onehot(cheap[..., :k], self.n_opt).sum(axis=2)
            top = counts.max(axis=-1)
            for j in range(1, k + 1):
                accept = top >= j
                r = np.where(accept, credit_of(counts, self.right), credit_of(dear, self.right))
                f = np.where(accept, credit_of(counts, self.reference),
                             credit_of(dear, self.reference))
                cost = self.spent(0, k) + np.where(accept, 0.0, self.spent(1, 1))
                out.append((k, j, self.row(r, f, cost, (np.full(1, k), 1 - accept))))
        return out

    def rule(self, value_usd: float | None):
        """The rule exactly as `cost_rows` builds it (prior fitted on every stored sample),
        replayed on the same orders, scored both ways."""
        price = [float(c.mean()) for c in self.cost]
        counts = [member_counts([[None if x < 0 else str(int(x)) for x in self.codes[g][q]]
                                 for g in range(2)], list(LAMS)) for q in range(self.Q)]
        prior = fit_joint_prior(np.array([c[0] for c in counts]),
                                np.array([c[1] for c in counts]))
        rule = replace(CostSpec(value_usd=value_usd), prior=prior).build(
            a=None, b=None, prices=price, max_n=BUDGETS, lams=list(LAMS),
            two_choices=two_fixed_choices([str(i) for i in range(self.n_opt)]))
        rp = replay_cost(rule, self.codes, self.orders, self.cost, options=self.n_opt,
                         questions=self.ids)
        right = replay_credit(rp, self.codes, self.orders, rule, self.right)
        ref = replay_credit(rp, self.codes, self.orders, rule, self.reference)
        row = self.row(right, ref, rp.spent, (rp.drawn[..., 0], rp.drawn[..., 1]))
        # the rule's own state: how often its two leaders are not all a question's answers
        return rule, row


def fmt(name: str, r: dict, dear_price: float) -> str:
    v, lo, hi = r["right"]
    f, flo, fhi = r["ref"]
    return (f"| {name} | {r['votes'][0]:.2f} / {r['votes'][1]:.2f} | {r['usd'] * 1e6:.2f} "
            f"({r['usd'] / dear_price:.2f}) | {v:.4f} ({lo:.4f}-{hi:.4f}) | "
            f"{f:.4f} ({flo:.4f}-{fhi:.4f}) |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, default=20)
    ap.add_argument("--reps", type=int, default=1000)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        codes, tokens, right, reference, ids = join(Path(tmp))
    sc = Scorer(codes, tokens, right, reference, a.orders, a.reps, ids=ids)
    Q = sc.Q
    inv = [float((c < 0).mean()) for c in codes]
    for name, c in zip(("cheap", "expensive"), codes, strict=True):
        third, lead = [], []
        for row in c:
            v = row[row >= 0]
            if v.size:
                cnt = np.sort(np.bincount(v))[::-1]
                third.append(cnt[2:].sum())
                lead.append(cnt[0] / v.size)
        print(f"{name}: {sum(third) / (c >= 0).sum():.3f} of the valid answers fall outside a "
              f"question's two leading ones; median leader share {np.median(lead):.2f}")
    print(f"{Q} questions; invalid: cheap {inv[0]:.3f}, expensive {inv[1]:.3f}; mean price per "
          f"sample (planted): cheap ${sc.cost[0].mean() * 1e6:.3f}e-6, expensive "
          f"${sc.dear_price * 1e6:.3f}e-6 (ratio {sc.dear_price / sc.cost[0].mean():.1f}); "
          f"λ = {LAMS[0]:.3f}, {LAMS[1]:.3f}; {a.orders} orders")
    ref_defined = float((reference.sum(axis=1) > 0).mean())
    prior = sc.rule(None)[0].prior
    qn, wn = prior.nodes()
    split = float(wn @ (((qn[:, 0] - 0.5) * (qn[:, 1] - 0.5)) < 0))
    cv = np.cov(qn.T, aweights=wn)
    print(f"fitted joint prior: {split:.3f} of its mass where the members lean to different "
          f"leaders (q_cheap, q_expensive on opposite sides of 1/2); correlation of q over the "
          f"prior {cv[0, 1] / np.sqrt(cv[0, 0] * cv[1, 1]):.2f}")
    print(f"reference (expensive member's 6-sample plurality) defined on {ref_defined:.3f} of "
          f"the questions; right on {float((reference * right).sum(axis=1).mean()):.4f}")
    print("\n| policy | votes cheap / expensive | µ$ per question (x one expensive sample) "
          "| accuracy, right answer (95% CI) | agreement with the reference (95% CI) |")
    print("|---|---|---|---|---|")
    for name, ns in (("expensive alone, n = 1", (0, 1)), ("expensive alone, n = 4", (0, 4)),
                     ("cheap alone, n = 1", (1, 0)), ("cheap alone, n = 10", (10, 0)),
                     ("cheap alone, n = 20", (20, 0)),
                     ("fixed mixed 10 + 4 (λ-weighted)", BUDGETS)):
        print(fmt(name, sc.fixed(ns), sc.dear_price))
    casc = sc.cascades()
    best, front = -1.0, []
    for k, j, r in sorted(casc, key=lambda x: x[2]["usd"]):
        if r["right"][0] > best + 1e-12:
            best = r["right"][0]
            front.append((k, j, r))
    for k, j, r in front:
        print(fmt(f"cascade k = {k}, accept at ≥ {j} (hindsight)", r, sc.dear_price))
    base = {"expensive n = 1": sc.fixed((0, 1)), "expensive n = 4": sc.fixed((0, 4)),
            "fixed mixed 10 + 4": sc.fixed(BUDGETS)}
    summaries = []
    for v in (None, *VALUES):
        value = None if v is None else v * sc.dear_price
        rule, r = sc.rule(value)
        label = ("cost rule, default (target_loss 0.005)" if v is None else
                 f"cost rule, value = {v} expensive samples")
        print(fmt(label, r, sc.dear_price))
        summaries.append((label, rule, r))
    print("\npaired differences, cost rule minus a baseline (right answer / agreement):")
    for label, _rule, r in summaries:
        print(f"  {label}: " + "; ".join(f"vs {b}: {sc.diff(r, rb)}" for b, rb in base.items()))
    print("\nthe rule's expectation under its fitted prior (rule.summary) against the replay:")
    print("| rule | expected votes cheap / expensive | measured | expected $ (x one expensive"
          " sample) | measured | expected agreement with the reference | measured |")
    print("|---|---|---|---|---|---|---|")
    for label, rule, r in summaries:
        s = rule.summary
        mix = (f", mixed with value ${rule.cheaper_value_usd * 1e6:.2f}e-6 on {rule.mix:.0%} "
               "of the questions" if rule.mix else "")
        print(f"| {label} (value ${rule.value_usd * 1e6:.2f}e-6{mix}) | {s.mean_samples[0]:.2f} / "
              f"{s.mean_samples[1]:.2f} | {r['votes'][0]:.2f} / {r['votes'][1]:.2f} | "
              f"{s.mean_cost_usd / sc.dear_price:.2f} | {r['usd'] / sc.dear_price:.2f} | "
              f"{s.accuracy:.4f} (its reference alone: {s.reference_accuracy:.4f}) | "
              f"{r['ref'][0]:.4f} ({r['ref'][1]:.4f}-{r['ref'][2]:.4f}) |")
    # the eval's own row (evals.costeval.cost_rows) at the default: the same replay
    costs = sc.cost
    (row,) = cost_rows(codes, costs, right, np.ones(Q), budgets=BUDGETS, lams=list(LAMS),
                       spec=CostSpec(), orders=a.orders, reps=a.reps, seed=0, questions=ids)
    print(f"\nthe eval's row (cost_rows, default): mean_samples_by_member "
          f"{[round(x, 3) for x in row['mean_samples_by_member']]}, mean_cost_usd "
          f"{row['mean_cost_usd']:.3e}, accuracy {row['accuracy']:.4f} "
          f"({row['ci'][0]:.4f}-{row['ci'][1]:.4f}), fixed 10 + 4 "
          f"{row['vs_fixed']['accuracy']:.4f}, value_usd {row['value_usd']:.3e}")
    mine = summaries[0][2]
    if not (np.allclose(row["mean_samples_by_member"], mine["votes"])
            and abs(row["accuracy"] - mine["right"][0]) < 1e-12
            and abs(row["mean_cost_usd"] - mine["usd"]) < 1e-12):
        raise SystemExit("the bench's replay of the default differs from cost_rows'")
    print(json.dumps({k: row[k] for k in ("mean_samples", "value_usd", "credit")}))
    print(f"time: {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
