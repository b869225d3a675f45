"""The bad-input walk outside evals/: every input a user can get wrong is one line on stderr, a
non-zero exit and no traceback (CLI), or one InputError (Python); the README's argument order
works. Through the real CLI and the real simulated server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ensemble import Ensemble
from ensemble.errors import DataError, InputError
from ensemble.tasks import get_task
from ensemble.testing import SimulatedServer

BINARY = bytes(range(256)) * 4  # not UTF-8, not YAML, not JSON


@pytest.fixture
def cli(run_cli):
    """`ensemble ARGS` in this process (the run_cli fixture of tests/conftest.py)."""
    return run_cli


def one_line(r):
    err = r.stderr if isinstance(r.stderr, str) else r.stderr.decode("utf-8", "replace")
    assert r.returncode != 0, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_readme_argument_order_for_choices_works(cli):
    with SimulatedServer(lam1=3.0) as srv:
        r = cli("sample", "--model", "openai/sim-expert", "--api-base", srv.base_url, "--t", "1",
                "-k", "3", "--choices", "positive,negative", "Positive or negative: hello",
                "--json")
        single = cli("sample", "--model", "openai/sim-expert", "--api-base", srv.base_url,
                     "-k", "2", "--choices", "L,R", "hello", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["choices"] == ["positive", "negative"] and sum(doc["counts"].values()) == 3
    assert single.returncode == 0, single.stderr
    assert json.loads(single.stdout)["choices"] == ["L", "R"]


def test_choices_differing_only_in_case_are_refused(cli):
    err = one_line(cli("sample", "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1",
                       "--choices", "l", "L", "hello there"))
    assert "differ only in case" in err
    with pytest.raises(InputError, match="differ only in case"):
        Ensemble(model="openai/x", api_base="http://127.0.0.1:9/v1", choices=["yes", "Yes"])


def test_a_prompt_argument_that_is_not_utf8_is_one_line():
    r = subprocess.run([sys.executable.encode(), b"-m", b"ensemble", b"sample", b"--model",
                        b"openai/x", b"--api-base", b"http://127.0.0.1:9/v1", b"caf\xe9 \xff"],
                       capture_output=True, timeout=120)
    assert "not valid text" in one_line(r)


def test_binary_files_are_one_line(tmp_path, cli):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(BINARY)
    base = ("--api-base", "http://127.0.0.1:9/v1")
    cases = [
        ("sample", "--model", "g", "--router", str(blob), "hello"),
        ("eval", "boxball", "--ensemble", str(blob), "--limit", "1"),
        ("eval", "jsonl", "--model", "openai/x", *base, "--data", str(blob), "--t", "1",
         "--n", "1"),
        ("testing", "serve", "--answer-key", str(blob)),
        ("testing", "serve", "--open-answers", str(blob)),
    ]
    for args in cases:
        err = one_line(cli(*args))
        assert "UTF-8" in err, (args, err)


def test_a_lone_surrogate_in_a_jsonl_line_names_the_row(tmp_path, cli):
    j = tmp_path / "q.jsonl"
    j.write_text('{"question": "ok?", "choices": ["a", "b"]}\n'
                 '{"question": "bad \\ud800 text", "choices": ["a", "b"]}\n')
    with pytest.raises(DataError, match="row 2.*surrogate"):
        get_task("jsonl", data=j).questions()
    err = one_line(cli("eval", "jsonl", "--model", "openai/x", "--api-base",
                       "http://127.0.0.1:9/v1", "--data", str(j), "--t", "1", "--n", "1"))
    assert "row 2" in err


def test_decide_refuses_a_lone_surrogate_and_decide_many_none():
    ens = Ensemble(model="openai/x", api_base="http://127.0.0.1:9/v1", n=1)
    with pytest.raises(InputError, match="lone surrogate"):
        ens.decide("bad \ud800 text")
    with pytest.raises(InputError, match="list of prompts"):
        ens.decide_many(None)  # type: ignore[arg-type]


def test_interrupting_sample_without_a_store_does_not_promise_one(tmp_path, interruptible):
    import signal
    import time

    # a process with SIGINT's default action whatever this one inherited (tests/conftest.py);
    # the reply never comes within the test: the interrupt cannot come after it
    with SimulatedServer(lam1=3.0, latency=600.0) as srv:
        proc = subprocess.Popen(interruptible("sample", "--model", "openai/sim-expert",
                                              "--api-base", srv.base_url, "-k", "2",
                                              "hello there"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        t0 = time.monotonic()
        while srv.stats.requests < 1 and proc.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.02)
        assert proc.poll() is None and srv.stats.requests == 1, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    text = err.decode()
    assert proc.returncode == 130, text
    assert "not kept" in text and "kept in the store" not in text


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/v1?key=secretq",
                                 "http://127.0.0.1:9/v1/?api-version=secretq", "http://h/v1?"])
def test_an_api_base_query_is_refused_without_echoing_it(url, tmp_path, capsys):
    """Issue 41 item 9: `--api-base ...?key=secretq` was written to spec.json (messages showed
    key=***), and the routes were appended after the query."""
    for argv in (("eval", "boxball", "--model", "openai/x", "--api-base", url, "--t", "1",
                  "--n", "1", "--limit", "2", "--out", tmp_path / "run"),
                 ("sample", "--model", "openai/x", "--api-base", url, "--store",
                  tmp_path / "s.sqlite", "hello")):
        err = _main(capsys, *argv)
        assert "?query" in err and "secretq" not in err
    assert not (tmp_path / "run").exists() and not (tmp_path / "s.sqlite").exists()
    with pytest.raises(InputError, match=r"\?query") as exc:
        Ensemble("openai/x", api_base=url, choices=["a", "b"])
    assert "secretq" not in str(exc.value)


def test_binary_run_files_are_one_line_naming_the_file(tmp_path):
    from ensemble.evals.records import read_questions, read_samples

    run = tmp_path / "run"
    run.mkdir()
    (run / "samples.jsonl").write_bytes(b'{"id": "q"}\n' + BINARY)
    (run / "questions.jsonl").write_bytes(BINARY)
    with pytest.raises(DataError, match="samples.jsonl.*not UTF-8"):
        list(read_samples(run))
    with pytest.raises(DataError, match="questions.jsonl.*not UTF-8"):
        list(read_questions(run))



# -- issue 32 item 6: the last tracebacks, each one line (in this process) -----------------------
def _main(capsys, *argv):
    from ensemble.cli import main

    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: a flag's value refused (exit 2)
        rc = exc.code
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("where", ["afile", "/proc/nope"])
def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path, capsys, where):
    out = tmp_path / where if where == "afile" else where
    if where == "afile":
        out.write_text("not a folder")
    err = _main(capsys, "eval", "boxball", "--model", "openai/x", "--api-base",
                "http://127.0.0.1:9/v1", "--t", "1", "--n", "1", "--limit", "2", "--out", out)
    assert f"--out {out}" in err
    assert ("is a file, not a folder" if where == "afile" else "cannot create the folder") in err


def test_a_spec_nested_100000_deep_is_one_line(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    err = _main(capsys, "eval", "--spec", deep)
    assert "nested too deeply" in err and str(deep) in err


def test_a_recursive_model_as_answer_is_one_input_error():
    from pydantic import BaseModel

    class Rec(BaseModel):  # the Optional["Rec"]
        child: Rec | None = None

    Rec.model_rebuild()
    with pytest.raises(InputError, match="contains itself"):
        Ensemble(model="openai/x", api_base="http://127.0.0.1:9/v1", answer=Rec)


# -- issue 32 item 11 ------------------------------------------------------------------------------
def test_choices_that_are_not_utf8_are_one_line(capsys):
    bad = b"\xffa,b".decode("utf-8", "surrogateescape")  # what Python makes of $'\xffa,b'
    err = _main(capsys, "sample", "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1",
                "--choices", bad, "Which?")
    assert "--choices" in err and "not valid text" in err


@pytest.mark.parametrize("choices", [["a"], []])
def test_fewer_than_two_choices_are_refused(choices):
    with pytest.raises(InputError, match="at least two answers"):
        Ensemble(model="openai/x", api_base="http://127.0.0.1:9/v1", choices=choices)


def test_an_api_base_fragment_is_refused_without_echoing_it(tmp_path, capsys):
    """Issue 32 item 11: `--api-base ...#secret` was written to summary.json and spec.json
    (and its requests went to a wrong path)."""
    err = _main(capsys, "eval", "boxball", "--model", "openai/x", "--api-base",
                "http://127.0.0.1:9/v1#secret", "--t", "1", "--n", "1", "--limit", "2",
                "--out", tmp_path / "run")
    assert "#fragment" in err and "secret" not in err
    assert not (tmp_path / "run").exists()
