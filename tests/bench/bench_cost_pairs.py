"""Benchmark: the cost rule on public recordings of real cheap/dear model pairs (issue 40.2).

The cost rule was judged on simulated members (bench_cost.py) and on one local model at two
temperatures with a planted price gap (bench_cost_real.py). Here each pair is two real models
answering the same questions, recorded by others and published: the samples of "Large Language
Model Cascades with Mixture of Thoughts Representations for Cost-efficient Reasoning" (Yue et
al., ICLR 2024; github.com/MurongYue/LLM_MoT_cascade, chain-of-thought results of GPT-3.5-turbo,
GPT-4 and Llama-2-13B on the same tasks). The repository has no licence, so nothing of it is
committed: give a checkout (or its git directory) as --mot and the bench reads its JSON files
at run time into a temporary folder.

Pairs (each question's recorded samples: the model's generated text and the answer the
authors extracted from it; the right answer theirs):
- date-gpt35: BIG-bench date understanding (369 questions), GPT-3.5-turbo (20 samples,
  GPT3_result/date_cot1.json) then GPT-4 (3 samples, GPT4_result/date_cot1.json);
- date-pot-gpt35: the same questions with program-of-thought prompts (the programs' outputs),
  GPT-3.5-turbo (20 samples, GPT3_result/date_pot1.json) then GPT-4 (3, GPT4_result/date_pot1.json);
- date-llama2: the same questions, Llama-2-13B-chat (20 samples,
  llama2_13B_result/date_cot1.json) then GPT-4;
- gsm-llama2: GSM8K with program-of-thought (the 400 questions both hold), Llama-2-13B (24
  samples, llama2_13B_result/gsm_pot1.json; answers are the programs' outputs) then GPT-4 (3
  samples, GPT4_result/gsm_pot1.json). The authors kept only the results of programs that ran
  (Llama-2: 24 on 244 questions, 16-23 on most others; GPT-4: fewer than 3 on 14): each missing
  result is an invalid reply, paid for at the question's mean sample length.

Through the user's path: each model's samples become a replay recording (`{"prompt", "samples":
[{"text": "<answer>A</answer>", "tokens": T}]}`, A the recorded answer, T the completion tokens
of its generated text) of a jsonl task (dates as "text", GSM8K as "number"), and `ensemble
eval --spec` runs the mixed ensemble (cheap n = 10 of its samples, GPT-4 n = 3, each priced by
`price_per_1k`) with `"adaptive": ["cost"]`: the summary's cost row is the rule at its default
(target_loss 0.005). The rest is computed here from the run folder (samples.jsonl: each
sample's parsed answer and dollars), on the cost row's own orders (`costeval.member_orders`,
the same seed), and the default is checked against the eval's row.

Tokens and dollars. GPT-3.5 and GPT-4 tokens are counted with their own tokenizer (cl100k_base,
`litellm.token_counter`): the completion tokens the API billed, up to the end token. Llama-2's
tokenizer is not here: its texts are counted with cl100k_base too (an approximation). Prices are
litellm's table's output prices (USD per 1M completion tokens): gpt-3.5-turbo 1.50, gpt-4 60.00,
Llama-2-13B-chat (Bedrock, meta.llama2-13b-chat-v1) 1.00. Prompt tokens are left out for every
policy alike (a few-shot prompt is paid per request, and how a policy batches its requests is
not what is compared): the dollars are those of the text generated.

Compared at equal accuracy (the right answer), against GPT-4 alone at n = 1:
- (a) GPT-4 alone, n = 1: its accuracy is the target, its cost the unit;
- (b) the cheap-first cascade tuned in hindsight: k cheap samples, accept their leader if it has
  at least j of them, else one GPT-4 sample decides; every (k, j), the cheapest reaching the
  target chosen on the very questions scored;
- (c) a threshold router: a question goes to one model, the cheap one (one sample) when the
  cheap model's agreement on it (its leader's share of all its recorded samples: a router that
  knows it exactly, better than a trained one can) is at least τ, else GPT-4 (one sample);
  every τ, the cheapest reaching the target chosen in hindsight;
- the cost rule, its value swept (value_usd = v x GPT-4's mean price per sample) and its
  target_loss swept (0.08 down to 0.0005, 4 steps per halving; a target that falls between two
  values' policies is met by the rule's randomised optimum, `CostRule.mix`, each question's
  policy keyed by its id), the cheapest setting of either reaching the target chosen in
  hindsight too.
For each: the dollars at the target accuracy as a ratio to GPT-4 alone, read two ways, every
family alike:
- single setting: the cheapest one setting (one (k, j), one τ, one value or target) reaching
  the target;
- mix of two: the family's frontier read between two neighbouring settings, as bench_cost reads
  its frontiers (its `frontier`/`interpolate`, imported): a randomised policy that runs one
  setting with probability α and the other otherwise earns and spends the α-mix of the two; a
  user would have to run it that way (the single setting is what one value gives).
Each with a 95% bootstrap interval over questions (each resample re-targets GPT-4's accuracy on
it and re-tunes both readings of every policy on it; a policy that cannot reach it on a resample
counts as infinite). Where no cascade reaches the target (the cheap model is weak), the rule
must not waste money: its ratio at most 1.05.

Run:  python tests/bench/bench_cost_pairs.py --mot PATH [--pairs ...] [--reps 1000]
      (~1-2 min a pair here; the eval runs in process)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from ensemble.cost.spec import CostSpec  # noqa: E402
from ensemble.evals.costeval import member_orders, replay_scored  # noqa: E402
from ensemble.evals.records import read_questions, read_samples  # noqa: E402
from ensemble.stopping import Drawn, FitContext, Observation, StopMemory  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cost import frontier, interpolate  # noqa: E402  (the house's frontier reading)

PRICE_PER_M = {"gpt-3.5-turbo": 1.50, "gpt-4": 60.00, "llama-2-13b-chat": 1.00}
PAIRS = {
    "date-gpt35": ("text", ("gpt-3.5-turbo", "GPT3_result/date_cot1.json"),
                   ("gpt-4", "GPT4_result/date_cot1.json")),
    "date-pot-gpt35": ("text", ("gpt-3.5-turbo", "GPT3_result/date_pot1.json"),
                       ("gpt-4", "GPT4_result/date_pot1.json")),
    "date-llama2": ("text", ("llama-2-13b-chat", "llama2_13B_result/date_cot1.json"),
                    ("gpt-4", "GPT4_result/date_cot1.json")),
    "gsm-llama2": ("number", ("llama-2-13b-chat", "llama2_13B_result/gsm_pot1.json"),
                   ("gpt-4", "GPT4_result/gsm_pot1.json")),
}
BUDGETS = (10, 3)  # cheap, GPT-4: each member's most votes
ORDERS = 20
# the cost rule's value_usd, x GPT-4's mean price per sample: 4 steps per doubling, so the
# hindsight choice is not coarser than the cascade's (k, j) grid
VALUES = tuple(float(round(2 ** (e / 4), 4)) for e in range(-8, 29))
# the rule's target_loss (its default parameter, 0.005 against GPT-4's one vote under the
# prior), 4 steps per halving from 0.08 to 0.0005: a target between two values' policies is
# met by the randomised optimum (`CostRule.mix`), which a value alone never runs
TARGETS = tuple(float(round(0.08 * 2 ** (-e / 4), 6)) for e in range(0, 30))
TOLERANCE = 1.05


# -- the published recordings -> a jsonl task and replay recordings -----------------------------
def reader(mot: Path):
    """A function reading one of the repository's JSON files, from a checkout or a git dir."""
    if (mot / "GPT4_result").is_dir():
        return lambda rel: json.loads((mot / rel).read_text())
    return lambda rel: json.loads(subprocess.run(
        ["git", f"--git-dir={mot}", "show", f"HEAD:{rel}"], capture_output=True, check=True,
        text=True).stdout)


def right_answer(row: dict) -> str:
    """The right answer of a row (Llama-2's date rows hold the options with 1 on the right)."""
    a = row["answer"]
    if isinstance(a, dict):
        return next(k for k, v in a.items() if v == 1)
    return str(a)


def answer_text(x: Any) -> str:
    """A recorded answer as the reply's answer text ('' for none)."""
    if x is None:
        return ""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x).strip()


def count_tokens(texts: list[str]) -> list[int]:
    import litellm  # token_counter: the OpenAI models' own tokenizer (cl100k_base)

    return [int(litellm.token_counter(model="gpt-4", text=t or "")) for t in texts]


@dataclass
class Pair:
    name: str
    kind: str
    models: tuple[str, str]
    data: Path
    recordings: tuple[Path, Path]
    samples: tuple[int, int]


def build_pair(name: str, read, tmp: Path) -> Pair:
    from ensemble.tasks.jsonl import JsonlTask

    kind, (cheap_model, cheap_file), (dear_model, dear_file) = PAIRS[name]
    cheap, dear = read(cheap_file), read(dear_file)
    dear_by_q = {r["question"]: r for r in dear}
    rows = [(r, dear_by_q[r["question"]]) for r in cheap if r["question"] in dear_by_q]
    k = (min(len(c["generated"]) for c, _ in rows), min(len(d["generated"]) for _, d in rows))
    folder = tmp / name
    folder.mkdir()
    data = folder / "data.jsonl"
    with data.open("w") as f:
        for i, (c, _) in enumerate(rows):
            f.write(json.dumps({"id": f"q{i:03d}", "question": c["question"],
                                "answer": right_answer(c)}) + "\n")
    questions = JsonlTask(data=data, answer=kind).questions()
    recs = (folder / "cheap.jsonl", folder / "dear.jsonl")
    for rec, which, kk in ((recs[0], 0, k[0]), (recs[1], 1, k[1])):
        with rec.open("w") as f:
            for q, pair in zip(questions, rows, strict=True):
                r = pair[which]
                texts = [g if isinstance(g, str) else json.dumps(g) for g in r["generated"][:kk]]
                toks = count_tokens(texts)
                results = list(r["results"])
                if len(results) < len(r["generated"]):
                    # the authors kept only the programs that ran (PoT): the rest are invalid
                    # replies, paid for; which text gave which result is lost, so each of the
                    # question's samples is priced at its texts' mean length
                    results += [None] * (len(r["generated"]) - len(results))
                    toks = [round(sum(toks) / len(toks))] * len(toks)
                f.write(json.dumps({"prompt": q.prompt, "samples": [
                    {"text": f"<answer>{answer_text(a)}</answer>", "tokens": t}
                    for a, t in zip(results[:kk], toks, strict=True)]}) + "\n")
    return Pair(name, kind, (cheap_model, dear_model), data, recs, k)


def run_eval(pair: Pair, out: Path, value: float | None = None) -> dict:
    """`ensemble eval --spec` on the pair's recordings, in process (the user's path)."""
    from ensemble.cli import main

    members = [{"model": f"replay/{rec}", "n": n, "samples": k, "temperature": 0.7,
                "label": label, "price_per_1k": [0.0, PRICE_PER_M[model] / 1000]}
               for rec, n, k, label, model in zip(pair.recordings, BUDGETS, pair.samples,
                                                  ("cheap", "dear"), pair.models, strict=True)]
    spec = {"task": "jsonl", "data": str(pair.data), "answer": pair.kind, "members": members,
            "aggregators": ["plurality"], "adaptive": ["cost"], "bootstrap": 1000}
    if value is not None:
        spec["value_usd"] = value
    path = out.parent / f"{out.name}.spec.json"
    path.write_text(json.dumps(spec))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["eval", "--spec", str(path), "--out", str(out), "--json"])
    if code != 0:
        raise SystemExit(f"the eval of {pair.name} failed ({code})")
    return json.loads(buf.getvalue())


# -- the run folder -> per-question policies ---------------------------------------------------
@dataclass
class Stored:
    codes: list[np.ndarray]  # per member (Q, K_g): each question's answers among its options
    costs: list[np.ndarray]  # per member (Q, K_g) dollars
    values: np.ndarray  # (Q, O) 1 on the right option
    agreement: np.ndarray  # (Q,) the cheap model's leader share over its recorded samples
    ids: list[str]  # each question's id: its key for the rule's per-question policy (a mix)


def stored(run: Path) -> Stored:
    questions = list(read_questions(run))
    where = {q.id: i for i, q in enumerate(questions)}
    opts = [list(q.choices) for q in questions]
    labels = ("cheap", "dear")
    per: dict[str, dict[tuple[int, int], tuple[int, float]]] = {lb: {} for lb in labels}
    for s in read_samples(run):
        qi = where[s.id]
        code = opts[qi].index(s.answer) if s.answer in opts[qi] else -1
        per[s.member or ""][qi, s.sample] = (code, float(s.cost_usd or 0.0))
    Q = len(questions)
    codes, costs = [], []
    for lb in labels:
        K = 1 + max(i for _, i in per[lb])
        c, d = np.full((Q, K), -1), np.zeros((Q, K))
        for (qi, i), (code, usd) in per[lb].items():
            c[qi, i], d[qi, i] = code, usd
        codes.append(c)
        costs.append(d)
    width = max(len(o) for o in opts)
    values = np.zeros((Q, width))
    for qi, q in enumerate(questions):
        values[qi, opts[qi].index(q.correct)] = 1.0
    agree = np.array([np.bincount(r[r >= 0]).max() / len(r) if (r >= 0).any() else 0.0
                      for r in codes[0]])
    return Stored(codes, costs, values, agree, [q.id for q in questions])


def credit(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(Q, R) fractional credit of the plurality of counts (Q, R, O)."""
    mx = counts.max(axis=-1, keepdims=True)
    top = (counts == mx) & (mx > 0)
    k = top.sum(axis=-1)
    return np.where(k > 0, (top * values[:, None, :]).sum(-1) / np.maximum(k, 1), 0.0)


def onehot(c: np.ndarray, width: int) -> np.ndarray:
    return (c[..., None] == np.arange(width)).astype(float)


class Policies:
    """Every policy's per-question accuracy and dollars (averaged over the orders)."""

    def __init__(self, st: Stored, seed: int = 0) -> None:
        self.st = st
        self.Q, self.O = st.values.shape
        self.orders = member_orders(st.codes, ORDERS, np.random.default_rng(seed))
        self.along = [np.take_along_axis(c[:, None, :], o, axis=2)
                      for c, o in zip(st.codes, self.orders, strict=True)]
        self.paid = [np.take_along_axis(d[:, None, :], o, axis=2).cumsum(axis=2)
                     for d, o in zip(st.costs, self.orders, strict=True)]

    def dear_alone(self) -> tuple[np.ndarray, np.ndarray]:
        first = onehot(self.along[1][..., :1], self.O).sum(axis=2)
        return credit(first, self.st.values).mean(1), self.paid[1][..., 0].mean(1)

    def cascades(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        dear = onehot(self.along[1][..., :1], self.O).sum(axis=2)
        out = {}
        for k in range(1, BUDGETS[0] + 1):
            counts = onehot(self.along[0][..., :k], self.O).sum(axis=2)
            top = counts.max(axis=-1)
            for j in range(1, k + 1):
                ok = top >= j
                acc = np.where(ok, credit(counts, self.st.values), credit(dear, self.st.values))
                usd = self.paid[0][..., k - 1] + np.where(ok, 0.0, self.paid[1][..., 0])
                out[f"cascade k={k} j={j}"] = (acc.mean(1), usd.mean(1))
        return out

    def routers(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        cheap = credit(onehot(self.along[0][..., :1], self.O).sum(axis=2), self.st.values)
        dear = credit(onehot(self.along[1][..., :1], self.O).sum(axis=2), self.st.values)
        out = {}
        for tau in np.round(np.arange(0.0, 1.0001, 0.05), 2):
            go = (self.st.agreement >= tau)[:, None]
            acc = np.where(go, cheap, dear)
            usd = np.where(go, self.paid[0][..., 0], self.paid[1][..., 0])
            out[f"router τ={tau:g}"] = (acc.mean(1), usd.mean(1))
        return out

    def cost_rule(self, value: float | None, target_loss: float | None = None
                  ) -> tuple[np.ndarray, np.ndarray, Any]:
        """The rule as the eval's row builds it (`costeval.cost_rows`: fitted on every stored
        sample, lams unknown: the members ranked by price; each question keyed by its id),
        replayed on the same orders."""
        st = self.st
        stored_q = [Drawn(tuple(tuple(Observation(None if x < 0 else str(int(x)),
                                                  cost_usd=float(c))
                                      for x, c in zip(st.codes[g][q], st.costs[g][q],
                                                      strict=True))
                                for g in range(2)), BUDGETS) for q in range(self.Q)]
        rule = CostSpec(value_usd=value, target_loss=target_loss).fit(
            stored_q, StopMemory(), FitContext(budgets=BUDGETS, lams=(None, None),
                                               two_choices=False))
        rp, acc = replay_scored(rule, st.codes, self.orders, st.values, st.costs, st.ids)
        return acc.mean(1), rp.spent.mean(1), (rule, rp)


def cost_at(settings: dict[str, tuple[np.ndarray, np.ndarray]], target: float,
            idx: np.ndarray | None = None) -> tuple[float, str | None]:
    """The cheapest mean dollars of a setting whose accuracy reaches `target` (on the
    questions `idx`, a bootstrap resample), and which; inf when none does."""
    best, which = np.inf, None
    for name, (acc, usd) in settings.items():
        a = acc.mean() if idx is None else acc[idx].mean()
        u = usd.mean() if idx is None else usd[idx].mean()
        if a >= target - 1e-12 and u < best:
            best, which = float(u), name
    return best, which


def mix_at(settings: dict[str, tuple[np.ndarray, np.ndarray]], target: float,
           idx: np.ndarray | None = None) -> tuple[float, str | None]:
    """The least mean dollars reaching `target` on the family's frontier or between two
    neighbouring settings of it (run one with probability α, the other otherwise: the mix's
    accuracy and dollars are the α-mix of theirs), as bench_cost reads its frontiers
    (`interpolate`); inf when the frontier's top does not reach it. The second value names
    the setting, or the two settings mixed and α (the share of the dearer one)."""
    named = {}
    for name, (acc, usd) in settings.items():
        a = float(acc.mean() if idx is None else acc[idx].mean())
        u = float(usd.mean() if idx is None else usd[idx].mean())
        named.setdefault((u, a), name)
    # target - 1e-12: the same tolerance as cost_at, so a setting exactly at the target is
    # read as itself by both
    usd = interpolate(list(named), target - 1e-12)
    if usd is None:
        return np.inf, None
    if idx is not None:
        return float(usd), None
    front = frontier(list(named))
    for (c0, a0), (c1, a1) in zip(front, front[1:], strict=False):
        alpha = (usd - c0) / (c1 - c0)
        if 1e-9 < alpha < 1 - 1e-9:
            return float(usd), f"{named[c0, a0]} with {named[c1, a1]}, α {alpha:.2f}"
    # on a frontier point (within the tolerance above): that setting alone
    return float(usd), min(((abs(c - usd), named[c, a]) for c, a in front))[1]


READINGS = {"single": cost_at, "mix": mix_at}


def judge(name: str, pol: Policies, rule_settings: dict, reps: int, seed: int = 1) -> dict:
    """Each family's dollars at GPT-4's accuracy, read both ways (`READINGS`: the cheapest
    single setting reaching it; a mix of two neighbouring settings), with 95% bootstrap
    intervals (each resample re-targets GPT-4's accuracy on it and re-tunes both readings)."""
    dear_acc, dear_usd = pol.dear_alone()
    families = {"cascade (hindsight)": pol.cascades(), "router (hindsight τ)": pol.routers(),
                "cost rule (hindsight setting)": rule_settings}
    point = {(f, r): read(s, dear_acc.mean()) for f, s in families.items()
             for r, read in READINGS.items()}
    boot = np.random.default_rng(seed).integers(0, pol.Q, size=(reps, pol.Q))
    ratios: dict[tuple[str, str], list[float]] = {k: [] for k in point}
    for idx in boot:
        target, unit = dear_acc[idx].mean(), dear_usd[idx].mean()
        for f, s in families.items():
            for r, read in READINGS.items():
                ratios[f, r].append(read(s, target, idx)[0] / unit)
    out = {"pair": name, "questions": pol.Q, "dear_accuracy": float(dear_acc.mean()),
           "dear_usd": float(dear_usd.mean()), "families": {}}
    for f in families:
        out["families"][f] = {}
        for r in READINGS:
            usd, which = point[f, r]
            x = np.array(ratios[f, r])
            srt = np.sort(x)  # inf (not reached on a resample) sorts last: the bounds stay inf
            lo, hi = (srt[min(len(srt) - 1, int(round(p * (len(srt) - 1))))]
                      for p in (0.025, 0.975))
            out["families"][f][r] = {"ratio": usd / float(dear_usd.mean()), "setting": which,
                                     "ci": [float(lo), float(hi)],
                                     "reached": float(np.isfinite(x).mean())}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mot", type=Path, required=True,
                    help="a checkout (or git dir) of github.com/MurongYue/LLM_MoT_cascade")
    ap.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=list(PAIRS))
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--json", type=Path, help="write the results here too")
    a = ap.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    read = reader(a.mot)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.pairs:
            t0 = time.perf_counter()
            pair = build_pair(name, read, Path(tmp))
            summary = run_eval(pair, Path(tmp) / f"{name}-run")
            st = stored(Path(tmp) / f"{name}-run")
            pol = Policies(st)
            dear_price = float(st.costs[1].mean())
            settings = {}
            default_acc, default_usd, (_, drp) = pol.cost_rule(None)
            votes = {"default": [float(x) for x in drp.drawn.mean(axis=(0, 1))]}
            (row,) = summary["adaptive"]
            if not (abs(row["accuracy"] - default_acc.mean()) < 1e-9
                    and abs(row["mean_cost_usd"] - default_usd.mean()) < 1e-12):
                raise SystemExit(f"{name}: the bench's replay of the default differs from the "
                                 f"eval's cost row ({row['accuracy']} vs {default_acc.mean()})")
            settings["default"] = (default_acc, default_usd)
            for v in VALUES:
                acc, usd, (_, vrp) = pol.cost_rule(v * dear_price)
                settings[f"value {v:g}x"] = (acc, usd)
                votes[f"value {v:g}x"] = [float(x) for x in vrp.drawn.mean(axis=(0, 1))]
            mixes = {}
            for t in TARGETS:
                acc, usd, (trule, trp) = pol.cost_rule(None, t)
                settings[f"target {t:g}"] = (acc, usd)
                votes[f"target {t:g}"] = [float(x) for x in trp.drawn.mean(axis=(0, 1))]
                mixes[f"target {t:g}"] = trule.mix
            res = judge(name, pol, settings, a.reps)
            res["cheap_alone_1"] = float(credit(onehot(pol.along[0][..., :1], pol.O).sum(2),
                                                st.values).mean())
            res["eval_cost_row"] = {k: row[k] for k in ("accuracy", "ci", "mean_cost_usd",
                                                        "mean_tokens", "mean_samples_by_member")}
            res["rule_curve"] = {k: (float(acc.mean()), float(usd.mean()) / res["dear_usd"],
                                     *votes[k])
                                 for k, (acc, usd) in settings.items()}
            res["rule_mix"] = mixes
            res["seconds"] = time.perf_counter() - t0
            results.append(res)
            report(res)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0


def report(res: dict) -> None:
    print(f"\n## {res['pair']}: {res['questions']} questions; GPT-4 alone n = 1: accuracy "
          f"{res['dear_accuracy']:.4f} at ${res['dear_usd'] * 1e3:.3f} per 1,000 questions x "
          f"1000 (= 1.00); cheap alone n = 1: {res['cheap_alone_1']:.4f}")
    print("dollars at GPT-4's accuracy (x GPT-4 alone), 95% interval, resamples reaching it; "
          "single setting | mix of two neighbouring settings")
    print("| policy | single setting | 95% interval | reached | setting | mix of two | "
          "95% interval | reached | settings mixed |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f, rr in res["families"].items():
        print(f"| {f} | " + " | ".join(
            f"{r['ratio']:.3f} | [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] | {r['reached']:.0%} | "
            f"{r['setting']}" for r in (rr["single"], rr["mix"])) + " |")
    weak = res["families"]["cascade (hindsight)"]["single"]["setting"] is None
    if weak:
        rule = res["families"]["cost rule (hindsight setting)"]
        print("no cheap-first cascade reaches GPT-4's accuracy (the cheap model is weak): the "
              "cost rule's ratio " + "; ".join(
                  f"{r} {rule[r]['ratio']:.3f} "
                  f"{'meets' if rule[r]['ratio'] <= TOLERANCE else 'FAILS'}"
                  for r in READINGS) + f" the bar of {TOLERANCE}")
    mix = res.get("rule_mix", {})
    print("cost rule curve (accuracy / dollars x GPT-4 alone / votes cheap, GPT-4 [/ share of "
          "questions on the cheaper policy of a target's mix]): " + "; ".join(
              f"{k} {a:.4f}/{u:.2f}/{c:.2f},{d:.2f}" + (f"/{mix[k]:.2f}" if mix.get(k) else "")
              for k, (a, u, c, d) in res["rule_curve"].items()))
    print(f"the eval's cost row (default): {json.dumps(res['eval_cost_row'])}")
    print(f"time: {res['seconds']:.0f} s")


if __name__ == "__main__":
    raise SystemExit(main())
