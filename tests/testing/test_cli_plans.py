"""`ensemble testing serve --tools --client-formats --structured ...`: the simulator's tool,
format and JSON-mode plans from the command line, so serve can be tried against them offline
(issue 30). One real process, stopped by SIGTERM; requests over real HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

SRC = str(Path(__file__).resolve().parents[2] / "src")
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]


def chat(base: str, **body) -> dict:
    r = httpx.post(base + "/chat/completions", json={"model": "m", **body}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def test_the_plans_from_the_command_line():
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ensemble", "testing", "serve", "--port", "0", "--tools",
         "--tool-accuracy", "0.9", "--client-formats", "--structured", '{"city": "paris"}',
         "--missing-rate", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env)
    try:
        base = proc.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:"), proc.stderr.read()
        called = chat(base, tools=TOOLS, messages=[{"role": "user", "content": "find x"}])
        assert called["finish_reason"] == "tool_calls"
        assert called["message"]["tool_calls"][0]["function"]["name"] == "lookup"
        dspy = chat(base, messages=[{"role": "user", "content": (
            "Respond with the corresponding output fields, starting with the field "
            "`[[ ## answer ## ]]`, and then ending with the marker for `[[ ## completed ## ]]`.")}])
        assert dspy["message"]["content"].startswith("[[ ## answer ## ]]")
        objects = [chat(base, response_format={"type": "json_object"}, temperature=1.0,
                        messages=[{"role": "user", "content": f"city {i}?"}])
                   for i in range(8)]
        docs = [json.loads(o["message"]["content"].split("\n", 1)[1]) for o in objects]
        assert any("city" in d for d in docs) and any("city" not in d for d in docs)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
