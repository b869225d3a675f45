"""The cost-aware rule over members: after each vote, stop and decide, or buy one more vote
from the member whose expected gain in accuracy per dollar is highest.

State: each member's votes for the question's two leading answers, (a_g, b_g), g = 1..G, each
member at most `max_n[g]` votes. Under the joint prior π over q = (q_1..q_G) (`joint.py`), the
terminal value of deciding now is

    T(s) = max(w, 1 − w),  w = P(answer 1 is the reference answer | s),

(the reference: the members' unlimited votes weighed by λ, `JointPrior.reference`), except in a
state where only one of the two answers has been seen: deciding the other one needs its name,
which only two fixed choices give (`two_choices`, the Ensemble's two choices). With more options,
or open answers, the one seen is what can be decided, and T(s) = w (or 1 − w when only answer 2
has been seen), which may lie below 1/2: the rule then buys votes rather than stop on an answer
it believes wrong (a cheap member's unanimous votes on questions where the prior says it is
often trapped). A vote of
member g costs c_g = price_g / value_usd accuracy units (`value_usd`: what one right decision
is worth, in dollars), and backward induction over the states gives

    V(s) = max( T(s),  max_g [ −c_g + P(1 | s, g) V(s + 1 for answer 1 of g)
                                    + P(2 | s, g) V(s + 1 for answer 2 of g) ] ),

over every member with budget left. The rule stops where T wins (never before a first vote:
a decision rests on at least one) and otherwise asks the member
whose term is largest: the expected gain in accuracy, net of its price, of a vote and of
acting optimally after it. That is Bayes-optimal under π among all rules that choose whom to
ask and when to stop from the votes seen (for questions whose votes fall on their two leading
answers, without invalid answers; other answers and invalid ones use up a member's budget and
vote for neither, as in the bayes rule's top-two reduction). The decision is the answer more
likely to be the reference, i.e. the members' votes weighed through the prior, which knows each
member's λ from the votes.

What a decision earns (`credit`): "reference" (the default, above) scores agreement with the
reference answer, a question whose reference is a coin flip (every member split) as much as a
clear one; "qr" scores the decision by P(it is right) under quantal response, the node's
p = P(answer 1 is right) read back from every member's q_g = ψ_λg(p) (`JointPrior.truth`):
then w = E[p | s], T(s) = max(w, 1 − w) is the expected credit of deciding now, which is what
a task scored by P(ω = decision) (box-and-ball) pays, and a question near p = 1/2 is worth
little to resolve, however split its votes ("qr" needs each member's λ). "planted": the
prior's own P(answer 1 is right) per node (`JointPrior.p`), for a prior built from a
simulator's planted truth, where the rule is the Bayes-optimal bound of any vote-based policy.

The state space is Π_g (n_g + 1)(n_g + 2)/2; the posteriors of every state over the prior's K
nodes are computed once per (prior, max_n) (cached), the induction once per price vector and
value. `CostRule(..., target_loss=x)` solves for the value: the smallest one whose policy loses
at most x accuracy under the prior against a reference, the strongest member's single vote
("strongest", the default) or every member's full budget ("fixed").

A target is a constraint, and a constrained problem's optimum is randomised (Beutler & Ross,
1985: the Lagrangian optimum of a constrained Markov decision problem mixes two deterministic
policies at the critical multiplier). The value is the multiplier: as it grows the policy's
loss falls in steps, and a step can be wide where a state every question passes through
changes its action (after one cheap vote: ask the cheap member again, or the dear one), so no
deterministic policy lies between the two neighbours. The rule then runs the two policies of
the critical value, the one that meets the target and the cheaper one that does not, the
cheaper on a share `mix` of the questions chosen so that the expected loss is the target
exactly: both are optimal at that value, so the mix is on the frontier, and it is cheaper than
the one that meets it alone. Which question runs which is a coin keyed by the question
(`Drawn.question`: the Ensemble's prompt, an eval's question id; `question_coin`), so a
question runs the same policy every time (a rerun over a store asks nothing) and a larger share
keeps the questions of a smaller one. A question without a key runs the policy that meets the
target. `summary` and `evaluate` report the mix; with `value_usd` given the policy is the one
deterministic optimum at that value.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ..errors import InputError
from .joint import JointPrior

if TYPE_CHECKING:
    from ..stopping.drawn import Drawn
    from ..stopping.priors import PriorUsed

__all__ = ["MAX_WORK", "CostRule", "CostSummary", "question_coin"]

#: Largest (states x prior nodes) the rule computes posteriors for (~1 s here).
MAX_WORK = 4e8
_EPS = 1e-12
_TIE = 1e-9  # |w − 1/2| at or below which the two answers tie (cost.choice.TIE_TOLERANCE)
REFERENCES = ("strongest", "fixed")
CREDITS = ("reference", "qr", "planted")


@dataclass(frozen=True)
class CostSummary:
    """What the cost rule expects of itself under its prior, for questions whose votes fall on
    their two leading answers, without invalid answers: mean votes per member, mean dollars per
    question, accuracy (agreement with the reference answer; with credit "qr", the expected
    P(decision is right)), the reference's accuracy (scored alike) and the loss against it."""

    mean_samples: tuple[float, ...]
    mean_cost_usd: float
    accuracy: float
    reference_accuracy: float
    loss: float
    value_usd: float
    credit: str = "reference"
    #: the share of questions run on the cheaper policy of a target's randomised optimum
    #: (0: one deterministic policy); every figure above is the mix's
    mix: float = 0.0


def question_coin(question: str) -> float:
    """A number in [0, 1) fixed by the question's key: which of a randomised optimum's two
    policies the question runs (the cheaper one below `CostRule.mix`)."""
    digest = hashlib.sha256(question.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


@dataclass(frozen=True)
class _States:
    """Every state, flat: counts A, B (S x G); successors up/down (S x G, −1: no budget);
    the level (total votes) of each; posteriors pred (S x G) and terminal value T (S)."""

    A: NDArray[np.int64]
    B: NDArray[np.int64]
    up: NDArray[np.int64]
    down: NDArray[np.int64]
    level: NDArray[np.int64]
    stride: NDArray[np.int64]
    pred: NDArray[np.float64]
    win: NDArray[np.float64]


def _triangle(n: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(a, b) with a + b <= n, in the order of tri(a, b) = m(m + 1)/2 + a, m = a + b."""
    a, b = [], []
    for m in range(n + 1):
        for x in range(m + 1):
            a.append(x)
            b.append(m - x)
    return np.array(a), np.array(b)


@lru_cache(maxsize=16)
def _states(prior: JointPrior, max_n: tuple[int, ...], ref: tuple[float, ...]) -> _States:
    G = len(max_n)
    tris = [_triangle(n) for n in max_n]
    sizes = np.array([len(t[0]) for t in tris])
    S = int(np.prod(sizes))
    q, w = prior.nodes()
    if S * q.shape[0] > MAX_WORK:
        raise InputError(f"the cost rule over members with at most {list(max_n)} votes has {S} "
                         f"states x {q.shape[0]} prior nodes (limit {MAX_WORK:.0e}): give the "
                         "members smaller n, or fit the prior on a coarser grid")
    stride = np.ones(G, dtype=np.int64)
    for g in range(G - 2, -1, -1):
        stride[g] = stride[g + 1] * sizes[g + 1]
    idx = np.indices(tuple(sizes)).reshape(G, -1).T  # (S, G) triangle index per member
    A = np.stack([tris[g][0][idx[:, g]] for g in range(G)], axis=1)
    B = np.stack([tris[g][1][idx[:, g]] for g in range(G)], axis=1)
    m = A + B
    flat = np.arange(S)
    room = m < np.array(max_n)
    up = np.where(room, flat[:, None] + (m + 2) * stride, -1)
    down = np.where(room, flat[:, None] + (m + 1) * stride, -1)
    lq, l1q, lw = np.log(q), np.log1p(-q), np.log(w)
    refa = np.asarray(ref)
    pred = np.empty((S, G))
    win = np.empty(S)
    chunk = max(1, int(2e7 // q.shape[0]))
    for lo in range(0, S, chunk):
        hi = min(S, lo + chunk)
        lp = A[lo:hi] @ lq.T + B[lo:hi] @ l1q.T + lw
        post = np.exp(lp - lp.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
        pred[lo:hi] = post @ q
        win[lo:hi] = post @ refa
    return _States(A, B, up, down, m.sum(axis=1), stride, pred, win)


def _picks(st: _States, two_choices: bool) -> NDArray[np.float64]:
    """Per state, the decision as P(deciding answer 1): 1, 0, or 1/2 on a tie (w = 1/2).
    Without `two_choices`, a state where only one answer has been seen decides that one."""
    win = st.win
    pick = np.where(win > 0.5 + _TIE, 1.0, np.where(win < 0.5 - _TIE, 0.0, 0.5))
    if not two_choices:
        seen1, seen2 = st.A.sum(axis=1) > 0, st.B.sum(axis=1) > 0
        pick = np.where(seen1 & ~seen2, 1.0, np.where(seen2 & ~seen1, 0.0, pick))
    return np.asarray(pick, dtype=float)


def _terminal(st: _States, pick: NDArray[np.float64]) -> NDArray[np.float64]:
    """T(s): the expected credit of deciding now, as `pick` decides (max(w, 1 − w) where
    both answers can be decided)."""
    return np.asarray(pick * st.win + (1 - pick) * (1 - st.win), dtype=float)


def _induction(st: _States, terminal: NDArray[np.float64], costs: NDArray[np.float64]
               ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(T, cont): the terminal value of each state (`terminal`) and the value of asking each
    member (−inf without budget), by backward induction level by level. The empty state never
    stops (T = −inf there): a decision rests on at least one vote."""
    T = terminal.copy()
    T[0] = -np.inf
    S, G = st.A.shape
    V = T.copy()
    cont = np.full((S, G), -np.inf)
    for lv in range(int(st.level.max()) - 1, -1, -1):
        sel = np.nonzero(st.level == lv)[0]
        for g in range(G):
            ok = st.up[sel, g] >= 0
            s = sel[ok]
            p = st.pred[s, g]
            cont[s, g] = -costs[g] + p * V[st.up[s, g]] + (1 - p) * V[st.down[s, g]]
        V[sel] = np.maximum(T[sel], cont[sel].max(axis=1))
    return T, cont


class CostRule:
    """The cost-aware rule over members (see the module docstring).

    prior: a `JointPrior` over the G members; prices: USD per vote of each member; max_n: each
    member's most votes; lams: each member's λ (ψ_λ units), which weigh the members' unlimited
    votes into the reference answer (default: their prices, the dearest member the strongest).
    credit: what a decision earns, "reference" (agreement with the reference answer) or "qr"
    (P(it is right) under quantal response, read through the members' λ: give `lams`) or
    "planted" (the prior's own P(answer 1 is right) per node, `JointPrior.p`).
    Give `value_usd` (dollars one right decision is worth) or `target_loss` (the largest
    expected accuracy loss under the prior against `reference`: "strongest" or "fixed"; met
    exactly, by running the cheaper of the critical value's two policies on a share `mix` of
    the questions, each by its key: see the module docstring).
    two_choices: the answers are two fixed choices, so that a lone answer seen can give way to
    the other (True); False for more options or open answers, where only answers seen can be
    decided (the terminal value of a state with one answer seen is then its w).
    """

    name = "cost"
    #: which prior the rule decides with, and why (set by `CostSpec.build`)
    prior_used: PriorUsed | None = None

    def __init__(self, *, prior: JointPrior, prices: Sequence[float], max_n: Sequence[int],
                 lams: Sequence[float] | None = None, value_usd: float | None = None,
                 target_loss: float | None = None, reference: str = "strongest",
                 credit: str = "reference", two_choices: bool = True) -> None:
        if not isinstance(prior, JointPrior):
            raise InputError("the cost rule needs a JointPrior (fit_joint_prior on pilot counts)")
        G = prior.members
        pr = np.asarray(prices, dtype=float).ravel()
        if pr.shape != (G,) or not np.isfinite(pr).all() or (pr < 0).any():
            raise InputError(f"give one price per vote (USD >= 0) for each of the {G} members, "
                             f"got {list(prices)!r}")
        ns = tuple(int(n) for n in max_n)
        if len(ns) != G or min(ns) < 1:
            raise InputError(f"give each of the {G} members its most votes (>= 1), got "
                             f"{list(max_n)!r}")
        lw = pr if lams is None else np.asarray(lams, dtype=float).ravel()
        if lw.shape != (G,) or (lw < 0).any() or not np.isfinite(lw).all():
            raise InputError(f"give one finite λ >= 0 per member ({G}), got {lams!r}")
        if reference not in REFERENCES:
            raise InputError(f"reference must be one of {', '.join(REFERENCES)}, got "
                             f"{reference!r}")
        if credit not in CREDITS:
            raise InputError(f"credit must be one of {', '.join(CREDITS)}, got {credit!r}")
        if credit == "qr" and lams is None:
            raise InputError('credit "qr" reads P(right) through each member\'s λ: give lams')
        if credit == "planted" and prior.p is None:
            raise InputError('credit "planted" needs a prior that carries p (JointPrior.of(q, '
                             'w, p))')
        if (value_usd is None) == (target_loss is None):
            raise InputError("give the cost rule value_usd (dollars a right decision is worth) "
                             "or target_loss (accuracy it may lose), one of them")
        self.prior = prior
        self.prices = tuple(map(float, pr))
        self.max_n = ns
        self.lams = tuple(map(float, lw))
        self.reference = reference
        self.credit = credit
        # per node: P(answer 1 is the reference answer), or P(answer 1 is right) under QR
        self._ref = (prior.reference(lw) if credit == "reference" else prior.truth(lw)
                     if credit == "qr" else np.asarray(prior.p, dtype=float))
        self._st = _states(prior, ns, tuple(map(float, self._ref)))
        self.two_choices = bool(two_choices)
        self._pick = _picks(self._st, self.two_choices)
        self._terminal = _terminal(self._st, self._pick)
        #: the share of questions run on the cheaper policy (`mix`, see the module docstring)
        #: and that policy's value (None: one deterministic policy)
        self.mix = 0.0
        self.cheaper_value_usd: float | None = None
        if target_loss is not None:
            tl = float(target_loss)
            if not 0 < tl < 1:
                raise InputError(f"target_loss must lie in (0, 1), got {target_loss!r}")
            value_usd, self.cheaper_value_usd, self.mix = self._value_for_loss(tl)
        v = float(value_usd)  # type: ignore[arg-type]
        if not (math.isfinite(v) and v > 0):
            raise InputError(f"value_usd must be a finite number > 0, got {value_usd!r}")
        self.value_usd = v
        self._T, self._cont = _induction(self._st, self._terminal, pr / v)
        self._cheaper = None if self.cheaper_value_usd is None else _induction(
            self._st, self._terminal, pr / self.cheaper_value_usd)
        self.summary = self._summarise()

    # -- deciding ----------------------------------------------------------------------------
    def index(self, a: Sequence[int], b: Sequence[int]) -> int:
        """The flat state of counts (a_g, b_g), capped at each member's budget."""
        out = 0
        for g, (x, y) in enumerate(zip(a, b, strict=True)):
            m = x + y
            if x < 0 or y < 0 or m > self.max_n[g]:
                raise InputError(f"member {g}: {x} + {y} votes, at most {self.max_n[g]}")
            out += (m * (m + 1) // 2 + x) * int(self._st.stride[g])
        return out

    def runs_cheaper(self, question: str | None) -> bool:
        """Whether the question (its key) runs the cheaper policy of a randomised optimum:
        its coin (`question_coin`) below `mix`; never without a key or a mix."""
        return (question is not None and self._cheaper is not None
                and question_coin(question) < self.mix)

    def _arrays(self, cheaper: bool) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return self._cheaper if cheaper and self._cheaper is not None else (self._T, self._cont)

    def next_member(self, a: Sequence[int], b: Sequence[int],
                    available: Sequence[bool] | None = None, *,
                    question: str | None = None) -> int | None:
        """The member to ask next at counts (a, b), or None: stop and decide. `available`:
        which members still have budget (invalid and third answers use it up too);
        `question`: the question's key, which picks its policy when the rule mixes two."""
        s = self.index(a, b)
        T, conts = self._arrays(self.runs_cheaper(question))
        cont = conts[s].copy()
        if available is not None:
            cont[~np.asarray(available, dtype=bool)] = -np.inf
        g = int(np.argmax(cont))
        return g if cont[g] > T[s] + _EPS else None

    def next(self, drawn: Drawn) -> tuple[int, ...]:
        """The stop-rule interface (`StopPolicy`): one vote of the member to ask next at the
        question's counts (each member's votes for the two leaders, ranked by the rule's λ),
        among those with budget left, by the question's policy (`Drawn.question`); all
        zeros: stop and decide."""
        a, b, _ = drawn.member_counts(self.lams)
        g = self.next_member(a, b, [m > 0 for m in drawn.left()], question=drawn.question)
        return tuple(1 if h == g else 0 for h in range(len(self.max_n)))

    def win(self, a: Sequence[int], b: Sequence[int]) -> float:
        """P(answer 1 is the reference answer | counts); with credit "qr", P(answer 1 is
        right | counts) under quantal response (its expected credit)."""
        return float(self._st.win[self.index(a, b)])

    def decide(self, a: Sequence[int], b: Sequence[int]) -> int:
        """1 or 2: the answer more likely to be the reference, or with credit "qr" to be
        right (1 on a tie); without `two_choices`, the one answer seen when only one has been
        (whatever w: the other has no name)."""
        return 2 if self._pick[self.index(a, b)] == 0.0 else 1

    def picks(self) -> NDArray[np.float64]:
        """Per flat state, the decision as P(deciding answer 1): 1, 0, or 1/2 on a tie (as
        `decide`, for vectorised replay beside `policy`)."""
        return self._pick.copy()

    def policy(self, cheaper: bool = False) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """(action per flat state: −1 stop, else the member asked; P(answer 1 is the
        reference, or with credit "qr" or "planted" P(answer 1 is right), per state), with
        every member's budget available: for vectorised replay. `cheaper`: the cheaper policy
        of a mix (the questions `runs_cheaper` picks; without a mix, the one policy)."""
        T, cont = self._arrays(cheaper)
        best = cont.max(axis=1)
        act = np.where(best > T + _EPS, cont.argmax(axis=1), -1)
        return act, self._st.win.copy()

    def _mixed(self, one: CostSummary, cheap: CostSummary | None) -> CostSummary:
        """The mix's summary: a share `mix` of `cheap`, the rest `one`."""
        if cheap is None:
            return one
        x = self.mix
        n = tuple((1 - x) * p + x * q for p, q in zip(one.mean_samples, cheap.mean_samples,
                                                       strict=True))
        acc = (1 - x) * one.accuracy + x * cheap.accuracy
        return CostSummary(mean_samples=n, mean_cost_usd=(1 - x) * one.mean_cost_usd
                           + x * cheap.mean_cost_usd, accuracy=acc,
                           reference_accuracy=one.reference_accuracy,
                           loss=one.reference_accuracy - acc, value_usd=one.value_usd,
                           credit=one.credit, mix=x)

    @property
    def states(self) -> _States:
        return self._st

    # -- what it expects of itself --------------------------------------------------------------
    def _forward(self, act: NDArray[np.int64]) -> tuple[float, NDArray[np.float64]]:
        st = self._st
        S, G = st.A.shape
        T = self._terminal
        mass = np.zeros(S)
        mass[0] = 1.0
        acc = 0.0
        draws = np.zeros(G)
        for lv in range(int(st.level.max()) + 1):
            sel = np.nonzero((st.level == lv) & (mass > 0))[0]
            stop = act[sel] < 0
            acc += float(mass[sel[stop]] @ T[sel[stop]])
            for g in range(G):
                s = sel[act[sel] == g]
                p = st.pred[s, g]
                draws[g] += mass[s].sum()
                np.add.at(mass, st.up[s, g], mass[s] * p)
                np.add.at(mass, st.down[s, g], mass[s] * (1 - p))
        return acc, draws

    def evaluate(self, prior: JointPrior) -> CostSummary:
        """What this rule's policy (fitted on its own prior) earns and spends on questions drawn
        from another prior, e.g. a simulator's planted truth, exactly (no sampling): each
        decision scored by that prior's p (`JointPrior.p`) when it carries one, else by its
        reference answer under the rule's λ; `reference_accuracy` is the strongest member's
        one vote scored alike. For questions whose votes fall on their two leading answers, as
        `summary`."""
        if not isinstance(prior, JointPrior) or prior.members != len(self.max_n):
            raise InputError(f"evaluate the rule on a JointPrior over its {len(self.max_n)} "
                             "members")
        one = self._evaluate(prior, self.policy()[0])
        return self._mixed(one, None if self._cheaper is None else
                           self._evaluate(prior, self.policy(cheaper=True)[0]))

    def _evaluate(self, prior: JointPrior, act: NDArray[np.int64]) -> CostSummary:
        q, w = prior.nodes()
        truth = prior.reference(self.lams) if prior.p is None else np.asarray(prior.p)
        st = self._st
        S, G = st.A.shape
        # the credit of stopping in each state, per node: p deciding 1, 1 − p deciding 2
        pick = self._pick
        mass = np.zeros((S, q.shape[0]))
        mass[0] = 1.0
        acc = np.zeros(q.shape[0])
        draws = np.zeros((G, q.shape[0]))
        for lv in range(int(st.level.max()) + 1):
            sel = np.nonzero(st.level == lv)[0]
            stop = sel[act[sel] < 0]
            acc += (mass[stop] * (pick[stop, None] * truth[None, :]
                                  + (1 - pick[stop, None]) * (1 - truth[None, :]))).sum(axis=0)
            for g in range(G):
                s = sel[act[sel] == g]
                draws[g] += mass[s].sum(axis=0)
                np.add.at(mass, st.up[s, g], mass[s] * q[None, :, g])
                np.add.at(mass, st.down[s, g], mass[s] * (1 - q[None, :, g]))
        strongest = int(np.argmax(self.lams))
        ref = float(w @ (truth * q[:, strongest] + (1 - truth) * (1 - q[:, strongest])))
        n = draws @ w
        accuracy = float(acc @ w)
        return CostSummary(mean_samples=tuple(map(float, n)),
                           mean_cost_usd=float(n @ np.asarray(self.prices)),
                           accuracy=accuracy, reference_accuracy=ref, loss=ref - accuracy,
                           value_usd=self.value_usd, credit=self.credit)

    def _reference_accuracy(self) -> float:
        if self.reference == "strongest":
            return self.prior.accuracy_alone(int(np.argmax(self.lams)), self.lams,
                                             None if self.credit == "reference" else self._ref)
        st = self._st  # every member's full budget: ask anyone with budget left
        act = np.where((st.up < 0).all(axis=1), -1, np.argmax(st.up >= 0, axis=1))
        return self._forward(act)[0]

    def _summarise(self) -> CostSummary:
        ref = self._reference_accuracy()
        one = self._summary_of(self.policy()[0], ref)
        return self._mixed(one, None if self._cheaper is None else
                           self._summary_of(self.policy(cheaper=True)[0], ref))

    def _summary_of(self, act: NDArray[np.int64], ref: float) -> CostSummary:
        acc, draws = self._forward(act)
        return CostSummary(mean_samples=tuple(map(float, draws)),
                           mean_cost_usd=float(draws @ np.asarray(self.prices)),
                           accuracy=acc, reference_accuracy=ref, loss=ref - acc,
                           value_usd=getattr(self, "value_usd", float("nan")),
                           credit=self.credit)

    def _value_for_loss(self, target: float) -> tuple[float, float | None, float]:
        """(value, cheaper value, mix): the smallest value (largest price in accuracy units)
        whose policy loses at most `target` against the reference under the prior (bisection
        on its log), and where the next cheaper policy (at the bracket's other end, the same
        critical value within 1e-8 of its log) loses more, that policy's value and the share
        of questions it runs so that the mix loses `target` exactly (None, 0: no mix)."""
        top = max(self.prices)
        if top <= 0:
            return 1.0, None, 0.0
        ref = self._reference_accuracy()

        def loss(log_c: float) -> float:
            T, cont = _induction(self._st, self._terminal,
                                 np.asarray(self.prices) / (top / math.exp(log_c)))
            best = cont.max(axis=1)
            act = np.where(best > T + _EPS, cont.argmax(axis=1), -1)
            return ref - self._forward(act)[0]

        lo, hi = math.log(1e-7), math.log(1.0)
        if loss(lo) > target:  # no value meets it: the most generous one, alone
            return top / math.exp(lo), None, 0.0
        for _ in range(30):
            mid = (lo + hi) / 2
            if loss(mid) <= target:
                lo = mid
            else:
                hi = mid
        meets, short = loss(lo), loss(hi)
        if short <= target or short - meets <= 1e-12:
            return top / math.exp(lo), None, 0.0
        return top / math.exp(lo), top / math.exp(hi), (target - meets) / (short - meets)

    def __repr__(self) -> str:
        return (f"CostRule(max_n={list(self.max_n)}, prices={list(self.prices)}, "
                f"value_usd={self.value_usd:.4g}, credit={self.credit!r}, "
                f"two_choices={self.two_choices}"
                + (f", mix={self.mix:.3g}" if self.mix else "") + ")")
