"""Benchmark: batch mode against the simulated Files + Batch API (its own process).

1. The issue's eval (`boxball --t 1 --n 1 3 --samples 3 --limit 40`), online and with
   `--batch` where a fifth of the lines fail on their first submission: requests to
   /v1/chat/completions and batches (counted at the server), wall time, whether the --json
   keys and rows are the same; and the price ratio batch / online where litellm knows both
   prices (the same eval as `openai/gpt-4o-mini`: litellm prices its batch lines at its
   `*_cost_per_token_batches` rates).
2. Paper-sized: MathQA, all 2,985 questions x 20 samples x 5 temperatures (298,500 samples)
   with `--batch`: lines, batches, wall time, peak RSS of the eval process alone (its own
   rusage from wait4; the simulated server runs in another process and is not counted).
   Target: below 300 MB.

    python tests/bench/bench_batch.py [--delay 2] [--skip-paper] [--data test.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _servers import server_process, server_stats

ROOT = Path(__file__).resolve().parents[2]


def ensemble(*args: str) -> tuple[dict, float, float]:
    """(--json document, wall seconds, peak RSS MB of this command's own process)."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "ensemble", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stderr is not None
    with ThreadPoolExecutor(2) as pool:
        fo, fe = pool.submit(p.stdout.read), pool.submit(p.stderr.read)
        # the child's own rusage (RUSAGE_CHILDREN would mix in the server process)
        _, status, usage = os.wait4(p.pid, 0)
        out, err = fo.result(), fe.result()
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(err)
    return json.loads(out), wall, usage.ru_maxrss / 1024


def issue_eval(delay: float, d: str) -> None:
    common = ["eval", "boxball", "--t", "1", "--n", "1", "3", "--samples", "3", "--limit",
              "40", "--json"]
    for model in ("openai/x", "openai/gpt-4o-mini"):
        with server_process("--lam", "3", "--batch-delay", str(delay),
                            "--batch-fail-first", "0.2") as url:
            base = [*common, "--model", model, "--api-base", url]
            on, on_wall, _ = ensemble(*base, "--out", os.path.join(d, f"on-{model[7:]}"))
            s0 = server_stats(url)
            b, b_wall, _ = ensemble(*base, "--out", os.path.join(d, f"b-{model[7:]}"), "--batch",
                                    "--batch-poll", "0.5")
            s1 = server_stats(url)
        print(f"[{model}] online: {on['requests']} requests to /v1/chat/completions, "
              f"{on_wall:.1f} s (sampling {on['wall_time_s']:.1f} s), cost {on['cost_usd']}")
        print(f"[{model}] batch:  {s1['requests'] - s0['requests']} requests to "
              f"/v1/chat/completions, {s1['batches_created'] - s0['batches_created']} batches, "
              f"{s1['batch_lines'] - s0['batch_lines']} lines run "
              f"({s1['batch_line_faults'] - s0['batch_line_faults']} failed first), "
              f"{b['requests']} lines submitted, {b_wall:.1f} s (sampling "
              f"{b['wall_time_s']:.1f} s, server delay {delay:g} s per batch), "
              f"cost {b['cost_usd']}")
        print(f"[{model}] same --json keys: {sorted(b) == sorted(on)}; same rows: "
              f"{b['results'] == on['results'] and b['contrasts'] == on['contrasts']}")
        if on["cost_usd"] and b["cost_usd"]:
            print(f"[{model}] price ratio batch / online: {b['cost_usd'] / on['cost_usd']:.3f} "
                  f"(tokens {b['tokens']} vs {on['tokens']})")


def paper(delay: float, data: str, d: str) -> None:
    sys.path.insert(0, str(ROOT))
    from ensemble.tasks import get_task
    from ensemble.testing import answer_key_from_questions

    key = answer_key_from_questions(get_task("mathqa", data=data).questions())
    kf = os.path.join(d, "key.json")
    Path(kf).write_text(json.dumps(key))
    with server_process("--answer-key", kf, "--lam", "1", "--batch-delay", str(delay)) as url:
        doc, wall, rss = ensemble(
            "eval", "mathqa", "--model", "openai/sim-expert", "--api-base", url, "--data",
            data, "--t", "0", "0.25", "0.5", "0.75", "1", "--n", "1", "5", "20",
            "--samples", "20", "--bootstrap", "200", "--out", os.path.join(d, "paper"),
            "--json", "--batch", "--batch-poll", "1")
        st = server_stats(url)
    print(f"paper-sized: {doc['samples']['total']} samples, {doc['requests']} lines in "
          f"{st['batches_created']} batches, {st['requests']} chat requests, wall {wall:.0f} s "
          f"(sampling {doc['wall_time_s']:.0f} s), peak RSS {rss:.0f} MB (the eval process "
          "alone; the server runs in its own process)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=2.0, help="server seconds per batch")
    ap.add_argument("--skip-paper", action="store_true")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "mathqa" /
                                          "test.json"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        issue_eval(a.delay, d)
        if not a.skip_paper:
            paper(a.delay, a.data, d)


if __name__ == "__main__":
    main()
