"""Scoring a rule that weighs each sample by what it says about itself (soft votes, issue 37).

A counting rule's estimate at n comes from each question's answer counts (`evals.analysis`,
`evals.groups`). A rule that weighs its samples (`RuleInfo.weighs_samples`: soft, confidence,
deepconf, weighted) reads each sample's logprobs instead: its ballots give every sample a score
over the question's options (`score_table`). They come from one weighing of the run
(`RuleBase.weigh_many`): every question over all of its samples, what the rule learns from the
run (the soft rules' signal check, CISC's temperature) decided once for the run, and said in
the run's notes. The vote of n samples is the option of the highest summed score (ties within
1e-12 share the credit; an invalid sample adds nothing; no positive score at all is wrong), with
DeepConf's filter applied within each n (`Ballots.kept`). Each sample's score is its own, so
the vote of any n of a question's samples is the vote the rule gives those n (for confidence,
up to the mean confidence it gives a sample whose answer its tokens do not spell).

The estimate at n is, per question, the mean credit over the n-subsets of its K samples (a
mixed ensemble: an n_g-subset of each member's K_g samples): every subset when there are at
most `EXACT` of them (the U-statistic, exact and unbiased like the counting rules' estimates),
else `SUBSETS` uniformly random ones, the same index sets for every question, drawn from the
run's seed (unbiased; their Monte-Carlo noise, at most 0.5/sqrt(SUBSETS) per question, enters
the jackknife below). Jackknife: without sample i, the estimate is the mean credit over the
subsets that leave i out (exactly the delete-one U-statistic when every subset is scored); one
variant per sample, weight (K − 1)/K. The main vote's jackknife is laid out the same way
(`per_sample`), so a rule minus the main vote is paired sample by sample.

Box-and-ball (the expected utility, each expert drawing its own ball): per scenario and state
ω, m of the n experts see red with probability C(n, m) P(red | ω)^m P(blue | ω)^(n − m); they
vote with an m-subset of the red question's samples and an (n − m)-subset of the blue one's
(every pair, or `SUBSETS` random pairs per m), the decision scoring +1 when right, −1 when
wrong or when no sample scores, 0 on a tie (a fair coin): `box_weighed_values`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations, product
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.errors import InputError
from ensemble.rules import Evidence, RunBallots, TraceSummary, declared

from .analysis import ItemValues, state_weights

__all__ = ["EXACT", "SUBSETS", "Scores", "box_per_sample", "box_weighed_values",
           "ensemble_cells", "evidence_table", "model_cells", "per_sample", "run_scores",
           "score_table", "subset_values", "weighed_rules"]

EXACT = 2000  # score every subset up to this many; above, SUBSETS random ones
SUBSETS = 2000
_TOL = 1e-12  # the rules' tie tolerance (`RuleBase.by_scores`)


def weighed_rules(rules: Sequence[str]) -> list[str]:
    """The rules of `rules` that weigh their samples (scored here, not from counts)."""
    return [r for r in rules if (info := declared(r)) is not None and info.weighs_samples]


@dataclass(frozen=True)
class Scores:
    """A rule's weighing of one member's samples: `values[q, i, j]` what sample i adds to
    option j of question q (its question's options, coded as `adaptive.question_codes`),
    `rank[q, i]` and `keep` DeepConf's filter (None, 1: every sample counts), and the notes
    of the run's weighing."""

    values: NDArray[np.float64]
    rank: NDArray[np.float64] | None
    keep: float
    notes: tuple[str, ...]


def _evidence(questions: Sequence[Any], rows: Sequence[Sequence[Any]], answers: Any
              ) -> list[list[Evidence | None]]:
    """Each sample's evidence (`decision.evidence_of`), read for the answer it counts as here;
    a sample that does not exist (fewer drawn) abstains like a reply without tokens."""
    from ensemble.decision import evidence_of

    from .openanswers import is_open

    out: list[list[Evidence | None]] = []
    for qi, q in enumerate(questions):
        row = list(rows[qi] or ())
        opts = None if is_open(q) else list(q.choices)
        got: list[Evidence | None] = []
        for j in range(answers.shape[1]):
            s = row[j] if j < len(row) else None
            if s is None:
                got.append(Evidence(trace=TraceSummary(tokens=0, mean_logprob=0.0)))
                continue
            a = answers[qi, j]
            got.append(evidence_of(s if s.answer == a else replace(s, answer=a), options=opts))
        out.append(got)
    return out


def evidence_table(questions: Sequence[Any], rows: Sequence[Sequence[Any]], answers: Any,
                   options: Sequence[Sequence[str]]) -> NDArray[np.float64]:
    """(Q, K, J) each sample's own P(option j) at its answer position (its logprobs' top-k
    mapped to its question's `options[q]`; NaN where it has none: an open answer, a reply
    without logprobs)."""
    arr = np.asarray(answers, dtype=object)
    nq, k = arr.shape
    width = max((len(o) for o in options), default=1)
    out = np.full((nq, k, max(width, 1)), np.nan)
    for qi, row in enumerate(_evidence(questions, rows, arr)):
        idx = {o: j for j, o in enumerate(options[qi])}
        for i, e in enumerate(row):
            if e is None or e.options is None:
                continue
            out[qi, i] = 0.0
            for o, lp in e.options.items():
                if o in idx:
                    out[qi, i, idx[o]] = math.exp(lp)
    return out


def run_scores(rule: str, questions: Sequence[Any], rows: Sequence[Sequence[Any]],
               answers: Any, *, options: Sequence[Sequence[str]]) -> Scores:
    """`rule` weighing one member's samples of every question (`rows[q]` its samples,
    `answers[q, i]` what each counts as, None invalid), as scores over each question's
    `options[q]`; a run whose replies came without the logprobs it reads is refused in one
    line."""
    from ensemble.aggregators import RuleBase, get_aggregator

    from .openanswers import is_open

    arr = np.asarray(answers, dtype=object)
    built = get_aggregator(rule, open=any(is_open(q) for q in questions))
    if not isinstance(built, RuleBase):
        raise InputError(f"{rule} reads logprobs but is no ensemble.RuleBase, so the evals "
                         "cannot weigh a run's samples by it (RuleBase.weigh_many)")
    run = built.weigh_many([list(r) for r in arr], _evidence(questions, rows, arr))
    return score_table(run, arr, options)


def score_table(run: RunBallots, answers: Any, options: Sequence[Sequence[str]]) -> Scores:
    """A run's ballots as (Q, K, J) scores over each question's options (answers outside
    them, and shares of options not among them, add nothing)."""
    arr = np.asarray(answers, dtype=object)
    nq, k = arr.shape
    width = max((len(o) for o in options), default=1)
    values = np.zeros((nq, k, max(width, 1)))
    rank: NDArray[np.float64] | None = None
    keep = 1.0
    for qi, b in enumerate(run.ballots):
        idx = {o: j for j, o in enumerate(options[qi])}
        shares = b.shares
        for i, w in enumerate(b.weights):
            share = shares[i] if shares is not None else None
            if share is None:
                a = arr[qi, i]
                if a is not None and a in idx:
                    values[qi, i, idx[a]] += w
                continue
            for o, mass in share.items():
                if o in idx:
                    values[qi, i, idx[o]] += w * mass
        if b.rank is not None and b.keep < 1:
            if rank is None:
                rank = np.zeros((nq, k))
            rank[qi] = b.rank
            keep = b.keep
    return Scores(values, rank, keep, run.notes)


# -- the subsets ----------------------------------------------------------------------------
def _subsets(ks: Sequence[int], ns: Sequence[int], rng: np.random.Generator
             ) -> tuple[NDArray[np.intp], bool]:
    """(S, Σ n_g) sample columns (member g's columns offset by Σ_{h<g} K_h), sorted within
    each member: every combination when there are at most EXACT, else SUBSETS random ones;
    and whether they are every one."""
    count = math.prod(math.comb(k, n) for k, n in zip(ks, ns, strict=True))
    offsets = np.cumsum([0, *ks[:-1]])
    if count <= EXACT:
        per = [list(combinations(range(k), n)) for k, n in zip(ks, ns, strict=True)]
        rows = [sum((tuple(o + x for x in c) for o, c in zip(offsets, combo, strict=True)), ())
                for combo in product(*per)]
        return np.array(rows, dtype=np.intp).reshape(len(rows), sum(ns)), True
    parts = [np.sort(np.argsort(rng.random((SUBSETS, k)), axis=1)[:, :n], axis=1) + o
             for k, n, o in zip(ks, ns, offsets, strict=True)]
    return np.concatenate(parts, axis=1), False


def _credit(totals: NDArray[np.float64], right: NDArray[np.int64]) -> NDArray[np.float64]:
    """(q, S) credit of the highest total over options (q, S, J): the right option's share of
    the ties, 0 without a positive total or when the right answer is not an option (−1)."""
    best = totals.max(axis=-1, keepdims=True)
    win = (totals >= best - _TOL * np.maximum(1.0, best)) & (best > 0)
    nwin = win.sum(axis=-1)
    r = np.maximum(right, 0)[:, None, None]
    hit = np.take_along_axis(win, np.broadcast_to(r, (*win.shape[:2], 1)), axis=-1)[..., 0]
    hit &= (right >= 0)[:, None]
    return np.where(nwin > 0, hit / np.maximum(nwin, 1), 0.0)


def _kept(rank: NDArray[np.float64], keep: float) -> NDArray[np.bool_]:
    """(q, S, n) which of each subset's n samples count under DeepConf's filter: the
    ceil(keep × n) of highest rank, ties to the earlier sample (`Ballots.kept`)."""
    n = rank.shape[-1]
    order = np.argsort(-rank, axis=-1, kind="stable")
    mask = np.zeros(rank.shape, dtype=bool)
    np.put_along_axis(mask, order[..., :max(1, math.ceil(keep * n))], True, axis=-1)
    return mask


def _totals(values: NDArray[np.float64], rank: NDArray[np.float64] | None, keep: float,
            cols: NDArray[np.intp]) -> NDArray[np.float64]:
    """(q, S, J) each subset's summed scores (DeepConf's filter within it)."""
    v = values
    totals = np.zeros((v.shape[0], cols.shape[0], v.shape[2]))
    mask = None if rank is None else _kept(rank[:, cols], keep)
    for p in range(cols.shape[1]):
        totals += v[:, cols[:, p], :] if mask is None else v[:, cols[:, p], :] * mask[:, :, p, None]
    return totals


def _subset_credit(values: NDArray[np.float64], rank: NDArray[np.float64] | None,
                   keep: float, right: NDArray[np.int64], cols: NDArray[np.intp]
                   ) -> NDArray[np.float64]:
    """(Q, S) the credit of each subset of columns `cols` (S, n) of every question."""
    nq, _, width = values.shape
    s, n = cols.shape
    out = np.empty((nq, s))
    step = max(1, int(2_000_000 // max(1, s * width * (n if rank is not None else 1))))
    for lo in range(0, nq, step):
        hi = min(nq, lo + step)
        out[lo:hi] = _credit(_totals(values[lo:hi], None if rank is None else rank[lo:hi],
                                     keep, cols), right[lo:hi])
    return out


def _jackknife(credit: NDArray[np.float64], cols: NDArray[np.intp], total: int
               ) -> NDArray[np.float64]:
    """(Q, total) the mean credit over the subsets without each column, minus the mean."""
    s = cols.shape[0]
    member = np.zeros((s, total))
    np.put_along_axis(member, cols, 1.0, axis=1)
    without = s - member.sum(axis=0)  # (total,)
    base = credit.mean(axis=1)
    sums = credit.sum(axis=1)[:, None] - credit @ member
    jack = np.where(without > 0, sums / np.maximum(without, 1), base[:, None])
    return jack - base[:, None]


def subset_values(scores: Sequence[Scores], correct: Any, ns: Sequence[int], *,
                  rng: np.random.Generator) -> ItemValues:
    """Per-question estimate of a weighing rule's accuracy with n_g of each member's samples
    (module docstring): `scores[g]` member g's (`run_scores`), `correct[q]` the right
    option's code (−1: not among the options). One member: ns = [n]."""
    ks = [int(sc.values.shape[1]) for sc in scores]
    for k, n in zip(ks, ns, strict=True):
        if k < n:
            raise InputError(f"n = {n} needs at least {n} answers per question; some have {k} "
                             "(draw more with --samples)")
    width = max(sc.values.shape[2] for sc in scores)
    values = np.concatenate([np.pad(sc.values, ((0, 0), (0, 0), (0, width - sc.values.shape[2])))
                             for sc in scores], axis=1)
    ranked = [sc for sc in scores if sc.rank is not None]
    rank = (np.concatenate([sc.rank if sc.rank is not None else np.zeros(sc.values.shape[:2])
                            for sc in scores], axis=1) if ranked else None)
    keep = ranked[0].keep if ranked else 1.0
    right = np.asarray(correct, dtype=np.int64)
    cols, _ = _subsets(ks, ns, rng)
    credit = _subset_credit(values, rank, keep, right, cols)
    ok = all(k - 1 >= n for k, n in zip(ks, ns, strict=True))
    total = sum(ks)
    jack = _jackknife(credit, cols, total) if ok else np.zeros((len(right), total))
    weight = np.concatenate([np.full((len(right), k), (k - 1) / k if k else 0.0) for k in ks],
                            axis=1)
    identical = (values == values[:, :1]).all(axis=(1, 2))
    return ItemValues(credit.mean(axis=1), jack, weight, ok, identical)


def per_sample(iv: ItemValues, codes: Sequence[Any], cats: int) -> ItemValues:
    """A counting rule's values (`vote_values`, `vote_group_values`: one jackknife variant per
    (member, category), the last category invalid) laid out per sample like `subset_values`,
    so the two pair sample by sample; the variance is the same."""
    cols = []
    for g, c in enumerate(codes):
        a = np.asarray(c)
        cols.append(g * cats + np.where(a < 0, cats - 1, a))
    at = np.concatenate(cols, axis=1)
    jack = np.take_along_axis(iv.jack, at, axis=1)
    weight = np.concatenate([np.full(np.asarray(c).shape, (np.asarray(c).shape[1] - 1)
                                     / max(1, np.asarray(c).shape[1])) for c in codes], axis=1)
    return ItemValues(iv.values, jack, weight, iv.jackknife, iv.identical)


# -- box-and-ball ---------------------------------------------------------------------------
def box_weighed_values(scores: Scores, loc: Sequence[tuple[int, int]],
                       joint: NDArray[np.float64], ns: Sequence[int], *,
                       rng: np.random.Generator) -> dict[int, ItemValues]:
    """Per-scenario expected utility (±1 units) of a weighing rule with n experts each drawing
    its own ball (module docstring), for each n: `scores` over the options (L, R) of every
    question, `loc[q]` its (scenario, colour) (`scoring.box_layout`; (−1, −1): left out),
    `joint` (S, 2, 2) P(colour, ω). Jackknife: one variant per (colour, sample), columns
    colour × K + sample."""
    v = scores.values
    k = v.shape[1]
    ns_s = joint.shape[0]
    mu, w0, w1 = state_weights(np.asarray(joint, dtype=float))
    # (S, 2, K, 2) each scenario's colour questions' scores; a colour it cannot show: none
    table = np.zeros((ns_s, 2, k, 2))
    rank = np.zeros((ns_s, 2, k))
    present = np.zeros((ns_s, 2), dtype=bool)
    for qi, (s, c) in enumerate(loc):
        if s >= 0:
            table[s, c] = v[qi, :, :2]
            present[s, c] = True
            if scores.rank is not None:
                rank[s, c] = scores.rank[qi]
    flat = table.reshape(ns_s, 2 * k, 2)
    flat_rank = rank.reshape(ns_s, 2 * k) if scores.rank is not None else None
    out = {}
    for n in sorted(set(ns)):
        value = np.zeros(ns_s)
        jack = np.zeros((ns_s, 2 * k))
        if k < n:
            raise InputError(f"n = {n} needs at least {n} answers to every question of a "
                             f"scenario; some have {k} (draw more with --samples)")
        for m in range(n + 1):
            pr = [math.comb(n, m) * w[:, 0] ** m * w[:, 1] ** (n - m) for w in (w0, w1)]
            if not (pr[0].any() or pr[1].any()):
                continue
            cols, _ = _subsets([k, k], [m, n - m], rng)
            tot = _totals(flat, flat_rank, scores.keep, cols)
            tl, tr = tot[..., 0], tot[..., 1]
            best = np.maximum(tl, tr)
            tie = np.abs(tl - tr) <= _TOL * np.maximum(1.0, best)
            d = np.where(tie, 0.0, np.sign(tl - tr))  # ω = 1 (L right): +1 for L, -1 for R
            scored = best > 0  # else no sample scored: wrong whatever ω
            for u, p, at in ((np.where(scored, d, -1.0), pr[1], mu),
                             (np.where(scored, -d, -1.0), pr[0], 1 - mu)):
                coef = (at * p)[:, None]
                value += coef[:, 0] * u.mean(axis=1)
                if k - 1 >= n:
                    jack += coef * _jackknife(u, cols, 2 * k)
        ok = k - 1 >= n
        identical = (flat == flat[:, :1]).all(axis=(1, 2))
        weight = np.repeat(present, k, axis=1) * ((k - 1) / k if k else 0.0)
        out[n] = ItemValues(value, jack if ok else np.zeros((ns_s, 2 * k)), weight, ok,
                            identical)
    return out


def box_per_sample(iv: ItemValues, answers: Any, loc: Sequence[tuple[int, int]], scenarios: int
                   ) -> ItemValues:
    """The box-ball majority's values (`box_values`: one variant per (colour, L/R/invalid))
    laid out per (colour, sample) like `box_weighed_values`."""
    arr = np.asarray(answers, dtype=object)
    k = arr.shape[1]
    jack = np.zeros((scenarios, 2 * k))
    weight = np.zeros((scenarios, 2 * k))
    for qi, (s, c) in enumerate(loc):
        if s < 0:
            continue
        for i, a in enumerate(arr[qi]):
            cat = 0 if a == "L" else 1 if a == "R" else 2
            jack[s, c * k + i] = iv.jack[s, c * 3 + cat]
            weight[s, c * k + i] = (k - 1) / k if k else 0.0
    return ItemValues(iv.values, jack, weight, iv.jackknife, iv.identical)


def model_cells(layout: Any, questions: Sequence[Any], answers: Any,
                rows: Sequence[Sequence[Any]], *, temps: Sequence[float], ns: Sequence[int],
                rules: Sequence[str], seed: int
                ) -> tuple[dict[tuple[int, int, str], ItemValues],
                           dict[tuple[int, int], ItemValues], list[str]]:
    """One model's cells under each weighing rule, at each temperature (its index) and n:
    (ti, n, rule) -> values; the main vote's values at (ti, n) laid out per sample, to pair
    with them; and what each rule's weighing of the run says (its notes, per t). `answers`
    (T, Q, K) as the draw gives them, `rows[ti * Q + q]` the samples behind them."""
    from ensemble.rules import main_vote

    from .adaptive import question_codes
    from .analysis import box_values, vote_values
    from .scoring import box_answer_counts, box_layout

    arr = np.asarray(answers, dtype=object)
    nq = len(questions)
    out: dict[tuple[int, int, str], ItemValues] = {}
    main: dict[tuple[int, int], ItemValues] = {}
    notes: list[str] = []
    box = layout.utility
    if box:
        scen, joint, loc = box_layout(list(questions))
        options: list[list[str]] = [["L", "R"]] * nq
    else:
        codes, correct, width = question_codes(questions, arr)
        options = [list(dict.fromkeys([*q.choices, str(q.correct)])) for q in questions]
    for ti, t in enumerate(temps):
        if box:
            counts = box_answer_counts(arr[ti], loc, len(scen))
            hard = box_values(counts, joint, list(ns))
            for n in ns:
                main[ti, n] = box_per_sample(hard[main_vote(True), n], arr[ti], loc, len(scen))
        else:
            hard = vote_values(codes[ti], np.asarray(correct), list(ns), n_options=width)
            for n in ns:
                main[ti, n] = per_sample(hard[main_vote(False), n], [codes[ti]], width + 1)
        for r in rules:
            sc = run_scores(r, questions, rows[ti * nq:(ti + 1) * nq], arr[ti],
                            options=options)
            notes += [f"t = {t:g}: {x}" if len(temps) > 1 else x for x in sc.notes]
            if box:
                got = box_weighed_values(sc, loc, joint, ns, rng=np.random.default_rng(seed))
                for n in ns:
                    out[ti, n, r] = got[n]
            else:
                for n in ns:
                    out[ti, n, r] = subset_values([sc], correct, [n],
                                                  rng=np.random.default_rng(seed))
    return out, main, notes


def ensemble_cells(questions: Sequence[Any], answers: Sequence[Any],
                   rows: Sequence[Sequence[Any]], *, ns: Sequence[int], rules: Sequence[str],
                   base: ItemValues, alone: Sequence[ItemValues], seed: int
                   ) -> tuple[dict[str, ItemValues], ItemValues, list[ItemValues], list[str]]:
    """A mixed ensemble (multiple choice) under each weighing rule: each member's n_g samples
    voting together, the rule weighing every question's samples of all members as one
    decision. Also the main vote's `base` values and each member's `alone` values
    (`scoring.ensemble_cells`) laid out per sample, member g's at its columns in the
    ensemble's, to pair with them; and the weighing's notes. `answers[g]` (Q, K_g),
    `rows[g * Q + q]` the samples behind them."""
    from .adaptive import question_codes

    nq = len(questions)
    arrs = [np.asarray(a, dtype=object) for a in answers]
    ks = [a.shape[1] for a in arrs]
    coded = [question_codes(questions, a[None]) for a in arrs]
    codes = [c[0][0] for c in coded]
    correct = np.asarray(coded[0][1])
    cats = max(c[2] for c in coded) + 1
    options = [list(dict.fromkeys([*q.choices, str(q.correct)])) for q in questions]
    joined = np.concatenate(arrs, axis=1)
    joined_rows = [[s for g, k in enumerate(ks)
                    for s in (list(rows[g * nq + qi] or ()) + [None] * k)[:k]]
                   for qi in range(nq)]
    offsets = np.cumsum([0, *ks])
    out: dict[str, ItemValues] = {}
    notes: list[str] = []
    for r in rules:
        sc = run_scores(r, questions, joined_rows, joined, options=options)
        notes += list(sc.notes)
        parts = [Scores(sc.values[:, lo:hi], None if sc.rank is None else sc.rank[:, lo:hi],
                        sc.keep, sc.notes) for lo, hi in zip(offsets[:-1], offsets[1:],
                                                              strict=True)]
        out[r] = subset_values(parts, correct, ns, rng=np.random.default_rng(seed))
    total = int(offsets[-1])
    each = []
    for g, iv in enumerate(alone):
        own = per_sample(iv, [codes[g]], cats)
        jack = np.zeros((nq, total))
        weight = np.zeros((nq, total))
        jack[:, offsets[g]:offsets[g + 1]] = own.jack
        weight[:, offsets[g]:offsets[g + 1]] = own.weight
        each.append(ItemValues(iv.values, jack, weight, iv.jackknife, iv.identical))
    return out, per_sample(base, codes, cats), each, notes
