"""The joint prior over members: how one question's votes of every member relate.

Each question has, for each member g, a probability q_g that a sample of g votes answer 1 of
the question's two leading answers (answer 2 otherwise; other answers and invalid ones only use
up budget). Across the task's questions the vector q = (q_1, ..., q_G) follows a prior π, here
a discrete one on nodes: `JointPrior`. Which answer is "1" is data, not a label, so π is
symmetric under q ↔ 1 − q (every member's at once): the members' votes are tied together
through the question, which is what lets "the cheap member is split" (q_1 near 1/2) say
something about the expensive one (q_2).

The reference answer of a question is the decision of the members' unlimited votes weighed by
their λ (`reference`): answer 1 where Σ_g λ_g sign(2 q_g − 1) > 0. With one member far stronger
than the rest, that is the strongest member's unlimited vote.

`fit_joint_prior(a, b)` fits π across questions from per-member counts (empirical Bayes): the
NPMLE (EM on the weights of a fixed product grid of nodes) of the unlabelled likelihood, the
mean over both labellings of Π_g q_g^{a_g} (1 − q_g)^{b_g}. The likelihood does not depend on
why sampling stopped or on which member a policy chose (both depend only on votes seen), so
counts drawn by the cost rule itself may be refitted without bias.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import InputError

__all__ = ["JointPrior", "fit_joint_prior", "joint_grid"]


@dataclass(frozen=True)
class JointPrior:
    """A discrete prior over q = (q_1..q_G): nodes `q` (K x G) with weights `w` (K), symmetric
    under q ↔ 1 − q. Build it with `JointPrior.of(q, w)` (symmetrises, clips to
    [1e-9, 1 − 1e-9], merges equal nodes, normalises). A planted prior may carry `p`: at each
    node, P(answer 1 is right) (the node 1 − q gets 1 − p; merged nodes the weighted mean), for
    a rule scored by it (`CostRule(credit="planted")`)."""

    q: tuple[tuple[float, ...], ...]
    w: tuple[float, ...]
    p: tuple[float, ...] | None = None

    @classmethod
    def of(cls, q: ArrayLike, w: ArrayLike | None = None, p: ArrayLike | None = None
           ) -> JointPrior:
        qa = np.atleast_2d(np.asarray(q, dtype=float))
        wa = np.ones(qa.shape[0]) if w is None else np.asarray(w, dtype=float).ravel()
        if qa.size == 0 or qa.shape[0] != wa.shape[0]:
            raise InputError("a joint prior needs one weight per node (nodes: K x G)")
        pa = None if p is None else np.asarray(p, dtype=float).ravel()
        if pa is not None and (pa.shape != wa.shape or np.isnan(pa).any() or (pa < 0).any()
                               or (pa > 1).any()):
            raise InputError("a planted p gives each node P(answer 1 is right), in [0, 1]")
        if np.isnan(qa).any() or (qa < 0).any() or (qa > 1).any():
            raise InputError("joint prior nodes q must lie in [0, 1]")
        if np.isnan(wa).any() or (wa < 0).any() or wa.sum() <= 0:
            raise InputError("joint prior weights must be >= 0 with a positive sum")
        qa = np.clip(qa, 1e-9, 1 - 1e-9)
        qs = np.concatenate([qa, 1 - qa])
        ws = np.concatenate([wa, wa])
        uq, inv = np.unique(np.round(qs, 12), axis=0, return_inverse=True)
        wm = np.bincount(inv.ravel(), weights=ws)
        keep = wm > 0
        pm = None
        if pa is not None:
            num = np.bincount(inv.ravel(), weights=ws * np.concatenate([pa, 1 - pa]))
            pm = tuple(map(float, num[keep] / wm[keep]))
        return cls(tuple(tuple(map(float, r)) for r in uq[keep]),
                   tuple(map(float, wm[keep] / wm[keep].sum())), pm)

    @property
    def members(self) -> int:
        return len(self.q[0])

    def describe(self) -> str:
        """One phrase for a person."""
        return f"a joint prior over {self.members} members on {len(self.w)} nodes"

    def nodes(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(q as a K x G array, w as a K array)."""
        return np.asarray(self.q), np.asarray(self.w)

    def reference(self, weights: ArrayLike) -> NDArray[np.float64]:
        """P(answer 1 is the reference answer) per node: 1, 0, or 1/2 on a tie, the reference
        being the members' unlimited votes weighed by `weights` (their λ)."""
        q, _ = self.nodes()
        lw = np.asarray(weights, dtype=float).ravel()
        if lw.shape != (q.shape[1],) or (lw < 0).any():
            raise InputError(f"give one weight >= 0 (λ) per member, {q.shape[1]} of them")
        score = np.sign(2 * q - 1) @ lw
        return np.where(score > 1e-12, 1.0, np.where(score < -1e-12, 0.0, 0.5))

    def truth(self, lams: ArrayLike) -> NDArray[np.float64]:
        """P(answer 1 is right) per node under quantal response: a member of rationality λ_g
        votes 1 with probability q_g = ψ_λg(p), p = P(answer 1 is right), so logit(q_g) =
        2λ_g(2p − 1); p is the least-squares fit of that line to every member's logit,
        2p − 1 = Σ_g λ_g logit(q_g) / (2 Σ_g λ_g²) (the strongest member weighs most), clipped
        to [0, 1]. Symmetric: the node 1 − q gets 1 − p."""
        q, _ = self.nodes()
        lw = np.asarray(lams, dtype=float).ravel()
        if lw.shape != (q.shape[1],) or (lw < 0).any() or not (lw > 0).any():
            raise InputError(f"give one λ >= 0 per member, {q.shape[1]} of them, not all 0")
        y = (np.log(q) - np.log1p(-q)) @ lw / (2 * float(lw @ lw))
        return np.asarray(np.clip(0.5 + y / 2, 0.0, 1.0), dtype=float)

    def accuracy_alone(self, g: int, weights: ArrayLike, credit: ArrayLike | None = None
                       ) -> float:
        """P(one vote of member g is the reference answer) under the prior; with `credit`
        (per node, the credit of answer 1, e.g. `truth`), the expected credit of that vote."""
        q, w = self.nodes()
        ref = self.reference(weights) if credit is None else np.asarray(credit, dtype=float)
        return float(w @ (ref * q[:, g] + (1 - ref) * (1 - q[:, g])))


def joint_grid(members: int, per_member: int) -> NDArray[np.float64]:
    """The product grid of `per_member` nodes per member (arcsine spacing: dense near 0 and
    1), as a K x G array."""
    u = (np.arange(per_member) + 0.5) / per_member
    axis = np.sin(np.pi * u / 2) ** 2
    mesh = np.meshgrid(*([axis] * members), indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


def fit_joint_prior(a: ArrayLike, b: ArrayLike, *, grid: int | None = None,
                    iterations: int = 3000, tol: float = 1e-9) -> JointPrior:
    """Fit the joint prior (NPMLE on a product grid) from per-question, per-member counts.

    a, b: (Q, G) counts of each member's votes for answer 1 and answer 2 of each question's two
    leading answers (labelled alike for every member of a question). `grid`: nodes per member
    (default 21 for two members, 11 for three, 7 beyond). Nodes left with weight below 1e-7
    are dropped.
    """
    aa = np.asarray(a, dtype=float)
    bb = np.asarray(b, dtype=float)
    if aa.ndim != 2 or aa.shape != bb.shape:
        raise InputError("a and b must be (questions, members) counts of the same shape")
    if (aa < 0).any() or (bb < 0).any():
        raise InputError("counts must be >= 0")
    informative = (aa + bb).sum(axis=1) >= 2
    if not informative.any():
        raise InputError("fitting the joint prior needs questions with 2 or more votes for "
                         "the two leading answers; draw a larger pilot")
    aa, bb = aa[informative], bb[informative]
    G = aa.shape[1]
    per = grid if grid is not None else {1: 41, 2: 21, 3: 11}.get(G, 7)
    q = joint_grid(G, per)
    lq, l1q = np.log(q), np.log1p(-q)
    pairs, mult = np.unique(np.concatenate([aa, bb], axis=1), axis=0, return_counts=True)
    pa, pb = pairs[:, :G], pairs[:, G:]
    # unlabelled: the mean over both labellings makes the fit symmetric by construction
    ll = np.logaddexp(pa @ lq.T + pb @ l1q.T, pb @ lq.T + pa @ l1q.T)
    lik = np.exp(ll - ll.max(axis=1, keepdims=True))
    w = np.full(q.shape[0], 1.0 / q.shape[0])
    total = mult.sum()
    for _ in range(iterations):
        mix = lik @ w
        new = w * ((mult / mix) @ lik) / total
        done = np.abs(new - w).max() < tol
        w = new
        if done:
            break
    keep = w > 1e-7 * w.max()
    return JointPrior.of(q[keep], w[keep])
