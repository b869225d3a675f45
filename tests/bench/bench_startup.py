"""Start-up cost of the command line and the package (DESIGN.md section 7: `ensemble --help` and
`ensemble theory ...` under 0.5 s, no litellm; a dry run of an `openai/...` model, no litellm).

    python tests/bench/bench_startup.py [--runs 15]

Each case runs in a fresh interpreter `--runs` times; printed: the median CPU time of the child
(user + sys, from `os.wait4`: steadier than wall time on a shared machine), the median wall
time, and the modules it imported (heavy ones named). Compare two trees by running it with
each on PYTHONPATH; ratios between cases of one run are the figures to quote.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CASES = {
    "import ensemble": "import ensemble",
    "ensemble --help": "from ensemble.cli import main; main(['--help'])",
    "ensemble --version": "from ensemble.cli import main; main(['--version'])",
    "ensemble theory threshold": ("from ensemble.cli import main; "
                                  "main(['theory', 'threshold', '--n-max', '5', '--json'])"),
    "ensemble serve --help": "from ensemble.cli import main; main(['serve', '--help'])",
    # counts prompt tokens (tiktoken for openai/...) and prices them; sends nothing
    "ensemble eval --dry-run": ("import tempfile; from ensemble.cli import main; "
                                "main(['eval', 'boxball', '--model', 'openai/gpt-4o-mini', "
                                "'--api-base', 'http://127.0.0.1:9/v1', '--t', '1', '--n', '1', "
                                "'--limit', '10', '--max-tokens', '20', '--dry-run', '--out', "
                                "tempfile.mkdtemp() + '/run'])"),
}
HEAVY = ("litellm", "openai", "numpy", "scipy", "aiohttp", "matplotlib", "importlib.metadata",
         "ensemble.aggregators", "ensemble.stopping.bayes", "ensemble.testing")

PROBE = ("import sys, atexit, json, os\n"
         "def _report():\n"
         "    os.write(int(os.environ['BENCH_FD']), json.dumps(sorted(sys.modules)).encode())\n"
         "atexit.register(_report)\n")


def one(code: str) -> tuple[float, float, list[str]]:
    """(child CPU seconds, wall seconds, modules imported) of one fresh run of `code`."""
    import json

    r, w = os.pipe()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", PROBE + "try:\n    " + code +
                             "\nexcept SystemExit:\n    pass\n"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            pass_fds=(w,), env={**os.environ, "BENCH_FD": str(w)})
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"{code!r} failed (status {status})")
    return usage.ru_utime + usage.ru_stime, wall, json.loads(data or b"[]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}; PYTHONPATH={os.environ.get('PYTHONPATH', '')}; "
          f"load {os.getloadavg()[0]:.1f}; {args.runs} runs per case")
    print(f"{'case':28} {'cpu ms':>7} {'wall ms':>8} {'modules':>8}  heavy imports")
    for name, code in CASES.items():
        one(code)  # warm the file cache
        runs = [one(code) for _ in range(args.runs)]
        cpu = statistics.median(r[0] for r in runs) * 1000
        wall = statistics.median(r[1] for r in runs) * 1000
        mods = runs[-1][2]
        heavy = [h for h in HEAVY if h in mods]
        print(f"{name:28} {cpu:7.0f} {wall:8.0f} {len(mods):8d}  {', '.join(heavy) or '-'}")


if __name__ == "__main__":
    main()
