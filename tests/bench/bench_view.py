"""Benchmark: `ensemble view` on a run of MathQA's size, and its first render in headless Chromium.

Run folder: the 2,985 MathQA test questions (the real prompts from ../shared/data/mathqa when
present, else synthetic ones of the same length) x 3 temperatures (0, 0.5, 1) x 20 samples =
179,100 samples, written through evals.records like an eval does, with synthetic replies of
realistic length: a reasoning of 250-750 characters (mean ~500) ending in <answer>X</answer>,
3% without an answer (invalid); at t = 0 the 20 replies to a question are identical (greedy
decoding), at t > 0 they differ. votes.jsonl for n in {1, 3, 5, 20}; summary.json and
accuracy.png from the eval's own analysis (200 bootstrap repetitions).

Measured: the time to write view.html (Python), its size, and the time to first render in
headless Chromium (the page's own `performance.now()` after the first page of questions is in
the DOM, read from `--dump-dom`; it counts from navigation start, so it includes reading and
parsing the file and the embedded JSON), plus the wall time of the whole chromium process.

    python tests/bench/bench_view.py [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _plans import jsonl_plan

from ensemble.evals.grid import analyse
from ensemble.evals.outputs import write_outputs
from ensemble.evals.records import model_members, write_questions, write_samples, write_votes
from ensemble.evals.schemas import EvalSummary, Tables
from ensemble.evals.view import build_view
from ensemble.sampling.types import Sample
from ensemble.tasks import Question

ROOT = Path(__file__).resolve().parents[2]
MATHQA = [ROOT.parent / "shared" / "data" / "mathqa" / "test.json"]
TEMPS, K, NS, LETTERS = (0.0, 0.5, 1.0), 20, (1, 3, 5, 20), "ABCDE"
WORDS = ("the total is so we divide by then multiply each part gives rate speed distance time "
         "percent of area length width ratio sum difference hence answer option per hour "
         "cost price profit interest years").split()


def questions(n: int = 2985) -> list[Question]:
    path = next((p for p in MATHQA if p.exists()), None)
    if path is not None:
        from ensemble.tasks import get_task

        return list(get_task("mathqa", data=str(path)).questions())[:n]
    rng = random.Random(0)
    return [Question(id=f"q{i}", prompt=" ".join(rng.choices(WORDS, k=90)),
                     choices=tuple(LETTERS), correct=rng.choice(LETTERS)) for i in range(n)]


def reply(rng: random.Random, answer: str | None) -> str:
    words = []
    target = rng.randint(250, 750)
    size = 0
    while size < target:
        w = rng.choice(WORDS) if rng.random() < 0.8 else str(rng.randint(2, 999))
        words.append(w)
        size += len(w) + 1
    body = f"<reason>{' '.join(words)}</reason>\n"
    return body + (f"<answer>{answer}</answer>" if answer else "I am not sure.")


def synthetic_run(out: Path, qs: list[Question], *, seed: int = 0) -> int:
    """Write a MathQA-sized eval run folder; returns the number of samples."""
    rng = random.Random(seed)
    g = np.random.default_rng(seed)
    rows, answers = [], np.empty((len(TEMPS), len(qs), K), dtype=object)
    for ti, t in enumerate(TEMPS):
        for qi, q in enumerate(qs):
            p_right = float(g.beta(6, 3))
            row, frozen = [], None
            for k in range(K):
                if t == 0 and frozen is not None:
                    text, a = frozen
                else:
                    if rng.random() < 0.03:
                        a = None
                    elif rng.random() < p_right:
                        a = q.correct
                    else:
                        a = rng.choice([c for c in q.choices if c != q.correct])
                    text = reply(rng, a)
                    frozen = (text, a)
                row.append(Sample(key="x", index=k, text=text, answer=a,
                                  completion_tokens=len(text) // 4, latency_s=0.5))
                answers[ti, qi, k] = a
            rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    write_questions(out, qs)
    n = write_samples(out, qs, TEMPS, rows, answers)
    write_votes(out, qs, model_members(TEMPS, NS), answers, rule="plurality")
    plan = jsonl_plan(qs, TEMPS, NS, samples=K, bootstrap=200)
    tables = analyse(plan, qs, answers)
    summary = EvalSummary(**{f: getattr(tables, f) for f in Tables.model_fields},
                          **_no_draw(plan, n, out))
    write_outputs(out, summary, chance=0.2)
    return n


def _no_draw(plan: Any, n: int, out: Path) -> dict[str, Any]:
    """The summary's fields beside the tables, for samples written here (no draw)."""
    import dataclasses

    from ensemble import ProviderOptions, __version__

    return {"task": plan.task_name, "model": plan.model, "bootstrap": plan.bootstrap, "seed": 0,
            "ensemble": None, "aggregators": ["plurality"], "lam1": None,
            "layout": dataclasses.asdict(plan.layout), "requests": 0,
            "cost_usd": None, "cost": {"now_usd": None, "stored_samples_usd": None,
                                       "note": "synthetic"},
            "tokens": {"prompt": 0, "completion": 0},
            "samples": {"total": n, "from_store": n}, "retries": 0, "errors": 0,
            "rate_limited": 0, "wall_time_s": 0.0, "analysis_time_s": 0.0,
            "run_dir": str(out), "data": {}, "failed": {"count": 0, "of": 0, "ids": [],
                                                         "reasons": {}, "file": None},
            "notes": [], "provider": ProviderOptions().public(), "endpoint": None,
            "served_by": None, "created": "synthetic", "version": __version__}


def render_ms(page: Path, profile: Path) -> tuple[float, float]:
    """(first render in ms as the page measured it, chromium's wall time in s)."""
    exe = shutil.which("chromium")
    if exe is None:
        raise SystemExit("chromium not installed (apt-get install chromium)")
    t0 = time.perf_counter()
    res = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                          "--no-first-run", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    m = re.search(r'data-render-ms="(\d+)"', res.stdout)
    if m is None:
        raise SystemExit(f"no render time in the DOM: {res.stderr[-500:]}")
    return float(m.group(1)), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", help="write the run here and keep it")
    args = ap.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-view-"))
    run = base / "run"
    qs = questions()
    t0 = time.perf_counter()
    n = synthetic_run(run, qs)
    print(f"run: {len(qs)} questions x {len(TEMPS)} t x {K} samples = {n} samples "
          f"(written in {time.perf_counter() - t0:.1f} s); samples.jsonl "
          f"{(run / 'samples.jsonl').stat().st_size / 1e6:.1f} MB")
    builds, renders, walls = [], [], []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        res = build_view([run])
        builds.append(time.perf_counter() - t0)
        ms, wall = render_ms(res.path, base / f"profile{i}")
        renders.append(ms)
        walls.append(wall)
    print(f"view.html: {res.bytes / 1e6:.1f} MB ({res.questions} questions, {res.samples} "
          f"samples)")
    print(f"ensemble view (Python): median {statistics.median(builds):.2f} s "
          f"(runs: {', '.join(f'{b:.2f}' for b in builds)})")
    print(f"first render in headless Chromium: median {statistics.median(renders):.0f} ms "
          f"(runs: {', '.join(f'{r:.0f}' for r in renders)}); chromium process wall time "
          f"median {statistics.median(walls):.1f} s")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
