"""Each provider option is declared once (`ensemble.providers.options.OPTIONS`, issue 36.6):
the parts of `ProviderOptions` hold and check exactly the declared fields, the commands' flags
are made from the declaration, and a problem is named in the user's terms: the flag on the
command line, the keyword in Python."""

from __future__ import annotations

import argparse
import dataclasses
import re
import typing

import pytest

from ensemble.cliargs import add_option_args, provider_options
from ensemble.errors import InputError
from ensemble.providers import options as opts
from ensemble.providers.options import OPTIONS, ProviderKwargs, ProviderOptions, options_in

PARTS = {"endpoint": opts.Endpoint, "limits": opts.Limits, "retry": opts.Retry,
         "failures": opts.FailurePolicy, "cost": opts.CostPolicy}


def test_the_parts_hold_the_declared_options_with_their_defaults():
    for part, cls in PARTS.items():
        declared = {o.name: o.default for o in OPTIONS if o.part == part}
        held = {f.name: f.default for f in dataclasses.fields(cls) if f.name != "transport"}
        assert held == declared, part
    assert set(typing.get_type_hints(ProviderKwargs)) == {o.name for o in OPTIONS} | {
        "transport"}
    assert set(ProviderOptions.names()) == {o.name for o in OPTIONS} | {"transport"}


def _parser(place: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="x", exit_on_error=False)
    add_option_args(p, place)
    return p


def test_the_flags_are_the_declared_options_and_parse_into_provider_options():
    p = _parser("run")
    flags = set(re.findall(r"\[(--[a-z0-9-]+)", p.format_usage())) - {"--help"}
    assert flags == {o.flag for o in options_in("run")}
    args = p.parse_args(["--api-base", "http://127.0.0.1:8000/v1/", "--max-concurrency", "8",
                         "--rpm", "120", "--price-per-1k-tokens", "0.5,1.5"])
    got = provider_options(args)
    assert got.endpoint.api_base == "http://127.0.0.1:8000/v1"
    assert (got.limits.max_concurrency, got.limits.rpm, got.limits.tpm) == (8, 120.0, None)
    assert got.cost.price_per_1k == (0.5, 1.5) and got.retry == opts.Retry()
    assert provider_options(p.parse_args([])) == ProviderOptions()


@pytest.mark.parametrize("flag,value,words", [
    ("--api-base", "ftp://x", "'ftp://x' is not an http(s) URL"),
    ("--api-key", "", "must be a non-empty key"),
    ("--max-concurrency", "0", "must be an integer >= 1, got '0'"),
    ("--rpm", "inf", "must be a finite number > 0, got 'inf'"),
    ("--timeout", "-1", "must be a finite number > 0, got '-1'"),
    ("--price-per-1k-tokens", "1,x", "must be two finite prices >= 0"),
])
def test_a_bad_flag_is_named_as_the_flag(flag, value, words):
    with pytest.raises(argparse.ArgumentError) as caught:
        _parser("run").parse_args([flag, value])
    text = str(caught.value)
    assert text.startswith(f"argument {flag}: ") and words in text
    name = next(o.name for o in OPTIONS if o.flag == flag)
    if "_" in name:
        assert name not in text  # never the Python parameter


@pytest.mark.parametrize("kw,words", [
    ({"api_base": "ftp://x"}, "api_base 'ftp://x' is not an http(s) URL"),
    ({"api_key": ""}, "api_key must be a non-empty key"),
    ({"max_concurrency": 0}, "max_concurrency must be an integer >= 1, got 0"),
    ({"timeout": None}, "timeout must be a finite number > 0, got None"),
    ({"price_per_1k": (1, -2)}, "price_per_1k must be two finite prices >= 0"),
])
def test_a_bad_keyword_is_named_as_the_keyword(kw, words):
    with pytest.raises(InputError, match=re.escape(words)):
        ProviderOptions(**kw)


def test_a_key_is_never_quoted_back():
    with pytest.raises(InputError) as caught:
        ProviderOptions(api_key=b"sk-secret-123456789")  # type: ignore[arg-type]
    assert "secret" not in str(caught.value)


def test_the_docs_table_is_the_declaration():
    """docs/sampling.md lists every option as declared (name, flag, default, places, help)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "sampling.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| `(--[\w-]+)` \| ([^|]+) \| ([^|]+) \| (.+) \|$", text,
                      re.MULTILINE)
    want = []
    for o in OPTIONS:
        default = "none" if o.default is None else (
            f"{o.default:g}" if isinstance(o.default, float) else str(o.default))
        want.append((o.name, o.flag, default, ", ".join(o.places), o.help))
    assert rows == want


def test_serve_takes_the_declared_options_by_flag_and_by_field(run_cli):
    """`ensemble serve`'s upstream flags and its config's fields are the options declared for
    "serve" (the key by its variable: --upstream-key-env, api_key_env), each problem named
    where it was given."""
    from ensemble.serve.config import EndpointConfig, parse_config

    usage = run_cli("serve", "--help").stdout
    for o in options_in("serve"):
        assert (("--upstream-key-env" if o.secret else o.flag) + " ") in usage
    bad = run_cli("serve", "--model", "openai/x", "--max-attempts", "0")
    assert bad.returncode == 2 and "argument --max-attempts: must be an integer >= 1" in bad.stderr
    assert set(EndpointConfig.model_fields) == {
        f"{o.name}_env" if o.secret else o.name for o in options_in("serve")}
    with pytest.raises(InputError, match=r"^c\.yaml: models\.vote\.rpm: must be a finite "
                                         r"number > 0, got -1 "):
        parse_config({"models": {"vote": {"model": "openai/x", "rpm": -1}}}, source="c.yaml")
    with pytest.raises(InputError, match="max_retry_time belong to each member"):
        parse_config({"models": {"vote": {"members": [{"model": "openai/x"}],
                                          "max_retry_time": 5}}})
    ok = parse_config({"models": {"vote": {"model": "openai/x", "price_per_1k": [0.5, 1]}}})
    assert ok.models["vote"].provider_options()["price_per_1k"] == (0.5, 1.0)


@pytest.mark.parametrize("member,words", [
    ({"api_base": "ftp://x"}, "members.0.api_base: 'ftp://x' is not an http(s) url"),
    ({"price_per_1k": [1, -1]}, "members.0.price_per_1k: must be two finite prices >= 0"),
])
def test_a_spec_members_options_are_checked_as_declared_and_named_by_field(
        member, words, run_cli, tmp_path):
    """A run spec's member takes the options declared for "member", each checked as declared
    and named by its path in the file (was: `api_base ...` with no file or member named, and
    a negative price accepted)."""
    import json

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"task": "boxball", "n": [1], "members": [
        {"model": "openai/x", "temperature": 1, **member}]}))
    r = run_cli("eval", "--spec", spec)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
    assert f"--spec {spec}: {words}" in r.stderr


def test_the_files_hold_the_declared_options():
    """A spec's member holds the options declared for "member"; summary.json's record of a
    run's options holds every declared option (a versioned document: a new option is added
    there deliberately, with its format)."""
    from ensemble.evals.schemas import ProviderInfo
    from ensemble.evals.spec import MemberSpec

    member = {o.name for o in OPTIONS if o.name in MemberSpec.model_fields}
    assert member == {o.name for o in options_in("member")}
    for o in options_in("member"):
        assert MemberSpec.model_fields[o.name].description == o.help
    assert set(ProviderInfo.model_fields) == {o.name for o in OPTIONS}
