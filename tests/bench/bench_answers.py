"""Benchmark: the cost of reading open answers, per sample.

Number: 20,000 replies as the simulated server writes them (a short reasoning, then
`<answer>X</answer>` with X in one of the forms 1250, 1,250, 1250.0, $1,250, \\boxed{1250},
"The answer is 1250"), numbers drawn at random (integers and two-decimal values). Measured:
`Number().parse(reply)` (extract the answer, canonicalise it), against the baseline of the same
run, today's raw-string parser `extract_answer(reply)`, and merging 20 samples' keys by
tolerance (`merge_same`). Target: < 50 µs per sample.

Math: 60 distinct expressions (polynomials, fractions, roots, π) written two ways each.
Measured: `Math(cache=False).parse` (math-verify parse + canonical LaTeX, every time), the
warm-cache cost (`Math().parse` on spellings already seen), a realistic run (20 samples per
question, 3 distinct spellings per question, the cache cold at the start), and one
equivalence check `same(a, b)` uncached and cached.

    python tests/bench/bench_answers.py [--repeats 5]

Medians over the repeats; ratios against the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence

from ensemble.answers import Math, Number, clear_math_cache, merge_same
from ensemble.sampling.parsing import extract_answer
from ensemble.testing import write_number
from ensemble.testing.openexpert import FORMS


def number_replies(k: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(k):
        x = float(rng.randint(1, 2_000_000)) if rng.random() < 0.6 else \
            round(rng.uniform(-5000, 5000), 2)
        form = FORMS[rng.randrange(len(FORMS))]
        out.append(f"<reason>Multiply the price by the quantity, then add the tax of "
                   f"{rng.randint(2, 20)} percent.</reason>\n<answer>{write_number(x, form)}"
                   "</answer>")
    return out


def math_spellings() -> list[tuple[str, str]]:
    pairs = []
    for a in range(1, 21):
        pairs.append((f"x^2+{2 * a}x+{a * a}", f"(x+{a})^2"))
        pairs.append((f"\\frac{{{a}}}{{{a + 1}}}", f"{a}/({a + 1})"))
        pairs.append((f"\\sqrt{{{a * a * 2}}}", f"{a}\\sqrt{{2}}"))
    return pairs


def per_sample(fn: Callable[[str], object], items: Sequence[str], repeats: int) -> float:
    """Median over repeats of the mean seconds per item."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for x in items:
            fn(x)
        times.append((time.perf_counter() - t0) / len(items))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    replies = number_replies(20_000)
    num = Number()
    base = per_sample(extract_answer, replies, args.repeats)
    parse = per_sample(num.parse, replies, args.repeats)
    keys = [num.parse(r) for r in replies]
    groups = [keys[i:i + 20] for i in range(0, len(keys), 20)]
    t0 = time.perf_counter()
    for _ in range(args.repeats):
        for g in groups:
            merge_same(num, g)
    merge = (time.perf_counter() - t0) / args.repeats / len(keys)
    valid = sum(k is not None for k in keys) / len(keys)
    print(f"number: {len(replies)} replies, {valid:.1%} parsed")
    print(f"  baseline extract_answer (raw string)   {base * 1e6:8.2f} µs/sample")
    print(f"  Number().parse                         {parse * 1e6:8.2f} µs/sample "
          f"({parse / base:.2f}x baseline)  target < 50 µs: "
          f"{'met' if parse < 50e-6 else 'NOT met'}")
    print(f"  merge_same, 20 samples a question      {merge * 1e6:8.2f} µs/sample")

    pairs = math_spellings()
    spelled = [s for p in pairs for s in p]
    cold = Math(cache=False)
    warm = Math()
    reps = max(1, args.repeats // 2)
    uncached = per_sample(cold.parse, spelled, reps)
    for s in spelled:
        warm.parse(s)
    cached = per_sample(warm.parse, spelled, args.repeats)
    # a realistic run: 20 samples per question, 3 distinct spellings each, cache cleared first
    rng = random.Random(1)
    run = []
    for i in range(0, len(pairs) - 1, 2):
        options = [pairs[i][0] + " ", pairs[i][1] + " ", pairs[i + 1][0] + " "]
        run += [f"<answer>{options[rng.randrange(3)]}</answer>" for _ in range(20)]
    clear_math_cache()  # a benchmark measures the cold cache
    t0 = time.perf_counter()
    for text in run:
        warm.parse(text)
    realistic = (time.perf_counter() - t0) / len(run)
    ka, kb = cold.parse(pairs[0][0]), cold.parse(pairs[0][1])
    assert ka and kb
    t0 = time.perf_counter()
    for _ in range(reps):
        assert cold.same(ka, kb)
    same_cold = (time.perf_counter() - t0) / reps
    warm.same(ka, kb)
    t0 = time.perf_counter()
    for _ in range(1000):
        warm.same(ka, kb)
    same_warm = (time.perf_counter() - t0) / 1000
    print(f"math: {len(spelled)} spellings of {len(pairs)} expressions")
    print(f"  parse, no cache                        {uncached * 1e6:10.1f} µs/sample "
          f"({uncached / base:.0f}x the raw baseline)")
    print(f"  parse, warm cache                      {cached * 1e6:10.2f} µs/sample")
    print(f"  20 samples/question, 3 spellings, cold {realistic * 1e6:10.1f} µs/sample "
          f"({uncached / realistic:.1f}x cheaper than no cache)")
    print(f"  same(a, b), no cache                   {same_cold * 1e6:10.1f} µs")
    print(f"  same(a, b), cached                     {same_warm * 1e6:10.2f} µs")


if __name__ == "__main__":
    main()
