"""CPU per test and per xdist worker of a pytest run: where the default run's time goes.

On a shared, loaded machine wall times say little; CPU (user + sys of the test's process and of
the child processes it waited for) is what the 4-minute target on 2 idle cores is made of
(idle wall ~ total CPU / 2 when both workers stay busy, plus the tests' waits). As a plug-in:

    mkdir -p /tmp/cpu && CPU_PER_TEST_DIR=/tmp/cpu PYTHONPATH=src:tests/bench \\
        /usr/bin/time -v python -m pytest -p no:cacheprovider -p cpu_per_test
    python tests/bench/cpu_per_test.py /tmp/cpu [TOP]

The first prints the whole run's CPU (time -v: user + sys); the second each worker's CPU and the
moment its last test ended (the balance), the TOP tests by CPU and the files by CPU. A test's CPU
includes what its in-process servers and llama.cpp threads used; not a child process it left
running (a daemon), nor the first import of a module another test already paid for in that
worker (the first litellm user pays ~5 s).
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

_T0 = time.time()
_rows: list[tuple[str, float, float, float]] = []
_start: dict[str, tuple[float, float]] = {}


def _cpu() -> float:
    me, ch = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                  resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def pytest_runtest_logstart(nodeid, location):  # noqa: ARG001
    _start[nodeid] = (time.time(), _cpu())


def pytest_runtest_logfinish(nodeid, location):  # noqa: ARG001
    started = _start.pop(nodeid, None)
    if started is not None:
        _rows.append((nodeid, started[0] - _T0, time.time() - started[0], _cpu() - started[1]))


def pytest_sessionfinish(session):
    out = os.environ.get("CPU_PER_TEST_DIR")
    if not out or session.config.pluginmanager.hasplugin("dsession"):
        return  # not asked, or the xdist controller (its workers report)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    doc = {"worker": worker, "wall": time.time() - _T0, "cpu": _cpu(), "tests": _rows}
    Path(out, f"{worker}.json").write_text(json.dumps(doc))


def main(folder: str, top: int = 30) -> None:
    rows = []
    for path in sorted(Path(folder).glob("*.json")):
        doc = json.loads(path.read_text())
        tests = doc["tests"]
        rows += [(t, doc["worker"]) for t in tests]
        last = max((t[1] + t[2] for t in tests), default=0.0)
        print(f"{doc['worker']}: CPU {doc['cpu']:.1f} s, {len(tests)} tests, their CPU "
              f"{sum(t[3] for t in tests):.1f} s, last test ended at {last:.1f} s")
    print(f"\ntop {top} tests by CPU (s of CPU, s of wall, worker):")
    for t, worker in sorted(rows, key=lambda r: -r[0][3])[:top]:
        print(f"  {t[3]:7.2f} {t[2]:7.1f}  {worker}  {t[0]}")
    files: collections.Counter[str] = collections.Counter()
    for t, _ in rows:
        files[t[0].split("::")[0]] += t[3]
    print(f"\ntop {top} files by CPU:")
    for name, cpu in files.most_common(top):
        print(f"  {cpu:7.2f}  {name}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
