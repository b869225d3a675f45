"""The local model's throughput: samples/s with n samples per question, one sequence at a time
(one slot: what the local provider did before it used llama.cpp's parallel slots) against the
server's slots (`ensemble.local.DEFAULT_SLOTS`, one request of n per question, requests side
by side), through the real sampler, on MathQA prompts.

    nice -n 10 python tests/bench/bench_local_n.py                 # n = 1, 5, 20, 3 rounds
    nice -n 10 python tests/bench/bench_local_n.py --ns 5 --rounds 5 --samples 40

Each round runs every (n, setting) once, the settings alternated, each on a fresh server (the
start-up is timed apart: memory and start-up grow with the KV cache). It prints per cell the
median samples/s over the rounds, and the ratio slots / one slot of each round's pair (the
machine is shared: ratios within a round, medians over rounds). Tokens per sample are printed
too: a setting that made replies shorter would look faster.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import ensemble.local as local
from ensemble import SampleRequest
from ensemble.sampling.sampler import Sampler
from ensemble.tasks import get_task

ROOT = Path(__file__).resolve().parents[2]
MATHQA = ROOT.parent / "shared" / "data" / "mathqa" / "test.json"
SMOLLM2 = ROOT.parent / "shared" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return int(fh.read().split("VmRSS:")[1].split()[0]) / 1024


async def one(model: str, prompts: list[str], n: int, slots: int, max_tokens: int,
              seed: int) -> dict[str, float]:
    os.environ["ENSEMBLE_LOCAL_SLOTS"] = str(slots)
    before = rss_mb()
    t0 = time.perf_counter()
    # the provider caps the concurrency at its slots; a loaded machine needs the timeout (one
    # slot waits --timeout: a 60 s default gave up there at load 15)
    async with Sampler(model, max_concurrency=64, timeout=900.0) as s:
        start = time.perf_counter() - t0
        mem = rss_mb() - before
        reqs = [SampleRequest.of(p, temperature=0.7, k=n, max_tokens=max_tokens,
                                 tag=f"{seed}:{i}") for i, p in enumerate(prompts)]
        t1 = time.perf_counter()
        rows = await s.sample(reqs)
        el = time.perf_counter() - t1
    got = [x for row in rows for x in row]
    toks = [x.completion_tokens or 0 for x in got]
    assert len(got) == n * len(prompts) and all(x.text is not None for x in got)
    return {"rate": len(got) / el, "tokens": statistics.mean(toks), "start": start, "mem": mem,
            "seconds": el}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=f"local:{SMOLLM2}")
    ap.add_argument("--ns", type=int, nargs="+", default=[1, 5, 20])
    ap.add_argument("--samples", type=int, default=20, help="samples per cell (n x questions)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slots", type=int, default=local.DEFAULT_SLOTS)
    ap.add_argument("--max-tokens", type=int, default=48)
    a = ap.parse_args()
    import litellm  # noqa: F401 - imported once here, not inside the first timed cell (~4 s)

    qs = list(get_task("mathqa", data=MATHQA).questions())
    print(f"{a.model}; threads {local.cores.total}; max_tokens {a.max_tokens}; "
          f"{a.samples} samples a cell; load {os.getloadavg()[0]:.1f}", flush=True)
    res: dict[tuple[int, int], list[dict[str, float]]] = {}
    ratios: dict[int, list[float]] = {n: [] for n in a.ns}
    at = 0
    for r in range(a.rounds):
        for n in a.ns:
            k = max(1, a.samples // n)
            prompts = [q.prompt for q in qs[at:at + k]]  # fresh prompts: nothing cached
            at += k
            order = (1, a.slots) if r % 2 == 0 else (a.slots, 1)
            pair = {}
            for slots in order:
                # the same prompts for both settings, but other samples: a store-free sampler
                out = asyncio.run(one(a.model, prompts, n, slots, a.max_tokens, r))
                res.setdefault((n, slots), []).append(out)
                pair[slots] = out["rate"]
                print(f"round {r} n={n:>2} slots={slots:>2}: {out['rate']:.2f} samples/s "
                      f"({out['seconds']:.0f} s, {out['tokens']:.1f} tokens/sample; start "
                      f"{out['start']:.1f} s, +{out['mem']:.0f} MB; load "
                      f"{os.getloadavg()[0]:.1f})", flush=True)
            ratios[n].append(pair[a.slots] / pair[1])
    print("\nn   one slot (samples/s)   slots (samples/s)   ratio per round -> median")
    for n in a.ns:
        one_, many = res[(n, 1)], res[(n, a.slots)]
        print(f"{n:<3} {statistics.median(x['rate'] for x in one_):>10.2f}"
              f" {statistics.median(x['rate'] for x in many):>19.2f}   "
              f"{[round(x, 2) for x in ratios[n]]} -> x{statistics.median(ratios[n]):.2f}")
    for slots in (1, a.slots):
        cells = [x for (n, s), xs in res.items() if s == slots for x in xs]
        print(f"slots {slots}: start-up median {statistics.median(x['start'] for x in cells):.1f}"
              f" s, memory +{statistics.median(x['mem'] for x in cells):.0f} MB (RSS of the "
              "process after the server started)")


if __name__ == "__main__":
    main()
