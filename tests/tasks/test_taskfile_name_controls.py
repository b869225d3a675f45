"""Issue 41 item 15: a task file's `name` reached the terminal raw: escape sequences recoloured
the terminal and set its window title, a newline split the results' title, and the figure's
glyph warnings leaked. A name (or, without one, the file's stem) holding a control character
is one line naming the key and the character, before any request; other names still work.
Through `ensemble eval` in this process against the simulated server."""

from __future__ import annotations

import json
import warnings

import pytest

from ensemble.testing import SimulatedServer

BAD = {
    "window-title": "mammals\x1b]0;pwned\x07",
    "colour": "\x1b[31mred",
    "newline": "two\nlines",
    "carriage-return": "over\rwrite",
    "delete": "a\x7fb",
    "c1": "a\x9bb",
    "bidi-override": "abc\u202edcb",
    "line-separator": "a\u2028b",
}


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=5) as srv:
        yield srv


def _task(folder, name_line: str, stem: str = "animals"):
    (folder / "animals.jsonl").write_text("".join(
        json.dumps({"animal": a, "mammal": m}) + "\n"
        for a, m in (("cat", "yes"), ("trout", "no"), ("bat", "yes"))))
    path = folder / f"{stem}.yaml"
    path.write_text(name_line + "data: animals.jsonl\nprompt: Is the {animal} a mammal? "
                    "{choices}\nanswer: choice\nchoices: [\"yes\", \"no\"]\ntarget: mammal\n")
    return path


def _eval(run_cli, server, task, tmp_path):
    return run_cli("eval", task, "--model", "openai/sim-expert", "--api-base",
                   server.base_url, "--t", "1", "--n", "1", "--samples", "2", "--bootstrap",
                   "100", "--out", tmp_path / "run")


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_name_with_a_control_character_is_refused(case, run_cli, server, tmp_path):
    task = _task(tmp_path, f"name: {json.dumps(BAD[case])}\n")
    asked = server.stats.requests
    r = _eval(run_cli, server, task, tmp_path)
    line = r.refusal()
    assert "name:" in line and "control character" in line, line
    assert "\x1b" not in r.stderr + r.stdout and "\x07" not in r.stderr
    assert server.stats.requests == asked and not (tmp_path / "run").exists()


def test_a_file_stem_with_a_control_character_is_refused(run_cli, server, tmp_path):
    task = _task(tmp_path, "", stem="ani\x1b[31mmals")
    r = _eval(run_cli, server, task, tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "control character" in lines[0], r.stderr
    assert "\x1b" not in r.stderr


def test_other_names_are_shown_as_written(run_cli, server, tmp_path):
    """Accents, other scripts, an emoji with a joiner: all printable, all kept; the figure's
    missing glyphs are not warned about on stderr."""
    name = "Säugetiere 哺乳類 👨‍👩‍👧"
    task = _task(tmp_path, f"name: {json.dumps(name, ensure_ascii=False)}\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # what `python -W default` or a terminal shows
        r = _eval(run_cli, server, task, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.lstrip().startswith(f"{name} · ")
    assert (tmp_path / "run" / "accuracy.png").stat().st_size > 0
    glyphs = [str(w.message) for w in seen if "Glyph" in str(w.message)]
    assert not glyphs and "Glyph" not in r.stderr, glyphs
