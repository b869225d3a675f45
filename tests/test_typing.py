"""The public API as users' type checkers see it: `mypy --strict` on a script outside the repo
finds the installed package and real types (not Any) for Ensemble, Decision and @vote."""

import importlib.util
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''\
    from ensemble import Decision, Ensemble, vote

    with Ensemble("openai/x", n=3, temperature=0.5) as ens:
        d = ens.decide("Is it?")
        reveal_type(d)
        reveal_type(d.decision)
        reveal_type(ens.decide_many)

    @vote("openai/x", n=3, choices=["yes", "no"])
    def positive(text: str) -> str:
        return f"Is this positive? {text}"

    reveal_type(positive("great"))

    @vote("openai/x", n=3, choices=["yes", "no"])
    async def apositive(text: str) -> str:
        return f"Is this positive? {text}"

    async def main() -> None:
        reveal_type(await positive.adecide("great"))
        reveal_type(await apositive("great"))

    reveal_type(positive.ensemble.members[0].lam)
    ''')


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (pip install -e '.[dev]')")
def test_mypy_strict_sees_real_types_from_outside_the_repo(tmp_path):
    (tmp_path / "user.py").write_text(SCRIPT, encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                          "--cache-dir", str(tmp_path / ".mypy_cache"), "user.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    revealed = [line.split("Revealed type is ", 1)[1] for line in text.splitlines()
                if "Revealed type is" in line]
    assert revealed[0] == '"ensemble.decision.Decision"', text
    assert revealed[1] == '"str | None"', text
    assert "list[ensemble.decision.Decision]" in revealed[2], text
    assert revealed[3] == '"ensemble.decision.Decision"', text  # @vote keeps the call typed
    assert revealed[4:6] == ['"ensemble.decision.Decision"'] * 2, text  # .adecide, async def
    assert revealed[6] == '"float | None"', text  # .ensemble is the Ensemble
    assert "error" not in text.replace("Revealed", ""), text
