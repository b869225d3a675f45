"""Benchmark: the client's cost per sample does not grow with the size of the run.

Against the simulated expert (its own process, zero latency, an answer key for MathQA):
`ensemble eval mathqa` over 300 questions x 20 samples at one temperature (6,000 samples) and
over all 2,985 questions x 20 samples at two temperatures (119,400 samples), each into a fresh
folder. Printed: the sampling wall time per sample (`wall_time_s` in --json) of each, their
ratio (target <= 1.2) and the eval process's peak RSS (target < 500 MB).

    python tests/bench/bench_scale.py [--data ../shared/data/mathqa/test.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from _servers import server_process

ROOT = Path(__file__).resolve().parents[2]


def run_eval(url: str, data: str, out: str, temps: list[str],
             limit: int | None) -> tuple[dict, float]:
    cmd = [sys.executable, "-m", "ensemble", "eval", "mathqa", "--model", "openai/sim-expert",
           "--api-base", url, "--data", data, "--t", *temps, "--n", "1", "5",
           "--samples", "20", "--out", out, "--json", "--bootstrap", "200"]
    if limit:
        cmd += ["--limit", str(limit)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the largest of any child so far: runs go smallest first
    return json.loads(r.stdout), max(peak_kb, before) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "mathqa" /
                                          "test.json"))
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from ensemble.tasks import get_task
    from ensemble.testing import answer_key_from_questions

    key = answer_key_from_questions(get_task("mathqa", data=a.data).questions())
    with tempfile.TemporaryDirectory() as d:
        kf = os.path.join(d, "key.json")
        Path(kf).write_text(json.dumps(key))
        with server_process("--answer-key", kf, "--lam", "1") as url:
            small, rss_small = run_eval(url, a.data, os.path.join(d, "small"), ["0.7"], 300)
            big, rss_big = run_eval(url, a.data, os.path.join(d, "big"), ["0.5", "1"], None)
    ps = small["wall_time_s"] / small["samples"]["total"]
    pb = big["wall_time_s"] / big["samples"]["total"]
    print(f"small: {small['samples']['total']} samples, {small['requests']} requests, "
          f"{small['wall_time_s']:.1f} s, {ps * 1e3:.3f} ms/sample, peak RSS {rss_small:.0f} MB")
    print(f"big:   {big['samples']['total']} samples, {big['requests']} requests, "
          f"{big['wall_time_s']:.1f} s, {pb * 1e3:.3f} ms/sample, peak RSS {rss_big:.0f} MB")
    print(f"cost per sample, big / small: {pb / ps:.2f} (target <= 1.2); "
          f"peak RSS {rss_big:.0f} MB (target < 500)")


if __name__ == "__main__":
    main()
