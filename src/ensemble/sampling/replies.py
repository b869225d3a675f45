"""What a provider returns, made safe before the engine stores, shows or returns it.

Every reply enters the engine here (the online path through `checked`, the batch path through
`checked_text` and `usable_tokens`):
- API keys echoed in a reply's text or logprobs (a debugging proxy, a prompt-injected model, a
  provider quoting the Authorization header) are replaced by `***`: the key registered with
  `ensemble.secrets` never reaches the store, `samples.jsonl`, a view or `Decision.to_json()`.
- Token usage that cannot be true (negative, not an integer, absurdly large) is unknown, not a
  credit: a reply reporting -10 million tokens must not switch a cost cap off. The cost litellm
  derived from such usage is unknown too.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from ..providers.base import Choice, Completion
from ..secrets import redact_known

__all__ = ["MAX_TOKENS_PER_REPLY", "checked", "checked_logprobs", "checked_text",
           "usable_cost", "usable_tokens"]

# no model replies with more tokens than this in one request (n choices together); a count
# above it is a provider's bug, not usage to pay for
MAX_TOKENS_PER_REPLY = 50_000_000


def usable_tokens(value: Any) -> int | None:
    """A reported token count, or None when it is missing or cannot be true."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        return None
    count = int(value)
    return count if 0 <= count <= MAX_TOKENS_PER_REPLY else None


def usable_cost(value: Any) -> float | None:
    """A reported or derived cost in USD, or None when it is missing or cannot be true."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    cost = float(value)
    return cost if math.isfinite(cost) and cost >= 0 else None


def checked_text(text: str | None) -> str | None:
    """A reply's text with every registered API key replaced by `***`."""
    return redact_known(text) if isinstance(text, str) else text


def checked_logprobs(logprobs: Any) -> Any:
    """A reply's logprobs (plain JSON data) with registered keys replaced in every string."""
    if logprobs is None:
        return None
    try:
        blob = json.dumps(logprobs, ensure_ascii=False)
    except (TypeError, ValueError):
        return None  # not plain data: nothing the engine could store faithfully anyway
    clean = redact_known(blob)
    if clean == blob:
        return logprobs
    try:
        return json.loads(clean)
    except ValueError:  # pragma: no cover - a key never spans JSON syntax
        return None


def checked(comp: Completion) -> Completion:
    """`comp` with keys redacted from its choices and impossible usage made unknown."""
    choices = tuple(Choice(text=checked_text(c.text), finish_reason=c.finish_reason,
                           logprobs=checked_logprobs(c.logprobs),
                           tokens=usable_tokens(c.tokens) if c.tokens is not None else None,
                           answer_lp=checked_logprobs(c.answer_lp))
                    for c in comp.choices)
    pt = usable_tokens(comp.prompt_tokens) if comp.prompt_tokens is not None else None
    ct = usable_tokens(comp.completion_tokens) if comp.completion_tokens is not None else None
    bad_usage = ((comp.prompt_tokens is not None and pt is None)
                 or (comp.completion_tokens is not None and ct is None))
    cost = None if bad_usage else usable_cost(comp.cost_usd)
    return replace(comp, choices=choices, prompt_tokens=pt, completion_tokens=ct, cost_usd=cost)
