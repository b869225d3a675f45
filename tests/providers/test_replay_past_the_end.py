"""A replay asked past what it can serve says which sample, counted from 1 (defects3 item 6:
"sample 1 was asked" named the second sample by its 0-based index), and a run's samples.jsonl
with a gap in a question's sample indices says where the gap is and how to fill it (item 7:
it said the prompt "holds 1 sample" while the file held two, 0 and 2, and served only the
first, silently). Through `ensemble sample --model replay/...` (a replay sends no request)."""

from __future__ import annotations

import json

OK = "<answer>yes</answer>"


def test_ordinals():
    from ensemble.wording import ordinal

    assert [ordinal(i) for i in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st",
        "111th", "112th"]


def test_past_the_recording_names_the_sample_counted_from_one(tmp_path, run_cli):
    rec = tmp_path / "rec.jsonl"
    rec.write_text(json.dumps({"prompt": "P?", "samples": [OK]}) + "\n")
    line = run_cli("sample", "--model", f"replay/{rec}", "-k", "2",
                   "--choices", "yes,no", "P?").refusal()
    assert "holds 1 sample of the prompt 'P?'" in line
    assert "the 2nd sample was asked" in line and "sample 1 was asked" not in line, line
    assert "ask for at most 1 sample" in line


def _run_folder(folder, indices) -> str:
    (folder / "questions.jsonl").write_text(json.dumps({"id": "q1", "prompt": "P?"}) + "\n")
    (folder / "samples.jsonl").write_text("".join(
        json.dumps({"id": "q1", "t": 1.0, "sample": i, "text": OK, "tokens": 3}) + "\n"
        for i in indices))
    return str(folder)


def test_a_gap_in_a_runs_sample_indices_is_named(tmp_path, run_cli):
    folder = _run_folder(tmp_path, [0, 2, 3])
    line = run_cli("sample", "--model", f"replay/{folder}", "--t", "1",
                   "-k", "3", "--choices", "yes,no", "P?").refusal()
    assert """the 2nd sample ("sample": 1) of question id 'q1' at t = 1 is missing""" in line
    assert "(line 2 holds its 3rd)" in line, line  # the file's line just past the gap
    assert "ask for at most 1 sample" in line and "ensemble eval --spec" in line, line


def test_samples_before_a_gap_are_served(tmp_path, run_cli):
    folder = _run_folder(tmp_path, [0, 2])
    r = run_cli("sample", "--model", f"replay/{folder}", "--t", "1", "-k", "1", "--choices",
                "yes,no", "P?")
    assert r.returncode == 0, r.stderr
