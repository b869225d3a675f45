"""Benchmark: soft votes against hard plurality, at equal accuracy (issue 37).

For each case, every question's K recorded samples (answers and compact logprobs) are drawn
through the user's path: `Sampler` with `logprobs=True` against the in-process simulated expert
(`FakeExpertProvider`) or a committed recording (`replay/...`), parsed by the task's parser,
then `ensemble.decision.evidence_of` (what `Ensemble` hands a rule). Along R random orders of
each question's samples, the first n (n = 1..K) are voted by:

- `plurality` (hard votes; ties share the credit);
- `soft` (each sample adds its distribution over the options: `ensemble.soft`);
- `confidence` (CISC: hard votes weighed by softmax(log P(answer) / T), T fitted without
  labels by `ensemble.soft.fit_temperature` on the run's own samples);

each rule's per-sample scores being the evals' own (`RuleBase.weigh_many` and
`ensemble.evals.weighed.score_table`, what `ensemble eval --aggregator soft` scores);
- `deepconf` (refused on replies with a median under 64 tokens, as the rule refuses);
- `soft*`: `soft` without its signal check (what the check protects against).

`soft` and `confidence` first run their signal check (`ensemble.soft.SignalCheck`: the
covariance of own confidence with agreement, and the held-out gain) on the run's own samples
(each question one decision, all K samples in recorded order): where it stays off they are
counted as hard votes, as the rule does.

Printed per case: accuracy at n = 1, 3, 5, 10, K; the samples each rule needs to reach
plurality's accuracy at n = K (interpolated along its curve), as a ratio to K with a 95%
paired bootstrap interval over questions (the curves resampled together); and the paired
difference rule − plurality at n = 3 and 5 with its interval.

Cases: the simulator's informative setting, fixed before any soft vote was measured: the
multiple-choice case of tests/bench/bench_adaptive.py (5 options, reading accuracy ρ ~
Beta(3, 2) with one distractor, λ₁ = 3, t = 1, K = 20) drawn from the simulated expert, with
its default chain beliefs (κ = CHAIN_KAPPA = 1), `--questions` 1000; its noise setting (the
same with `ChainBeliefs(mode="noise")`); and every folder of tests/bench/data holding a
recording with logprobs (`"lp"` in its samples).

    python tests/bench/bench_soft.py [--questions 1000] [--orders 100] [--boot 1000]
        [--only sim|rec] [--plot docs/soft.png]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from ensemble.decision import evidence_of  # noqa: E402
from ensemble.sampling.sampler import Sampler  # noqa: E402
from ensemble.sampling.types import SampleRequest  # noqa: E402

DATA = ROOT / "tests" / "bench" / "data"
RULES = ("plurality", "soft", "soft*", "confidence", "deepconf")
LAM1 = 3.0  # bench_adaptive.py's multiple-choice case


# -- cases: per question, its K samples' answers and evidence -----------------------------------
class Case:
    """One run's samples: `answers[q][i]` (None: invalid), `evidence[q][i]`, the right answer
    `correct[q]`, the options of each question (choice tasks: the task's; open answers: the
    distinct answers of its samples)."""

    def __init__(self, name: str, answers: list[list[str | None]], evidence: list[list[Any]],
                 correct: list[str | None], choices: tuple[str, ...] | None, note: str = ""):
        self.name, self.answers, self.evidence = name, answers, evidence
        self.correct, self.choices, self.note = correct, choices, note
        self.k = min(len(a) for a in answers)


async def _draw(model: str, prompts: list[str], t: float, k: int, parse: Any,
                provider: Any = None) -> list[list[Any]]:
    async with Sampler(model, provider=provider, store=None) as s:
        rows = await s.sample([SampleRequest.of(p, temperature=t, k=k, logprobs=True,
                                                top_logprobs=5) for p in prompts], parser=parse)
    return [list(r) for r in rows]


def simulated_case(mode: str, *, questions: int, k: int = 20, seed: int = 0) -> Case:
    from ensemble.sampling.parsing import choice_parser
    from ensemble.testing import ChainBeliefs, FakeExpertProvider, SimulatedExpert

    letters = list("ABCDE")
    rng = np.random.default_rng(seed)
    prompts, key, correct = [], {}, []
    for i in range(questions):
        right = letters[int(rng.integers(5))]
        text = f"Simulated question {i}: which option holds the planted answer?"
        opts = "\n".join(f"{c}) option {c.lower()}{i}" for c in letters)
        prompts.append(f"### Question:\n{text}\n### Options:\n{opts}\n\n"
                       "Reply as <answer>LETTER</answer>.")
        key[text] = right
        correct.append(right)
    expert = SimulatedExpert(lam1=LAM1, answer_key=key, seed=seed,
                             beliefs=ChainBeliefs(mode=mode))
    fake = FakeExpertProvider(expert=expert)
    parse = choice_parser(letters)
    rows = asyncio.run(_draw("fake/sim-expert", prompts, 1.0, k, parse, provider=fake))
    answers = [[s.answer for s in r] for r in rows]
    evidence = [[evidence_of(s, options=letters) for s in r] for r in rows]
    return Case(f"simulator, {mode} beliefs ({questions} questions x {k}, 5 options, "
                f"lambda1 = {LAM1:g}, t = 1)", answers, evidence, correct, tuple(letters))


def recording_cases() -> list[Case]:
    from ensemble.tasks.taskfile import TaskFile

    out = []
    for folder in sorted(p for p in DATA.iterdir() if p.is_dir()):
        rec = folder / "recording.jsonl"
        if not rec.is_file():
            continue
        first = json.loads(rec.open().readline())
        s0 = first["samples"][0]
        if not (isinstance(s0, dict) and "lp" in s0):
            continue
        task = TaskFile(data=folder / "task.yaml")
        qs = task.questions()
        k = min(len(json.loads(x)["samples"]) for x in rec.read_text().splitlines() if x.strip())
        t = float(first["t"])
        rows = asyncio.run(_draw(f"replay/{rec}", [q.prompt for q in qs], t, k, task.parse))
        choices = tuple(task.choices) or None
        answers = [[s.answer for s in r] for r in rows]
        evidence = [[evidence_of(s, options=list(choices) if choices else None) for s in r]
                    for r in rows]
        correct = [None if q.correct is None else str(task.parse(str(q.correct)) or q.correct)
                   for q in qs]
        out.append(Case(f"{folder.name} ({len(qs)} questions x {k}, t = {t:g})", answers,
                        evidence, correct, choices))
    return out


# -- per-sample score vectors of each rule ----------------------------------------------------
def vectors(case: Case) -> tuple[dict[str, np.ndarray | None], np.ndarray, dict[str, str]]:
    """{rule: V[q, i, j]} (the score sample i adds to option j of question q; None: the rule
    is refused), the index of the right option per question (-1: not among them), notes.
    Each rule's scores are the evals' (`RuleBase.weigh_many`, `evals.weighed.score_table`:
    one implementation): the run weighed once, its signal check and fitted temperature
    decided over every question."""
    from ensemble.aggregators import get_aggregator
    from ensemble.errors import InputError
    from ensemble.evals.weighed import score_table

    Q, K = len(case.answers), case.k
    opts: list[list[str]] = []
    for q in range(Q):
        if case.choices:
            opts.append(list(case.choices))
        else:
            seen: list[str] = []
            for a in case.answers[q][:K]:
                if a is not None and a not in seen:
                    seen.append(a)
            opts.append(seen)
    J = max(1, max(len(o) for o in opts))
    answers = np.empty((Q, K), dtype=object)
    for q in range(Q):
        answers[q] = case.answers[q][:K]
    hard = np.zeros((Q, K, J))
    right = np.full(Q, -1)
    for q in range(Q):
        index = {o: j for j, o in enumerate(opts[q])}
        if case.correct[q] in index:
            right[q] = index[case.correct[q]]
        for i in range(K):
            if answers[q, i] is not None:
                hard[q, i, index[answers[q, i]]] = 1.0
    evidence = [list(e[:K]) for e in case.evidence]
    is_open = not case.choices
    out: dict[str, np.ndarray | None] = {"plurality": hard}
    notes: dict[str, str] = {}
    for rule, kw in (("soft", {}), ("confidence", {}), ("soft*", {"check": False}),
                     ("deepconf", {})):
        built = get_aggregator(rule.rstrip("*"), open=is_open, **kw)
        try:
            run = built.weigh_many([list(a) for a in answers], evidence)  # type: ignore[union-attr]
        except InputError as exc:
            out[rule], notes[rule] = None, f"refused: {exc}"
            continue
        sc = score_table(run, answers, opts)
        if sc.rank is not None:  # the curves below vote prefixes without DeepConf's filter
            out[rule], notes[rule] = None, "not replayed here: score it with ensemble eval"
            continue
        v = np.zeros((Q, K, J))
        v[:, :, :sc.values.shape[2]] = sc.values
        out[rule] = v
        if run.notes:
            notes[rule] = "; ".join(run.notes)
    return out, right, notes


def curves(v: np.ndarray, right: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """acc[q, n-1]: expected credit of the vote of the first n samples along each order
    (ties share the credit; no valid vote: 0), averaged over the orders."""
    Q, K, J = v.shape
    acc = np.zeros((Q, K))
    for lo in range(0, Q, 200):
        hi = min(Q, lo + 200)
        vv = v[lo:hi][np.arange(hi - lo)[:, None, None], orders[lo:hi]]  # [q, r, i, j]
        cum = np.cumsum(vv, axis=2)
        top = cum.max(axis=3, keepdims=True)
        win = (cum >= top - 1e-12 * np.maximum(1.0, top)) & (top > 0)
        nwin = win.sum(axis=3)
        r = right[lo:hi]
        picked = np.take_along_axis(win, np.maximum(r, 0)[:, None, None, None], axis=3)
        hit = np.where(r[:, None, None] >= 0, picked[..., 0], False)
        credit = np.where(nwin > 0, hit / np.maximum(nwin, 1), 0.0)
        acc[lo:hi] = credit.mean(axis=1)
    return acc


def samples_at(curve: np.ndarray, target: float) -> float:
    """The n (interpolated) at which a mean accuracy curve first reaches `target` (inf: never)."""
    for n in range(len(curve)):
        if curve[n] >= target:
            if n == 0:
                return 1.0
            lo = curve[n - 1]
            return n + (target - lo) / (curve[n] - lo) if curve[n] > lo else n + 1.0
    return math.inf


def report(case: Case, *, orders_n: int, boot: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    Q, K = len(case.answers), case.k
    orders = np.argsort(rng.random((Q, orders_n, K)), axis=2)
    vecs, right, notes = vectors(case)
    acc = {r: curves(v, right, orders) for r, v in vecs.items() if v is not None}
    W = rng.multinomial(Q, np.full(Q, 1.0 / Q), size=boot) / Q  # bootstrap weights [B, Q]
    means = {r: W @ a for r, a in acc.items()}  # [B, K]
    point = {r: a.mean(axis=0) for r, a in acc.items()}
    print(f"\n== {case.name}" + (f" - {case.note}" if case.note else ""))
    ns = [n for n in (1, 3, 5, 10, K) if n <= K]
    print(f"{'rule':<11}" + "".join(f"{'n=' + str(n):>9}" for n in ns)
          + f"  samples/10 to plur. n=10, /{K} to n={K} (95% CI)"
          + "  paired diff n=3 / n=5 (95% CI)")
    target = point["plurality"][K - 1]
    out: dict[str, Any] = {"case": case.name, "rules": {}}
    for rule in RULES:
        if rule not in acc:
            print(f"{rule:<11}  {notes.get(rule, 'refused')}")
            out["rules"][rule] = {"refused": notes.get(rule)}
            continue
        a = point[rule]
        n_star = samples_at(a, target)
        ratio_at = {}
        for at in (10, K):
            ratios = np.array([samples_at(m, t) / at for m, t in
                               zip(means[rule], means["plurality"][:, at - 1], strict=True)])
            # a resample whose curve never reaches the target (both converge to one limit:
            # the flat top) counts as more than every finite ratio: its upper bound is inf
            q = np.quantile(np.where(np.isfinite(ratios), ratios, 1e9), [0.025, 0.975])
            ratio_at[at] = (samples_at(a, point["plurality"][at - 1]) / at,
                            *(float(x) if x < 1e8 else math.inf for x in q))
        _, lo, hi = ratio_at[K]
        diffs = {n: (means[rule][:, n - 1] - means["plurality"][:, n - 1]) for n in (3, 5)
                 if n <= K}
        dtext = "  ".join(f"{a[n - 1] - point['plurality'][n - 1]:+.4f} "
                          f"[{np.percentile(d, 2.5):+.4f}, {np.percentile(d, 97.5):+.4f}]"
                          for n, d in diffs.items())
        ratio = n_star / K
        r10 = ratio_at[10]
        print(f"{rule:<11}" + "".join(f"{a[n - 1]:>9.4f}" for n in ns)
              + f"{r10[0]:>8.3f} [{r10[1]:.2f}, {r10[2]:.2f}]"
              + f"{ratio:>8.3f} [{lo:.2f}, {hi:.2f}]  {dtext}"
              + (f"  ({notes[rule]})" if rule in notes else ""))
        out["rules"][rule] = {"acc": [float(x) for x in a], "ratio": ratio,
                              "ratio_ci": [float(lo), float(hi)], "ratio10": list(r10),
                              "diff": {n: [float(a[n - 1] - point["plurality"][n - 1]),
                                           float(np.percentile(d, 2.5)),
                                           float(np.percentile(d, 97.5))]
                                       for n, d in diffs.items()},
                              "note": notes.get(rule)}
    return out


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, len(results))
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, res in zip(axes.flat, results, strict=False):
        for rule, style in (("plurality", "k-"), ("soft", "C0-"), ("confidence", "C1--")):
            r = res["rules"].get(rule, {})
            if "acc" in r:
                ax.plot(range(1, len(r["acc"]) + 1), r["acc"], style, label=rule)
        ax.set_title(res["case"][:48], fontsize=8)
        ax.set_xlabel("samples n", fontsize=8)
        ax.set_ylabel("accuracy", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(results):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=1000)
    ap.add_argument("--orders", type=int, default=100)
    ap.add_argument("--boot", type=int, default=1000)
    ap.add_argument("--only", choices=("sim", "rec"))
    ap.add_argument("--plot", type=Path)
    ap.add_argument("--json", type=Path, help="write the figures here too")
    a = ap.parse_args(argv)
    t0 = time.time()
    cases: list[Case] = []
    if a.only != "rec":
        cases += [simulated_case(m, questions=a.questions) for m in ("informative", "noise")]
    if a.only != "sim":
        cases += recording_cases()
    results = [report(c, orders_n=a.orders, boot=a.boot) for c in cases]
    print(f"\n({time.time() - t0:.0f} s)")
    if a.plot:
        plot(results, a.plot)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
