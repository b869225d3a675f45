"""`ensemble serve` with the clients people already use, nobody here wrote, each pointed at the
endpoint as a user would: LangChain (`ChatOpenAI`: plain, `bind_tools`, `with_structured_output`
by function calling and by JSON mode, the Responses API), DSPy (`Predict`, with no --choices:
its own `[[ ## field ## ]]` format is voted), litellm (`responses`, `text_completion`) and
inspect_ai's default `--model openai/NAME` route (the Responses API), with and without tools.

Every voted result is checked against what the simulated upstream served for that prompt
(`SimulatedServer(keep_replies=True)`): the tool is the plurality of the samples' tools, each
argument the plurality of that argument among the samples that chose it (compared as the
voting compares: strings without case or punctuation, numbers by value), each JSON field the
plurality of that field, the text one that voted for the plurality."""

from __future__ import annotations

import json
import re
from collections import Counter
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ensemble.sampling.parsing import choice_parser
from ensemble.serve import RequestLog, VotingServer, parse_config
from ensemble.tasks import get_task
from ensemble.testing import (
    FormatPlan,
    SimulatedServer,
    StructuredPlan,
    ToolPlan,
    answer_key_from_questions,
)

# the clients are imported by the tests that use them, not at collection: every xdist worker
# collects this module, and LangChain and DSPy cost ~2-3 s to import
if find_spec("langchain_openai") is None or find_spec("dspy") is None:
    pytest.skip("pip install -e '.[dev]'", allow_module_level=True)

YES_NO = choice_parser(["yes", "no"])
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather forecast for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "the city"},
        "days": {"type": "integer", "description": "how many days ahead"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "days", "unit"]}}}
NEWS_TOOL = {"type": "function", "function": {
    "name": "get_news", "description": "Headlines about a topic.",
    "parameters": {"type": "object", "properties": {"topic": {"type": "string"}},
                   "required": ["topic"]}}}
INSPECT_TASKS = Path(__file__).resolve().parent.parent / "integrations"
SERVE_KEY = "serve-key-for-clients-4567"


class Weather(BaseModel):
    city: str
    days: int


def canon(v: Any) -> Any:
    """A value as the vote compares it: text without case, spaces or punctuation, numbers by
    value, objects field by field."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        return re.sub(r"[\W_]+", "", v).lower()
    if isinstance(v, dict):
        return tuple(sorted((k, canon(x)) for k, x in v.items()))
    return repr(v)


@pytest.fixture(scope="module")
def env(mathqa_path):
    mp = pytest.MonkeyPatch()
    mp.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm as a client: no price fetch
    questions = get_task("mathqa", data=mathqa_path, limit=3, seed=5).questions()
    with SimulatedServer(seed=31, lam1=1.0, keep_replies=True,
                         answer_key=answer_key_from_questions(questions),
                         tools=ToolPlan(accuracy=0.7), formats=FormatPlan(accuracy=0.7),
                         structured=StructuredPlan({"city": "paris", "days": 3},
                                                   accuracy=0.7)) as up:
        cfg = parse_config({"port": 0, "models": {
            "open": {"model": "openai/sim-expert", "api_base": up.base_url, "n": 5,
                     "temperature": 1.0},
            "yesno": {"model": "openai/sim-expert", "api_base": up.base_url, "n": 5,
                      "temperature": 0.9, "choices": ["yes", "no"]},
            "mc": {"model": "openai/sim-expert", "api_base": up.base_url, "n": 5,
                   "temperature": 0.8, "choices": list("ABCDE")}}})
        with VotingServer(cfg, api_key=SERVE_KEY, log=RequestLog(sink=lambda _: None)) as srv:
            yield {"up": up, "srv": srv, "questions": questions}
    mp.undo()


def _replies(up, prompt: str, temperature: float):
    return [r for r in up.stats.replies if r.prompt == prompt and r.temperature == temperature]


def _samples(up, prompt: str, temperature: float) -> list[tuple[str | None, tuple]]:
    """Per sample served for a prompt: (its text, its tool calls)."""
    out = []
    for r in _replies(up, prompt, temperature):
        calls = r.tool_calls or ((),) * len(r.texts)
        out += list(zip(r.texts, calls, strict=True))
    return out


def _top(counts: Counter, value: Any) -> bool:
    return counts[value] == max(counts.values())


def _check_tool_call(up, prompt: str, t: float, name: str, args: dict[str, Any]) -> None:
    samples = _samples(up, prompt, t)
    assert len(samples) == 5
    names = Counter(c[0]["function"]["name"] for _, c in samples if c)
    assert _top(names, name), (names, name)
    chose = [__import__("json").loads(c[0]["function"]["arguments"]) for _, c in samples
             if c and c[0]["function"]["name"] == name]
    for key, value in args.items():
        counts = Counter(canon(a[key]) for a in chose if key in a)
        assert _top(counts, canon(value)), (key, counts, value)


def _check_json(up, prompt: str, t: float, obj: dict[str, Any]) -> None:
    import json

    samples = _samples(up, prompt, t)
    served = [json.loads(text[text.index("{"):text.rindex("}") + 1])  # the object in the reply
              for text, _ in samples if text]
    assert len(served) == 5
    for key, value in obj.items():
        counts = Counter(canon(s[key]) for s in served if key in s)
        assert _top(counts, canon(value)), (key, counts, value)


def _chat(env, **kw):
    import langchain_openai

    return langchain_openai.ChatOpenAI(base_url=env["srv"].base_url, api_key=SERVE_KEY,
                                       max_retries=0, **kw)


# -- LangChain ------------------------------------------------------------------------------
def test_langchain_plain_chat_gets_a_sample_that_voted_for_the_plurality(env):
    prompt = "Is Paris in France? Answer yes or no."
    msg = _chat(env, model="yesno").invoke(prompt)
    texts = [t for t, _ in _samples(env["up"], prompt, 0.9)]
    votes = Counter(a for a in map(YES_NO, texts) if a)
    assert msg.content in texts and _top(votes, YES_NO(msg.content))


def test_langchain_bind_tools_gets_the_voted_tool_call(env):
    prompt = "What will the weather be in the capital of France, in celsius?"
    msg = _chat(env, model="open").bind_tools([WEATHER_TOOL, NEWS_TOOL]).invoke(prompt)
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    _check_tool_call(env["up"], prompt, 1.0, call["name"], call["args"])
    if call["name"] == "get_weather":  # valid against the tool's schema
        assert set(call["args"]) == {"city", "days", "unit"}
        assert isinstance(call["args"]["days"], int)
        assert call["args"]["unit"] in ("celsius", "fahrenheit")


def test_langchain_structured_output_by_function_calling(env):
    prompt = "Which city and how many days ahead? Fill the form."
    w = _chat(env, model="open").with_structured_output(
        Weather, method="function_calling").invoke(prompt)
    assert isinstance(w, Weather)
    _check_tool_call(env["up"], prompt, 1.0, "Weather", w.model_dump())


def test_langchain_structured_output_by_json_mode(env):
    prompt = "Give the city and the days as a JSON object with keys city and days."
    w = _chat(env, model="open").with_structured_output(Weather, method="json_mode").invoke(
        prompt)
    assert isinstance(w, Weather)
    _check_json(env["up"], prompt, 1.0, w.model_dump())


def test_langchain_through_the_responses_api(env):
    prompt = "Is Rome in Spain? Answer yes or no."
    msg = _chat(env, model="yesno", use_responses_api=True).invoke(prompt)
    text = msg.content[0]["text"] if isinstance(msg.content, list) else msg.content
    texts = [t for t, _ in _samples(env["up"], prompt, 0.9)]
    votes = Counter(a for a in map(YES_NO, texts) if a)
    assert text in texts and _top(votes, YES_NO(text))


# -- DSPy -----------------------------------------------------------------------------------
def test_dspy_predict_fields_are_voted_without_choices(env):
    import dspy

    lm = dspy.LM("openai/open", api_base=env["srv"].base_url, api_key=SERVE_KEY, cache=False,
                 temperature=1.0, num_retries=0)
    question = "What is the capital of France?"
    with dspy.context(lm=lm):
        pred = dspy.Predict("question -> answer")(question=question)
    prompts = {r.prompt for r in env["up"].stats.replies if question in r.prompt}
    assert len(prompts) == 1
    texts = [t for t, _ in _samples(env["up"], prompts.pop(), 1.0)]
    answers = Counter(canon(m.group(1)) for t in texts
                      for m in [re.search(r"\[\[ ## answer ## \]\]\s*(.*?)\s*(\[\[|$)", t or "",
                                          re.S)] if m)
    assert sum(answers.values()) == 5
    assert _top(answers, canon(pred.answer)), (answers, pred.answer)
    # the vote, as DSPy keeps it: the reply's body in the LM's history
    ens = lm.history[-1]["response"].provider_data["ensemble"]
    assert ens["samples"] == 5 and ens["fields"]["answer"]["votes"]


# -- litellm as a client --------------------------------------------------------------------
def test_litellm_responses_and_text_completion(env):
    import litellm

    prompt = "Is Oslo in Norway? Answer yes or no."
    r = litellm.responses(model="openai/yesno", input=prompt, api_base=env["srv"].base_url,
                          api_key=SERVE_KEY)
    text = r.output[0].content[0].text
    texts = [t for t, _ in _samples(env["up"], prompt, 0.9)]
    votes = Counter(a for a in map(YES_NO, texts) if a)
    assert text in texts and _top(votes, YES_NO(text))

    prompt = "Is Lisbon in Italy? Answer yes or no."
    c = litellm.text_completion(model="openai/yesno", prompt=prompt,
                                api_base=env["srv"].base_url, api_key=SERVE_KEY)
    texts = [t for t, _ in _samples(env["up"], prompt, 0.9)]
    votes = Counter(a for a in map(YES_NO, texts) if a)
    assert c.choices[0].text in texts and _top(votes, YES_NO(c.choices[0].text))


# -- inspect_ai's default route: --model openai/NAME is the Responses API ------------------------
def _inspect(env, tmp_path, monkeypatch, task: str, model: str) -> Any:
    """inspect's own eval() in this process (its CLI is tested in tests/integrations), with
    its openai provider pointed at the endpoint as a user would: OPENAI_BASE_URL."""
    from inspect_ai import eval as inspect_eval

    monkeypatch.chdir(INSPECT_TASKS)
    monkeypatch.setenv("OPENAI_BASE_URL", env["srv"].base_url)
    monkeypatch.setenv("OPENAI_API_KEY", SERVE_KEY)
    monkeypatch.setenv("ENSEMBLE_TEST_LIMIT", "3")
    (log,) = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    return log


def test_inspect_default_openai_route_votes(env, tmp_path, mathqa_path, monkeypatch):
    monkeypatch.setenv("ENSEMBLE_TEST_MATHQA", str(mathqa_path))
    log = _inspect(env, tmp_path, monkeypatch, "inspect_mathqa.py", "openai/mc")
    parse = choice_parser(list("ABCDE"))
    assert len(log.samples) == 3
    for s in log.samples:
        texts = [t for t, _ in _samples(env["up"], s.input, 0.8)]
        votes = Counter(a for a in map(parse, texts) if a)
        assert sum(votes.values()) + sum(parse(t) is None for t in texts) == 5
        assert s.output.completion in texts and _top(votes, parse(s.output.completion))
        # the vote, as inspect keeps it: the Responses reply's metadata on the output
        meta = s.output.metadata
        assert meta["ensemble_decision"] == parse(s.output.completion)
        assert meta["ensemble_samples"] == "5"
        assert sum(json.loads(meta["ensemble_votes"]).values()) + int(meta["ensemble_invalid"]) == 5


def test_inspect_use_tools_through_the_endpoint(env, tmp_path, monkeypatch):
    log = _inspect(env, tmp_path, monkeypatch, "inspect_tools.py", "openai/open")
    (s,) = log.samples
    calls = [c for m in s.messages if m.role == "assistant" and m.tool_calls
             for c in m.tool_calls]
    assert len(calls) == 1
    _check_tool_call(env["up"], s.input, 1.0, calls[0].function, calls[0].arguments)
    tool_msgs = [m for m in s.messages if m.role == "tool"]
    assert len(tool_msgs) == 1 and "ANSWER:" in s.output.completion
