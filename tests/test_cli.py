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
