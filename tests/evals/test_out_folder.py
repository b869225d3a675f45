"""`--out` writes only into a run folder (issue 41 item 1): a new or empty folder, or one this
project made (its summary, its calibration or its sample store). A folder of the user's files
(a source checkout, a home folder, `/`) is refused in one line before any request, and nothing
in it changes. Through `ensemble.cli.main` in-process against the simulated server (real HTTP on
127.0.0.1)."""

from __future__ import annotations

import sqlite3

import pytest

from ensemble.testing import SimulatedServer


@pytest.fixture(scope="module")
def server():
    with SimulatedServer(lam1=3.0, seed=7) as srv:
        yield srv


def _eval(run_cli, server, out, *more):
    return run_cli("eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                   server.base_url, "--t", "1", "--n", "1", "--samples", "2", "--limit", "2",
                   "--bootstrap", "100", "--out", out, *more)


def _calibrate(run_cli, server, out):
    return run_cli("calibrate", "--model", "openai/sim-expert", "--api-base", server.base_url,
                   "--t", "1", "--samples", "2", "--limit", "3", "--out", out)


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_a_folder_of_the_users_files_is_refused_and_left_alone(server, tmp_path, run_cli):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "grid.csv").write_text("mine\n")
    (mine / "votes.jsonl").write_text("mine\n")
    (mine / "notes.txt").write_text("mine\n")
    before, asked = _files(mine), server.stats.requests
    for r in (_eval(run_cli, server, mine), _calibrate(run_cli, server, mine)):
        line = r.refusal()
        assert str(mine) in line and "not a run folder" in line and "grid.csv" in line
    assert _files(mine) == before and sorted(p.name for p in mine.iterdir()) == sorted(before)
    assert server.stats.requests == asked  # refused before any request


def test_a_source_checkout_is_refused(server, tmp_path, run_cli):
    checkout = tmp_path / "checkout"
    (checkout / "src").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    line = _eval(run_cli, server, checkout).refusal()
    assert "not a run folder" in line and "give a new or empty folder" in line
    assert sorted(p.name for p in checkout.iterdir()) == ["pyproject.toml", "src"]


def test_a_sqlite_file_of_the_users_is_not_a_store(server, tmp_path, run_cli):
    folder = tmp_path / "db"
    folder.mkdir()
    with sqlite3.connect(folder / "samples.sqlite") as conn:
        conn.execute("CREATE TABLE accounts (name TEXT)")
    conn.close()
    before = _files(folder)
    line = _eval(run_cli, server, folder).refusal()
    assert "not a run folder" in line and "samples.sqlite" in line
    assert _files(folder) == before


def test_new_empty_and_own_run_folders_are_written(server, tmp_path, run_cli):
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (tmp_path / "new" / "run", empty):
        r = _eval(run_cli, server, out)
        assert r.returncode == 0, r.stderr
        assert (out / "summary.json").is_file()
    asked = server.stats.requests
    again = _eval(run_cli, server, empty, "--n", "1", "--bootstrap", "200")  # a rescoring
    assert again.returncode == 0, again.stderr
    assert server.stats.requests == asked


def test_a_run_stopped_before_its_summary_resumes(server, tmp_path, run_cli):
    run = tmp_path / "run"
    assert _eval(run_cli, server, run).returncode == 0
    for name in ("summary.json", "grid.csv", "votes.jsonl", "questions.jsonl", "samples.jsonl",
                 "accuracy.png", "spec.json"):
        (run / name).unlink(missing_ok=True)  # as far as a kill mid-draw gets: the store
    asked = server.stats.requests
    r = _eval(run_cli, server, run)
    assert r.returncode == 0, r.stderr
    assert server.stats.requests == asked  # resumed from its store: nothing asked again


def test_view_replaces_only_its_own_page(server, tmp_path, run_cli):
    run = tmp_path / "run"
    assert _eval(run_cli, server, run).returncode == 0
    page = tmp_path / "page.html"
    page.write_text("<html>my own page</html>\n")
    line = run_cli("view", run, "--out", page).refusal()
    assert str(page) in line and "did not write" in line
    assert page.read_text() == "<html>my own page</html>\n"
    ours = tmp_path / "ours.html"
    for _ in range(2):  # a page it wrote is rewritten
        r = run_cli("view", run, "--out", ours)
        assert r.returncode == 0, r.stderr
