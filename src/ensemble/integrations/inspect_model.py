"""inspect_ai's model API for ensemble voting: `inspect eval task.py --model ensemble/<model>
-M n=5 -M temperature=0.7` draws n samples of each generate call from <model> (any model
string `Ensemble` takes: openai/..., anthropic/..., local, ...) and answers with the vote.

No server sits between: each generate call is one `Ensemble.adecide` on inspect's own event
loop, and the reply is built by the same function that answers `ensemble serve`'s chat
completions (`serve.wire.completion_doc`), so the text inspect scores is the full text of a
sample that voted for the decision, and `output.metadata["ensemble"]` holds the votes (the
`ensemble` object of a served reply: decision, votes, margin, samples, invalid, cost).

Model args (`-M key=value`) are `Ensemble`'s keywords: n, temperature, choices (a list or
"A,B,C"), answer, aggregator, stop, max_n, lam, calibration, store, seed, tie, invalid and the
provider options (max_concurrency, rpm, timeout, ...). inspect's own generate config supplies
temperature (over `-M temperature`), max_tokens, top_p, seed (the provider's sampling seed)
and stop_seqs; `--model-base-url` is the upstream's api_base.
"""

from __future__ import annotations

import time
from typing import Any

from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from ..api import Ensemble
from ..errors import InputError
from ..serve.wire import completion_doc

__all__ = ["EnsembleModelAPI", "ensemble_messages"]

# inspect's generate config -> Ensemble's sampling keywords
_CONFIG = (("max_tokens", "max_tokens"), ("top_p", "top_p"), ("seed", "sampling_seed"),
           ("stop_seqs", "stop_sequences"))


def ensemble_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """inspect's chat messages as the role/content dicts `Ensemble` takes (text parts only)."""
    out = []
    for m in messages:
        if m.role == "tool" or (isinstance(m, ChatMessageAssistant) and m.tool_calls):
            raise InputError("the ensemble model API votes on text replies; this sample's "
                             "history has tool calls: use `ensemble serve` with inspect's "
                             "openai provider for tool use")
        out.append({"role": m.role, "content": m.text})
    return out


class EnsembleModelAPI(ModelAPI):
    """One `Ensemble` per distinct sampling config (inspect may vary the config per call)."""

    def __init__(self, model_name: str, base_url: str | None = None,
                 api_key: str | None = None, api_key_vars: list[str] | None = None,
                 config: GenerateConfig | None = None, **model_args: Any) -> None:
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key,
                         api_key_vars=api_key_vars or [],
                         config=config or GenerateConfig())
        if not model_name:
            raise InputError("give the model to vote with after ensemble/, e.g. "
                             "--model ensemble/openai/gpt-4o-mini")
        args = dict(model_args)
        if isinstance(args.get("choices"), str):
            args["choices"] = [c.strip() for c in args["choices"].split(",") if c.strip()]
        if base_url:
            args.setdefault("api_base", base_url)
        if api_key:
            args.setdefault("api_key", api_key)
        self._args = args
        self._ensembles: dict[tuple[Any, ...], Ensemble] = {}

    def _ensemble(self, config: GenerateConfig) -> Ensemble:
        kw = dict(self._args)
        if config.temperature is not None:
            kw["temperature"] = config.temperature
        for theirs, ours in _CONFIG:
            value = getattr(config, theirs)
            if value is not None:
                kw[ours] = value
        key = tuple(sorted((k, repr(v)) for k, v in kw.items()))
        ens = self._ensembles.get(key)
        if ens is None:
            ens = self._ensembles[key] = Ensemble(self.model_name, **kw)
        return ens

    async def generate(self, input: list[ChatMessage], tools: list[ToolInfo],
                       tool_choice: ToolChoice, config: GenerateConfig) -> ModelOutput:
        if tools:
            raise InputError("the ensemble model API votes on text replies; this task offers "
                             "tools: use `ensemble serve` with inspect's openai provider")
        t0 = time.perf_counter()
        ens = self._ensemble(config)
        decision = await ens.adecide(ensemble_messages(input))
        doc = completion_doc(self.model_name, decision, ens.members)
        message = doc["choices"][0]["message"]
        usage = doc["usage"]
        return ModelOutput(
            model=self.model_name,
            choices=[ChatCompletionChoice(
                message=ChatMessageAssistant(content=message["content"] or "",
                                             model=self.model_name, source="generate"),
                stop_reason="stop")],
            usage=ModelUsage(input_tokens=usage["prompt_tokens"],
                             output_tokens=usage["completion_tokens"],
                             total_tokens=usage["total_tokens"]),
            time=time.perf_counter() - t0,
            metadata={"ensemble": doc["ensemble"]},
        )

    async def aclose(self) -> None:
        for ens in self._ensembles.values():
            await ens.aclose()
        self._ensembles.clear()

    def max_connections(self) -> int:
        # inspect's own concurrency: let the Ensemble's per-endpoint limiter bound requests
        return 32
