"""Measure a mixed ensemble eval against two simulated models (docs/ensembles.md, "Evaluating a
mixed ensemble"): one expert with λ₁ = 2 and one with λ₁ = 8 (ψ_λ units), one vote each at
t = 1, on all 216 box-ball scenarios. Theory (exact, docs/ensembles.md): majority 0.6655,
lam-weighted = robust = 0.6987 (utility, ±1 units). Prints the eval's table and the command.

    PYTHONPATH=src python tests/bench/bench_mixed.py [--samples K] [--limit L]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ensemble.testing import SimulatedServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    # different seeds: the two models' answers are independent
    with SimulatedServer(lam1=2.0, seed=1) as s2, SimulatedServer(lam1=8.0, seed=2) as s8:
        spec = {"members": [
            {"model": "openai/sim-l2", "api_base": s2.base_url, "n": 1, "temperature": 1.0,
             "lam": 2.0, "label": "λ₁=2"},
            {"model": "openai/sim-l8", "api_base": s8.base_url, "n": 1, "temperature": 1.0,
             "lam": 8.0, "label": "λ₁=8"}]}
        (tmp / "spec.json").write_text(json.dumps(spec, indent=1))
        cmd = ["ensemble", "eval", "boxball", "--ensemble", str(tmp / "spec.json"),
               "--samples", str(a.samples), "--out", str(tmp / "run"),
               "--price-per-1k-tokens", "0,0"]
        if a.limit:
            cmd += ["--limit", str(a.limit)]
        if a.json:
            cmd.append("--json")
        t0 = time.perf_counter()
        r = subprocess.run(cmd, text=True, capture_output=True, env={
            **__import__("os").environ, "COLUMNS": "140"})
        print(" ".join(cmd), file=sys.stderr)
        print(r.stdout, r.stderr, f"\n{time.perf_counter() - t0:.1f} s", sep="")
        sys.exit(r.returncode)


if __name__ == "__main__":
    main()
