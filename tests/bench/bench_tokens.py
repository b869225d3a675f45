"""Benchmark: stopping by tokens against stopping by samples, at equal accuracy (issue 40.3).

`stop="bayes"` prices every sample alike; `stop="bayes-tokens"` prices a question's next sample
by its samples' length so far (`ensemble.stopping.tokens`). What a run pays is tokens, so the
question is how many completion tokens each needs to reach the same accuracy, on a recording
whose samples have their real lengths.

Recordings (`--mot PATH`: a checkout or git dir of github.com/MurongYue/LLM_MoT_cascade, read at
run time, never committed; it has no licence):
- gpt35-date: GPT-3.5-turbo on BIG-bench date understanding, 40 chain-of-thought samples a
  question (369 questions, GPT3_result/date_cot1_40.json), each sample's completion tokens
  counted with cl100k_base, GPT-3.5's own tokenizer (`litellm.token_counter`), answers the
  authors' own extraction;
- llama2-date: Llama-2-13B-chat on the same questions, 20 samples (llama2_13B_result/
  date_cot1.json; its answers disagree on 93% of questions), counted with cl100k_base too (an
  approximation of Llama's own tokenizer);
- with `--local`: tests/bench/data/smollm2-arith (SmolLM2-135M, 250 arithmetic questions x 20,
  tokens as llama.cpp reported them; replies cut at 12 tokens, so lengths barely differ: a
  control where the two rules should agree).

Through the user's path: `ensemble eval jsonl --data D --answer text --model replay/REC --t 0.7
--n 1 K --samples K --adaptive bayes bayes-tokens --json` (in process), whose adaptive rows carry
`mean_tokens`; then both rules' costs are swept with `evals.adaptive.adaptive_eval` (what the
eval's rows call) on the run folder's samples and tokens, 50 orders (--orders), and for targets just
below the fixed-K accuracy each rule's fewest tokens reaching the target (its cost chosen in
hindsight, the same for both) are compared, with 95% bootstrap intervals over questions (each
resample re-chooses both rules' costs).

Run:  python tests/bench/bench_tokens.py --mot PATH [--local] [--reps 500] [--orders 50]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
for p in (str(SRC), str(Path(__file__).resolve().parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench_cost_pairs import answer_text, count_tokens, reader, right_answer  # noqa: E402

from ensemble.evals.adaptive import adaptive_eval, question_codes  # noqa: E402
from ensemble.evals.records import read_questions, read_samples  # noqa: E402
from ensemble.stopping import StopSpec  # noqa: E402

COSTS = [float(c) for c in np.geomspace(2e-4, 0.05, 14)]
RULES = ("bayes", "bayes-tokens")


MOT_CASES = {  # name: (file, what; the tokens are cl100k_base counts of the generated text)
    "gpt35-date": ("GPT3_result/date_cot1_40.json",
                   "GPT-3.5-turbo, date understanding, 40 samples"),
    "llama2-date": ("llama2_13B_result/date_cot1.json",
                    "Llama-2-13B-chat, date understanding, 20 samples (cl100k_base counts, "
                    "not Llama's own tokenizer)"),
}


def mot_case(read, tmp: Path, case: str) -> tuple[str, Path, Path, int]:
    from ensemble.tasks.jsonl import JsonlTask

    file, what = MOT_CASES[case]
    rows = read(file)
    k = min(len(r["results"]) for r in rows)
    data = tmp / f"{case}.jsonl"
    with data.open("w") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps({"id": f"q{i:03d}", "question": r["question"],
                                "answer": right_answer(r)}) + "\n")
    questions = JsonlTask(data=data, answer="text").questions()
    rec = tmp / f"{case}-recording.jsonl"
    with rec.open("w") as f:
        for q, r in zip(questions, rows, strict=True):
            toks = count_tokens([g if isinstance(g, str) else json.dumps(g)
                                 for g in r["generated"][:k]])
            f.write(json.dumps({"prompt": q.prompt, "t": 0.7, "samples": [
                {"text": f"<answer>{answer_text(a)}</answer>", "tokens": t}
                for a, t in zip(r["results"][:k], toks, strict=True)]}) + "\n")
    return what, data, rec, k


def eval_run(data: Path, rec: Path, k: int, out: Path, kind: str, task: str = "jsonl") -> dict:
    from ensemble.cli import main

    args = [task, *(["--data", str(data), "--answer", kind] if task == "jsonl" else []),
            "--model", f"replay/{rec}", "--t", "0.7", "--n", "1", str(k), "--samples", str(k),
            "--adaptive", *RULES, "--out", str(out), "--json"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        if main(["eval", *args]) != 0:
            raise SystemExit(f"eval failed: {' '.join(args)}")
    return json.loads(buf.getvalue())


def stored(run: Path, k: int) -> tuple[np.ndarray, list[int], int, np.ndarray]:
    questions = list(read_questions(run))
    where = {q.id: i for i, q in enumerate(questions)}
    answers = np.full((1, len(questions), k), None, dtype=object)
    tokens = np.full((1, len(questions), k), np.nan)
    for s in read_samples(run):
        if s.sample < k:
            answers[0, where[s.id], s.sample] = s.answer
            tokens[0, where[s.id], s.sample] = np.nan if s.tokens is None else s.tokens
    codes, correct, width = question_codes(questions, answers)
    return codes, correct, width, tokens


def curves(codes, correct, width, tokens, k: int, reps: int, orders: int) -> dict[str, list]:
    out: dict[str, list] = {r: [] for r in RULES}
    for rule in RULES:
        for c in COSTS:
            (res,) = adaptive_eval(codes, StopSpec(rule, max_n=k, cost=c), correct=correct,
                                   n_options=width, orders=orders, fixed_ns=(k,), reps=reps,
                                   rng=0, tokens=tokens)
            out[rule].append((c, res))
    return out


def fewest(points, target: float, idx=None) -> float:
    """The fewest mean tokens of a cost whose accuracy reaches `target` (inf: none)."""
    best = np.inf
    for _, res in points:
        acc = res.question_accuracy if idx is None else res.question_accuracy[idx]
        tok = res.question_tokens if idx is None else res.question_tokens[idx]
        if acc.mean() >= target - 1e-12:
            best = min(best, float(tok.mean()))
    return best


def compare(name: str, cv: dict, fixed_acc: np.ndarray, fixed_tok: float, reps: int) -> None:
    Q = len(fixed_acc)
    boot = np.random.default_rng(1).integers(0, Q, size=(reps, Q))
    print(f"\n## {name}: {Q} questions; fixed K: accuracy {fixed_acc.mean():.4f}, "
          f"{fixed_tok:.0f} tokens a question")
    print("| target accuracy | bayes: tokens | bayes-tokens: tokens | ratio tokens/samples "
          "rule (95% CI) |")
    print("|---|---|---|---|")
    for gap in (0.02, 0.01, 0.005, 0.002):
        tgt = float(fixed_acc.mean()) - gap
        a, b = fewest(cv["bayes"], tgt), fewest(cv["bayes-tokens"], tgt)
        ratios = []
        for idx in boot:
            t = float(fixed_acc[idx].mean()) - gap
            ra, rb = fewest(cv["bayes"], t, idx), fewest(cv["bayes-tokens"], t, idx)
            ratios.append(rb / ra if np.isfinite(ra) and np.isfinite(rb) else np.nan)
        r = np.array(ratios)
        ok = r[np.isfinite(r)]
        lo, hi = np.percentile(ok, [2.5, 97.5]) if ok.size else (np.nan, np.nan)
        print(f"| fixed − {gap} = {tgt:.4f} | {a:.0f} | {b:.0f} | {b / a:.3f} [{lo:.3f}, "
              f"{hi:.3f}] ({ok.size}/{reps} resamples reach it with both) |")
    print("curves (cost: accuracy / tokens):")
    for rule in RULES:
        print(f"  {rule}: " + "; ".join(f"{c:.2g}: {res.accuracy.value:.4f}/"
                                       f"{res.mean_tokens:.0f}" for c, res in cv[rule]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mot", type=Path, help="a checkout or git dir of LLM_MoT_cascade")
    ap.add_argument("--cases", nargs="+", default=list(MOT_CASES), choices=list(MOT_CASES),
                    help="which of the MoT recordings (default: all)")
    ap.add_argument("--local", action="store_true", help="also the SmolLM2 arithmetic control")
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--orders", type=int, default=50,
                    help="random orders of each question's samples per cost (the token rule is "
                         "replayed through next(), question by question)")
    a = ap.parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    t0 = time.perf_counter()
    cases = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        if a.mot:
            cases += [(*mot_case(reader(a.mot), tmp, c), "text", "jsonl") for c in a.cases]
        if a.local:
            folder = ROOT / "tests" / "bench" / "data" / "smollm2-arith"
            cases.append(("SmolLM2-135M, arithmetic, 20 samples (control)", None,
                          folder / "recording.jsonl", 20, "number", str(folder / "task.yaml")))
        for name, data, rec, k, kind, task in cases:
            out = tmp / f"run-{len(list(tmp.iterdir()))}"
            doc = eval_run(data, rec, k, out, kind, task)
            print(f"\n{name}: the eval's adaptive rows (default cost):")
            for row in doc["adaptive"]:
                print(f"  {row['stop']}: accuracy {row['accuracy']:.4f} "
                      f"[{row['ci'][0]:.4f}, {row['ci'][1]:.4f}], {row['mean_samples']:.2f} "
                      f"samples, {row['mean_tokens']:.0f} tokens a question (fixed {k}: "
                      f"{row['vs_fixed']['accuracy']:.4f})")
            codes, correct, width, tokens = stored(out, k)
            lengths = tokens[np.isfinite(tokens)]
            per_q = np.nanmean(tokens[0], axis=1)
            print(f"  sample length: median {np.median(lengths):.0f} tokens, 5-95% "
                  f"{np.percentile(lengths, 5):.0f}-{np.percentile(lengths, 95):.0f}; "
                  f"questions' mean length 5-95% {np.percentile(per_q, 5):.0f}-"
                  f"{np.percentile(per_q, 95):.0f}")
            cv = curves(codes, correct, width, tokens, k, a.reps, a.orders)
            (fx,) = adaptive_eval(codes, StopSpec("fixed", max_n=k), correct=correct,
                                  n_options=width, orders=a.orders, reps=a.reps, rng=0,
                                  tokens=tokens)
            compare(name, cv, fx.question_accuracy, float(fx.mean_tokens or 0), a.reps)
    print(f"\ntime: {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
