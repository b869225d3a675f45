"""User text that reaches a terminal, a report, a log or a run folder's name (a member's label,
a model string, allowed answers, a served name) holding a control character is refused in one
line, escaped in the message, before any request and before any folder is made (defects3
item 1; a task's name already was: 41.15, tests/tasks/test_taskfile_name_controls.py). One
check for all: `ensemble.wording.unprintable`. Through the CLI (this process, against the
simulated server), a spec file, serve's start and the Python API."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ensemble.errors import InputError
from ensemble.testing import SimulatedServer

BAD = {
    "colour": "\x1b[31m",
    "window-title": "\x1b]0;pwned\x07",
    "newline": "\n",
    "carriage-return": "\r",
    "c1": "\x9b",
    "bidi-override": "\u202e",
    "line-separator": "\u2028",
}


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=5) as srv:
        yield srv


def _refused(r, server=None, asked=None) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "control character U+" in lines[0], lines[0]
    out = r.stderr + r.stdout
    assert not any(c in out for c in "\x1b\x07\x9b\u202e\u2028\r"), repr(out)
    if server is not None:
        assert server.stats.requests == asked
    return lines[0]


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_model_string_is_refused_by_eval(case, run_cli, server, tmp_path):
    asked = server.stats.requests
    r = run_cli("eval", "boxball", "--model", f"openai/sim-expert{BAD[case]}", "--api-base",
                server.base_url, "--t", "1", "--n", "1", "--samples", "1", "--limit", "2",
                "--out", tmp_path / "run")
    line = _refused(r, server, asked)
    assert "sim-expert" in line and "--model" in line, line
    assert not (tmp_path / "run").exists()


def test_a_model_string_is_refused_by_sample(run_cli, server):
    asked = server.stats.requests
    line = _refused(run_cli("sample", "--model", "openai/sim\x1b[2Jexpert", "--api-base",
                            server.base_url, "--choices", "L,R", "-k", "1", "Box?"),
                    server, asked)
    assert r"--model 'openai/sim\x1b[2Jexpert'" in line, line  # escaped: the user sees it


def test_an_allowed_answer_is_refused(run_cli, server):
    asked = server.stats.requests
    line = _refused(run_cli("sample", "--model", "openai/sim-expert", "--api-base",
                            server.base_url, "--choices", "L\x1b[31m,R", "-k", "1", "Box?"),
                    server, asked)
    assert "choices" in line, line


@pytest.mark.parametrize("field", ["label", "model"])
def test_a_spec_members_label_or_model_is_refused_naming_the_field(field, run_cli, server,
                                                                  tmp_path):
    members = [{"model": "openai/sim-expert", "n": 1, "temperature": 1.0, "label": "cold"},
               {"model": "openai/sim-expert", "n": 2, "temperature": 0.5, "label": "warm"}]
    members[1][field] = members[1][field] + "\x1b]0;pwned\x07"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"task": "boxball", "members": members, "samples": 2,
                                "limit": 2, "bootstrap": 100}))
    asked = server.stats.requests
    line = _refused(run_cli("eval", "--spec", spec, "--api-base", server.base_url, "--out",
                            tmp_path / "run"), server, asked)
    assert f"members.1.{field}" in line, line
    assert not (tmp_path / "run").exists()


def _serve(*args) -> subprocess.CompletedProcess[str]:
    """`ensemble serve ARGS` in a process of its own (if it started, it would serve until
    killed: the timeout ends it and fails the test)."""
    return subprocess.run([sys.executable, "-m", "ensemble", "serve", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_serve_refuses_a_served_name_or_model_at_start(server, tmp_path):
    line = _refused(_serve("--model", "openai/sim-expert", "--api-base", server.base_url,
                           "--name", "vote\x1b[31m", "--port", "0"))
    assert "vote" in line, line
    cfg = tmp_path / "serve.yaml"
    cfg.write_text(json.dumps({"models": {"vote": {"model": "openai/sim\u202eexpert",
                                                   "api_base": server.base_url}}}))
    line = _refused(_serve("--config", cfg, "--port", "0"))
    assert "U+202E" in line and "vote" in line, line


def test_the_python_api_refuses_them_when_the_ensemble_is_made():
    from ensemble import Ensemble, Member

    with pytest.raises(InputError, match="control character U[+]001B"):
        Ensemble("openai/sim\x1b[31m", n=1, choices=["L", "R"])
    with pytest.raises(InputError, match="control character U[+]000A"):
        Member("openai/a\nb")
    with pytest.raises(InputError, match="control character U[+]202E"):
        Ensemble("openai/sim-expert", n=1, choices=["L\u202e", "R"])


def test_printable_text_is_kept(run_cli, server):
    """Accents, other scripts and an emoji with a joiner are printable: allowed answers and
    models in them still work."""
    r = run_cli("sample", "--model", "openai/sim-expert", "--api-base", server.base_url,
                "--choices", "Ja,Nein 👨‍👩‍👧", "-k", "1", "Säugetier? 哺乳類")
    assert r.returncode == 0, r.stderr


def test_serve_logs_a_clients_control_characters_escaped(server):
    """What a client sends cannot be refused before it is logged: serve's log line (text and
    JSON) shows its control characters as escapes, so a request cannot act on the terminal
    that shows serve's log (a model name that sets the window title, a path that clears it)."""
    import httpx

    from ensemble.serve import RequestLog, VotingServer, parse_config

    for json_lines in (False, True):
        lines: list[str] = []
        cfg = parse_config({"port": 0, "log_json": json_lines, "models": {"box": {
            "model": "openai/sim-expert", "api_base": server.base_url, "n": 1,
            "choices": ["L", "R"]}}})
        with VotingServer(cfg, log=RequestLog(sink=lines.append,
                                              json_lines=json_lines)) as srv:
            r = httpx.post(f"{srv.base_url}/chat/completions", timeout=30, json={
                "model": "box\x1b]0;pwned\x07\u202e\x9b", "messages": [
                    {"role": "user", "content": "L or R?"}]})
            assert r.status_code == 404
            httpx.get(f"{srv.base_url}/%1b[2J", timeout=30)
        assert len(lines) == 2, lines
        for line in lines:
            assert line.isprintable(), repr(line)
        if json_lines:
            assert json.loads(lines[0])["model"] == "box\x1b]0;pwned\x07\u202e\x9b"
        else:
            assert "model=box\\x1b]0;pwned\\x07\\u202e\\x9b" in lines[0], lines[0]
            assert "\\x1b[2J" in lines[1], lines[1]
