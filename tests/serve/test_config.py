"""The serve config (YAML, pydantic), the request checks and the overrides, without a server:
the docs' config builds, and each mistake is an InputError naming what to fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ensemble.errors import InputError
from ensemble.serve import (
    Overrides,
    RequestRejected,
    ServedEnsembles,
    build_ensemble,
    load_config,
    parse_chat_request,
    parse_config,
    parse_overrides,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "serve.md"


def test_the_docs_config_loads_and_builds_its_ensembles(tmp_path, monkeypatch):
    # the config format's own example (the first; "Running several replicas" has a fleet's)
    block = [b for b in re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"),
                                   re.S) if "models:" in b][0]
    path = tmp_path / "serve.yaml"
    path.write_text(block)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-example-0000000000")
    cfg = load_config(path)
    assert cfg.host == "127.0.0.1" and list(cfg.models) == ["vote-mini", "adaptive", "mixed"]
    cfg.store = None  # build without touching runs/
    served = ServedEnsembles(cfg)
    mini = served.get("vote-mini")
    assert mini.n == 5 and mini.choices == tuple("ABCDE")
    assert mini.members[0].options.limits.max_concurrency == 8
    assert mini.members[0].options.endpoint.api_key == "sk-docs-example-0000000000"
    assert served.get("adaptive").stop_spec.stop == "bayes"
    assert served.get("adaptive").stop_spec.max_n == 20
    mixed = served.get("mixed")
    assert [m.n for m in mixed.members] == [1, 4] and mixed.aggregator_name == "lam-weighted"
    assert "sk-docs" not in repr(served.describe("vote-mini"))


@pytest.mark.parametrize("doc, expect", [
    ({"models": {}}, "serves no models"),
    ({"models": {"a": {}}}, "either model: or members:"),
    ({"models": {"a": {"model": "openai/x", "members": [{"model": "openai/y"}]}}}, "not both"),
    ({"models": {"a": {"members": [{"model": "openai/y"}], "n": 3}}}, "n belong to each member"),
    ({"models": {"a": {"model": "openai/x", "n": 0}}}, "models.a.n"),
    ({"models": {"a": {"model": "openai/x"}}, "port": 70000}, "port"),
    ({"models": {"a": {"model": "openai/x", "api_key": "sk-in-the-file"}}}, "api_key"),
])
def test_config_mistakes_are_one_input_error(doc, expect):
    with pytest.raises(InputError) as ei:
        parse_config(doc)
    assert expect in str(ei.value) and "\n" not in str(ei.value)


def test_a_bad_ensemble_fails_at_start_up_naming_the_served_model():
    cfg = parse_config({"models": {"r": {"model": "openai/x", "aggregator": "robust",
                                         "lam": 2.0}}})
    with pytest.raises(InputError, match="served model 'r': robust decides between two"):
        ServedEnsembles(cfg)


def test_overrides_within_bounds():
    served = parse_config({"models": {"a": {"model": "openai/x", "n": 5,
                                            "max_request_n": 9}}}).models["a"]
    assert parse_overrides({"n": 9, "stop": "beta"}, served) == Overrides(n=9, stop="beta")
    assert parse_overrides({"stop": None}, served).stop == "none"
    ens = build_ensemble(served, overrides=Overrides(n=7, stop="beta"))
    assert ens.stop_spec.stop == "beta" and ens.stop_spec.max_n == 7
    for bad, msg in (({"n": 10}, "from 1 to 9"), ({"n": True}, "from 1 to 9"),
                     ({"stop": "never"}, "must be one of"), ({"k": 1}, "unknown ensemble"),
                     ([1], "must be an object")):
        with pytest.raises(InputError, match=msg):
            parse_overrides(bad, served)
    mixed = parse_config({"models": {"m": {"members": [{"model": "openai/x", "n": 2}]}}})
    with pytest.raises(InputError, match="mixed ensemble"):
        parse_overrides({"n": 1}, mixed.models["m"])


def test_request_checks():
    req = parse_chat_request({"model": "a", "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Left "},
                                     {"type": "text", "text": "or right?"}]}]})
    assert req.messages == ({"role": "system", "content": "Be brief."},
                            {"role": "user", "content": "Left or right?"})
    for body, param in (({"messages": [{"role": "user", "content": "x"}]}, "model"),
                        ({"model": "a", "messages": []}, "messages"),
                        ({"model": "a", "messages": [{"role": "function", "content": "x"}]},
                         "messages[0].role"),
                        ({"model": "a", "messages": [{"role": "tool", "content": "x"}]},
                         "messages[0].tool_call_id"),
                        ({"model": "a", "messages": [{"role": "user", "content": [
                            {"type": "image_url", "image_url": {"url": "x"}}]}]},
                         "messages[0].content"),
                        ({"model": "a", "tools": [{}], "messages": [{"role": "user",
                                                                     "content": "x"}]}, "tools"),
                        ({"model": "a", "n": 0, "messages": [{"role": "user", "content": "x"}]},
                         "n"),
                        ({"model": "a", "stream": "yes", "messages": [{"role": "user",
                                                                       "content": "x"}]},
                         "stream")):
        with pytest.raises(RequestRejected) as ei:
            parse_chat_request(body)
        assert ei.value.status == 400 and ei.value.param == param


def test_a_served_ensemble_decides_by_the_cost_rule():
    from ensemble.cost.spec import CostSpec

    cfg = parse_config({"models": {"frugal": {
        "members": [{"model": "openai/cheap", "n": 6, "temperature": 1.0, "lam": 1.5,
                     "price_per_1k": [0.0, 0.00015]},
                    {"model": "openai/dear", "n": 2, "temperature": 1.0, "lam": 6.0,
                     "price_per_1k": [0.0, 0.0025]}],
        "stop": "cost", "cost": {"value_usd": 0.01, "pilot_questions": 20, "credit": "qr"},
        "choices": ["yes", "no"]}}})
    ens = ServedEnsembles(cfg).get("frugal")
    assert ens.stop_spec == CostSpec(value_usd=0.01, pilot_questions=20, credit="qr")
    plain = ServedEnsembles(parse_config({"models": {"f": {
        "members": [{"model": "openai/a", "n": 2, "price_per_1k": [0.0, 0.001]},
                    {"model": "openai/b", "n": 1, "price_per_1k": [0.0, 0.002]}],
        "stop": "cost"}}})).get("f")
    assert plain.stop_spec == CostSpec()  # target_loss 0.005 against the strongest member
    with pytest.raises(InputError, match="cost.value_usd"):
        parse_config({"models": {"f": {"model": "openai/a", "stop": "cost",
                                       "cost": {"value_usd": -1}}}})
    with pytest.raises(InputError, match="cost.credit"):
        parse_config({"models": {"f": {"model": "openai/a", "stop": "cost",
                                       "cost": {"credit": "planted"}}}})


def test_the_cost_config_expresses_every_field_of_the_cost_spec():
    from dataclasses import fields

    from ensemble.cost import JointPrior
    from ensemble.cost.spec import CostSpec
    from ensemble.serve.config import CostConfig

    assert {f.name for f in fields(CostSpec)} == set(CostConfig.model_fields)
    members = [{"model": "openai/cheap", "n": 6, "temperature": 1.0, "lam": 1.5},
               {"model": "openai/dear", "n": 2, "temperature": 1.0, "lam": 6.0}]
    prior = {"q": [[0.9, 0.97], [0.2, 0.93]], "w": [0.8, 0.2]}

    def served(cost):
        return parse_config({"models": {"f": {"members": members, "stop": "cost",
                                               "choices": ["yes", "no"], "cost": cost}}})

    cfg = served({"target_loss": 0.01, "reference": "fixed", "pilot": [4, 1],
                  "pilot_questions": 12, "prices": [1.5e-5, 2.5e-4], "prior": prior})
    assert ServedEnsembles(cfg).get("f").stop_spec == CostSpec(
        target_loss=0.01, reference="fixed", pilot=(4, 1), pilot_questions=12,
        prices=(1.5e-5, 2.5e-4), prior=JointPrior.of(prior["q"], prior["w"]))
    for cost, match in (({"pilot": [2]}, r"cost.pilot gives 1 value.*one per member \(2\)"),
                        ({"pilot": [2, -1]}, "cost.pilot.1"),
                        ({"prices": [1e-5, 1e-4, 1e-3]}, "cost.prices gives 3"),
                        ({"prices": [1e-5, -1]}, "cost.prices.1"),
                        ({"value_usd": 0.01, "target_loss": 0.01}, "not both"),
                        ({"prior": {"q": [[0.9], [0.2]], "w": [0.8, 0.2]}}, "cost.prior.q"),
                        ({"prior": {"q": [[0.9, 1.5]], "w": [1.0]}}, "cost.prior.q"),
                        ({"prior": {"q": [[0.9, 0.9]], "w": [1.0, 2.0]}}, "prior: .*one weight")):
        with pytest.raises(InputError, match=match):
            served(cost)


def test_a_one_model_server_does_not_offer_the_cost_rule():
    """Issue 41 item 18: ensemble.stop lists only the rules a one-model server can use."""
    from ensemble.errors import InputError
    from ensemble.serve import parse_overrides

    served = parse_config({"models": {"m": {"model": "openai/x"}}}).models["m"]
    with pytest.raises(InputError) as ei:
        parse_overrides({"stop": "cost"}, served)
    assert "cost" not in str(ei.value).split("got")[0] and "bayes" in str(ei.value)
