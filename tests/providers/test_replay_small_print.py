"""Issue 41 item 13: a replay recording with a malformed field is one line on stderr naming
the file, the line and the field, through `ensemble sample --model replay/...` (no request can
leave: a replay never sends one). Before: `"tokens": "abc"`, `"t": "hot"`, `"sample": "first"`
raised ValueError, `"tokens": 1e400` OverflowError, tokens 1.7 were read as 1 and two lines for
one prompt silently kept the last."""

from __future__ import annotations

import json

import pytest

OK = "<answer>yes</answer>"


def _minimal(**sample) -> list[dict]:
    return [{"prompt": "P?", "samples": [OK, {"text": OK, **sample}]}]


def _run_line(**fields) -> list[dict]:
    line = {"id": "q1", "t": 1.0, "sample": 0, "text": OK, "tokens": 3, "cost_usd": None}
    return [line | fields]


BAD = {
    "tokens-text": (_minimal(tokens="abc"), 1, '"tokens"'),
    "tokens-overflow": ("1e400", 1, '"tokens"'),
    "tokens-fraction": (_minimal(tokens=1.7), 1, '"tokens"'),
    "tokens-negative": (_minimal(tokens=-3), 1, '"tokens"'),
    "tokens-bool": (_minimal(tokens=True), 1, '"tokens"'),
    "cost-text": (_minimal(cost_usd="cheap"), 1, '"cost_usd"'),
    "cost-negative": (_minimal(cost_usd=-0.5), 1, '"cost_usd"'),
    "cost-nan": ("NaN", 1, '"cost_usd"'),
    "text-number": (_minimal(text=42), 1, '"text"'),
    "t-text": ([{"prompt": "P?", "t": "hot", "samples": [OK]}], 1, '"t"'),
    "t-negative": ([{"prompt": "P?", "t": -1, "samples": [OK]}], 1, '"t"'),
    "prompt-twice": ([{"prompt": "Q?", "samples": [OK]}, {"prompt": "P?", "samples": [OK]},
                      {"prompt": "P?", "samples": [OK, OK]}], 3, "line 2 again"),
    "run-sample-text": (_run_line(sample="first"), 1, '"sample"'),
    "run-sample-fraction": (_run_line(sample=1.5), 1, '"sample"'),
    "run-sample-negative": (_run_line(sample=-1), 1, '"sample"'),
    "run-t-text": (_run_line(t="hot"), 1, '"t"'),
    "run-tokens-text": (_run_line(tokens="abc"), 1, '"tokens"'),
    "run-sample-twice": (_run_line() + _run_line(text="<answer>no</answer>"), 2, "line 1"),
}


def _write(folder, docs) -> str:
    (folder / "questions.jsonl").write_text(json.dumps({"id": "q1", "prompt": "P?"}) + "\n")
    if docs == "1e400":  # JSON that Python reads as inf
        text = '{"prompt": "P?", "samples": [{"text": "x", "tokens": 1e400}]}\n'
    elif docs == "NaN":
        text = '{"prompt": "P?", "samples": [{"text": "x", "cost_usd": NaN}]}\n'
    else:
        text = "\n".join(json.dumps(d) for d in docs) + "\n"
    name = "samples.jsonl" if isinstance(docs, list) and "sample" in docs[0] else "rec.jsonl"
    (folder / name).write_text(text)
    return str(folder / name)


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_recording_is_one_line_naming_the_file_and_line(case, tmp_path, run_cli):
    docs, line, field = BAD[case]
    path = _write(tmp_path, docs)
    r = run_cli("sample", "--model", f"replay/{path}", "-k", "1", "--choices", "yes,no", "P?")
    said = r.refusal()
    assert f"{path} line {line}" in said and field in said, said


def test_well_formed_numbers_still_read(tmp_path, run_cli):
    """What the checks must keep: integral floats as token counts (3.0 is 3), a cost of 0, an
    integer temperature, and two questions sharing one prompt, recorded alike (the store keys
    samples by prompt: tests/bench/data/smollm2-arith repeats 11 prompts so), in a minimal
    recording and in a run's samples.jsonl."""
    from ensemble.providers.replay import load_recording

    rec = tmp_path / "rec.jsonl"
    rec.write_text(2 * (json.dumps({"prompt": "P?", "t": 1, "samples": [
        OK, {"text": OK, "tokens": 3.0, "cost_usd": 0}]}) + "\n"))
    got = load_recording(f"replay/{rec}").get("P?", 1.0)
    assert got is not None and got[1].tokens == 3 and got[1].cost_usd == 0.0
    (tmp_path / "questions.jsonl").write_text(
        "".join(json.dumps({"id": i, "prompt": "P?"}) + "\n" for i in ("q1", "q2")))
    (tmp_path / "samples.jsonl").write_text("".join(
        json.dumps({"id": i, "t": 1.0, "sample": 0, "text": OK, "tokens": 3}) + "\n"
        for i in ("q1", "q2")))
    got = load_recording(f"replay/{tmp_path}").get("P?", 1.0)
    assert got is not None and [s.text for s in got] == [OK]
    r = run_cli("sample", "--model", f"replay/{rec}", "--t", "1", "-k", "2", "--choices",
                "yes,no", "P?")
    assert r.returncode == 0, r.stderr
