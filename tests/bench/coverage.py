"""Coverage of every interval the project prints, by simulation against planted experts.

For each interval: draw many runs from an expert whose truth is known exactly, compute the
interval with the project's own code (the same functions the CLI calls), and count how often
it covers the truth. Printed per interval: coverage with its own 95% Wilson interval, and the
mean bias of the estimate (± its standard error); for the tests (goodness of fit, λ₁/t) the
rejection rate at the 5% level.

    python tests/bench/coverage.py                      # all checks, 300 replications each
    python tests/bench/coverage.py --reps 50 --only box-eval mc-eval
    python tests/bench/coverage.py --only box-eval-k1     # samples = n = 1 (issue 32)
    python tests/bench/coverage.py --markdown docs/coverage.md
    python tests/bench/coverage.py --experiment         # 20 runs and 20 compare pairs, real HTTP

The seam: every check draws its answers through a `Source`, a callable
`source(questions, t, samples, rng) -> answers` returning a (Q, samples) object array of
answers (None = invalid). `PlantedExpert` (numpy, seeded) is the default; an in-process fake
provider (`ensemble.testing`) plugs in with the same signature. Truths come from the expert's
own probabilities (`truth_box`, `truth_mc`), never from the samples.

Planted experts (λ in ψ_λ units):
- box-ball: P(L) = ψ_{λ₁/t}(p) with an optional bias on the logit; the probit alternative is
  P(L) = Φ(c · (2(λ₁/t)(2p − 1) + bias)) with c = √(2π)/4, the logistic's slope at p = 1/2
  (so both links agree near p = 1/2 and differ in the tails); the simulated server's
  `link="probit"` must draw exactly this.
- multiple choice: the simulated server's documented model: a reading accuracy ρ_q ~ Beta(a, b)
  per question, the option read picked with probability 1/(1 + 4e^(−4λ)), λ = λ₁/t.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from scipy.special import expit
from scipy.stats import norm

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _plans, when loaded by path

from _plans import jsonl_plan  # noqa: E402

from ensemble.calibration import fit_joint, fit_lambda  # noqa: E402
from ensemble.evals.analysis import box_utility, plurality_exact  # noqa: E402
from ensemble.evals.compare import RunData, compare_runs  # noqa: E402
from ensemble.evals.grid import analyse  # noqa: E402
from ensemble.evals.plan import resolve  # noqa: E402
from ensemble.evals.records import QuestionRecord  # noqa: E402
from ensemble.evals.runner import RunOptions  # noqa: E402
from ensemble.evals.schemas import dump  # noqa: E402
from ensemble.evals.scoring import box_layout  # noqa: E402
from ensemble.evals.spec import RunSpec, one_model  # noqa: E402
from ensemble.tasks import Question, get_task  # noqa: E402

PROBIT_C = math.sqrt(2 * math.pi) / 4
LETTERS = ("A", "B", "C", "D", "E")


# -- the seam: where answers come from ---------------------------------------------------------
class Source(Protocol):
    def __call__(self, questions: Sequence[Question], t: float, samples: int,
                 rng: np.random.Generator) -> np.ndarray: ...


@dataclass(frozen=True)
class PlantedExpert:
    """A simulated expert with planted λ₁ (numpy, seeded by the caller's rng).

    Box-ball questions (with a posterior): "L" with probability `p_left(p, t)`. Multiple
    choice (no posterior): the option probabilities of `mc_probs`. `invalid_rate` of the
    answers are None (unparseable), independently of the rest.
    """

    lam1: float
    bias: float = 0.0
    link: str = "logit"
    invalid_rate: float = 0.0
    mc_a: float = 8.0
    mc_b: float = 4.0
    population_seed: int = 0
    _rho: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    def p_left(self, p: Any, t: float) -> Any:
        z = 2 * (self.lam1 / t) * (2 * np.asarray(p, dtype=float) - 1) + self.bias
        return expit(z) if self.link == "logit" else norm.cdf(PROBIT_C * z)

    def rho(self, q: Question) -> float:
        """The question's reading accuracy: fixed per question (its id seeds it)."""
        if q.id not in self._rho:
            seed = [self.population_seed, *map(ord, q.id)]
            self._rho[q.id] = float(np.random.default_rng(seed).beta(self.mc_a, self.mc_b))
        return self._rho[q.id]

    def mc_probs(self, q: Question, t: float) -> np.ndarray:
        """P(each option), P(invalid) last; the right option first in `q.choices` order."""
        k = len(q.choices)
        keep = 1.0 / (1.0 + (k - 1) * math.exp(-4 * self.lam1 / t))
        rho = self.rho(q)
        right = q.choices.index(str(q.correct))
        wrong = (right + 1) % k  # the distractor a misreading leads to
        p = np.full(k, (1 - keep) / (k - 1))
        p[right] = rho * keep + (1 - rho) * (1 - keep) / (k - 1)
        p[wrong] = (1 - rho) * keep + rho * (1 - keep) / (k - 1)
        return np.append(p * (1 - self.invalid_rate), self.invalid_rate)

    def __call__(self, questions: Sequence[Question], t: float, samples: int,
                 rng: np.random.Generator) -> np.ndarray:
        out = np.empty((len(questions), samples), dtype=object)
        for i, q in enumerate(questions):
            if q.posterior is not None:
                pl = float(self.p_left(q.posterior, t))
                row = np.where(rng.random(samples) < pl, "L", "R").astype(object)
            else:
                p = self.mc_probs(q, t)
                idx = rng.choice(len(p), size=samples, p=p)
                row = np.array([q.choices[j] if j < len(q.choices) else None for j in idx],
                               dtype=object)
            if self.invalid_rate and q.posterior is not None:
                row[rng.random(samples) < self.invalid_rate] = None
            out[i] = row
        return out


# -- exact truths --------------------------------------------------------------------------------
BOX = get_task("boxball").questions()


def truth_box(expert: PlantedExpert, questions: Sequence[Question], t: float, n: int,
              rule: str = "majority") -> float:
    """The exact mean utility (±1 units) over the scenarios of `questions`."""
    scen, joint, loc = box_layout(list(questions))
    r = np.full((len(scen), 2), 0.5)
    rr = np.full((len(scen), 2), 0.5)
    for q, (s, c) in zip(questions, loc, strict=True):
        pl = float(expert.p_left(q.posterior, t))
        r[s, c] = pl * (1 - expert.invalid_rate)
        rr[s, c] = (1 - pl) * (1 - expert.invalid_rate)
    return float(box_utility(r, joint, n, rule=rule, r_right=rr).mean())


def truth_mc(expert: PlantedExpert, questions: Sequence[Question], t: float, n: int,
             rule: str = "plurality") -> float:
    """The exact mean accuracy over `questions` (random-follow: P(right answer))."""
    probs = np.array([expert.mc_probs(q, t) for q in questions])
    right = np.array([q.choices.index(str(q.correct)) for q in questions])
    if rule == "random-follow":
        return float(probs[np.arange(len(questions)), right].mean())
    return float(plurality_exact(probs, right, n).mean())


def mc_population(size: int = 1000, seed: int = 0) -> list[Question]:
    """A multiple-choice task of `size` questions (five options, the right one at random)."""
    g = np.random.default_rng(seed)
    out = []
    for i in range(size):
        right = LETTERS[int(g.integers(5))]
        out.append(Question(id=f"mc{i:04d}", prompt=f"question {i}", choices=LETTERS,
                            correct=right))
    return out


# -- bookkeeping --------------------------------------------------------------------------------
@dataclass
class Tally:
    """Coverage counts and estimation errors of one interval."""

    name: str
    setting: str
    hits: int = 0
    reps: int = 0
    errors: list[float] = field(default_factory=list)

    def add(self, lo: float, hi: float, truth: float, estimate: float | None = None) -> None:
        self.reps += 1
        self.hits += lo - 1e-12 <= truth <= hi + 1e-12
        if estimate is not None:
            self.errors.append(estimate - truth)

    @property
    def coverage(self) -> float:
        return self.hits / max(self.reps, 1)

    def wilson(self) -> tuple[float, float]:
        from statsmodels.stats.proportion import proportion_confint

        lo, hi = proportion_confint(self.hits, self.reps, alpha=0.05, method="wilson")
        return float(lo), float(hi)

    def bias(self) -> tuple[float, float] | None:
        if not self.errors:
            return None
        e = np.asarray(self.errors)
        return float(e.mean()), float(e.std(ddof=1) / math.sqrt(e.size)) if e.size > 1 else 0.0


@dataclass
class Rate:
    """How often a test rejects at the 5% level."""

    name: str
    setting: str
    rejects: int = 0
    runs: int = 0

    def add(self, p: float | None) -> None:
        self.runs += 1
        self.rejects += p is not None and p < 0.05

    def wilson(self) -> tuple[float, float]:
        from statsmodels.stats.proportion import proportion_confint

        lo, hi = proportion_confint(self.rejects, self.runs, alpha=0.05, method="wilson")
        return float(lo), float(hi)


# -- the checks ---------------------------------------------------------------------------------
def _cell(rows: list[dict[str, Any]], **key: Any) -> dict[str, Any]:
    return next(r for r in rows if all(r[k] == v for k, v in key.items()))


def check_box_eval(reps: int, source: Source | None = None, *, limit: int | None = 40,
                   samples: int = 10, ns: tuple[int, ...] = (1, 3, 5), lam1: float = 3.0,
                   t: float = 1.0, invalid_rate: float = 0.0, seed0: int = 0) -> list[Tally]:
    """`ensemble eval boxball`: utility per n and rule; both intervals and the bias."""
    expert = PlantedExpert(lam1=lam1, invalid_rate=invalid_rate)
    src = source or expert
    what = (f"boxball λ₁={lam1:g}, t={t:g}, K={samples}, "
            + (f"{limit} of 216 scenarios" if limit else "all 216 scenarios")
            + (f", {invalid_rate:.0%} invalid" if invalid_rate else ""))
    keys = [("majority", n) for n in ns] + [("random-follow", 1)]
    task_truth = {k: truth_box(expert, BOX, t, k[1], k[0]) for k in keys}
    tq = {k: Tally(f"eval utility, {k[0]} n={k[1]}: for these scenarios", what) for k in keys}
    tt = {k: Tally(f"eval utility, {k[0]} n={k[1]}: for the task", what) for k in keys}
    for rep in range(reps):
        cfg = one_model("boxball", "planted", (t,), ns,
                         samples=samples, limit=limit, seed=seed0 + rep, bootstrap=500)
        qs = resolve(cfg).questions
        g = np.random.default_rng(10_000 + seed0 + rep)
        answers = src(qs, t, samples, g)[None]
        s = dump(analyse(resolve(cfg), qs, answers))
        for k in keys:
            row = _cell(s["results"], t=t, n=k[1], aggregator=k[0])
            own = truth_box(expert, qs, t, k[1], k[0])
            tq[k].add(*row["utility_ci_questions"], own, row["utility"])
            tt[k].add(*row["utility_ci"], task_truth[k], row["utility"])
    return [*tq.values(), *tt.values()]


def check_box_contrasts(reps: int, source: Source | None = None, *, limit: int = 40,
                        samples: int = 10, lam1: float = 3.0, seed0: int = 0) -> list[Tally]:
    """The eval's paired differences on box-ball: t = 1 − t = 0.5 at each n, n − 1 at t = 1."""
    expert = PlantedExpert(lam1=lam1)
    src = source or expert
    temps, ns = (0.5, 1.0), (1, 3, 5)
    what = f"boxball λ₁={lam1:g}, K={samples}, {limit} of 216 scenarios"
    specs = ([("temperature", 1.0, n) for n in ns] + [("ensemble", 1.0, n) for n in (3, 5)])

    def diff(qs: Sequence[Question], kind: str, t: float, n: int) -> float:
        if kind == "temperature":
            return truth_box(expert, qs, t, n) - truth_box(expert, qs, 0.5, n)
        return truth_box(expert, qs, t, n) - truth_box(expert, qs, t, 1)

    task_truth = {sp: diff(BOX, *sp) for sp in specs}
    name = {sp: (f"contrast t=1 − t=0.5 at n={sp[2]}" if sp[0] == "temperature"
                 else f"contrast n={sp[2]} − n=1 at t=1") for sp in specs}
    tq = {sp: Tally(name[sp] + ": for these scenarios", what) for sp in specs}
    tt = {sp: Tally(name[sp] + ": for the task", what) for sp in specs}
    for rep in range(reps):
        cfg = one_model("boxball", "planted", temps, ns,
                         samples=samples, limit=limit, seed=seed0 + rep, bootstrap=500)
        qs = resolve(cfg).questions
        g = np.random.default_rng(20_000 + seed0 + rep)
        answers = np.stack([src(qs, t, samples, g) for t in temps])
        s = dump(analyse(resolve(cfg), qs, answers))
        for sp in specs:
            row = _cell(s["contrasts"], kind=sp[0], t=sp[1], n=sp[2], aggregator="majority")
            tq[sp].add(*row["utility_ci_questions"], diff(qs, *sp), row["utility_difference"])
            tt[sp].add(*row["utility_ci"], task_truth[sp], row["utility_difference"])
    return [*tq.values(), *tt.values()]


def check_mc_eval(reps: int, source: Source | None = None, *, size: int = 1000,
                  limit: int = 200, samples: int = 10, lam1: float = 0.7,
                  invalid_rate: float = 0.05, seed0: int = 0) -> list[Tally]:
    """`ensemble eval mathqa|jsonl`: plurality accuracy per n, random-follow, contrasts."""
    expert = PlantedExpert(lam1=lam1, invalid_rate=invalid_rate)
    src = source or expert
    pop = mc_population(size)
    temps, ns = (0.5, 1.0), (1, 3, 5)
    what = (f"multiple choice (5 options) λ₁={lam1:g}, K={samples}, {limit} of {size} "
            f"questions, {invalid_rate:.0%} invalid")
    keys = [("plurality", n) for n in ns] + [("random-follow", 1)]
    truth = {(t, k): truth_mc(expert, pop, t, k[1], k[0]) for t in temps for k in keys}
    tq = {k: Tally(f"eval accuracy, {k[0]} n={k[1]}, t=1: for these questions", what)
          for k in keys}
    tt = {k: Tally(f"eval accuracy, {k[0]} n={k[1]}, t=1: for the task", what) for k in keys}
    cq = {n: Tally(f"contrast t=1 − t=0.5 at n={n} (plurality): for these questions", what)
          for n in ns}
    ct = {n: Tally(f"contrast t=1 − t=0.5 at n={n} (plurality): for the task", what) for n in ns}
    eq = Tally("contrast n=5 − n=1 at t=1 (plurality): for these questions", what)
    et = Tally("contrast n=5 − n=1 at t=1 (plurality): for the task", what)
    # the plan of a run of the whole population (its size: the task's), seeded per run below
    whole = jsonl_plan(pop, temps, ns, samples=samples, bootstrap=500)
    for rep in range(reps):
        g = np.random.default_rng(30_000 + seed0 + rep)
        idx = np.sort(g.choice(size, size=limit, replace=False))
        qs = [pop[i] for i in idx]
        plan = replace(whole, seed=seed0 + rep, limit=limit)
        answers = np.stack([src(qs, t, samples, g) for t in temps])
        s = dump(analyse(plan, qs, answers))
        own = {(t, k): truth_mc(expert, qs, t, k[1], k[0]) for t in temps for k in keys}
        for k in keys:
            row = _cell(s["results"], t=1.0, n=k[1], aggregator=k[0])
            tq[k].add(*row["ci_questions"], own[1.0, k], row["accuracy"])
            tt[k].add(*row["ci"], truth[1.0, k], row["accuracy"])
        for n in ns:
            row = _cell(s["contrasts"], kind="temperature", t=1.0, n=n, aggregator="plurality")
            k = ("plurality", n)
            cq[n].add(*row["ci_questions"], own[1.0, k] - own[0.5, k], row["difference"])
            ct[n].add(*row["ci"], truth[1.0, k] - truth[0.5, k], row["difference"])
        row = _cell(s["contrasts"], kind="ensemble", t=1.0, n=5, aggregator="plurality")
        p5, p1 = ("plurality", 5), ("plurality", 1)
        eq.add(*row["ci_questions"], own[1.0, p5] - own[1.0, p1], row["difference"])
        et.add(*row["ci"], truth[1.0, p5] - truth[1.0, p1], row["difference"])
    return [*tq.values(), *tt.values(), *cq.values(), *ct.values(), eq, et]


def _records(qs: Sequence[Question]) -> tuple[QuestionRecord, ...]:
    return tuple(QuestionRecord(id=q.id, prompt=q.prompt, choices=list(q.choices),
                                correct=q.correct, posterior=q.posterior,
                                meta={k: list(v) if isinstance(v, tuple) else v
                                      for k, v in q.meta.items()}) for q in qs)


def check_compare(reps: int, source_a: Source | None = None, source_b: Source | None = None,
                  *, lams: tuple[float, float] = (2.0, 4.0), limit: int = 40,
                  samples: int = 10, ns: tuple[int, ...] = (1, 3, 5), t: float = 1.0,
                  seed0: int = 0) -> list[Tally]:
    """`ensemble compare`: B − A between two planted experts on shared box-ball scenarios."""
    ea, eb = PlantedExpert(lam1=lams[0]), PlantedExpert(lam1=lams[1])
    sa, sb = source_a or ea, source_b or eb
    what = (f"boxball λ₁ {lams[0]:g} vs {lams[1]:g}, t={t:g}, K={samples}, {limit} of 216 "
            "scenarios")
    task_truth = {n: truth_box(eb, BOX, t, n) - truth_box(ea, BOX, t, n) for n in ns}
    tq = {n: Tally(f"compare B − A, majority n={n}: for these scenarios", what) for n in ns}
    tt = {n: Tally(f"compare B − A, majority n={n}: for the task", what) for n in ns}
    for rep in range(reps):
        cfg = one_model("boxball", "planted", (t,), ns,
                         samples=samples, limit=limit, seed=seed0 + rep)
        qs = resolve(cfg).questions
        g = np.random.default_rng(40_000 + seed0 + rep)
        runs = []
        for name, src in (("a", sa), ("b", sb)):
            ans = src(qs, t, samples, g)
            runs.append(RunData(Path(name), "boxball", name, (t,), ns, samples, 216,
                                _records(qs), {(t, q.id): list(ans[i])
                                               for i, q in enumerate(qs)}))
        doc = compare_runs(runs[0], runs[1], reps=500, seed=rep)
        for n in ns:
            row = _cell(doc["results"], t=t, n=n, aggregator="majority")
            own = truth_box(eb, qs, t, n) - truth_box(ea, qs, t, n)
            tq[n].add(*row["utility_ci_questions"], own, row["utility_diff"])
            tt[n].add(*row["utility_ci"], task_truth[n], row["utility_diff"])
    return [*tq.values(), *tt.values()]


def _box_counts(expert: PlantedExpert, t: float, samples: int, g: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = np.array([q.posterior for q in BOX])
    ones = g.binomial(samples, expert.p_left(p, t))
    return p, ones, np.full(p.size, samples)


def check_calibration(reps: int, *, lam1: float = 3.0, bias: float = 0.0, samples: int = 10,
                      temps: tuple[float, ...] = (0.5, 1.0), seed0: int = 0) -> list[Tally]:
    """`ensemble calibrate`: λ per temperature (profile interval) and the joint λ₁ (Wald)."""
    expert = PlantedExpert(lam1=lam1, bias=bias)
    what = f"boxball 400 questions, λ₁={lam1:g}, bias {bias:g}, K={samples}"
    per_t = {t: Tally(f"calibrate λ at t={t:g} (planted {lam1 / t:g})", what) for t in temps}
    joint = Tally(f"calibrate joint λ₁ (planted {lam1:g})", what)
    for rep in range(reps):
        g = np.random.default_rng(50_000 + seed0 + rep)
        groups = []
        for t in temps:
            p, ones, tot = _box_counts(expert, t, samples, g)
            f = fit_lambda(p, ones, tot, gof_reps=0)
            per_t[t].add(*f.ci, lam1 / t, f.lam)
            groups.append((t, p, ones, tot))
        j = fit_joint(groups, gof_reps=0)
        if j is not None:
            joint.add(*j.ci, lam1, j.lam1)
    return [*per_t.values(), joint]


def check_tests(runs: int, *, lam1: float = 3.0, samples: int = 10,
                temps: tuple[float, ...] = (0.5, 1.0), gof_reps: int = 199,
                seed0: int = 0) -> list[Rate]:
    """Rejection rates at the 5% level: goodness of fit (true expert: size; probit expert:
    power) per temperature and pooled, the deviance test, and the λ₁/t likelihood ratio."""
    out = []
    for link in ("logit", "probit"):
        expert = PlantedExpert(lam1=lam1, link=link)
        what = f"{link} expert, λ₁={lam1:g}, K={samples}, t ∈ {{{', '.join(map(str, temps))}}}"
        kind = "size" if link == "logit" else "power"
        rates = {f"GOF link test at t={t:g} ({kind})": Rate(
            f"GOF link test at t={t:g} ({kind})", what) for t in temps}
        pooled = Rate(f"GOF link test pooled over t ({kind})", what)
        dev = Rate(f"GOF deviance test at t={temps[-1]:g} ({kind})", what)
        lrt = Rate(f"λ₁/t likelihood-ratio test ({kind})", what)
        for rep in range(runs):
            g = np.random.default_rng(60_000 + seed0 + rep)
            groups = []
            for t in temps:
                p, ones, tot = _box_counts(expert, t, samples, g)
                f = fit_lambda(p, ones, tot, gof_reps=gof_reps, rng=rep)
                rates[f"GOF link test at t={t:g} ({kind})"].add(f.gof_pvalue)
                groups.append((t, p, ones, tot))
            dev.add(f.deviance_pvalue)
            j = fit_joint(groups, gof_reps=gof_reps, rng=rep)
            pooled.add(None if j is None else j.gof_pvalue)
            lrt.add(None if j is None else j.lrt_pvalue)
        out += [*rates.values(), pooled, dev]
        if link == "logit":
            out.append(lrt)
    return out


def truth_box_group(experts: Sequence[PlantedExpert], questions: Sequence[Question], t: float,
                    ns: Sequence[int], rule: Any) -> float:
    """The exact mean utility (±1 units) over the scenarios of `questions` of a mixed ensemble:
    member g is `experts[g]` with `ns[g]` votes, `rule` a group rule of `evals.analysis`."""
    from ensemble.evals.groups import box_group_exact

    scen, joint, loc = box_layout(list(questions))
    probs = np.zeros((len(experts), len(scen), 2, 3))
    probs[..., 0] = probs[..., 1] = 0.5
    for g, e in enumerate(experts):
        for q, (s, c) in zip(questions, loc, strict=True):
            pl = float(e.p_left(q.posterior, t))
            probs[g, s, c] = (pl * (1 - e.invalid_rate), (1 - pl) * (1 - e.invalid_rate),
                              e.invalid_rate)
    return float(box_group_exact(probs, joint, list(ns), rule).mean())


def check_mixed_box(reps: int, *, lams: tuple[float, ...] = (2.0, 8.0),
                    ns: tuple[int, ...] = (1, 1), samples: int = 10, limit: int = 40,
                    t: float = 1.0, seed0: int = 0) -> list[Tally]:
    """`ensemble eval boxball --ensemble`: each rule's utility and each rule − majority, for
    planted members λ₁ = lams with ns votes each; both intervals and the bias."""
    from ensemble.evals.groups import group_rule
    from ensemble.evals.mixed import analyse_mixed
    from ensemble.members import Member

    experts = [PlantedExpert(lam1=lam) for lam in lams]
    members = [Member(f"planted-{g}", n=n, temperature=t, lam=lam / t)
               for g, (lam, n) in enumerate(zip(lams, ns, strict=True))]
    labels = [f"m{g}" for g in range(len(members))]
    rules = ["majority", "lam-weighted", "robust"]
    f = {r: group_rule(r, [m.lam for m in members]) for r in rules}
    what = (" + ".join(f"{n}@λ₁={lam:g}" for lam, n in zip(lams, ns, strict=True))
            + f", t={t:g}, K={samples}, {limit} of 216 scenarios")

    def truth(qs: Sequence[Question], r: str) -> float:
        return truth_box_group(experts, qs, t, ns, f[r])

    task = {r: truth(BOX, r) for r in rules}
    tq = {r: Tally(f"mixed ensemble utility, {r}: for these scenarios", what) for r in rules}
    tt = {r: Tally(f"mixed ensemble utility, {r}: for the task", what) for r in rules}
    dq = {r: Tally(f"mixed {r} − majority: for these scenarios", what) for r in rules[1:]}
    dt = {r: Tally(f"mixed {r} − majority: for the task", what) for r in rules[1:]}
    for rep in range(reps):
        plan = resolve(RunSpec.model_validate({
            "task": "boxball", "samples": samples, "limit": limit, "seed": seed0 + rep,
            "bootstrap": 500, "aggregators": rules,
            "members": [{"model": m.model, "n": m.n, "temperature": t, "lam": m.lam,
                         "label": label} for m, label in zip(members, labels, strict=True)]}))
        qs = plan.questions
        g = np.random.default_rng(30_000 + seed0 + rep)
        answers = [e(qs, t, samples, g) for e in experts]
        s = dump(analyse_mixed(plan, qs, answers))
        own = {r: truth(qs, r) for r in rules}
        for r in rules:
            row = _cell(s["results"], member="ensemble", aggregator=r)
            tq[r].add(*row["utility_ci_questions"], own[r], row["utility"])
            tt[r].add(*row["utility_ci"], task[r], row["utility"])
        for r in rules[1:]:
            row = _cell(s["contrasts"], kind="aggregator", aggregator=r)
            tq_d = own[r] - own["majority"]
            dq[r].add(*row["utility_ci_questions"], tq_d, row["utility_difference"])
            dt[r].add(*row["utility_ci"], task[r] - task["majority"], row["utility_difference"])
    return [*tq.values(), *tt.values(), *dq.values(), *dt.values()]


CHECKS: dict[str, Callable[[int], list[Any]]] = {
    "calibrate": lambda r: check_calibration(r),
    "box-eval": lambda r: check_box_eval(r),
    "box-eval-full": lambda r: check_box_eval(r, limit=None, invalid_rate=0.1),
    # samples = n = 1 (issue 32): the noise cannot be separated from the scenarios'
    "box-eval-k1": lambda r: check_box_eval(r, samples=1, ns=(1,)),
    "box-contrasts": lambda r: check_box_contrasts(r),
    "mc-eval": lambda r: check_mc_eval(r),
    "compare": lambda r: check_compare(r),
    "mixed-box": lambda r: check_mixed_box(r),
    "mixed-box-32": lambda r: check_mixed_box(r, ns=(3, 2), seed0=1000),
    "tests": lambda r: check_tests(min(r, 100)),
}


# -- the experiment through the real server ---------------------------------------------
def experiment(runs: int = 20, *, lam1: float = 3.0, samples: int = 10, limit: int = 40,
               ns: tuple[int, ...] = (1, 3, 5), out: Path | None = None) -> list[Tally]:
    """20 runs of `ensemble eval boxball --t 1 --n 1 3 5 --samples 10 --limit 40` against the
    simulated server (real HTTP), a different server seed and --seed per run; exact values
    from the planted ψ."""
    import asyncio
    import tempfile

    from ensemble.evals.runner import run_eval
    from ensemble.testing import SimulatedServer

    expert = PlantedExpert(lam1=lam1)
    task_truth = {n: truth_box(expert, BOX, 1.0, n) for n in ns}
    what = f"simulated server, λ₁={lam1:g}, t=1, K={samples}, {limit} of 216 scenarios"
    tq = {n: Tally(f"eval utility, majority n={n}: for these scenarios", what) for n in ns}
    tt = {n: Tally(f"eval utility, majority n={n}: for the task", what) for n in ns}
    base = Path(out or tempfile.mkdtemp(prefix="coverage-"))
    for rep in range(runs):
        with SimulatedServer(lam1=lam1, seed=100 + rep) as srv:
            cfg = one_model("boxball", "openai/sim-expert", (1.0,), ns,
                            api_base=srv.base_url, samples=samples, limit=limit, seed=rep)
            s = dump(asyncio.run(run_eval(cfg, RunOptions(out=str(base / f"run{rep}")))))
        qs = resolve(cfg).questions
        for n in ns:
            row = _cell(s["results"], t=1.0, n=n, aggregator="majority")
            tq[n].add(*row["utility_ci_questions"], truth_box(expert, qs, 1.0, n),
                      row["utility"])
            tt[n].add(*row["utility_ci"], task_truth[n], row["utility"])
    return [*tq.values(), *tt.values()]


def experiment_compare(pairs: int = 20, *, lams: tuple[float, float] = (2.0, 4.0),
                       samples: int = 10, limit: int = 40, ns: tuple[int, ...] = (1, 3, 5),
                       out: Path | None = None) -> list[Tally]:
    """20 pairs of eval runs against simulated servers with planted λ₁ = 2 and 4 (real HTTP,
    run folders on disk), then `ensemble compare`'s logic on the folders (`read_run`)."""
    import asyncio
    import tempfile

    from ensemble.evals.rundir import read_run as load_run
    from ensemble.evals.runner import run_eval
    from ensemble.testing import SimulatedServer

    ea, eb = PlantedExpert(lam1=lams[0]), PlantedExpert(lam1=lams[1])
    task_truth = {n: truth_box(eb, BOX, 1.0, n) - truth_box(ea, BOX, 1.0, n) for n in ns}
    what = (f"simulated servers λ₁ {lams[0]:g} vs {lams[1]:g}, t=1, K={samples}, {limit} of "
            "216 scenarios, run folders")
    tq = {n: Tally(f"compare B − A, majority n={n}: for these scenarios", what) for n in ns}
    tt = {n: Tally(f"compare B − A, majority n={n}: for the task", what) for n in ns}
    base = Path(out or tempfile.mkdtemp(prefix="coverage-compare-"))
    for rep in range(pairs):
        dirs = []
        for name, lam in (("a", lams[0]), ("b", lams[1])):
            with SimulatedServer(lam1=lam, seed=200 + 2 * rep + (name == "b")) as srv:
                cfg = one_model("boxball", "openai/sim-expert", (1.0,), ns,
                                api_base=srv.base_url, samples=samples, limit=limit, seed=rep)
                asyncio.run(run_eval(cfg, RunOptions(out=str(base / f"{name}{rep}"))))
            dirs.append(base / f"{name}{rep}")
        doc = compare_runs(load_run(dirs[0]), load_run(dirs[1]), seed=rep)
        qs = resolve(cfg).questions
        for n in ns:
            row = _cell(doc["results"], t=1.0, n=n, aggregator="majority")
            own = truth_box(eb, qs, 1.0, n) - truth_box(ea, qs, 1.0, n)
            tq[n].add(*row["utility_ci_questions"], own, row["utility_diff"])
            tt[n].add(*row["utility_ci"], task_truth[n], row["utility_diff"])
    return [*tq.values(), *tt.values()]


# -- output -------------------------------------------------------------------------------------
def _fmt(item: Any) -> tuple[str, ...]:
    if isinstance(item, Rate):
        lo, hi = item.wilson()
        return (item.name, item.setting, str(item.runs),
                f"rejects {item.rejects / item.runs:.1%} [{lo:.1%}, {hi:.1%}]", "")
    lo, hi = item.wilson()
    b = item.bias()
    bias = "" if b is None else f"{b[0]:+.5f} ± {b[1]:.5f}"
    return (item.name, item.setting, str(item.reps),
            f"{item.coverage:.1%} [{lo:.1%}, {hi:.1%}]", bias)


HEADER = ("interval / test", "setting", "runs", "coverage (95% Wilson)", "mean bias ± SE")


def markdown(items: list[Any]) -> str:
    rows = [HEADER, ("---",) * len(HEADER), *map(_fmt, items)]
    return "\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=300, help="replications per check")
    ap.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="run these checks only")
    ap.add_argument("--experiment", action="store_true",
                    help="the issue's 20-run experiment and 20 compare pairs, through the "
                         "simulated HTTP server and run folders")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    args = ap.parse_args(argv)
    items: list[Any] = []
    runs: dict[str, Callable[[], list[Any]]] = {"experiment": experiment,
                                                  "experiment-compare": experiment_compare}
    names = list(runs) if args.experiment else (args.only or list(CHECKS))
    for name in names:
        t0 = time.perf_counter()
        got = runs[name]() if name in runs else CHECKS[name](args.reps)
        items += got
        print(f"## {name} ({time.perf_counter() - t0:.0f} s)")
        for it in got:
            print("  " + " | ".join(x for x in _fmt(it) if x))
        sys.stdout.flush()
    if args.markdown:
        Path(args.markdown).write_text(markdown(items))
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
