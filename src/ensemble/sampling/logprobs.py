"""A sample's token logprobs, kept compactly: what the soft rules read (issue 37).

A provider's `logprobs` (the OpenAI layout: `{"content": [{"token", "logprob", "top_logprobs":
[{"token", "logprob"}, ...]}, ...]}`) can be tens of kilobytes per sample for a reasoning trace.
The rules need much less, and `compact` keeps exactly that, one small JSON object per sample
(the store's `answer_lp` column, `Sample.answer_lp`, and each sample's `"lp"` in a replay
recording):

    {"s": "64",                  the answer span's text (the tokens the answer was read from)
     "at": 4,                    the span's first token (its index in the reply)
     "lp": [-0.61, -0.02],       the span's tokens' own logprobs
     "top": [["6", -0.61], ...], the top-k alternatives (k <= TOP_K) at the span's first token
     "trace": [n, mean, conf, low, tail]}
                                 the whole reply: tokens, mean token logprob, and DeepConf's
                                 mean, lowest-group and tail token confidence (below)

"s", "at", "lp" and "top" are absent when no span of the reply reads as its answer (an invalid
sample, or an answer the tokens do not spell). Numbers are rounded to 4 decimals.

The answer's probability. The answer span's tokens are found by the run's own parser: the last
run of tokens whose text alone parses to the sample's answer (the shortest such run at its
start). Its probability is the product of its tokens' probabilities, each conditional on the
reply so far (`answer_logprob`: the sum of "lp"): for an answer of several tokens (a number of
several digits, a word split in pieces) that is the probability of the whole answer given the
sample's own text before it. Over options (`option_probs`, choice answers), the top-k at the
span's first token are mapped through the parser ("Yes", " yes" and "YES" all to yes; a piece
that starts exactly one option, such as "pos" for positive, to that option) and summed per
option: P(option) at the answer position, conditioned on the sample's reasoning; what the top-k
does not name is unassigned. Open answers (numbers, text) get only their own probability.

DeepConf's token confidence (Fu et al., "Deep Think with Confidence", 2025): at token i,
C_i = −(1/k) Σ_j log P_i(j) over the top-k alternatives the provider returned; a group is
a sliding window of `WINDOW` tokens (the whole reply when it is shorter), its confidence the
mean C_i; "low" is the lowest group's confidence, "tail" the mean over the last `WINDOW`
tokens, "conf" the mean over the reply. Higher is more confident.

Logprobs as reported. llama.cpp and the OpenAI API report the model's own distribution
(before the temperature: the same values at every t, measured on llama.cpp in
docs/theory.md); `compact` keeps them as given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["TOP_K", "WINDOW", "answer_logprob", "compact", "option_probs", "trace_summary"]

TOP_K = 5
WINDOW = 2048  # DeepConf's group and tail size, in tokens
MAX_SPAN = 16  # an answer read from more tokens than this is not located (a long text answer)

Parse = Callable[[str], "str | None"]


def _r(x: float) -> float:
    return round(float(x), 4) if math.isfinite(x) else -1e4


def _tokens(logprobs: Any) -> list[Mapping[str, Any]]:
    if isinstance(logprobs, Mapping):
        content = logprobs.get("content")
    else:
        content = getattr(logprobs, "content", None)
    if not isinstance(content, Sequence) or isinstance(content, (str, bytes)):
        return []
    return [t for t in content if isinstance(t, Mapping) and isinstance(t.get("token"), str)
            and isinstance(t.get("logprob"), (int, float))]


def _tops(tok: Mapping[str, Any]) -> list[tuple[str, float]]:
    out = []
    for u in tok.get("top_logprobs") or ():
        if isinstance(u, Mapping) and isinstance(u.get("token"), str) \
                and isinstance(u.get("logprob"), (int, float)):
            out.append((str(u["token"]), float(u["logprob"])))
    return out


def trace_summary(tokens: Sequence[Mapping[str, Any]], *, window: int = WINDOW
                  ) -> list[float]:
    """[n, mean logprob, mean confidence, lowest group confidence, tail confidence] of a
    reply's tokens (module docstring)."""
    n = len(tokens)
    if n == 0:
        return [0, 0.0, 0.0, 0.0, 0.0]
    lps = [float(t["logprob"]) for t in tokens]
    conf = []
    for t in tokens:
        tops = _tops(t) or [(str(t["token"]), float(t["logprob"]))]
        conf.append(-sum(max(v, -1e4) for _, v in tops) / len(tops))
    w = min(window, n)
    acc = sum(conf[:w])
    low = acc
    for i in range(w, n):  # sliding window sums, O(n)
        acc += conf[i] - conf[i - w]
        low = min(low, acc)
    return [n, _r(sum(lps) / n), _r(sum(conf) / n), _r(low / w), _r(sum(conf[-w:]) / w)]


def _locate(tokens: Sequence[Mapping[str, Any]], answer: str, parse: Parse
            ) -> tuple[int, int] | None:
    """The last run of tokens whose text parses to `answer` (shortest at its start)."""
    texts = [str(t["token"]) for t in tokens]
    for i in range(len(texts) - 1, -1, -1):
        if not texts[i].strip():
            continue
        piece = ""
        for j in range(i, min(len(texts), i + MAX_SPAN)):
            piece += texts[j]
            try:
                got = parse(piece)
            except Exception:  # noqa: BLE001 - a parser bug: the span is not located
                got = None
            if got == answer:
                return i, j + 1
    return None


def compact(logprobs: Any, answer: str | None, parse: Parse | None, *,
            top_k: int = TOP_K, window: int = WINDOW) -> dict[str, Any] | None:
    """The compact form (module docstring) of a reply's `logprobs`, its answer located with
    `parse` (None when the reply carries no token logprobs)."""
    tokens = _tokens(logprobs)
    if not tokens:
        # an empty reply that came with logprobs (no token to report): its trace says so
        content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
        return {"trace": trace_summary([])} if isinstance(content, list) else None
    out: dict[str, Any] = {}
    span = _locate(tokens, answer, parse) if answer is not None and parse is not None else None
    if span is not None:
        i, j = span
        out["s"] = "".join(str(t["token"]) for t in tokens[i:j])
        out["at"] = i
        out["lp"] = [_r(float(t["logprob"])) for t in tokens[i:j]]
        tops = sorted(_tops(tokens[i]), key=lambda kv: -kv[1])[:top_k]
        out["top"] = [[tok, _r(v)] for tok, v in tops]
    out["trace"] = trace_summary(tokens, window=window)
    return out


def answer_logprob(lp: Mapping[str, Any] | None, answer: str | None, parse: Parse | None
                   ) -> float | None:
    """log P(the sampled answer | the reply before it): the sum of the answer span's token
    logprobs; None when the compact form has no span for this answer (re-read by another
    parser, say, or no logprobs)."""
    if not lp or "lp" not in lp or answer is None:
        return None
    if parse is not None:
        try:
            if parse(str(lp.get("s", ""))) != answer:
                return None
        except Exception:  # noqa: BLE001
            return None
    return float(sum(lp["lp"]))


def option_probs(lp: Mapping[str, Any] | None, answer: str | None, parse: Parse | None, *,
                 options: Sequence[str] | None = None) -> dict[str, float] | None:
    """P(option) at the answer position for choice answers (the top-k mapped through the
    parser, summed per option; unnamed mass unassigned); for open answers (`options` None)
    only the sampled answer's own probability. None when the sample has no located span."""
    own = answer_logprob(lp, answer, parse)
    if own is None or lp is None or answer is None:
        return None
    if not options:
        return {answer: math.exp(own)}
    out: dict[str, float] = {}
    lowered = [(o, o.lower()) for o in options]
    for tok, v in lp.get("top") or ():
        got = None
        if parse is not None:
            try:
                got = parse(str(tok))
            except Exception:  # noqa: BLE001
                got = None
        if got is None:
            piece = str(tok).strip().lower()
            starts = [o for o, low in lowered if piece and low.startswith(piece)]
            got = starts[0] if len(starts) == 1 else None
        if got is not None and got in options:
            out[got] = out.get(got, 0.0) + math.exp(float(v))
    if answer not in out:  # the sampled token itself was cut from the top-k: its own share
        out[answer] = math.exp(float(lp["lp"][0]))
    total = sum(out.values())
    if total > 1.0:  # a tokenizer's duplicates ("Yes", " Yes") can sum past 1 after rounding
        out = {k: v / total for k, v in out.items()}
    return out
