"""Soft votes: rules that read what each sample says about itself (issue 37).

Three registered rules, each drawing the logprobs it reads (`ensemble.rules.Requests`):

- `soft`: each sample adds its own distribution over the options (the top-k at the answer
  position mapped to options; mass the top-k does not name is unassigned); for open answers
  (numbers, text) its answer's own probability, the rest unassigned. Under quantal response
  the answer token's distribution is the sample's QR distribution given its own reasoning, and
  the sum is the Rao-Blackwellised plurality: the same expected scores with less variance
  (docs/theory.md, "Soft votes").
- `confidence`: Confidence-Informed Self-Consistency (Taubenfeld et al. 2025,
  `google-research/cisc`): each sample's hard vote weighed by softmax(c_i / T) over the
  decision's samples, c_i its confidence: the answer's log-probability (`by="answer"`, the
  default) or the reply's mean token logprob (`by="mean"`). T (`temperature=`, default 1: the
  weight is then proportional to the answer's probability) is fitted without the scored
  questions' labels by `fit_temperature` on a run's own samples (benchmarks, evals).
- `deepconf`: DeepConf (Fu et al. 2025): keep the `keep` share (η, default 0.9) of the samples
  with the highest trace confidence (the lowest group's, `by="low"`, or the tail's,
  `by="tail"`), then a vote weighed by that confidence. It reads reasoning traces: on replies
  shorter than `MIN_TRACE` tokens (a median) it is refused in one line, never run as a
  plurality.

No signal, no harm. `soft` and `confidence` check their own samples before trusting them
(`SignalCheck`): does a sample's confidence in its own answer go with how many of the other
samples agree with it? Over the (own confidence, leave-one-out agreement) pairs of every
decision a rule instance has made (an Ensemble keeps its rule), the correlation must be
positive at one-sided 0.1% (a z with a per-decision cluster-robust error: one decision's
samples share its answers) with at least `MIN_PAIRS` pairs; and the rule's vote of each
decision's first half must agree with the plurality of its second half at least as often as
the hard vote of the first half does (`heldout_gain`, averaged once `MIN_GAINS` decisions have
one: confidence that goes with agreement can still mislead a vote, as the lengths of open
answers do). Until then, and when either fails, the samples count as hard votes (a plurality)
and the vote's notes say so. On the
simulator's noise setting (confidence drawn independently of the question) the check stays
off; on its informative setting it turns on within the first few decisions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .aggregators import RuleBase, Vote
from .errors import InputError
from .rules import Ballots, Evidence, Requests, RunBallots, register_rule

__all__ = ["CONFIDENCE", "DEEPCONF", "MIN_PAIRS", "MIN_TRACE", "SOFT", "SignalCheck",
           "agreement_pairs", "contributions", "fit_temperature", "heldout_gain", "signal_z"]

SOFT = "soft"
CONFIDENCE = "confidence"
DEEPCONF = "deepconf"
MIN_PAIRS = 30  # pairs before the signal check may turn a soft rule on
MIN_GAINS = 10  # decisions with a held-out gain before it may turn a soft rule off
Z_SIGNAL = 3.09  # one-sided 0.1%: the check is read again after every decision
MIN_TRACE = 64  # deepconf: a median reply shorter than this is no reasoning trace
TOP_K = 5


def agreement_pairs(answers: Sequence[str | None], own: Sequence[float | None]
                    ) -> list[tuple[float, float]]:
    """(own confidence, share of the other valid samples giving the same answer) per valid
    sample with a confidence, over one decision's samples."""
    valid = [(a, c) for a, c in zip(answers, own, strict=True) if a is not None and c is not None]
    m = len(valid)
    if m < 2:
        return []
    counts: dict[str, int] = {}
    for a, _ in valid:
        counts[a] = counts.get(a, 0) + 1
    return [(float(c), (counts[a] - 1) / (m - 1)) for a, c in valid]


def signal_z(decisions: Sequence[Sequence[tuple[float, float]]]) -> float:
    """The covariance of own confidence and agreement over every pair, as a z with a
    cluster-robust (per decision) standard error: the samples of one decision share its
    answers, so they are not independent pairs (0 when undefined)."""
    pairs = [p for d in decisions for p in d]
    if len(pairs) < 4:
        return 0.0
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    u = [sum((x - mx) * (y - my) for x, y in d) for d in decisions if d]
    ss = sum(v * v for v in u)
    return sum(u) / math.sqrt(ss) if ss > 0 else 0.0


def heldout_gain(answers: Sequence[str | None],
                 contributions: Sequence[Mapping[str, float] | None]) -> float | None:
    """Does the rule's vote of a decision's first half agree with the plurality of its second
    half more often than the hard vote of the first half does? Its credit minus the hard
    vote's (ties share the credit), in [-1, 1]; None with fewer than 4 samples or no valid
    answer in either half. Label-free: the held-out samples are the pseudo-label.
    `contributions[i]`: what sample i adds to each answer under the rule (None: nothing)."""
    m = len(answers)
    if m < 4:
        return None
    h = m // 2
    rest: dict[str, float] = {}
    for a in answers[h:]:
        if a is not None:
            rest[a] = rest.get(a, 0.0) + 1.0
    hard: dict[str, float] = {}
    for a in answers[:h]:
        if a is not None:
            hard[a] = hard.get(a, 0.0) + 1.0
    soft: dict[str, float] = {}
    for c in contributions[:h]:
        for a, v in (c or {}).items():
            soft[a] = soft.get(a, 0.0) + v
    if not rest or not hard:
        return None
    labels = _winners(rest)
    return _credit(_winners(soft), labels) - _credit(_winners(hard), labels)


def _winners(scores: Mapping[str, float]) -> list[str]:
    best = max(scores.values(), default=0.0)
    return [a for a, v in scores.items() if best > 0 and v >= best - 1e-12 * max(1.0, best)]


def _credit(winners: Sequence[str], labels: Sequence[str]) -> float:
    return sum(1 for a in winners if a in labels) / len(winners) if winners else 0.0


@dataclass
class SignalCheck:
    """Whether a rule's logprobs have shown a signal (module docstring): the pairs of every
    decision so far; `on` while their covariance is positive at one-sided 0.1% (a
    cluster-robust z, `signal_z`) over at least `MIN_PAIRS` pairs."""

    decisions: list[list[tuple[float, float]]] = field(default_factory=list)
    gains: list[float] = field(default_factory=list)
    min_pairs: int = MIN_PAIRS

    def add(self, pairs: Iterable[tuple[float, float]], gain: float | None = None) -> None:
        got = list(pairs)
        if got:
            self.decisions.append(got)
        if gain is not None:
            self.gains.append(gain)

    @property
    def gain(self) -> float | None:
        """The mean held-out gain (`heldout_gain`) over the decisions that had one."""
        return sum(self.gains) / len(self.gains) if len(self.gains) >= MIN_GAINS else None

    @property
    def pairs(self) -> int:
        return sum(len(d) for d in self.decisions)

    @property
    def z(self) -> float:
        return signal_z(self.decisions)

    @property
    def on(self) -> bool:
        gain = self.gain
        return (self.pairs >= self.min_pairs and self.z > Z_SIGNAL
                and (gain is None or gain >= 0))

    def note(self, rule: str) -> str:
        if self.pairs < self.min_pairs:
            return (f"{rule}: counted as hard votes: the logprobs have not yet shown a signal "
                    f"({self.pairs} of the {self.min_pairs} samples the check needs)")
        gain = self.gain
        if self.z > Z_SIGNAL and gain is not None and gain < 0:
            return (f"{rule}: counted as hard votes: weighed by their logprobs, half of a "
                    f"decision's samples agree less with the other half than their plain "
                    f"count does ({gain:+.3f} over {len(self.gains)} decisions)")
        return (f"{rule}: counted as hard votes: a sample's confidence does not go with the "
                f"other samples' agreement (z = {self.z:.2f} over {self.pairs} samples; "
                f"the logprobs carry no signal here)")


def contributions(answers: Sequence[str | None], ballots: Ballots
                  ) -> list[dict[str, float] | None]:
    """What each sample adds to each answer under `ballots`."""
    out: list[dict[str, float] | None] = []
    for i, (a, w) in enumerate(zip(answers, ballots.weights, strict=True)):
        share = ballots.shares[i] if ballots.shares is not None else None
        if share is None:
            out.append(None if a is None else {a: w})
        else:
            out.append({k: w * v for k, v in share.items()})
    return out


def own_probability(e: Evidence, answer: str | None) -> float | None:
    """P(the sample's own answer) at its answer position."""
    if answer is None:
        return None
    if e.options is not None and answer in e.options:
        return math.exp(e.options[answer])
    return None if e.logprob is None else math.exp(e.logprob)


class _Checked(RuleBase):
    """A rule that weighs by logprobs only once they have shown a signal. Subclasses give
    their ballots before the check (`ballots`)."""

    def __init__(self, *, check: bool = True, **kw: Any) -> None:
        super().__init__(**kw)
        self.check = SignalCheck() if check else None
        self.answers: list[str | None] = []

    def __call__(self, answers: Sequence[str | None], *, choices: Sequence[str] | None = None,
                 weights: Sequence[float] | None = None, groups: Sequence[int] | None = None,
                 evidence: Sequence[Evidence | None] | None = None) -> Vote:
        self.answers = list(answers)  # weigh() reads them with the evidence
        return super().__call__(answers, choices=choices, weights=weights, groups=groups,
                                evidence=evidence)

    def ballots(self, evidence: Sequence[Evidence], answers: Sequence[str | None]
                ) -> Ballots:  # pragma: no cover - abstract
        raise NotImplementedError

    def weigh(self, evidence: Sequence[Evidence], *, groups: list[int] | None) -> Ballots:
        answers = self.answers[:len(evidence)]
        if len(answers) != len(evidence):
            answers = [None] * len(evidence)
        return self.gate(evidence, self.ballots(evidence, answers))

    def gate(self, evidence: Sequence[Evidence], ballots: Ballots) -> Ballots:
        if self.check is None:
            return ballots
        answers = self.answers[:len(evidence)]
        own = [own_probability(e, a) for e, a in zip(evidence, answers, strict=True)]
        self.check.add(agreement_pairs(answers, own),
                       heldout_gain(answers, contributions(answers, ballots)))
        if self.check.on:
            return ballots
        return Ballots(tuple(1.0 for _ in evidence), None, (self.check.note(self.name),))

    def fit_run(self, answers: Sequence[Sequence[str | None]],
                evidence: Sequence[Sequence[Evidence]]) -> tuple[str, ...]:
        """What the rule learns from a whole run before weighing it (none here); notes."""
        return ()

    def weigh_many(self, answers: Sequence[Sequence[str | None]],
                   evidence: Sequence[Sequence[Evidence | None]]) -> RunBallots:
        """A run's decisions weighed together: the signal check (module docstring) reads every
        decision of the run first, each over all of its samples, and the run is weighed by the
        logprobs, or counted as hard votes, as a whole (an `Ensemble` turns it on after its
        first few decisions instead)."""
        self.check_evidence(evidence)
        ev = [[e for e in row if e is not None] for row in evidence]
        notes = self.fit_run(answers, ev)
        raw = [self.ballots(e, a) for a, e in zip(answers, ev, strict=True)]
        if self.check is None:
            return RunBallots(tuple(raw), notes)
        check = SignalCheck(min_pairs=self.check.min_pairs)
        for a, e, b in zip(answers, ev, raw, strict=True):
            own = [own_probability(x, y) for x, y in zip(e, a, strict=True)]
            check.add(agreement_pairs(a, own), heldout_gain(a, contributions(a, b)))
        if check.on:
            gain = check.gain
            return RunBallots(tuple(raw), (*notes, (
                f"{self.name}: weighed by the logprobs: a sample's confidence goes with the "
                f"other samples' agreement (z = {check.z:.1f} over {check.pairs} samples"
                + ("" if gain is None else f"; held-out gain {gain:+.3f}") + ")"),))
        hard = [Ballots(tuple(1.0 for _ in e)) for e in ev]
        return RunBallots(tuple(hard), (*notes, check.note(self.name)))


@register_rule(summary="soft vote: each sample adds its own distribution over the options "
               "(answer-token logprobs; hard votes until they show a signal)",
               requests=Requests(answer_logprobs=True, top_logprobs=TOP_K))
class Soft(_Checked):
    """Each sample adds P(option) at its answer position (open answers: its answer's own
    probability); module docstring."""

    name = SOFT

    def ballots(self, evidence: Sequence[Evidence], answers: Sequence[str | None]) -> Ballots:
        shares: list[dict[str, float] | None] = []
        weights: list[float] = []
        for e in evidence:
            if e.options is not None:
                shares.append({k: math.exp(v) for k, v in e.options.items()})
                weights.append(1.0)
            else:  # open answers: its own answer's probability, the rest unassigned; an
                # answer its tokens do not spell: a hard vote
                shares.append(None)
                weights.append(math.exp(e.logprob) if e.logprob is not None else 1.0)
        return Ballots(tuple(weights), tuple(shares))


def softmax_weights(conf: Sequence[float], temperature: float) -> tuple[float, ...]:
    """softmax(c_i / T), scaled so the largest weight is 1 (the same decision)."""
    if not conf:
        return ()
    top = max(conf)
    return tuple(math.exp((c - top) / temperature) for c in conf)


@register_rule(summary="CISC: each vote weighed by softmax(confidence / T), its answer's "
               "logprob or mean token logprob (hard votes until they show a signal)",
               requests=Requests(answer_logprobs=True, trace_logprobs=True))
class Confidence(_Checked):
    """Confidence-Informed Self-Consistency (module docstring). Options: `by` ("answer" or
    "mean"), `temperature` T > 0 (default: 1 for one decision; fitted without labels on a
    run's own samples when the evals score a run, `fit_temperature`), `check` (the signal
    check, default on)."""

    name = CONFIDENCE

    def __init__(self, *, by: str = "answer", temperature: float | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        if by not in ("answer", "mean"):
            raise InputError(f"confidence: by is 'answer' (the answer's logprob) or 'mean' "
                             f"(the reply's mean token logprob), got {by!r}")
        if temperature is not None and not (isinstance(temperature, (int, float))
                                            and temperature > 0 and math.isfinite(temperature)):
            raise InputError(f"confidence: temperature must be a number > 0, got "
                             f"{temperature!r}")
        self.by = by
        self.temperature = None if temperature is None else float(temperature)
        self.fitted: float | None = None

    def conf_of(self, e: Evidence) -> float | None:
        if self.by == "mean":
            return e.trace.mean_logprob if e.trace is not None else None
        return e.logprob

    def confidences(self, evidence: Sequence[Evidence]) -> list[float]:
        """Each sample's confidence; a sample whose answer its tokens do not spell weighs as
        the others do on average."""
        got = [self.conf_of(e) for e in evidence]
        known = [c for c in got if c is not None]
        middle = sum(known) / len(known) if known else 0.0
        return [middle if c is None else c for c in got]

    def ballots(self, evidence: Sequence[Evidence], answers: Sequence[str | None]) -> Ballots:
        t = self.temperature or self.fitted or 1.0
        return Ballots(softmax_weights(self.confidences(evidence), t))

    def fit_run(self, answers: Sequence[Sequence[str | None]],
                evidence: Sequence[Sequence[Evidence]]) -> tuple[str, ...]:
        if self.temperature is not None:
            return ()
        k = min((len(a) for a in answers), default=0)
        self.fitted = fit_temperature([self.confidences(e) for e in evidence], answers,
                                      n=max(1, min(5, k // 2)))
        return (f"{self.name}: T = {self.fitted:g}, fitted without labels on the run's own "
                "samples (each question's first votes against the plurality of its others)",)


@register_rule(summary="DeepConf: the top share of samples by trace confidence (lowest group "
               "or tail), confidence-weighted; refused on replies of a few tokens",
               requests=Requests(trace_logprobs=True), scorable=False)
class DeepConf(RuleBase):
    """DeepConf's offline vote (module docstring). Options: `keep` η in (0, 1] (default
    0.9), `by` ("low" or "tail"), `min_trace` (tokens, default MIN_TRACE)."""

    name = DEEPCONF

    def __init__(self, *, keep: float = 0.9, by: str = "low", min_trace: int = MIN_TRACE,
                 **kw: Any) -> None:
        super().__init__(**kw)
        if not (isinstance(keep, (int, float)) and 0 < keep <= 1):
            raise InputError(f"deepconf: keep is the share of samples kept, in (0, 1], got "
                             f"{keep!r}")
        if by not in ("low", "tail"):
            raise InputError(f"deepconf: by is 'low' (lowest group confidence) or 'tail', "
                             f"got {by!r}")
        self.keep, self.by, self.min_trace = float(keep), by, int(min_trace)

    def weigh(self, evidence: Sequence[Evidence], *, groups: list[int] | None) -> Ballots:
        lengths = sorted(e.trace.tokens for e in evidence if e.trace is not None)
        median = lengths[len(lengths) // 2] if lengths else 0
        if median < self.min_trace:
            raise InputError(f"deepconf reads the confidence of reasoning traces, and these "
                             f"replies have a median of {median} tokens (it needs "
                             f"{self.min_trace}): use soft or confidence, which read the "
                             "answer's own logprobs")
        conf = [_trace_conf(e, self.by) for e in evidence]
        # the top share by confidence counts (`Ballots.kept`): of any n of these samples
        # voting together, their own top share, as the evals score it at n
        return Ballots(tuple(max(c, 0.0) for c in conf), rank=tuple(conf), keep=self.keep)


def _trace_conf(e: Evidence, by: str) -> float:
    t = e.trace
    if t is None:
        return 0.0
    value = t.lowest_group if by == "low" else t.tail
    return float(value) if value is not None else 0.0


def fit_temperature(conf: Sequence[Sequence[float]], answers: Sequence[Sequence[str | None]],
                    *, n: int, grid: Sequence[float] = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
                    ) -> float:
    """CISC's temperature fitted without labels on a run's own samples: per question, the
    confidence-weighted vote of its first `n` samples is scored against the plurality of its
    remaining samples (a pseudo-label); the T of the grid that agrees most wins (ties: the
    larger T, the closer to a plain vote)."""
    best, best_t = -1.0, max(grid)
    for temperature in sorted(grid, reverse=True):
        hits = 0.0
        for c, a in zip(conf, answers, strict=True):
            head = list(a[:n])
            rest = [x for x in a[n:] if x is not None]
            if not rest:
                continue
            tally: dict[str, int] = {}
            for x in rest:
                tally[x] = tally.get(x, 0) + 1
            pseudo = max(tally.values())
            labels = {x for x, k in tally.items() if k == pseudo}
            w = softmax_weights(list(c[:n]), temperature)
            score: dict[str, float] = {}
            for h, wi in zip(head, w, strict=True):
                if h is not None:
                    score[h] = score.get(h, 0.0) + wi
            if score:
                top = max(score.values())
                winners = [h for h, v in score.items() if v == top]
                hits += sum(1 for h in winners if h in labels) / len(winners)
        if hits > best:
            best, best_t = hits, temperature
    return best_t
