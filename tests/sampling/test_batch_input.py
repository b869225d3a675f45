"""Batch mode's input files: each line as the provider's wire format writes it, the split
within the provider's limits, temporary files that hold the lines instead of memory; and the
openai SDK's Batch API, which runs a batch without importing litellm."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from ensemble.errors import InputError
from ensemble.providers.openai_wire import BATCH_ENDPOINT, line_writer
from ensemble.sampling.batch_input import input_files, input_lines

BODIES = {"k1": {"model": "m", "messages": [{"role": "user", "content": "é 1"}],
                 "temperature": 1.0},
          "k2": {"model": "m", "messages": [{"role": "user", "content": "two"}],
                 "temperature": 0.5, "max_tokens": 9}}
WRITERS = {key: line_writer(body) for key, body in BODIES.items()}


def test_lines_are_the_json_of_their_documents_with_n_on_lines_of_several():
    got = list(input_lines([("k1", [0, 1, 2, 3, 4, 7]), ("k2", [5])], WRITERS.__getitem__, 4))
    assert [(ln.key, ln.start, ln.count, ln.custom_id) for ln, _ in got] == [
        ("k1", 0, 4, "k1:0:4"), ("k1", 4, 1, "k1:4:1"), ("k1", 7, 1, "k1:7:1"),
        ("k2", 5, 1, "k2:5:1")]
    for ln, data in got:
        body = dict(BODIES[ln.key])
        if ln.count > 1:
            body["n"] = ln.count
        doc = {"custom_id": ln.custom_id, "method": "POST", "url": BATCH_ENDPOINT,
               "body": body}
        assert data == (json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
                        + "\n").encode()


def test_files_are_split_within_the_limits_and_hold_the_lines():
    lines = list(input_lines([("k1", range(10)), ("k2", range(10))], WRITERS.__getitem__, 2))
    one = max(len(d) for _, d in lines)
    files = list(input_files(iter(lines), max_lines=4, max_bytes=3 * one))
    try:
        assert [len(b) for b, _ in files] == [3, 3, 3, 1]
        assert b"".join(f.read() for _, f in files) == b"".join(d for _, d in lines)
        assert all(f.fileno() >= 0 for _, f in files)  # real files, not bytes in memory
    finally:
        for _, f in files:
            f.close()
    files = list(input_files(iter(lines), max_lines=4, max_bytes=10 * one))
    assert [len(b) for b, _ in files] == [4, 4, 2]
    for _, f in files:
        f.close()


def test_a_line_larger_than_a_file_is_refused():
    with pytest.raises(InputError, match="more than the provider's 10 per file"):
        list(input_files(input_lines([("k1", [0])], WRITERS.__getitem__, 1), max_lines=5,
                         max_bytes=10))


def test_an_openai_batch_run_does_not_import_litellm(tmp_path):
    # litellm alone holds ~130 MB of a batch run's memory: `openai/...` batches go through
    # the SDK's own Files and Batch API (a fresh process: this one may have litellm already)
    code = textwrap.dedent(f"""
        import asyncio, sys
        from ensemble.sampling.batch import BatchOptions
        from ensemble.sampling.sampler import Sampler
        from ensemble.sampling.types import SampleRequest
        from ensemble.testing import BatchPlan, SimulatedServer

        async def main():
            with SimulatedServer(lam1=3.0, batch=BatchPlan(delay=0.1)) as srv:
                async with Sampler("openai/x", api_base=srv.base_url,
                                   store={str(tmp_path / "s.sqlite")!r}, mode="batch",
                                   batch=BatchOptions(poll_initial=0.05, poll_max=0.2)) as s:
                    res = await s.run([SampleRequest.of(f"q{{i}}", temperature=1.0, k=3)
                                       for i in range(4)])
                print(res.complete, srv.stats.batches_created, s.stats.requests,
                      "litellm" in sys.modules)

        asyncio.run(main())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "1", "4", "False"]
