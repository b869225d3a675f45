"""The CLI skeleton: help, start-up cost, one-line errors."""

import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ensemble", *args], capture_output=True, text=True,
                          timeout=120)


def test_help_works_and_does_not_import_litellm():
    code = ("import sys; from ensemble.cli import build_parser; build_parser().format_help(); "
            "import ensemble; ensemble.psi; print('litellm' in sys.modules, 'openai' in "
            "sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False False"
    res = run("--help")
    assert res.returncode == 0 and "quantal response" in res.stdout


def test_theory_threshold_imports_neither_litellm_nor_scipy():
    """`ensemble theory threshold` starts in well under 0.5 s: numpy only (scipy's optimizer and
    special functions alone cost ~0.3 s to import)."""
    code = ("import sys, io, contextlib; from ensemble.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    rc = main(['theory', 'threshold', '--n-max', '20', '--json'])\n"
            "mods = ('litellm', 'openai', 'scipy', 'scipy.optimize')\n"
            "print(rc, sorted(m for m in mods if m in sys.modules), out.getvalue().count('\"n\"'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "[]", "20"]


def test_unknown_command_is_one_line_usage_error():
    res = run("frobnicate")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "invalid choice" in lines[0]
    assert "Traceback" not in res.stderr


def test_every_e_g_in_the_help_parses_as_written():
    """Issue 32 item 9: `testing serve --help` showed `--report-usage -5,-9`, which argparse
    reads as an option ("expected one argument"). Each help's example of a flag's own value
    (`e.g. --flag=VALUE` or `e.g. --flag VALUE`) parses."""
    import re

    from ensemble.cli import build_parser

    parser = build_parser()
    found = []

    def walk(p, path):
        for action in p._actions:
            if action.choices and isinstance(action.choices, dict):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            for m in re.finditer(r"e\.g\. (--[\w-]+(?:=\S+| [^\s(),;]+))", action.help or ""):
                example = m.group(1).rstrip(".")
                flag = re.split(r"[= ]", example)[0]
                if flag in action.option_strings:
                    found.append([*path, *example.split(" ", 1)])

    walk(parser, [])
    usage = [a for a in found if a[-1].startswith("--report-usage")]
    assert usage == [["testing", "serve", "--report-usage=-5,-9"]]
    assert parser.parse_args(usage[0]).report_usage == (-5, -9)


def test_small_flags_refuse_what_they_would_silently_change(capsys):
    """Issue 32 item 11: `--n 1 1 3` was silently de-duplicated, `testing serve --seed -1`
    accepted."""
    from ensemble.cli import main

    rc = main(["eval", "boxball", "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1",
               "--t", "1", "--n", "1", "1", "3", "--limit", "2", "--dry-run"])
    err = capsys.readouterr().err
    assert rc != 0 and "--n 1 is given twice" in err
    import pytest

    with pytest.raises(SystemExit):
        main(["testing", "serve", "--seed", "-1"])
    assert "--seed" in capsys.readouterr().err


def test_one_is_singular(capsys, monkeypatch):
    """Issue 32 item 11: "1 samples", "1 requests"."""
    from ensemble.cli import main
    from ensemble.testing import SimulatedServer

    monkeypatch.setenv("COLUMNS", "120")
    with SimulatedServer(lam1=3.0) as srv:
        rc = main(["sample", "--model", "openai/sim-expert", "--api-base", srv.base_url,
                   "-k", "1", "--t", "1", "--choices", "L,R", "Left or right?"])
        out = " ".join(capsys.readouterr().out.split())
        assert rc == 0 and "1 sample of openai/sim-expert" in out and "requests 1," in out
        rc = main(["eval", "boxball", "--model", "openai/sim-expert", "--api-base",
                   srv.base_url, "--t", "1", "--n", "1", "--limit", "1", "--dry-run"])
        out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "2 samples to draw" in out and "in 2 requests" in out
    assert "1 samples" not in out and "1 requests" not in out
