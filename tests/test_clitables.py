"""The one table helper (`ensemble.clitables`): at 80 columns no number or id is cut, through
the real commands in this process (issue 32 item 4)."""

import json
import re
from collections import Counter

import numpy as np
import pytest

from ensemble.cli import main
from ensemble.clitables import Column, fit_table


def _run(capsys, monkeypatch, *argv):
    monkeypatch.setenv("COLUMNS", "80")
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return out.out


def _numbers(text):
    return re.findall(r"-?\d+\.\d+", text)


def _fits(text, width=80):
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width


@pytest.mark.parametrize("argv", [["--n", "15", "--lam", "3"],
                                  ["--group", "1:2", "--group", "12:8"]])
def test_theory_robust_prints_every_value_whole_at_80_columns(capsys, monkeypatch, argv):
    out = _run(capsys, monkeypatch, "theory", "robust", *argv)
    _fits(out)
    doc = json.loads(_run(capsys, monkeypatch, "theory", "robust", *argv, "--json"))
    want = Counter(f"{v:.4f}" for v in np.ravel(doc["f"]))
    got = Counter(_numbers(out))
    assert all(got[v] >= k for v, k in want.items()), (want, got)
    assert f"{doc['worst_regret']:.6f}" in out


def test_long_text_wraps_and_intervals_stay_whole():
    from rich.console import Console

    rows = [["lam-weighted − majority at t = 1, n = 3", "lam-weighted", "+0.0000", "0.0000",
             "[-0.010, +0.012]", "[-0.004, +0.006] ‡"]] * 3
    cols = [Column("difference", wrap=True), Column("aggregator"), Column("estimate"),
            Column("SEM", drop=2), Column("95% for the task"), Column("95% for these 40", drop=1)]
    table, dropped = fit_table(cols, rows, width=80, title="Paired differences")
    con = Console(width=80, record=True)
    con.print(table)
    text = con.export_text()
    _fits(text)
    assert text.count("[-0.010, +0.012]") == 3
    assert dropped == [] or dropped == ["95% for these 40"]
    if not dropped:
        assert text.count("[-0.004, +0.006] ‡") == 3


def test_a_grid_too_wide_for_any_drop_is_split_by_columns_with_its_key_repeated():
    from rich.console import Console

    cols = [Column("x1 \\ x2")] + [Column(str(j)) for j in range(20)]
    rows = [[str(i)] + [f"{i * j / 100:.4f}" for j in range(20)] for i in range(3)]
    table, dropped = fit_table(cols, rows, width=80)
    con = Console(width=80, record=True)
    con.print(table)
    text = con.export_text()
    _fits(text)
    assert not dropped and text.count("x1 \\ x2") >= 3
    for r in rows:
        for cell in r[1:]:
            assert cell in text


@pytest.mark.parametrize("width", [40, 50, 100])
def test_a_title_wider_than_its_table_wraps_at_spaces_never_mid_word(width):
    """Issue 41 item 30: `ensemble sample`'s title broke a model path mid-word at the width of
    its narrow table (`openai/models/SmolLM2-135` / `M-Instruct-Q8_0.gguf at t`) at any width."""
    from rich.console import Console

    model = "openai/models/SmolLM2-135M-Instruct-Q8_0.gguf"
    title = f"3 samples of {model} at t = 1.0"
    table, _ = fit_table([Column("answer", justify="left", wrap=True), Column("count"),
                          Column("share")], [["L", "3", "100%"]], width=width, title=title)
    con = Console(width=width, record=True)
    con.print(table)
    text = con.export_text()
    _fits(text, width)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    if width >= len(model):  # whole on a line
        assert any(model in line for line in lines), text
    else:  # wider than the terminal: folded, as nothing else can show it
        assert model in "".join(lines), text
    if width >= len(title):
        assert title in lines, text
