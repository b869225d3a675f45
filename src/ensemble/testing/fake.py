"""An in-process fake provider with a planted expert: sampling without a port or a network.

    from ensemble import Ensemble
    from ensemble.testing import FakeExpertProvider

    fake = FakeExpertProvider(lam1=3.0, seed=1)
    ens = Ensemble("sim-expert", provider=fake, temperature=1.0, n=5, choices=["L", "R"])
    ens.decide(box_ball_prompt)
    fake.requests                       # how many requests it served

It answers exactly as `SimulatedServer` does (the same `SimulatedExpert`), so a unit test with
the fake and an end-to-end test over HTTP see the same samples for the same seed: like httpx's
`MockTransport` or litellm's `mock_response`, but with a model of how answers are produced.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..providers.base import Capabilities, Choice, Completion
from ..providers.params import SamplingParams
from ..providers.toolcalls import reply_text
from .expert import ChainBeliefs, MCModel, SimulatedExpert, prompt_key

__all__ = ["FakeExpertProvider"]

_ids = itertools.count(1)


class FakeExpertProvider:
    """A provider (see `ensemble.providers.Provider`) answering from a planted expert.

    Expert options as for `SimulatedExpert` (`lam1`, `bias`, `link`, `answer_key`, `mc_model`,
    `invalid_rate`, `seed`, `beliefs`) or a ready `expert`. `latency`: seconds per request.
    `price_per_token`: (prompt, completion) USD per token, so cost accounting can be tested
    (None: unknown price). `supports_n`: honour the provider's `n`.
    """

    name = "fake"

    def __init__(self, *, lam1: float = 10.0, bias: float = 0.0, link: str = "logit",
                 answer_key: Mapping[str, str] | None = None, mc_model: MCModel | None = None,
                 invalid_rate: float = 0.0, seed: int = 0, latency: float = 0.0,
                 price_per_token: tuple[float, float] | None = None, supports_n: bool = True,
                 expert: SimulatedExpert | None = None, model: str = "sim-expert",
                 beliefs: ChainBeliefs | None = None) -> None:
        self.expert = expert or SimulatedExpert(lam1=lam1, bias=bias, link=link,
                                                answer_key=answer_key, mc_model=mc_model,
                                                invalid_rate=invalid_rate, seed=seed,
                                                beliefs=beliefs)
        self.model = model
        self.api_base: str | None = None
        self.latency = float(latency)
        self.price_per_token = price_per_token
        # the planted expert's logprobs, with any number of alternatives per token
        self.capabilities = Capabilities(max_concurrency=None, supports_n=bool(supports_n),
                                         batch_api=None, logprobs=True,
                                         tokenizer="the planted expert's token count")
        self.endpoint = ("fake", f"in-process-{next(_ids)}", "-")
        e = self.expert  # another planted expert is another source of samples
        self.identity: str | None = (f"fake:{model}:lam1={e.lam1!r}:bias={e.bias!r}:"
                                     f"link={e.link}:seed={e.seed}:invalid={e.invalid_rate!r}"
                                     + (f":open={e.open_answers!r}" if e.open_answers else "")
                                     + (f":structured={e.structured!r}" if e.structured
                                        else "")
                                     + (f":difficulty={e.difficulty_seed}:mc={e.mc.a!r},"
                                        f"{e.mc.b!r}" if e.difficulty_seed is not None
                                        else "")
                                     + (f":tools={e.tools!r}" if e.tools else "")
                                     + (f":formats={e.formats!r}" if e.formats else "")
                                     # a scaled bias answers otherwise (fixed keeps old keys)
                                     + ("" if e.bias_form == "fixed"
                                        else f":bias_form={e.bias_form}"))
        self.requests = 0
        self.served: Counter[tuple[str, int]] = Counter()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FakeExpertProvider(lam1={self.expert.lam1}, seed={self.expert.seed})"

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def price(self, prompt_tokens: int, completion_tokens: int, *,
              batch: bool = False) -> float | None:
        if self.price_per_token is None:
            return None
        return (prompt_tokens * self.price_per_token[0]
                + completion_tokens * self.price_per_token[1])

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        return self.expert.usage([dict(m) for m in messages], [])[0]

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, first_index: int = 0,
                       headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        msgs = [dict(m) for m in messages]
        t = float(params.temperature)
        key = prompt_key(msgs, t)
        start = first_index
        short = params.max_tokens is not None and params.max_tokens <= 5
        choices = []
        for j in range(n):
            extra = dict(params.extra)
            reply = self.expert.reply(msgs, t, start + j, short=short, key=key,
                                      response_format=extra.get("response_format"),
                                      tools=extra.get("tools"),
                                      tool_choice=extra.get("tool_choice"))
            lp: Any = None
            if params.logprobs:
                lp = self.expert.logprobs_for(reply, params.top_logprobs or 0, key, start + j)
            choices.append(Choice(text=reply_text(reply.text, reply.tool_calls),
                                  finish_reason="tool_calls" if reply.tool_calls else "stop",
                                  logprobs=lp))
        with self._lock:
            self.requests += 1
            for j in range(n):
                self.served[(key, start + j)] += 1
        ptoks, ctoks = self.expert.usage(msgs, [c.text or "" for c in choices])
        cost = self.price(ptoks, ctoks)
        return Completion(choices=tuple(choices), prompt_tokens=ptoks, completion_tokens=ctoks,
                          cost_usd=cost, latency_s=self.latency)
