"""inspect_ai's model API for ensemble voting: `inspect eval task.py --model ensemble/<model>
-M n=5 -M temperature=0.7` draws n samples of each generate call from <model> (any model
string `Ensemble` takes: openai/..., anthropic/..., local, ...) and answers with the vote.

No server sits between, and nothing is voted differently from `ensemble serve`: each generate
call is turned into the chat request an OpenAI client would send (messages with their tool
calls and tool results, the tools, tool_choice, a JSON-schema response format) and decided by
the endpoint's own path — `serve.wire.parse_chat_request`, `serve.ensembles.ServedEnsembles`
(one served model built from the model args), `Ensemble.adecide`, `serve.wire.completion_doc`
— on inspect's event loop. So tool calls are voted (the tool, then each argument), replies in
inspect's "ANSWER: X" format are voted without --choices, and the text inspect scores is the
full text of a sample that voted for the decision. `output.metadata["ensemble"]` holds the
votes (the `ensemble` object of a served reply: decision, votes, margin, samples, invalid,
cost, and per field or argument its own vote).

Model args (`-M key=value`) are a served model's fields (docs/serve.md, "The config file"): n,
temperature, choices (a list or "A,B,C"), answer, aggregator, stop, max_n, lam, calibration,
system, seed, max_tokens and the endpoint's options (api_base, api_key_env, max_concurrency,
rpm, timeout, ...). inspect's own `--temperature` and `--max-tokens` are used when given (the
first generate call's; a served model keeps its sampling parameters), `--model-base-url` is
the upstream's api_base.
"""

from __future__ import annotations

import json
import time
from typing import Any

from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    StopReason,
)
from inspect_ai.tool import ToolCall, ToolChoice, ToolFunction, ToolInfo

from ..errors import InputError
from ..serve.config import parse_config
from ..serve.ensembles import ServedEnsembles, parse_overrides
from ..serve.replies import ChatMessage as ReplyMessage
from ..serve.wire import RequestRejected, completion_doc, parse_chat_request

__all__ = ["EnsembleModelAPI", "chat_body"]

NAME = "ensemble"  # the one served name behind the model API
_STOP: dict[str, StopReason] = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls",
         "content_filter": "content_filter"}


def _message(m: ChatMessage) -> dict[str, Any]:
    """One inspect message as OpenAI's chat message (tool calls and results kept)."""
    if isinstance(m, ChatMessageTool):
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.text}
    if isinstance(m, ChatMessageAssistant) and m.tool_calls:
        return {"role": "assistant", "content": m.text or None, "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.function, "arguments": json.dumps(c.arguments)}}
            for c in m.tool_calls]}
    return {"role": m.role, "content": m.text}


def _tool_choice(choice: ToolChoice, tools: list[ToolInfo]) -> Any:
    if not tools:
        return None
    if isinstance(choice, ToolFunction):
        return {"type": "function", "function": {"name": choice.name}}
    return choice  # "auto" | "any" | "none" as OpenAI spells them, "any" as "required"


def chat_body(messages: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice,
              config: GenerateConfig) -> dict[str, Any]:
    """The chat completion request an OpenAI client would send for one generate call."""
    body: dict[str, Any] = {"model": NAME, "messages": [_message(m) for m in messages]}
    if tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description,
            "parameters": t.parameters.model_dump(exclude_none=True)}} for t in tools]
        choice = _tool_choice(tool_choice, tools)
        body["tool_choice"] = "required" if choice == "any" else choice
    if config.response_schema is not None:
        rs = config.response_schema
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": rs.name, "schema": rs.json_schema.model_dump(exclude_none=True)}}
    return body


def _output_message(message: ReplyMessage, name: str) -> ChatMessageAssistant:
    calls = [ToolCall(id=c.id, function=c.function.name,
                      arguments=json.loads(c.function.arguments or "{}"))
             for c in message.tool_calls or ()]
    return ChatMessageAssistant(content=message.content or "", model=name,
                                source="generate", tool_calls=calls or None)


class EnsembleModelAPI(ModelAPI):
    """One served model, built from the model args on the first generate call."""

    def __init__(self, model_name: str, base_url: str | None = None,
                 api_key: str | None = None, api_key_vars: list[str] | None = None,
                 config: GenerateConfig | None = None, **model_args: Any) -> None:
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key,
                         api_key_vars=api_key_vars or [], config=config or GenerateConfig())
        if not model_name:
            raise InputError("give the model to vote with after ensemble/, e.g. "
                             "--model ensemble/openai/gpt-4o-mini")
        args = dict(model_args)
        if isinstance(args.get("choices"), str):
            args["choices"] = [c.strip() for c in args["choices"].split(",") if c.strip()]
        if base_url:
            args.setdefault("api_base", base_url)
        self._args = args
        self._served: ServedEnsembles | None = None

    def _ensembles(self, config: GenerateConfig) -> ServedEnsembles:
        if self._served is None:
            served = {"model": self.model_name, **self._args}
            if config.temperature is not None:
                served["temperature"] = config.temperature
            if config.max_tokens is not None:
                served["max_tokens"] = config.max_tokens
            self._served = ServedEnsembles(parse_config({"models": {NAME: served}},
                                                        source="ensemble model args (-M)"))
        return self._served

    async def generate(self, input: list[ChatMessage], tools: list[ToolInfo],
                       tool_choice: ToolChoice, config: GenerateConfig) -> ModelOutput:
        t0 = time.perf_counter()
        ensembles = self._ensembles(config)
        try:
            req = parse_chat_request(chat_body(input, tools, tool_choice, config))
            served = ensembles.served(NAME)
            assert served is not None  # the one name this API serves
            ens = ensembles.get(NAME, parse_overrides(req.overrides, served),
                                req.response_format, req.sampling, tools=req.tools,
                                tool_choice=req.tool_choice)
        except RequestRejected as exc:
            raise InputError(str(exc)) from None
        decision = await ens.adecide(req.messages)
        doc = completion_doc(NAME, decision, ens.members, kind=ens.answer_kind)
        choice, usage = doc.choices[0], doc.usage
        return ModelOutput(
            model=self.model_name,
            choices=[ChatCompletionChoice(
                message=_output_message(choice.message, self.model_name),
                stop_reason=_STOP.get(choice.finish_reason or "stop", "unknown"))],
            usage=ModelUsage(input_tokens=usage.prompt_tokens,
                             output_tokens=usage.completion_tokens,
                             total_tokens=usage.total_tokens),
            time=time.perf_counter() - t0,
            metadata={"ensemble": doc.ensemble.model_dump()},
        )

    async def aclose(self) -> None:
        if self._served is not None:
            await self._served.aclose()
            self._served = None

    def max_connections(self) -> int:
        # inspect's own concurrency; the served model's limiter bounds requests upstream
        return 32
