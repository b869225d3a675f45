"""The public API as users' type checkers see it: `mypy --strict` on a script outside the repo
finds the installed package and real types (not Any) for Ensemble, Decision and @vote, the
decision typed by `answer=`: a str for choices, a float for numbers, the pydantic model."""

import importlib.util
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''\
    from pydantic import BaseModel

    from ensemble import Decision, Ensemble, vote
    from ensemble.answers import Number

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

    class Verdict(BaseModel):
        supported: bool
        confidence: int

    reveal_type(Ensemble("openai/x", n=3, answer="number").decide("25 x 50?").decision)
    reveal_type(Ensemble("openai/x", n=3, answer=Number(rel_tol=0.01)).decide("?").decision)
    reveal_type(Ensemble("openai/x", n=3, answer=Verdict).decide("Is it?").decision)
    reveal_type(Ensemble("openai/x", n=3, answer="math").decide("x?").decision)
    reveal_type(Ensemble("openai/x", n=3, choices=["A", "B"]).decide_many(["?"])[0].decision)

    @vote("openai/x", n=3, answer="number")
    def product(a: int, b: int) -> str:
        return f"What is {a} x {b}?"

    reveal_type(product(25, 50).decision)

    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    reveal_type(Ensemble("openai/x", n=3, tools=[tool]).decide("?").decision)

    def show(d: Decision) -> str:  # a bare Decision is Decision[str], as before
        return str(d.decision)
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
    decision = '"ensemble.decision.Decision[str]"'
    assert revealed[0] == decision, text
    assert revealed[1] == '"str | None"', text
    assert "list[ensemble.decision.Decision[str]]" in revealed[2], text
    assert revealed[3] == decision, text  # @vote keeps the call typed
    assert revealed[4:6] == [decision] * 2, text  # .adecide, async def
    assert revealed[6] == '"float | None"', text  # .ensemble is the Ensemble
    assert revealed[7:9] == ['"float | None"'] * 2, text  # answer="number", Number(...)
    assert revealed[9] == '"user.Verdict | None"', text  # a pydantic model: an instance
    assert revealed[10:12] == ['"str | None"'] * 2, text  # math (LaTeX), choices
    assert revealed[12] == '"float | None"', text  # @vote(answer="number")
    assert "ToolCall" in revealed[13] and "str" in revealed[13], text  # tools=: a call or text
    assert "error" not in text.replace("Revealed", ""), text


def test_the_overloads_keywords_are_the_ensembles():
    # the overloads type every keyword through EnsembleKwargs: one added to Ensemble but not
    # there would be an error in users' type checkers
    import inspect

    from ensemble.api import Ensemble, EnsembleKwargs
    from ensemble.providers.options import ProviderOptions

    params = set(inspect.signature(Ensemble.__init__).parameters)
    typed = set(EnsembleKwargs.__optional_keys__)
    assert params - {"self", "model", "answer", "tools", "kwargs"} <= typed
    assert set(ProviderOptions.names()) <= typed
