"""Replay a stopping rule on stored samples, and score it beside fixed-n votes.

Given each question's stored answers (indices 0..K−1) a rule is replayed as a sampler would run
it: it sees the answers one at a time in some order, and stops where its table says (a lossless
batch k changes nothing here: it only says how many to request at once). The decision is the
plurality of the answers seen when it stops; a tie among the leaders gets fractional credit (the
expected value of a fair tie-break); a question with no valid answer counts as wrong.

Orders. The decision of an adaptive rule depends on the order of the samples, that of a fixed n
on which n samples are used. Both are averaged over the same R random orders of each question's
samples (independent per question): the adaptive rule runs along each order, the fixed-n vote
takes its first n (a uniformly random n-subset, as in `evals.analysis`). So adaptive and fixed
rows are estimated the same way, on the same draws, and their difference is paired. `orders=None`
replays the stored order only (what one real run would have done). A rule whose prior is fitted
from a pilot (a `StopSpec` of the bayes rule without a prior) refits it for each order from that
order's first `pilot` answers of every question, as a real run would.

Any stopping rule. A rule is given as a built `StoppingRule`, or as its plan (`StopPlan`, the
stop-rule interface the Python API draws by: a `StopSpec`, a plug-in's plan). A rule that
decides from its table alone (`StoppingRule.table_only`: fixed, beta, bayes) is looked up
vectorised; any other (a rule on soft evidence or tokens, a plug-in plan) is replayed through
the interface itself: per order, each question's pilot (`plan.pilot_draw`), the policy fitted
on the pilots of that order (`plan.fit`), then `policy.next(drawn)` after each batch it asks
for, the batch taken along the order, as the Python API's draw loop does; slower (a Python
call per batch), the same answer. A fitted policy that says where it stops along whole orders
(`stopping.plan.PrefixPolicy`: bayes-soft) is asked that once per order instead: as fast as
the table rules but for the fit (the SmolLM2 yes/no recording, 200 questions x 20 samples,
200 orders: docs/adaptive.md gives the times).

Scoring. `values[q, o]` is the credit of deciding option o on question q: 1 for the right
option of a multiple-choice question (`correct=`), and for box-and-ball P(ω = decision | colour):
p for L, 1 − p for R (`boxball_inputs`). Per question, the value and the samples used are
averaged over the orders; the reported accuracy is the weighted mean over questions, with
`weights` (box-and-ball: P(colour | scenario), so each scenario counts once, i.e. weights
P(scenario, colour) with P(scenario) uniform over the run's scenarios). Mean samples per question
(the pilot included) is the plain mean: every question asked is paid for. Intervals come from a
bootstrap over questions (over `groups`, e.g. a scenario's two colours together): 2.5/97.5
percentiles of B resampled means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ensemble.errors import InputError
from ensemble.stopping import (
    Drawn,
    FitContext,
    Observation,
    StopMemory,
    StoppingRule,
    StopPlan,
    StopPolicy,
    StopSpec,
)
from ensemble.stopping.drawn import Prefixes
from ensemble.stopping.plan import PrefixPolicy

from .intervals import Estimate, estimate

__all__ = [
    "AdaptiveResult",
    "Replay",
    "adaptive_eval",
    "boxball_inputs",
    "question_codes",
    "replay",
    "values_from_correct",
]


@dataclass(frozen=True)
class Replay:
    """A rule replayed on (Q, K) answer codes along R orders.

    used[q, r]: samples the rule drew (pilot included). counts[q, r, o]: votes for option o when
    it stopped. fixed[n][q, r, o]: votes among the first n of the same order. rules: the rule of
    each order (one per order when a prior is refitted per order).
    """

    used: NDArray[np.int16]
    counts: NDArray[np.int16]
    fixed: dict[int, NDArray[np.int16]]
    rules: tuple[StopPolicy, ...]
    spent: NDArray[np.float64] | None = None  # [q, r]: dollars of the samples used (costs=)
    order: NDArray[np.intp] | None = None  # [q, r, i]: the i-th sample index along order r
    tokens: NDArray[np.float64] | None = None  # [q, r]: their completion tokens (tokens=)


@dataclass(frozen=True)
class AdaptiveResult:
    """An adaptive row beside fixed-n rows, on the same samples and orders.

    accuracy and fixed[n] are on the 0-1 scale (box-and-ball: P(ω = decision)); difference is
    adaptive minus fixed max_n, paired; saving = 1 − mean_samples / max_n.
    """

    stop: str
    max_n: int
    mean_samples: Estimate
    accuracy: Estimate
    fixed: dict[int, Estimate]
    difference: Estimate
    saving: float
    orders: int
    question_accuracy: NDArray[np.float64]
    question_samples: NDArray[np.float64]
    mean_cost_usd: float | None = None  # dollars per question of the samples used (costs=)
    mean_tokens: float | None = None  # their completion tokens per question (tokens=)
    question_tokens: NDArray[np.float64] | None = None  # per question, over the orders
    # what the rule says of its fit (a policy's `notes`, e.g. bayes-soft's gain): the first
    # order's, and in how many orders it read soft evidence
    notes: tuple[str, ...] = ()

    def row(self, **extra: Any) -> dict[str, Any]:
        """The adaptive row as the eval's JSON carries it (`extra` adds e.g. t, aggregator)."""
        return {**extra, "n": self.max_n, "stop": self.stop,
                "mean_samples": self.mean_samples.value,
                "mean_samples_ci": list(self.mean_samples.ci),
                "mean_cost_usd": self.mean_cost_usd, "mean_tokens": self.mean_tokens,
                "accuracy": self.accuracy.value, "sem": self.accuracy.sem,
                "ci": list(self.accuracy.ci), "saving": self.saving,
                "vs_fixed": {"n": self.max_n, "accuracy": self.fixed[self.max_n].value,
                             "difference": self.difference.value,
                             "difference_ci": list(self.difference.ci)}}


def values_from_correct(correct: ArrayLike, n_options: int) -> NDArray[np.float64]:
    """values[q, o] = 1 if o is question q's right option, else 0."""
    c = np.asarray(correct).astype(np.int64).ravel()
    if (c < 0).any() or (c >= n_options).any():
        raise InputError(f"correct codes must lie in [0, {n_options})")
    v = np.zeros((c.size, n_options))
    v[np.arange(c.size), c] = 1.0
    return v


def question_codes(questions: Sequence[Any], answers: Any,
                   options: Sequence[str] | None = None
                   ) -> tuple[NDArray[np.int64], list[int], int]:
    """(codes, correct, n_options): (T, Q, K) codes of the answers (T, Q, K; None = invalid,
    code −1), each question's among its own options (its choices, then its right answer if not
    among them; open answers: the ones its samples gave), or among `options` for every
    question; each question's right code (−1 when not among `options`); the number of codes.
    Coded per question, a replay's cost grows with one question's options, not with the
    task's distinct answers (issue 32: 951 of them, one-hot per sample, was quadratic)."""
    if options is not None:
        opts = [list(options)] * len(questions)
    else:
        opts = [list(dict.fromkeys([*q.choices, str(q.correct)])) for q in questions]
    idx = [{c: i for i, c in enumerate(o)} for o in opts]
    arr = np.asarray(answers, dtype=object)
    codes = np.full(arr.shape, -1, dtype=np.int64)
    for qi, where in enumerate(idx):
        codes[:, qi] = [[-1 if a is None else where.get(a, -1) for a in row]
                        for row in arr[:, qi]]
    correct = [where.get(str(q.correct), -1) for where, q in zip(idx, questions, strict=True)]
    return codes, correct, max((len(o) for o in opts), default=1)


def boxball_inputs(questions: Sequence[Any]
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """(values, weights, groups) for box-and-ball questions, answer codes L = 0, R = 1.

    values[q] = (p, 1 − p) with p = P(left | colour); weights = P(colour | scenario); groups =
    scenario index (a scenario's colours are resampled together).
    """
    scen: dict[str, int] = {}
    values = np.empty((len(questions), 2))
    weights = np.empty(len(questions))
    groups = np.empty(len(questions), dtype=np.int64)
    for i, q in enumerate(questions):
        p = float(q.posterior)
        values[i] = (p, 1.0 - p)
        weights[i] = float(q.meta["p_colour"])
        groups[i] = scen.setdefault(q.meta["scenario"], len(scen))
    return values, weights, groups


def _gen(rng: Any) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _order_indices(Q: int, K: int, M: int, orders: int | ArrayLike | None,
                   g: np.random.Generator) -> NDArray[np.intp]:
    """(Q, R, M) sample indices: the first M of each order."""
    if orders is None:
        return np.broadcast_to(np.arange(M), (Q, 1, M))
    if isinstance(orders, (int, np.integer)):
        if orders < 1:
            raise InputError(f"orders must be >= 1, got {orders}")
        return np.argsort(g.random((Q, int(orders), K)), axis=-1)[..., :M]
    perm = np.asarray(orders, dtype=np.intp)
    if perm.ndim == 2:
        perm = np.broadcast_to(perm, (Q, *perm.shape))
    if (perm.ndim != 3 or perm.shape[0] != Q or perm.shape[2] != K
            or (np.sort(perm, axis=-1) != np.arange(K)).any()):
        raise InputError("explicit orders must be permutations of 0..K-1, shaped (R, K) for "
                         "every question or (Q, R, K)")
    return perm[..., :M]


def _top_two(counts: NDArray[np.int16]) -> tuple[NDArray[np.int16], NDArray[np.int16]]:
    if counts.shape[-1] == 1:
        return counts[..., 0], np.zeros_like(counts[..., 0])
    part = np.partition(counts, counts.shape[-1] - 2, axis=-1)
    return part[..., -1], part[..., -2]


def replay(codes: ArrayLike, rule: StoppingRule | StopPlan, *, n_options: int,
           orders: int | ArrayLike | None = 200, fixed_ns: Sequence[int] = (),
           rng: Any = 0, costs: ArrayLike | None = None,
           tokens: ArrayLike | None = None,
           shares: ArrayLike | None = None) -> Replay:
    """Replay `rule` on (Q, K) answer codes (−1 = invalid, else an option in [0, n_options)).

    `rule` is a built rule, or a plan (a `StopSpec`: a bayes prior without one is fitted per
    order from that order's pilot; any `StopPlan`). `orders`: a number of random orders per
    question, explicit permutations of 0..K−1 ((R, K) for every question, or (Q, R, K)), or
    None for the stored order. `costs` (Q, K): each stored sample's dollars (NaN: unknown);
    `spent` is then what the samples the rule used cost, along each order; `tokens` (Q, K):
    each stored sample's completion tokens (NaN: unknown), which a rule that counts tokens
    reads (`Observation.tokens`) and the replay's `tokens` sums likewise.
    `shares` (Q, K, n_options): each stored sample's own P(option) (soft evidence: its
    answer-token logprobs), which a rule that reads them (`requests`, e.g. bayes-soft) sees
    as each `Observation`'s shares (NaN: the sample has none).
    """
    c = np.asarray(codes)
    if c.ndim != 2:
        raise InputError(f"codes must be a (questions, samples) array, got shape {c.shape}")
    Q, K = c.shape
    if (c < -1).any() or (c >= n_options).any():
        raise InputError(f"answer codes must be -1 (invalid) or lie in [0, {n_options})")
    spec = rule if isinstance(rule, StopSpec) else None
    M = max_n_of(rule, K)
    if K < M:
        raise InputError(f"the rule may draw up to max_n = {M} samples but only {K} are stored")
    bad = [n for n in fixed_ns if not 1 <= n <= M]
    if bad:
        raise InputError(f"fixed n must lie in [1, max_n = {M}], got {bad[0]}")
    if not _by_table(rule):
        g = _gen(rng)
        idx = _order_indices(Q, K, M, orders, g)
        plan = _Built(rule) if isinstance(rule, StoppingRule) else rule
        return replace(_replay_plan(c, plan, idx, n_options, M, fixed_ns, costs, tokens,
                                    shares),
                       order=idx)
    assert isinstance(rule, (StoppingRule, StopSpec))
    g = _gen(rng)
    idx = _order_indices(Q, K, M, orders, g)
    R = idx.shape[1]
    count_invalid = (spec.count_invalid if spec is not None
                     else getattr(rule, "count_invalid", False))
    # one extra category for invalid answers: it counts for the rule only if count_invalid
    picked = c[np.arange(Q)[:, None, None], idx].astype(np.int16)
    picked = np.where(picked < 0, n_options, picked)
    n_cat = n_options + 1

    rules = _rules_per_order(picked, rule, spec, n_cat if count_invalid else n_options)
    # orders that share a rule (one, or one per distinct pilot fit) are looked up together
    distinct = list({id(r): r for r in rules}.values())
    order_rule = np.array([next(i for i, d in enumerate(distinct) if d is r) for r in rules])

    used = np.empty((Q, R), dtype=np.int16)
    at_stop = np.empty((Q, R, n_options), dtype=np.int16)
    fixed = {n: np.empty((Q, R, n_options), dtype=np.int16) for n in fixed_ns}
    cost = None if costs is None else np.asarray(costs, dtype=float)
    if cost is not None and cost.shape != c.shape:
        raise InputError(f"costs must be one per stored sample, shaped {c.shape}")
    spent = None if cost is None else np.empty((Q, R))
    tok = _per_sample(tokens, c.shape, "tokens")
    used_tok = None if tok is None else np.empty((Q, R))
    n_axis = np.arange(1, M + 1)
    chunk = max(1, int(4_000_000 // max(1, R * M * n_cat)))
    for lo in range(0, Q, chunk):
        hi = min(Q, lo + chunk)
        onehot = picked[lo:hi, :, :, None] == np.arange(n_cat, dtype=np.int16)
        cum = onehot.cumsum(axis=2, dtype=np.int16)  # (q, R, M, O)
        top, second = _top_two(cum if count_invalid else cum[..., :n_options])
        stop = np.empty(top.shape, dtype=bool)
        for u, d in enumerate(distinct):
            sel = order_rule == u
            stop[:, sel] = d.table[n_axis, top[:, sel], second[:, sel]] == 0
        stop[..., M - 1] = True
        tau = stop.argmax(axis=2)
        used[lo:hi] = tau + 1
        at_stop[lo:hi] = np.take_along_axis(cum[..., :n_options], tau[..., None, None],
                                            axis=2)[:, :, 0]
        for n in fixed_ns:
            fixed[n][lo:hi] = cum[:, :, n - 1, :n_options]
        if cost is not None and spent is not None:
            paid = cost[np.arange(lo, hi)[:, None, None], idx[lo:hi]].cumsum(axis=2)
            spent[lo:hi] = np.take_along_axis(paid, tau[..., None], axis=2)[..., 0]
        if tok is not None and used_tok is not None:
            long = tok[np.arange(lo, hi)[:, None, None], idx[lo:hi]].cumsum(axis=2)
            used_tok[lo:hi] = np.take_along_axis(long, tau[..., None], axis=2)[..., 0]
    return Replay(used=used, counts=at_stop, fixed=fixed, rules=tuple(rules), spent=spent,
                  order=idx, tokens=used_tok)


def _per_sample(x: ArrayLike | None, shape: tuple[int, ...], what: str
                ) -> NDArray[np.float64] | None:
    """A per-stored-sample array (NaN: unknown) checked against the codes' shape."""
    if x is None:
        return None
    a = np.asarray(x, dtype=float)
    if a.shape != shape:
        raise InputError(f"{what} must be one per stored sample, shaped {shape}")
    return a


def max_n_of(rule: StoppingRule | StopPlan, stored: int) -> int:
    """The most samples `rule` may draw for a question of one member with `stored` samples:
    a rule's (or a `StopSpec`'s) max_n, else the plan's budget for that member."""
    if isinstance(rule, (StoppingRule, StopSpec)):
        return rule.max_n
    return int(rule.budgets([stored])[0])


def _by_table(rule: StoppingRule | StopPlan) -> bool:
    """Whether the rule's decisions can be looked up in its table (vectorised)."""
    if isinstance(rule, StoppingRule):
        return type(rule).table_only()
    return isinstance(rule, StopSpec) and rule.rule_class.table_only()


class _Built:
    """A rule already built, as a plan: nothing to pilot or fit."""

    def __init__(self, rule: StoppingRule) -> None:
        self.rule = rule
        self.stop = rule.name

    def budgets(self, ns: Sequence[int]) -> tuple[int, ...]:
        return (self.rule.max_n,)

    def pilot_draw(self, i: int, budgets: Sequence[int], memory: StopMemory) -> tuple[int, ...]:
        return (0,)

    def fit(self, pilots: Sequence[Drawn | None], memory: StopMemory,
            context: FitContext) -> StopPolicy:
        return self.rule

    def remember(self, memory: StopMemory, pilot: Drawn, drawn: Drawn) -> None:
        return None


def _replay_plan(c: NDArray[Any], plan: StopPlan, idx: NDArray[np.intp], n_options: int,
                 M: int, fixed_ns: Sequence[int], costs: ArrayLike | None,
                 tokens: ArrayLike | None = None, shares: ArrayLike | None = None
                 ) -> Replay:
    """The replay through the stop-rule interface (any plan): per order, pilots, fit, then
    `next` one answer at a time (see the module docstring); each sample observed with its
    tokens and dollars where they are known, and with `shares` its soft evidence. A policy
    that says where it stops along whole orders at once (`PrefixPolicy`, e.g. bayes-soft) is
    asked that instead, for every question of the order in one call: the same stops."""
    Q, R = idx.shape[:2]
    labels = [str(o) for o in range(n_options)]
    tok = _per_sample(tokens, c.shape, "tokens")
    usd = _per_sample(costs, c.shape, "costs")
    sh = None if shares is None else np.asarray(shares, dtype=float)

    def obs(q: int, i: int) -> Observation:
        x = c[q, i]
        t = None if tok is None or np.isnan(tok[q, i]) else int(tok[q, i])
        d = None if usd is None or np.isnan(usd[q, i]) else float(usd[q, i])
        share = (None if sh is None or np.isnan(sh[q, i]).any() else
                 {labels[j]: float(v) for j, v in enumerate(sh[q, i]) if v > 0})
        return Observation(None if x < 0 else labels[x], tokens=t, cost_usd=d, shares=share)

    seqs: dict[tuple[int, int], list[Observation]] = {}

    def seq(q: int, r: int, n: int) -> list[Observation]:
        """The first n observations of question q along order r (built once, on demand)."""
        have = seqs.setdefault((q, r), [])
        have.extend(obs(q, int(i)) for i in idx[q, r, len(have):n])
        return have[:n]

    used = np.empty((Q, R), dtype=np.int16)
    at_stop = np.empty((Q, R, n_options), dtype=np.int16)
    fixed = {n: np.empty((Q, R, n_options), dtype=np.int16) for n in fixed_ns}
    cost = None if costs is None else np.asarray(costs, dtype=float)
    if cost is not None and cost.shape != c.shape:
        raise InputError(f"costs must be one per stored sample, shaped {c.shape}")
    spent = None if cost is None else np.empty((Q, R))
    used_tok = None if tok is None else np.empty((Q, R))
    budgets = (M,)
    ctx = FitContext(budgets=budgets, lams=(None,))
    rules: list[StopPolicy] = []
    for r in range(R):
        memory = StopMemory()
        heads = [min(plan.pilot_draw(q, budgets, memory)[0], M) for q in range(Q)]
        policy = plan.fit([Drawn((tuple(seq(q, r, heads[q])),), budgets) for q in range(Q)],
                          memory, ctx)
        rules.append(policy)
        if isinstance(policy, PrefixPolicy):
            used[:, r] = _used_along(policy, _prefixes(c, idx[:, r], n_options, M, sh),
                                     np.asarray(heads), M)
        for q in range(Q):
            if not isinstance(policy, PrefixPolicy):
                n = heads[q]
                while n < M:
                    k = policy.next(Drawn((tuple(seq(q, r, n)),), budgets))[0]
                    if k <= 0:
                        break
                    n += min(k, M - n)
                used[q, r] = n
            n = int(used[q, r])
            if cost is not None and spent is not None:
                spent[q, r] = float(cost[q, idx[q, r, :n]].sum())
            if tok is not None and used_tok is not None:
                used_tok[q, r] = float(tok[q, idx[q, r, :n]].sum())
    _count_votes(c, idx, used, n_options, at_stop, fixed)
    return Replay(used=used, counts=at_stop, fixed=fixed, rules=tuple(rules), spent=spent,
                  tokens=used_tok)


def _count_votes(c: NDArray[Any], idx: NDArray[np.intp], used: NDArray[np.int16],
                 n_options: int, at_stop: NDArray[np.int16],
                 fixed: dict[int, NDArray[np.int16]]) -> None:
    """Fill at_stop[q, r, o] (votes for o among the samples used along order r) and
    fixed[n][q, r, o] (among the first n), invalid replies voting for nothing."""
    Q, R, M = idx.shape
    chunk = max(1, int(4_000_000 // max(1, R * M * n_options)))
    for lo in range(0, Q, chunk):
        hi = min(Q, lo + chunk)
        picked = c[np.arange(lo, hi)[:, None, None], idx[lo:hi]]
        cum = (picked[..., None] == np.arange(n_options)).cumsum(axis=2, dtype=np.int16)
        tau = (used[lo:hi].astype(np.intp) - 1)[..., None, None]
        got = np.take_along_axis(cum, np.maximum(tau, 0), axis=2)[:, :, 0]
        at_stop[lo:hi] = np.where(tau[..., 0] >= 0, got, 0)
        for n in fixed:
            fixed[n][lo:hi] = cum[:, :, n - 1]


def _prefixes(c: NDArray[Any], idx: NDArray[np.intp], n_options: int, M: int,
              shares: NDArray[np.float64] | None) -> Prefixes:
    """The prefixes of every question's samples along one order (`idx`: (Q, M) sample
    indices): hard counts, invalid replies, and with `shares` the soft tallies, each sample
    credited as its `Observation` would be (its shares where it has them all, else 1 to its
    answer)."""
    Q = c.shape[0]
    picked = c[np.arange(Q)[:, None], idx]  # (Q, M)
    onehot = picked[..., None] == np.arange(n_options)
    zero = np.zeros((Q, 1, n_options), dtype=np.int16)
    counts = np.concatenate([zero, onehot.cumsum(axis=1, dtype=np.int16)], axis=1)
    invalid = np.concatenate([np.zeros((Q, 1), dtype=np.int16),
                              (picked < 0).cumsum(axis=1, dtype=np.int16)], axis=1)
    tallies = None
    if shares is not None:
        sh = shares[np.arange(Q)[:, None], idx]  # (Q, M, O)
        have = ~np.isnan(sh).any(axis=-1, keepdims=True)
        credit = np.where(have, np.where(sh > 0, sh, 0.0), onehot.astype(float))
        tallies = np.concatenate([np.zeros((Q, 1, n_options)), credit.cumsum(axis=1)], axis=1)
    return Prefixes(counts=counts, invalid=invalid, tallies=tallies, budget=M)


def _used_along(policy: PrefixPolicy, prefixes: Prefixes, heads: NDArray[Any], M: int
                ) -> NDArray[np.int64]:
    """Samples used per question: the first prefix from its pilot on where the policy stops
    (at the budget at the latest), as `next` stepping from the pilot finds it."""
    stop = np.asarray(policy.stops_along(prefixes), dtype=bool).copy()
    stop[:, M] = True
    stop &= np.arange(M + 1) >= np.minimum(heads, M)[:, None]
    return stop.argmax(axis=1)


def _rules_per_order(picked: NDArray[np.int16], rule: StoppingRule | StopSpec,
                     spec: StopSpec | None, n_cat: int) -> list[StoppingRule]:
    R = picked.shape[1]
    if spec is None:
        return [rule] * R  # type: ignore[list-item]
    if not spec.needs_pilot:
        built = spec.build()
        return [built] * R
    pilot = min(spec.pilot, spec.max_n)
    if pilot < 1:
        raise InputError("fitting the prior from the run needs a pilot of at least 2 samples")
    head = picked[:, :, :pilot, None] == np.arange(n_cat, dtype=np.int16)
    top, second = _top_two(head.sum(axis=2, dtype=np.int16))  # (Q, R)
    cache: dict[bytes, StoppingRule] = {}
    out = []
    for r in range(R):
        # the fit depends only on the multiset of (top, second) pairs
        pairs = np.stack([top[:, r], second[:, r]], axis=1)
        key = np.unique(pairs, axis=0, return_counts=True)
        h = key[0].tobytes() + key[1].tobytes()
        if h not in cache:
            cache[h] = spec.rule_from_counts(top[:, r], second[:, r])
        out.append(cache[h])
    return out


def _policy_notes(policies: Sequence[Any]) -> tuple[str, ...]:
    """The first order's policy notes (`notes`), and, for a rule on soft evidence, in how many
    orders its fit read the logprobs."""
    first = tuple(getattr(policies[0], "notes", ())) if policies else ()
    gains = [p.gain for p in policies if hasattr(p, "gain")]
    if gains and len(gains) > 1:
        on = sum(1 for g in gains if g.on)
        first += (f"(the first order's fit; soft evidence read in {on} of {len(gains)} "
                  "orders)",)
    return first


def _mean_cost(spent: NDArray[np.float64] | None) -> float | None:
    if spent is None or not np.isfinite(spent).all():
        return None
    return float(spent.mean())


def _credit(counts: NDArray[np.int16], values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Mean value over the tied leaders (fractional tie-break); 0 without a valid vote."""
    mx = counts.max(axis=-1, keepdims=True)
    top = (counts == mx) & (mx > 0)
    k = top.sum(axis=-1)
    v = (top * values[:, None, :]).sum(axis=-1)
    return np.where(k > 0, v / np.maximum(k, 1), 0.0)


def _score_credit(totals: NDArray[np.float64], values: NDArray[np.float64]
                  ) -> NDArray[np.float64]:
    """`_credit` of summed scores (..., O): ties within 1e-12 of the highest share it."""
    best = totals.max(axis=-1, keepdims=True)
    top = (totals >= best - 1e-12 * np.maximum(1.0, best)) & (best > 0)
    k = top.sum(axis=-1)
    v = (top * values[:, None, :]).sum(axis=-1)
    return np.where(k > 0, v / np.maximum(k, 1), 0.0)


def _scored(scores: NDArray[np.float64], rank: NDArray[np.float64] | None, keep: float,
            rp: Replay, values: NDArray[np.float64], ns: Sequence[int]
            ) -> tuple[NDArray[np.float64], dict[int, NDArray[np.float64]]]:
    """Per question, the mean credit over the orders of a weighing rule's vote of the samples
    the stopping rule used, and of the first n of each order (`adaptive_eval`'s `scores`)."""
    assert rp.order is not None
    Q, R, M = rp.order.shape
    acc = np.zeros(Q)
    fixed = {n: np.zeros(Q) for n in ns}
    step = max(1, int(2_000_000 // max(1, R * M * scores.shape[-1])))
    for lo in range(0, Q, step):
        hi = min(Q, lo + step)
        at = np.arange(lo, hi)[:, None, None]
        picked = scores[at, rp.order[lo:hi]]  # (q, R, M, O)
        if rank is None or keep >= 1:
            cum = picked.cumsum(axis=2)
        else:  # DeepConf's filter: of the first m, the top share by rank counts
            ranks = rank[at, rp.order[lo:hi]]
            cum = np.empty_like(picked)
            for m in range(1, M + 1):
                order = np.argsort(-ranks[:, :, :m], axis=-1, kind="stable")
                mask = np.zeros(ranks[:, :, :m].shape, dtype=bool)
                np.put_along_axis(mask, order[..., :max(1, int(np.ceil(keep * m)))], True,
                                  axis=-1)
                cum[:, :, m - 1] = (picked[:, :, :m] * mask[..., None]).sum(axis=2)
        stop = (rp.used[lo:hi].astype(np.intp) - 1)[..., None, None]
        at_stop = np.take_along_axis(cum, stop, axis=2)[:, :, 0]
        acc[lo:hi] = _score_credit(at_stop, values[lo:hi]).mean(axis=1)
        for n in ns:
            fixed[n][lo:hi] = _score_credit(cum[:, :, n - 1], values[lo:hi]).mean(axis=1)
    return acc, fixed


def _weighted(x: NDArray[np.float64], w: NDArray[np.float64], grp: NDArray[np.int64],
              boot: NDArray[np.int64]) -> Estimate:
    """Weighted mean over questions, bootstrapped over groups (boot: (reps, G) group draws)."""
    G = boot.shape[1]
    num = np.bincount(grp, weights=w * x, minlength=G)[boot].sum(axis=1)
    den = np.bincount(grp, weights=w, minlength=G)[boot].sum(axis=1)
    return estimate(num / np.where(den > 0, den, 1.0), float((w * x).sum() / w.sum()))


def adaptive_eval(codes: ArrayLike, rule: StoppingRule | StopPlan, *,
                  correct: ArrayLike | None = None, values: ArrayLike | None = None,
                  weights: ArrayLike | None = None, groups: ArrayLike | None = None,
                  n_options: int | None = None, orders: int | ArrayLike | None = 200,
                  fixed_ns: Sequence[int] = (), reps: int = 1000, rng: Any = 0,
                  costs: ArrayLike | None = None, scores: ArrayLike | None = None,
                  rank: ArrayLike | None = None, keep: float = 1.0,
                  tokens: ArrayLike | None = None,
                  shares: ArrayLike | None = None) -> list[AdaptiveResult]:
    """Accuracy and mean samples of a stopping rule beside fixed-n votes, on stored samples.

    codes: (T, Q, K) or (Q, K) answer codes (−1 invalid), as `evals.analysis` uses. Give
    `correct` (Q,) right-option codes, or `values` (Q, O) credits per decided option (box-and-ball:
    `boxball_inputs`). `weights` (Q,) weight questions in the accuracy, `groups` (Q,) are resampled
    together in the bootstrap. The fixed max_n row is always computed. `costs`, shaped like
    codes: each stored sample's dollars (NaN: unknown); each result's `mean_cost_usd` is then
    the mean over questions (and orders) of the dollars of the samples the rule used (None if
    one of them has no price); `tokens` likewise: each stored sample's completion tokens, read
    by a rule that counts tokens and summed into `mean_tokens`. `scores` (T, Q, K, O): what each
    stored sample adds to each option under a rule that weighs its samples (`evals.weighed`);
    the decisions, adaptive and fixed, are then that rule's vote of the samples used (the
    highest summed score, ties within 1e-12 sharing the credit; with `rank` (T, Q, K) and
    `keep`, only the top `keep` share by rank of the samples used count), the stopping still
    the rule's own. `shares` (T, Q, K, O): each sample's own P(option), the soft
    evidence a stopping rule that reads it stops on (`replay`). Returns one result per T.
    """
    c = np.asarray(codes)
    if c.ndim == 2:
        c = c[None]
    if c.ndim != 3:
        raise InputError(f"codes must be (T, Q, K) or (Q, K), got shape {np.shape(codes)}")
    _, Q, _ = c.shape
    if values is None:
        if correct is None:
            raise InputError("give correct= (right-option codes) or values= (credit per option)")
        n_opt = n_options if n_options is not None else int(max(c.max(), np.max(correct))) + 1
        vals = values_from_correct(correct, n_opt)
    else:
        vals = np.asarray(values, dtype=float)
        if vals.ndim != 2 or vals.shape[0] != Q:
            raise InputError(f"values must be (questions, options) = ({Q}, O)")
        n_opt = vals.shape[1]
    w = np.ones(Q) if weights is None else np.asarray(weights, dtype=float).ravel()
    grp = np.arange(Q) if groups is None else np.unique(np.asarray(groups).ravel(),
                                                         return_inverse=True)[1].ravel()
    if w.shape != (Q,) or grp.shape != (Q,) or (w < 0).any() or w.sum() <= 0:
        raise InputError("weights and groups need one entry per question (weights >= 0)")
    if reps < 2:
        raise InputError("reps must be >= 2")
    M = max_n_of(rule, c.shape[2])
    ns = sorted({*fixed_ns, M})
    g = _gen(rng)
    G = int(grp.max()) + 1
    boot = g.integers(0, G, size=(reps, G))
    name = rule.name if isinstance(rule, StoppingRule) else rule.stop
    cs = None if costs is None else np.asarray(costs, dtype=float).reshape(c.shape)
    ts = None if tokens is None else np.asarray(tokens, dtype=float).reshape(c.shape)
    out = []
    for ti, ct in enumerate(c):
        rp = replay(ct, rule, n_options=n_opt, orders=orders, fixed_ns=ns, rng=g,
                    costs=None if cs is None else cs[ti], tokens=None if ts is None else ts[ti],
                    shares=None if shares is None else np.asarray(shares, dtype=float)[ti])
        if scores is None:
            acc_q = _credit(rp.counts, vals).mean(axis=1)
            fixed_q = {n: _credit(rp.fixed[n], vals).mean(axis=1) for n in ns}
        else:
            sc = np.asarray(scores, dtype=float)[ti]
            rk = None if rank is None else np.asarray(rank, dtype=float)[ti]
            acc_q, fixed_q = _scored(sc, rk, keep, rp, vals, ns)
        used_q = rp.used.mean(axis=1, dtype=float)
        ones = np.ones(Q)
        acc = _weighted(acc_q, w, grp, boot)
        samples = _weighted(used_q, ones, grp, boot)
        fixed = {n: _weighted(fixed_q[n], w, grp, boot) for n in ns}
        diff = _weighted(acc_q - fixed_q[M], w, grp, boot)
        out.append(AdaptiveResult(stop=name, max_n=M, mean_samples=samples, accuracy=acc,
                                  fixed=fixed, difference=diff, saving=1 - samples.value / M,
                                  orders=int(rp.used.shape[1]), question_accuracy=acc_q,
                                  question_samples=used_q,
                                  mean_cost_usd=_mean_cost(rp.spent),
                                  mean_tokens=_mean_cost(rp.tokens),
                                  question_tokens=None if rp.tokens is None
                                  else rp.tokens.mean(axis=1),
                                  notes=_policy_notes(rp.rules)))
    return out
