"""Benchmark: the bayes rule against Adaptive-Consistency (`beta`) on real recorded samples.

Issue 31: on recorded samples, does bayes's samples-vs-accuracy frontier lie below that of
Adaptive-Consistency (Aggarwal et al., EMNLP 2023; our `beta` rule, which decides as the
`adaptiveconsistency` package does), at equal accuracy, as it does on the simulator?

Each recording goes through the user's path: `ensemble eval ... --model replay/REC --adaptive
bayes beta --json` (a subprocess), so its answers are parsed by the project's own parsing and
the eval's default rows are printed as the user sees them. The replayed run's parsed answers are
then scored (`evals.adaptive.adaptive_eval`, the function the eval calls) along the same R
random orders of each question's samples for every rule:

- `bayes`, prior fitted per order from a pilot of 2 (the default), over a sweep of costs;
- `bayes` with a hindsight prior: `fit_prior(family="grid")` (NPMLE) on the top-two counts of
  *all* K samples of every question, the best a prior of the model's form can know;
- `beta` over thresholds 0.8..0.995; fixed n = 1..K.

Printed: the curves; samples at equal accuracy, bayes interpolated along its curve at each beta
point, as a ratio bayes / beta with a paired bootstrap interval over questions (the curves
resampled together; the fitted priors are held fixed); the same exactly under the model
(`expected_performance` under the hindsight prior: binary, no third answers, accuracy =
agreement with the vote of unlimited samples); and, to separate the rule from the target,
the ratios when accuracy is agreement with the vote of all K recorded samples; and a model
control: the same comparison on a recording drawn from the model itself (q from the hindsight
prior, i.i.d. binary samples, the same numbers of questions, samples and invalid answers), to
tell what the model predicts for a recording of this size from what it misses.

Recordings:
- `--recording DIR` (default: each folder of tests/bench/data): a folder holding `task.yaml`
  (or `data.jsonl` for the jsonl task) and `recording.jsonl` (the minimal replay format,
  docs/adaptive.md), plus `README.md` (provenance);
- `--run RUN`: a finished run folder of this project, replayed as `replay/RUN` (its task and
  data read from RUN/spec.json);
- `--esc FILE`: a result file of the ESC repository (Li et al., "Escape Sky-high Cost:
  Early-stopping Self-Consistency for Multi-step Reasoning", ICLR 2024; github.com/Yiwei98/ESC,
  e.g. GPT3.5_result/last_letters/T0.7.jsonl: question, answer, generated_answer = 40 texts),
  converted at run time into a jsonl task (open text answers) and a replay recording in a temp
  folder; never copied into this repository.

    python tests/bench/bench_adaptive_real.py [--esc T0.7.jsonl] [--run RUN] [--orders 200]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from bench_adaptive import exact_equal_accuracy, interp_samples  # noqa: E402

from ensemble.evals.adaptive import adaptive_eval, question_codes  # noqa: E402
from ensemble.evals.records import read_questions, read_samples  # noqa: E402
from ensemble.stopping import (  # noqa: E402
    DEFAULT_COST,
    StopSpec,
    fit_prior,
)

DATA = ROOT / "tests" / "bench" / "data"  # the committed recordings, one folder each
COSTS = sorted([float(c) for c in np.geomspace(3e-5, 0.06, 22)] + [DEFAULT_COST])
#: beta points this close to the fixed max_n accuracy (or above it) are on the flat top of both
#: curves, where samples at equal accuracy are not identified (printed, marked, not compared)
CEILING = 0.0005
THRESHOLDS = [0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 0.995]


# -- recordings -> replayed eval runs ----------------------------------------------------------
def eval_replay(task_args: list[str], model: str, t: float, k: int, out: Path) -> dict:
    """`ensemble eval TASK --model replay/... --adaptive bayes beta --json`, as a user runs it."""
    cmd = [sys.executable, "-m", "ensemble", "eval", *task_args, "--model", model, "--t",
           f"{t:g}", "--n", "1", str(k), "--samples", str(k), "--adaptive", "bayes", "beta",
           "--out", str(out), "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])}
    got = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if got.returncode != 0:
        raise SystemExit(f"replay failed ({' '.join(cmd)}):\n{got.stderr.strip()}")
    return json.loads(got.stdout)


def esc_case(path: Path, tmp: Path, t: float) -> tuple[str, dict, Path]:
    """An ESC result file as a jsonl task (open text answers) and a minimal replay recording."""
    from ensemble.tasks.jsonl import JsonlTask

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    data = tmp / "esc-data.jsonl"
    with data.open("w") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps({"id": f"q{i:03d}", "question": r["question"],
                                "answer": r["answer"]}) + "\n")
    k = min(len(r["generated_answer"]) for r in rows)
    questions = JsonlTask(data=data).questions()  # the prompts exactly as the task renders them
    rec = tmp / "esc-recording.jsonl"
    with rec.open("w") as f:
        for q, r in zip(questions, rows, strict=True):
            f.write(json.dumps({"prompt": q.prompt, "t": t,
                                "samples": r["generated_answer"][:k]}) + "\n")
    out = tmp / "esc-run"
    doc = eval_replay(["jsonl", "--data", str(data)], f"replay/{rec}", t, k, out)
    return f"ESC {path.parent.name}/{path.name} ({len(rows)} questions x {k}, t={t:g})", doc, out


def folder_case(folder: Path, tmp: Path) -> tuple[str, dict, Path]:
    """A committed recording: task.yaml (or data.jsonl) + recording.jsonl."""
    rec = folder / "recording.jsonl"
    first = json.loads(rec.open().readline())
    lines = sum(1 for line in rec.open() if line.strip())
    t, k = float(first["t"]), len(first["samples"])
    task = [str(folder / "task.yaml")] if (folder / "task.yaml").is_file() else \
        ["jsonl", "--data", str(folder / "data.jsonl")]
    out = tmp / f"{folder.name}-run"
    doc = eval_replay(task, f"replay/{rec}", t, k, out)
    return f"{folder.name} ({lines} questions x {k}, t={t:g})", doc, out


def run_case(run: Path, tmp: Path) -> tuple[str, dict, Path]:
    """A finished run folder of this project, replayed as replay/RUN."""
    spec = json.loads((run / "spec.json").read_text())
    (member,) = spec["members"]
    task = [spec["data"]] if spec["task"] == "taskfile" else \
        [spec["task"], *(["--data", spec["data"]] if spec.get("data") else [])]
    if spec.get("limit"):  # the run's own subset of the questions
        task += ["--limit", str(spec["limit"]), "--seed", str(spec.get("seed", 0))]
    out = tmp / f"{run.name}-replayed"
    doc = eval_replay(task, f"replay/{run}", float(member["temperature"]), int(spec["samples"]),
                      out)
    return f"run {run} (t={member['temperature']:g})", doc, out


def answer_codes(run: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """(Q, K) codes of the replayed run's parsed answers, each question's among its own
    options (−1: invalid), its right codes, and the number of codes."""
    qs = list(read_questions(run))
    got: dict[str, dict[int, str | None]] = collections.defaultdict(dict)
    for s in read_samples(run):
        got[s.id][s.sample] = s.answer
    k = min(len(got[q.id]) for q in qs)
    ans = np.empty((1, len(qs), k), dtype=object)
    for i, q in enumerate(qs):
        ans[0, i] = [got[q.id][j] for j in range(k)]
    codes, correct, n_opt = question_codes(qs, ans)
    return codes[0], np.asarray(correct), n_opt


# -- the comparison -----------------------------------------------------------------------------
def sweep(codes, values, orders, hindsight, *, hindsight_too=True):
    """{rule: [(per-question accuracy, per-question samples, parameter), ...]} and fixed n."""
    K = codes.shape[1]

    def one(spec, fixed=()):
        return adaptive_eval(codes, spec, values=values, orders=orders, reps=2, rng=1,
                             fixed_ns=list(fixed))[0]

    out: dict[str, list] = {"bayes": [], "hindsight": [], "beta": []}
    for c in COSTS:
        r = one(StopSpec("bayes", max_n=K, cost=c))
        out["bayes"].append((r.question_accuracy, r.question_samples, c))
        if hindsight_too:
            r = one(StopSpec("bayes", max_n=K, cost=c, prior=hindsight))
            out["hindsight"].append((r.question_accuracy, r.question_samples, c))
    fixed = None
    for th in THRESHOLDS:
        r = one(StopSpec("beta", max_n=K, threshold=th), fixed=range(1, K + 1))
        out["beta"].append((r.question_accuracy, r.question_samples, th))
        fixed = r.fixed
    assert fixed is not None
    return out, {n: e.value for n, e in fixed.items()}


def curve(points, idx=None):
    return [(float(s.mean() if idx is None else s[idx].mean()),
             float(a.mean() if idx is None else a[idx].mean()), p) for a, s, p in points]


def ratios(res, rule, reps, g):
    """Per beta threshold: (beta samples, accuracy, rule's samples at that accuracy, ratio,
    (2.5, 97.5) percentiles of the paired bootstrap ratio, share of resamples where the rule
    never reaches beta's accuracy)."""
    Q = res["beta"][0][0].size
    boot = g.integers(0, Q, size=(reps, Q))
    rows = []
    full_b, full_r = curve(res["beta"]), curve(res[rule])
    per = [([], 0) for _ in THRESHOLDS]
    for idx in boot:
        cb, cr = curve(res["beta"], idx), curve(res[rule], idx)
        for i, (s_beta, a_beta, _) in enumerate(cb):
            need = interp_samples([(s, a) for s, a, _ in cr], a_beta)
            if np.isfinite(need):
                per[i][0].append(need / s_beta)
            else:
                per[i] = (per[i][0], per[i][1] + 1)
    for i, (s_beta, a_beta, th) in enumerate(full_b):
        need = interp_samples([(s, a) for s, a, _ in full_r], a_beta)
        vals, missed = per[i]
        ci = tuple(np.percentile(vals, [2.5, 97.5])) if vals else (float("nan"),) * 2
        below = float(np.mean(np.asarray(vals) < 1)) if vals else float("nan")
        rows.append((th, s_beta, a_beta, need, need / s_beta, ci, missed / reps, below))
    return rows


def control(codes, hindsight, orders, reps, seed=0):
    """The comparison on samples drawn from the model: what the real recording's ratios would
    be if its questions' samples were i.i.d. given q, q from the hindsight prior (binary; the
    same Q, K and share of invalid answers), scored against its own K-sample vote and against
    the vote of unlimited samples (q > 1/2)."""
    Q, K = codes.shape
    g = np.random.default_rng(seed)
    q = g.choice(np.asarray(hindsight.q), size=Q, p=np.asarray(hindsight.w))
    syn = (g.random((Q, K)) >= q[:, None]).astype(np.int64)  # 0 with probability q
    syn = np.where(g.random((Q, K)) < (codes >= 0).mean(), syn, -1)
    cnt = np.stack([(syn == o).sum(axis=1) for o in range(2)], axis=1)
    mode = (cnt == cnt.max(axis=1, keepdims=True)) & (cnt > 0)
    agree = mode / np.maximum(mode.sum(axis=1, keepdims=True), 1)
    half = 0.5 * (q == 0.5)
    truth = np.stack([(q > 0.5) + half, (q < 0.5) + half], axis=1).astype(float)
    out = []
    for label, values in ((f"against its {K}-sample vote", agree),
                          ("against unlimited samples", truth)):
        res, _ = sweep(syn, values, orders, hindsight, hindsight_too=False)
        out.append((label, ratios(res, "bayes", reps, np.random.default_rng(11))))
    return out


def model_exact(hindsight, K):
    """Samples at equal accuracy exactly under the model with the hindsight prior."""
    return "; ".join(f"beta({th:g}) {beta_n:.2f} vs bayes {need:.2f} = {need / beta_n:.3f}"
                     for th, beta_n, need in exact_equal_accuracy(hindsight, K, n_costs=120))


def report(name, doc, run, *, orders_n, reps):
    t0 = time.perf_counter()
    codes, correct, n_opt = answer_codes(run)
    Q, K = codes.shape
    counts = np.stack([(codes == o).sum(axis=1) for o in range(n_opt)], axis=1)
    part = np.sort(counts, axis=1)
    top, second = part[:, -1], part[:, -2] if n_opt > 1 else np.zeros(Q, dtype=int)
    hindsight = fit_prior(top, second, family="grid")
    g = np.random.default_rng(7)
    orders = np.argsort(g.random((Q, orders_n, K)), axis=-1)
    right = np.zeros((Q, n_opt))
    right[np.arange(Q), correct] = 1.0
    mode = (counts == counts.max(axis=1, keepdims=True)) & (counts > 0)
    agree = mode / np.maximum(mode.sum(axis=1, keepdims=True), 1)

    print(f"\n== {name} ==")
    valid = (codes >= 0).mean()
    distinct = np.array([len(set(r[r >= 0])) for r in codes])
    share = top / np.maximum(top + second, 1)
    print(f"  {Q} questions x {K} samples; valid answers {valid:.3f}; distinct answers per "
          f"question median {np.median(distinct):g} (max {distinct.max()}); samples outside "
          f"the top two {1 - (top + second).sum() / (codes >= 0).sum():.3f}")
    print(f"  leader's share of the top two over all {K}: unanimous {np.mean(share == 1):.2f}, "
          f">= 0.9 {np.mean(share >= 0.9):.2f}, < 0.7 {np.mean(share < 0.7):.2f}; "
          f"the {K}-sample vote right on {np.mean(mode[np.arange(Q), correct]):.3f}")
    print(f"  pilot-of-2 fit on the stored order: {fit_prior(*_pilot(codes, n_opt))}; "
          f"hindsight grid prior: mean split E[2q(1-q)] = {hindsight.mean_split():.3f}")
    print("  the eval's own rows (replay, default settings):")
    for row in doc["adaptive"]:
        vs = row["vs_fixed"]
        print(f"    {row['stop']:<5} mean samples {row['mean_samples']:.2f} "
              f"({row['mean_samples_ci'][0]:.2f}-{row['mean_samples_ci'][1]:.2f})  accuracy "
              f"{row['accuracy']:.4f}  vs fixed {vs['n']} ({vs['accuracy']:.4f}) "
              f"{vs['difference']:+.4f} ({vs['difference_ci'][0]:+.4f} to "
              f"{vs['difference_ci'][1]:+.4f})")

    for label, values in (("accuracy = the right answer", right),
                          (f"accuracy = agreement with the vote of all {K} samples", agree)):
        res, fixed = sweep(codes, values, orders, hindsight)
        print(f"  -- {label} ({orders_n} orders; fixed n: "
              + "  ".join(f"{n}:{fixed[n]:.4f}" for n in sorted(fixed)
                          if n in (1, 2, 3, 5, 10, 20, K)) + ")")
        print("     cost      bayes (pilot fit)   bayes (hindsight prior)")
        for (a, s, c), (ah, sh, _) in zip(res["bayes"], res["hindsight"], strict=True):
            mark = "  <- default" if c == DEFAULT_COST else ""
            print(f"     {c:<9.3g} {s.mean():6.2f} {a.mean():.4f}     {sh.mean():6.2f} "
                  f"{ah.mean():.4f}{mark}")
        print("     beta threshold: " + "  ".join(f"{th:g}: {s.mean():.2f} {a.mean():.4f}"
                                                  for a, s, th in res["beta"]))
        for rule in ("bayes", "hindsight"):
            print(f"     samples at beta's accuracy, {rule} / beta (paired bootstrap over "
                  f"questions, {reps} resamples):")
            for th, s_b, a_b, need, ratio, ci, missed, below in ratios(
                    res, rule, reps, np.random.default_rng(11)):
                flat = a_b >= fixed[K] - CEILING
                print(f"       beta({th:g}) {s_b:5.2f} at {a_b:.4f}: {rule} {need:5.2f}  ratio "
                      f"{ratio:.3f} (95% CI {ci[0]:.3f}-{ci[1]:.3f}; below 1 in {below:.0%} "
                      f"of resamples" + (f"; never reached in {missed:.1%}" if missed else "")
                      + ")" + (f"  [at most {CEILING} below fixed {K}: not comparable]"
                               if flat else ""))
    print(f"  exact under the model, hindsight prior (binary, agreement with unlimited "
          f"samples): {model_exact(hindsight, K)}")
    print("  model control: a recording drawn from the model itself (each question's q from the "
          "hindsight prior, binary samples, the same questions, samples and valid rate), "
          "bayes / beta:")
    for label, ratio_rows in control(codes, hindsight, orders, reps):
        print(f"    {label}: " + "; ".join(
            f"beta({th:g}) {ratio:.3f} ({ci[0]:.3f}-{ci[1]:.3f})"
            for th, _s, _a, _n, ratio, ci, _m, _b in ratio_rows if th <= 0.975))
    print(f"  time: {time.perf_counter() - t0:.0f} s")


def compact(run: Path, into: Path, *, tokens: bool = False) -> None:
    """Write a finished run of a task file as a committed recording folder: task.yaml and its
    data file (copied), recording.jsonl (one line per question: prompt, t, sample texts; with
    `tokens`, each sample as {"text", "tokens"}, its recorded completion tokens, so that a
    replay can price it with a member's price_per_1k)."""
    import shutil

    import yaml

    spec = json.loads((run / "spec.json").read_text())
    if spec["task"] != "taskfile":
        raise SystemExit("--compact takes a run of a task file (task.yaml)")
    (member,) = spec["members"]
    task_file = Path(spec["data"])
    doc = yaml.safe_load(task_file.read_text())
    into.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(task_file, into / "task.yaml")
    prompts = {q.id: q.prompt for q in read_questions(run)}
    rows = (task_file.parent / doc["data"]).read_text().splitlines(keepends=True)
    if doc.get("id") and str(doc["data"]).endswith(".jsonl"):  # the run's questions only
        rows = [r for r in rows if r.strip() and str(json.loads(r)[doc["id"]]) in prompts]
    elif spec.get("limit"):
        raise SystemExit("--compact of a --limit run needs the task file's id field")
    (into / Path(doc["data"]).name).write_text("".join(rows))
    texts: dict[str, dict[int, Any]] = collections.defaultdict(dict)
    for s in read_samples(run):
        texts[s.id][s.sample] = ({"text": s.text, "tokens": s.tokens} if tokens
                                 and s.tokens is not None else s.text)
    with (into / "recording.jsonl").open("w") as f:
        for qid, prompt in prompts.items():
            got = texts[qid]
            f.write(json.dumps({"prompt": prompt, "t": float(member["temperature"]),
                                "samples": [got[i] for i in range(len(got))]},
                               ensure_ascii=False) + "\n")
    print(f"wrote {into}: {len(prompts)} questions", file=sys.stderr)


def _pilot(codes, n_opt):
    head = codes[:, :2]
    c = np.stack([(head == o).sum(axis=1) for o in range(n_opt)], axis=1)
    p = np.sort(c, axis=1)
    return p[:, -1], (p[:, -2] if n_opt > 1 else np.zeros(len(p), dtype=int))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recording", type=Path, action="append",
                    help="a recording folder (task.yaml or data.jsonl + recording.jsonl); "
                    f"default: every folder of {DATA.relative_to(ROOT)}")
    ap.add_argument("--run", type=Path, action="append", default=[],
                    help="a finished run folder, replayed as replay/RUN")
    ap.add_argument("--esc", type=Path, action="append", default=[],
                    help="an ESC result file (question, answer, generated_answer)")
    ap.add_argument("--esc-t", type=float, default=0.7, help="the ESC file's temperature")
    ap.add_argument("--orders", type=int, default=200)
    ap.add_argument("--reps", type=int, default=1000, help="bootstrap resamples")
    ap.add_argument("--compact", type=Path, metavar="RUN", help="write the finished run RUN "
                    "of a task file as a recording folder (--into) and exit")
    ap.add_argument("--into", type=Path, help="the recording folder --compact writes")
    ap.add_argument("--tokens", action="store_true", help="--compact keeps each sample's "
                    "completion tokens (a replay then prices it with price_per_1k)")
    a = ap.parse_args(argv)
    if a.compact is not None:
        if a.into is None:
            ap.error("--compact needs --into FOLDER")
        compact(a.compact, a.into, tokens=a.tokens)
        return 0
    folders = a.recording if a.recording is not None else sorted(
        p.parent for p in DATA.glob("*/recording.jsonl"))
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        missing = [f for f in folders if not (f / "recording.jsonl").is_file()]
        for f in missing:
            print(f"(no recording.jsonl in {f}: skipped)", file=sys.stderr)
        cases = [folder_case(f, tmp) for f in folders if f not in missing]
        cases += [run_case(r, tmp) for r in a.run]
        cases += [esc_case(p, tmp, a.esc_t) for p in a.esc]
        for name, doc, run in cases:
            report(name, doc, run, orders_n=a.orders, reps=a.reps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
