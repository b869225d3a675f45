"""Replay recorded samples: a provider that answers from a recording, never from a model.

    ensemble eval mathqa --model replay/runs/my-run --t 0.7 --n 1 3 5 --samples 10
    Ensemble("replay/recording.jsonl", n=10, stop="bayes", choices=[...])

The model string is `replay/<path>` (or `replay:<path>`), with `#<member>` to pick one member
of a mixed run (`replay/runs/mixed#cheap`). The path is

- a run folder of this project (or its `samples.jsonl`): every sample of `samples.jsonl`, its
  prompt read from `questions.jsonl` beside it by the sample's `id`, keyed by (prompt, t);
- a minimal JSONL recording, one line per prompt: `{"prompt": "...", "samples": [...]}` or
  `{"id": "q1", "samples": [...]}` (the prompt then read from a `questions.jsonl` beside the
  file, as in a run folder), optionally `"t"`; each sample is the reply's text, or an object
  `{"text": ..., "tokens": ..., "cost_usd": ..., "lp": ...}`. Without `t` it serves every
  temperature. `"lp"` is the sample's compact logprobs (`ensemble.sampling.logprobs`: the
  answer span's token logprobs, the top-k at its first token, the trace's confidences), served
  back to a request that asks for logprobs; a request for logprobs to a recording without
  them is refused in one line (a replay cannot invent them). Token counts and sample indices are
whole numbers >= 0, costs and temperatures numbers >= 0; a prompt (at one t) recorded twice must
repeat the same samples (questions sharing a prompt): anything else is one line naming the file
and line.

Sample i of a prompt is recorded sample i, always: a request for samples `first_index` ..
`first_index + n - 1` gets exactly those recorded replies, with their recorded completion
tokens and cost (repriced with `price_per_1k` when the recording has no cost), and no request
leaves the machine. Past the end of a recording, or for a prompt the recording does not hold,
the reply is one `RecordingExhausted` error naming the prompt and what was recorded; it is
systemic (every further request would fail alike), so a run stops there instead of inventing
a sample. A run's samples.jsonl whose indices skip one (a sample that failed for good) is
served up to the gap, and a request past it is told which sample of which question is missing.
The prompt is a request's last message (what the simulated expert reads too).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ensemble.wording import counted, ordinal

from ..errors import InputError, ProviderError
from .base import Capabilities, Choice, Completion
from .options import ProviderOptions
from .params import SamplingParams

__all__ = ["Recording", "RecordingExhausted", "ReplayProvider", "RecordedSample",
           "load_recording"]

PREFIXES = ("replay/", "replay:")


class RecordingExhausted(ProviderError):
    """A replay was asked for a sample the recording does not hold (past its end, or a prompt
    it never saw). Systemic: a replay cannot draw a new sample."""

    systemic = True


@dataclass(frozen=True)
class RecordedSample:
    """One recorded reply: its text, completion tokens, cost (None: unknown) and compact
    logprobs (None: recorded without them)."""

    text: str | None
    tokens: int | None = None
    cost_usd: float | None = None
    lp: Any = None


@dataclass(frozen=True)
class Recording:
    """Recorded samples per (prompt, t); t None serves every temperature."""

    path: str
    member: str | None
    samples: Mapping[tuple[str, float | None], tuple[RecordedSample, ...]]
    # (prompt, t) whose recorded indices skip one (a run's samples.jsonl whose sample failed
    # for good): where the gap is, said when a request reaches it
    gaps: Mapping[tuple[str, float | None], str] = field(default_factory=dict)

    def get(self, prompt: str, t: float) -> tuple[RecordedSample, ...] | None:
        got = self.samples.get((prompt, float(t)))
        return got if got is not None else self.samples.get((prompt, None))


def _split(model: str) -> tuple[Path, str | None]:
    rest = next((model[len(p):] for p in PREFIXES if model.startswith(p)), "")
    path, _, member = rest.partition("#")
    if not path:
        raise InputError(f"{model!r}: a replay names its recording, e.g. replay/runs/my-run "
                         "or replay/recording.jsonl")
    return Path(path), (member or None)


def _lines(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"replay: cannot read {path} ({exc.strerror or exc}); give a run "
                         "folder or a JSONL recording") from None
    except UnicodeDecodeError:
        raise InputError(f"replay: {path} is not UTF-8 text; give a JSONL recording") from None
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"replay: {path} line {no} is not JSON ({exc.msg}); a recording "
                             "has one JSON object per line") from None
        if not isinstance(doc, dict):
            raise InputError(f"replay: {path} line {no} is not a JSON object")
        out.append(doc)
    return out


def _prompts(folder: Path, where: Path) -> dict[str, str]:
    qfile = folder / "questions.jsonl"
    if not qfile.is_file():
        raise InputError(f"replay: {where} names questions by id but there is no "
                         f"questions.jsonl beside it; give each line its \"prompt\"")
    return {str(d["id"]): str(d["prompt"]) for d in _lines(qfile) if "id" in d and "prompt" in d}


def _count(d: Mapping[str, Any], key: str, where: str) -> int | None:
    """`d[key]` as a count (None when absent or null): a whole number >= 0 (3.0 is 3)."""
    x = d.get(key)
    if x is None:
        return None
    if (isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x)
            or x < 0 or x != int(x)):
        raise InputError(f"replay: {where}: \"{key}\" must be a whole number >= 0, got "
                         f"{json.dumps(x)[:40]}")
    return int(x)


def _amount(d: Mapping[str, Any], key: str, where: str, what: str) -> float | None:
    """`d[key]` as a finite number >= 0 (None when absent or null)."""
    x = d.get(key)
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0:
        raise InputError(f"replay: {where}: \"{key}\" must be {what}, a number >= 0, got "
                         f"{json.dumps(x)[:40]}")
    return float(x)


def _sample(x: Any, where: str) -> RecordedSample:
    if x is None or isinstance(x, str):
        return RecordedSample(x)
    if isinstance(x, dict):
        lp = x.get("lp", x.get("answer_lp"))
        if lp is not None and not isinstance(lp, dict):
            raise InputError(f"replay: {where}: a sample's \"lp\" is its compact logprobs, an "
                             f"object (ensemble.sampling.logprobs), got {type(lp).__name__}")
        text = x.get("text")
        if text is not None and not isinstance(text, str):
            raise InputError(f"replay: {where}: \"text\" is the reply's text, a string (or "
                             f"null: no text), got {json.dumps(text)[:40]}")
        return RecordedSample(text, _count(x, "tokens", where),
                              _amount(x, "cost_usd", where, "its cost in dollars"), lp)
    raise InputError(f"replay: {where}: a sample is its reply text or an object with "
                     f"\"text\", got {type(x).__name__}")


def load_recording(model: str) -> Recording:
    """Read the recording a `replay/...` model string names (see the module docstring)."""
    path, member = _split(model)
    if path.is_dir():
        path = path / "samples.jsonl"
    docs = _lines(path)
    folder = path.parent
    out: dict[tuple[str, float | None], dict[int, RecordedSample]] = {}
    if docs and "samples" not in docs[0]:  # this project's samples.jsonl
        prompts = _prompts(folder, path)
        labels = sorted({str(d["member"]) for d in docs if d.get("member") is not None})
        if labels and member is None:
            raise InputError(f"replay: {path} is a mixed run: name its member, e.g. "
                             f"replay/{folder}#{labels[0]} (members: {', '.join(labels)})")
        if member is not None and member not in labels:
            raise InputError(f"replay: {path} has no member {member!r} (members: "
                             f"{', '.join(labels) or 'none: drop #' + member})")
        seen: dict[tuple[str, float | None, int], tuple[int, RecordedSample]] = {}
        lines_of: dict[tuple[str, float | None], dict[int, tuple[int, str]]] = {}
        for no, d in enumerate(docs, 1):
            if member is not None and d.get("member") != member:
                continue
            where = f"{path} line {no}"
            gone = next((k for k in ("id", "t", "sample") if d.get(k) is None), None)
            if gone is not None:
                raise InputError(f"replay: {where}: no {gone!r} (a sample line has id, t, "
                                 "sample, text; its id in questions.jsonl)")
            if str(d["id"]) not in prompts:
                raise InputError(f"replay: {where}: id {d['id']!r} is not in "
                                 f"{folder / 'questions.jsonl'}")
            prompt = prompts[str(d["id"])]
            t = _amount(d, "t", where, "a temperature") or 0.0
            i = _count(d, "sample", where) or 0
            got = _sample(d, where)
            first = seen.setdefault((prompt, t, i), (no, got))
            if first[1] != got:  # questions sharing one prompt share its samples, alike
                raise InputError(f"replay: {where}: sample {i} of the prompt of id "
                                 f"{d['id']!r} at t = {t:g} differs from the one on line "
                                 f"{first[0]}: one sample per (prompt, t, sample)")
            out.setdefault((prompt, t), {})[i] = got
            lines_of.setdefault((prompt, t), {})[i] = (no, str(d["id"]))
    else:
        prompts = {}
        lines: dict[tuple[str, float | None], int] = {}
        for no, d in enumerate(docs, 1):
            if not isinstance(d.get("samples"), list):
                raise InputError(f"replay: {path} line {no}: give \"samples\": a list of "
                                 "replies in order")
            if "prompt" in d:
                prompt = str(d["prompt"])
            elif "id" in d:
                prompts = prompts or _prompts(folder, path)
                if str(d["id"]) not in prompts:
                    raise InputError(f"replay: {path} line {no}: id {d['id']!r} is not in "
                                     f"{folder / 'questions.jsonl'}")
                prompt = prompts[str(d["id"])]
            else:
                raise InputError(f"replay: {path} line {no}: give \"prompt\" or \"id\"")
            at = _amount(d, "t", f"{path} line {no}", "a temperature")
            recorded = {i: _sample(x, f"{path} line {no}") for i, x in enumerate(d["samples"])}
            if (prompt, at) in lines and out[prompt, at] != recorded:
                # questions sharing one prompt recorded alike (the store keys samples by
                # prompt) repeat its line: fine; other samples would be one of two silently
                raise InputError(f"replay: {path} line {no} records the prompt of line "
                                 f"{lines[prompt, at]} again" + ("" if at is None else
                                                               f" at t = {at:g}")
                                 + " with other samples: give each prompt (and t) one line, "
                                 "its samples in order")
            lines.setdefault((prompt, at), no)
            out[prompt, at] = recorded
    samples: dict[tuple[str, float | None], tuple[RecordedSample, ...]] = {}
    gaps: dict[tuple[str, float | None], str] = {}
    for key, by_index in out.items():
        n = 0
        while n in by_index:  # a recording serves its samples 0..n-1 without a gap
            n += 1
        samples[key] = tuple(by_index[i] for i in range(n))
        if len(by_index) > n:  # only a run's samples.jsonl numbers its samples
            after = min(i for i in by_index if i > n)
            no, qid = lines_of[key][after]
            gaps[key] = (f"the {ordinal(n + 1)} sample (\"sample\": {n}) of question id "
                         f"{qid!r} at t = {key[1]:g} is missing (line {no} holds its "
                         f"{ordinal(after + 1)})")
    return Recording(str(path), member, samples, gaps)


def recorded_logprobs(recording: Recording) -> dict[str, Any]:
    """What a recording can give a draw that reads logprobs (`Capabilities` fields): every
    sample recorded with them, none, or some (unknown: a prompt without them is refused when
    asked). The alternatives per token are what each sample was recorded with: no bound is
    declared."""
    lps = [s.lp for samples in recording.samples.values() for s in samples]
    held = sum(lp is not None for lp in lps)
    where = f"the recording {recording.path}"
    if not held:
        return {"logprobs": False, "logprobs_source": f"{where} holds none"}
    return {"logprobs": True if held == len(lps) else None, "logprobs_source": where}


class ReplayProvider:
    """A provider (see `ensemble.providers.Provider`) serving a recording's samples."""

    name = "replay"

    def __init__(self, model: str, options: ProviderOptions | None = None) -> None:
        self.model = model
        self.options = options or ProviderOptions()
        self.recording = load_recording(model)
        digest = hashlib.sha256(str(Path(self.recording.path).resolve()).encode()
                                ).hexdigest()[:16]
        self.api_base: str | None = None
        self.identity: str | None = f"replay:{digest}:{self.recording.member or ''}"
        self.endpoint = ("replay", self.identity, "-")
        self.capabilities = Capabilities(max_concurrency=None, supports_n=True, batch_api=None,
                                         **recorded_logprobs(self.recording))
        self.requests = 0

    def __repr__(self) -> str:
        return f"ReplayProvider({self.recording.path!r}, member={self.recording.member!r})"

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def price(self, prompt_tokens: int, completion_tokens: int, *,
              batch: bool = False) -> float | None:
        return self.options.cost.cost(prompt_tokens, completion_tokens)

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        return None

    def _cost(self, s: RecordedSample) -> float | None:
        if s.cost_usd is not None:
            return s.cost_usd
        return None if s.tokens is None else self.price(0, s.tokens)

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, first_index: int = 0,
                       headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        prompt = str(messages[-1].get("content", "")) if messages else ""
        t = float(params.temperature)
        rec = self.recording.get(prompt, t)
        where = f"replay {self.recording.path}"
        if rec is None:
            raise RecordingExhausted(
                f"{where} holds no samples of the prompt {prompt[:60]!r} at t = {t:g}: a "
                "replay serves only what was recorded (same prompt and temperature)",
                model=self.model, provider="replay", reason="not recorded")
        if first_index + n > len(rec):
            gap = self.recording.gaps.get((prompt, t)) or self.recording.gaps.get((prompt, None))
            if gap is not None:  # served up to the gap, and said so
                raise RecordingExhausted(
                    f"{where}: {gap}, and a replay serves a prompt's samples in order up to "
                    f"a gap: ask for at most {counted(len(rec), 'sample')}, or rerun the run "
                    "that recorded it (ensemble eval --spec ITS_FOLDER draws only the samples "
                    "its store lacks)",
                    model=self.model, provider="replay", reason="a gap in the recording")
            asked = max(len(rec), first_index) + 1  # the first one missing, counted from 1
            raise RecordingExhausted(
                f"{where} holds {counted(len(rec), 'sample')} of the prompt {prompt[:60]!r} at "
                f"t = {t:g}, and the {ordinal(asked)} sample was asked: a replay never invents "
                f"one; ask for at most {counted(len(rec), 'sample')}",
                model=self.model, provider="replay", reason="past the recording")
        got = rec[first_index:first_index + n]
        if params.logprobs and any(s.lp is None for s in got):
            raise RecordingExhausted(
                f"{where} holds no logprobs for the prompt {prompt[:60]!r} at t = {t:g}, and "
                "this request asks for them: a replay cannot invent them (record them, or use "
                "a rule that reads hard answers only)",
                model=self.model, provider="replay", reason="no logprobs recorded")
        self.requests += 1
        tokens = [s.tokens for s in got]
        costs = [self._cost(s) for s in got]
        return Completion(
            choices=tuple(Choice(text=s.text, finish_reason="stop", tokens=s.tokens,
                                 answer_lp=s.lp if params.logprobs else None)
                          for s in got),
            prompt_tokens=None,
            completion_tokens=None if None in tokens else sum(x or 0 for x in tokens),
            cost_usd=None if None in costs else float(sum(x or 0.0 for x in costs)),
            latency_s=0.0, recorded=True)
