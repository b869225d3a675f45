"""Unbiased per-item estimates for mixed ensembles: groups of members, each with its own
answers and n votes, under a group rule (majority, lam-weighted, robust). For one member they
reproduce `evals.analysis` value for value (plurality n = 1, 3, 5; box-ball majority n = 1, 3:
tests/evals/test_mixed.py). The estimators are described in `evals.analysis`: each member's
n_g answers are drawn without replacement from its samples (per colour for box-ball)."""

from __future__ import annotations

from collections.abc import Sequence
from math import comb, factorial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensemble.errors import InputError

from .analysis import ItemValues, check_box, choose_table, power_table, state_weights

__all__ = ["GroupRule", "box_group_exact", "box_group_values", "group_rule",
           "vote_group_values"]


GroupRule = Any  # Callable[[tuple[int, ...], tuple[int, ...]], NDArray]: (present, sizes) -> f


def group_rule(name: str, lams: Any) -> GroupRule:
    """The rule `name` for groups as `(present groups, their valid sizes) -> f` over the present
    groups' counts of the first choice (`ensemble.credit.group_aggregator_f`; cached).
    `lams`: λ per group (ψ_λ units); majority ignores it (None entries allowed)."""
    from ensemble.credit import group_aggregator_f

    cache: dict[tuple[tuple[int, ...], tuple[int, ...]], NDArray[np.float64]] = {}
    lam = [1.0 if x is None else float(x) for x in lams]

    def f(present: tuple[int, ...], sizes: tuple[int, ...]) -> NDArray[np.float64]:
        key = (present, sizes)
        if key not in cache:
            cache[key] = group_aggregator_f(name, list(sizes), [lam[g] for g in present])
        return cache[key]

    return f


def _hyper_lr(c: NDArray[np.int64], n: int) -> NDArray[np.float64]:
    """(..., n+1, n+1, n+1) P(l "L", r "R" among m answers drawn without replacement) as
    [..., m, l, r] from counts c[..., (L, R, invalid)]: the unbiased estimate of the
    multinomial probabilities of m fresh answers."""
    k = c.sum(axis=-1)
    norm = choose_table(k, n)
    safe = np.where(norm > 0, norm, 1.0)
    tab = [choose_table(c[..., i], n) for i in range(3)]
    out = np.zeros((*c.shape[:-1], n + 1, n + 1, n + 1))
    for m in range(n + 1):
        for x in range(m + 1):
            for y in range(m - x + 1):
                out[..., m, x, y] = tab[0][..., x] * tab[1][..., y] * tab[2][..., m - x - y]
        out[..., m, :, :] /= safe[..., m, None, None]
    return out


def _group_table(c: NDArray[np.int64], w: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """Unbiased P(l "L", r "R" among a group's n experts | ω), each drawing its own ball.

    c: (..., S, 2, 3) the group's counts per scenario and colour; w: (S, 2) P(colour | ω).
    Returns (..., S, n+1, n+1) as [l, r]: Σ_m C(n, m) w_red^m w_blue^(n−m) × the convolution
    of m red answers' and n − m blue answers' (l, r) laws."""
    h = _hyper_lr(c, n)  # (..., S, 2, n+1, n+1, n+1)
    red, blue = h[..., 0, :, :, :], h[..., 1, :, :, :]
    out = np.zeros((*c.shape[:-2], n + 1, n + 1))
    for m in range(n + 1):
        pr = comb(n, m) * w[:, 0] ** m * w[:, 1] ** (n - m)  # (S,)
        if not pr.any():
            continue
        a, b = red[..., m, :, :], blue[..., n - m, :, :]
        conv = np.zeros_like(out)
        for x in range(m + 1):
            for y in range(m - x + 1):
                conv[..., x:, y:] += a[..., x, y, None, None] * b[..., : n + 1 - x, : n + 1 - y]
        out += pr[..., :, None, None] * conv
    return out


def _decision_table(rule: GroupRule, ns: list[int], reach: list[NDArray[np.bool_]]
                    ) -> NDArray[np.float64]:
    """F[l_1, r_1, ..., l_G, r_G] = P(decide the first choice); NaN where no vote is valid.
    Only valid sizes in `reach` (per group, possible somewhere) are computed."""
    shape = [d for n in ns for d in (n + 1, n + 1)]
    out = np.full(shape, 0.5)
    sizes_iter = np.ndindex(*(n + 1 for n in ns))
    for v in sizes_iter:
        if not all(reach[g][v[g]] for g in range(len(ns))):
            continue
        present = tuple(g for g in range(len(ns)) if v[g] > 0)
        if not present:
            out[tuple(0 for _ in shape)] = np.nan
            continue
        f = rule(present, tuple(v[g] for g in present))
        for x in np.ndindex(*(v[g] + 1 for g in present)):
            idx: list[int] = []
            xi = dict(zip(present, x, strict=True))
            for g in range(len(ns)):
                lg = xi.get(g, 0)
                idx += [lg, v[g] - lg]
            out[tuple(idx)] = f[x]
    return out


def box_group_values(counts: NDArray[np.integer], joint: NDArray[np.float64], ns: list[int],
                     rules: dict[str, GroupRule]) -> dict[str, ItemValues]:
    """Per-scenario unbiased utility (±1 units) of rules over a mixed ensemble on box-ball.

    counts: (G, S, 2, 3) answers "L", "R", invalid of member g per scenario and colour (K_g
    samples per question); ns: the members' group sizes n_g (n_g ≤ K_g); rules: name ->
    `group_rule(...)`. Each of the Σ n_g experts draws its own ball; member g's experts answer
    a colour as member g's samples of it do. The exact utility is a polynomial in the members'
    per-colour answer probabilities (degree n_g in member g's); drawing each member's answers
    to each colour without replacement from its samples makes every monomial, and so the
    utility, unbiased (the members' samples are independent, so the products factor). Invalid
    answers drop out of the vote (the rule is the one for the valid sizes); no valid answer at
    all counts −1, as in `box_values`.

    Jackknife variants: one answer of (member g, colour c, category i) deleted, in that order
    (6 per member; for one member the layout of `box_values`).
    """
    c = np.asarray(counts, dtype=np.int64)
    j = np.asarray(joint, dtype=float)
    groups, s = c.shape[0], c.shape[1]
    if len(ns) != groups:
        raise ValueError(f"{groups} members' counts but {len(ns)} group sizes")
    for g in range(groups):
        check_box(c[g], j, ns[g])
    mu, w0, w1 = state_weights(j)
    k = c.sum(axis=-1)  # (G, S, 2)
    # per member: full counts and its 6 delete-one variants
    tabs: list[NDArray[np.float64]] = []  # (7, 2 states, S, n+1, n+1)
    mult = np.zeros((s, 6 * groups))
    for g in range(groups):
        var = np.repeat(c[g][None], 7, axis=0)
        for v in range(6):
            col, cat = divmod(v, 3)
            var[v + 1, :, col, cat] = np.maximum(var[v + 1, :, col, cat] - 1, 0)
            kc = k[g, :, col]
            mult[:, 6 * g + v] = c[g, :, col, cat] * np.where(kc > 1, (kc - 1) / np.maximum(kc, 1),
                                                              0.0)
        tabs.append(np.stack([_group_table(var, w, ns[g]) for w in (w0, w1)], axis=1))
    reach = []
    for g in range(groups):
        t = tabs[g]
        lr = np.add.outer(np.arange(ns[g] + 1), np.arange(ns[g] + 1))
        reach.append(np.array([(np.abs(t[..., lr == vv]) > 0).any() for vv in range(ns[g] + 1)]))
    ok = all(int(np.where(j.sum(axis=-1) > 0, k[g], 10**9).min()) - 1 >= ns[g]
             for g in range(groups))
    identical = np.ones(s, dtype=bool)
    for g in range(groups):
        identical &= ((c[g] == k[g][..., None]).any(axis=-1) | (k[g] == 0)).all(axis=-1)

    def expect(d: tuple[NDArray[Any], NDArray[Any]], pick: list[int]) -> NDArray[np.float64]:
        """Σ over count vectors of Π_g table_g[pick_g][ω] × d[ω], per scenario; (S,)."""
        tot = np.zeros(s)
        for om, weight in ((0, 1 - mu), (1, mu)):
            acc = d[om][None]  # (1, A_1, ..., A_G) with A = (n+1, n+1)
            acc = np.broadcast_to(acc, (s, *acc.shape[1:]))
            for g in range(groups):
                t = tabs[g][pick[g], om]  # (S, n+1, n+1)
                acc = np.einsum("sab...,sab->s...", acc, t)
            tot += weight * acc
        return tot

    out: dict[str, ItemValues] = {}
    for name, rule in rules.items():
        f = _decision_table(rule, ns, reach)
        none = np.isnan(f)
        d1 = np.where(none, -1.0, 2 * np.nan_to_num(f) - 1)
        d0 = np.where(none, -1.0, 1 - 2 * np.nan_to_num(f))
        d = (d0, d1)
        base = expect(d, [0] * groups)
        jack = np.zeros((s, 6 * groups))
        if ok:
            for g in range(groups):
                for v in range(6):
                    pick = [0] * groups
                    pick[g] = v + 1
                    jack[:, 6 * g + v] = expect(d, pick) - base
        out[name] = ItemValues(base, jack, mult, ok, identical)
    return out


def box_group_exact(probs: NDArray[np.float64], joint: NDArray[np.float64], ns: list[int],
                    rule: GroupRule) -> NDArray[np.float64]:
    """Exact utility (±1 units) per scenario of a group rule from the members' true answer
    probabilities probs (G, S, 2, 3) [member, scenario, colour, (L, R, invalid)]: the target
    `box_group_values` estimates (same computation, multinomial instead of hypergeometric)."""
    p = np.asarray(probs, dtype=float)
    j = np.asarray(joint, dtype=float)
    mu, w0, w1 = state_weights(j)
    groups, s = p.shape[0], p.shape[1]
    tabs = []
    for g in range(groups):
        n = ns[g]
        # multinomial law of (l, r) among m answers: m! Π π^y / y!
        pw = [power_table(p[g, ..., i], n) for i in range(3)]
        h = np.zeros((s, 2, n + 1, n + 1, n + 1))
        for m in range(n + 1):
            for x in range(m + 1):
                for y in range(m - x + 1):
                    h[..., m, x, y] = factorial(m) * pw[0][..., x] * pw[1][..., y] * \
                        pw[2][..., m - x - y]
        tab = []
        for w in (w0, w1):
            out = np.zeros((s, n + 1, n + 1))
            for m in range(n + 1):
                pr = comb(n, m) * w[:, 0] ** m * w[:, 1] ** (n - m)
                a, b = h[:, 0, m], h[:, 1, n - m]
                for x in range(m + 1):
                    for y in range(m - x + 1):
                        out[:, x:, y:] += (pr[:, None, None] * a[:, x, y, None, None]
                                           * b[:, : n + 1 - x, : n + 1 - y])
            tab.append(out)
        tabs.append(tab)
    reach = [np.ones(n + 1, dtype=bool) for n in ns]
    f = _decision_table(rule, ns, reach)
    none = np.isnan(f)
    d = (np.where(none, -1.0, 1 - 2 * np.nan_to_num(f)),
         np.where(none, -1.0, 2 * np.nan_to_num(f) - 1))
    tot = np.zeros(s)
    for om, weight in ((0, 1 - mu), (1, mu)):
        acc = np.broadcast_to(d[om][None], (s, *d[om].shape))
        for g in range(groups):
            acc = np.einsum("sab...,sab->s...", acc, tabs[g][om])
        tot += weight * acc
    return tot


def _subsets(counts: NDArray[np.int64], n: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Every count vector y of an n-subset drawn without replacement from answers with
    category counts `counts`, with its hypergeometric probability Π C(c, y) / C(K, n)."""
    cats = [i for i in range(counts.shape[0]) if counts[i] > 0]
    rows: list[list[int]] = []

    def walk(i: int, left: int, acc: list[int]) -> None:
        if i == len(cats) - 1:
            if left <= counts[cats[i]]:
                rows.append([*acc, left])
            return
        for y in range(min(left, int(counts[cats[i]])) + 1):
            walk(i + 1, left - y, [*acc, y])

    if cats:
        walk(0, n, [])
    ys = np.zeros((len(rows), counts.shape[0]), dtype=np.int64)
    if rows:
        ys[:, cats] = np.array(rows, dtype=np.int64)
    pr = np.array([np.prod([comb(int(c), int(y)) for c, y in zip(counts, row, strict=True)])
                   for row in ys], dtype=float) / comb(int(counts.sum()), n)
    return ys, pr


def _vote_group_one(counts: list[NDArray[np.int64]], right: int, ns: list[int],
                    rules: dict[str, Any]) -> dict[str, float]:
    y = np.zeros((1, 0, counts[0].shape[0] - 1), dtype=np.int64)
    pr = np.ones(1)
    for c, n in zip(counts, ns, strict=True):
        yg, pg = _subsets(c, n)
        y = np.concatenate([np.repeat(y, len(yg), axis=0),
                            np.tile(yg[:, None, :-1], (len(y), 1, 1))], axis=1)
        pr = np.outer(pr, pg).ravel()
    corr = np.full(len(y), right)
    return {name: float(pr @ credit(y, corr, lams)) for name, (credit, lams) in rules.items()}


def _credits(rules: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Each rule's credit over options (`RuleInfo.credit`) with its λ per member; a rule
    without one is refused, never scored as another."""
    from ensemble.rules import aggregator_info

    out = {}
    for name, lams in rules.items():
        credit = aggregator_info(name).credit
        if credit is None:
            raise InputError(f"{name} has no credit over options, so a vote's accuracy cannot "
                             "be estimated for it")
        out[name] = (credit, lams)
    return out


def _vote_weights(rules: dict[str, Any]) -> dict[str, NDArray[np.float64]]:
    """The rules that are weighted votes (`RuleInfo.weighs`) with weights the recursion of
    `evals.weightedvotes` takes (finite, > 0), and those weights."""
    from ensemble.rules import aggregator_info

    from .weightedvotes import usable_weights

    out = {}
    for name, lams in rules.items():
        weighs = aggregator_info(name).weighs
        if weighs is None or lams is None:
            continue
        w = usable_weights([float(x) for x in weighs(list(lams))])
        if w is not None:
            out[name] = w
    return out


def vote_group_values(codes: Sequence[NDArray[np.integer]], correct: NDArray[np.integer],
                      ns: list[int], rules: dict[str, Any], *, n_options: int
                      ) -> dict[str, ItemValues]:
    """Per-question unbiased accuracy of rules over a mixed ensemble (multiple choice).

    codes: per member g, (Q, K_g) answer indices (−1 invalid); ns: its group size n_g ≤ K_g;
    rules: a rule's name -> [λ per member] (a registered rule with a credit over options,
    `RuleInfo.credit`: e.g. plurality pools the votes, lam-weighted weighs them by 2λ). The
    estimate is the rule's average credit over all choices of an n_g-subset of each member's
    K_g answers (unbiased for fresh answers: the members' samples are independent), computed
    by enumerating each member's subset counts with their hypergeometric probabilities, or for
    a weighted vote (`RuleInfo.weighs`: plurality, lam-weighted) by the recursion over the
    options of `evals.weightedvotes` (the same number; its cost does not grow with the product
    of the members' count vectors, which open answers make huge). Credit as in
    `vote_values` (fractional ties, no valid vote = 0).

    Jackknife variants: one answer of (member g, category o) deleted, category o in 0 ..
    n_options (the last: invalid); for one member the layout of `vote_values`.
    """
    cats = n_options + 1
    groups = len(codes)
    q = len(correct)
    cnt = []
    for c in codes:
        a = np.asarray(c)
        m = np.zeros((q, cats), dtype=np.int64)
        for o in range(n_options):
            m[:, o] = (a == o).sum(axis=1)
        m[:, -1] = (a < 0).sum(axis=1)
        cnt.append(m)
    ks = [int(np.asarray(c).shape[1]) for c in codes]
    for k, n in zip(ks, ns, strict=True):
        if k < n:
            raise InputError(f"n = {n} needs at least {n} answers per question; a member has "
                             f"{k} (draw more with --samples)")
    ok = all(k - 1 >= n for k, n in zip(ks, ns, strict=True))
    weight = np.concatenate([m * ((k - 1) / k) for m, k in zip(cnt, ks, strict=True)], axis=1)
    identical = np.ones(q, dtype=bool)
    for c in codes:
        a = np.asarray(c)
        identical &= (a == a[:, :1]).all(axis=1)
    weighted = _vote_weights(rules)
    credits = _credits({r: lams for r, lams in rules.items() if r not in weighted})
    vals = {r: np.zeros(q) for r in rules}
    jack = {r: np.zeros((q, groups * cats)) for r in rules}

    def values(base: list[NDArray[np.int64]], right: int) -> dict[str, float]:
        from .weightedvotes import weighted_vote_value

        got = _vote_group_one(base, right, ns, credits) if credits else {}
        table = np.stack(base)
        for r, w in weighted.items():
            got[r] = weighted_vote_value(table, ns, w, right)
        return got

    for i in range(q):
        base = [m[i] for m in cnt]
        full = values(base, int(correct[i]))
        for r in rules:
            vals[r][i] = full[r]
        if not ok:
            continue
        for g in range(groups):
            for o in range(cats):
                if base[g][o] == 0:
                    continue
                var = [b.copy() for b in base]
                var[g][o] -= 1
                got = values(var, int(correct[i]))
                for r in rules:
                    jack[r][i, g * cats + o] = got[r] - full[r]
    return {r: ItemValues(vals[r], jack[r], weight, ok, identical) for r in rules}
