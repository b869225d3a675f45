"""The state of one question and the table every stopping rule is: k[drawn, top, second]."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ..errors import InputError
from ..rules import HARD, Requests

if TYPE_CHECKING:
    from .drawn import Drawn
    from .priors import PriorUsed

__all__ = ["MAX_N_LIMIT", "StoppingRule", "answer_counts", "lookahead", "validate_max_n"]

MAX_N_LIMIT = 200


def answer_counts(answers: Sequence[str | None], *, count_invalid: bool = False
                  ) -> tuple[int, int, int]:
    """(drawn, top, second): samples drawn, and the counts of the two most frequent answers.

    Invalid answers (None) count as drawn but support no answer, unless `count_invalid`, which
    treats None as one more answer (as the `adaptiveconsistency` package does).
    """
    counts = Counter(a for a in answers if count_invalid or a is not None)
    top = counts.most_common(2)
    return (len(answers), top[0][1] if top else 0, top[1][1] if len(top) > 1 else 0)


class StoppingRule:
    """A stopping rule as a table k[drawn, top, second] of samples to draw next (0 = stop).

    Subclasses fill the table; `more` and `more_counts` are the same lookup for every rule.
    A registered rule (`register_stop_rule`) declares its `name`, a one-line `about`, the
    `params` its constructor takes besides `max_n` (read from a `StopSpec`: its fields, or its
    `options` for a plug-in's own), and `needs_prior` when it is built only once a prior is
    fitted from a pilot (the spec's `prior`, or `StopSpec.rule(pilot_answers)`). Such a rule
    built by a `StopSpec` carries `prior_used`: which prior it decides with, and why. A rule
    that reads more of a sample than its hard answer (soft evidence: the answer-token
    logprobs) declares it in `requests` (`ensemble.rules.Requests`), as an aggregator does:
    whoever draws asks the provider for it, and the `Observation`s the rule reads carry it.
    """

    name: ClassVar[str] = "rule"
    about: ClassVar[str] = ""
    params: ClassVar[tuple[str, ...]] = ()
    needs_prior: ClassVar[bool] = False
    requests: ClassVar[Requests] = HARD
    prior_used: PriorUsed | None = None

    def __init__(self, max_n: int, table: NDArray[np.int16], *, count_invalid: bool = False
                 ) -> None:
        self.max_n = max_n
        self.count_invalid = count_invalid
        self._table = table

    @property
    def table(self) -> NDArray[np.int16]:
        """k[drawn, top, second] for 0 ≤ second ≤ top, top + second ≤ drawn ≤ max_n (read-only;
        other entries are unused)."""
        return self._table

    def more(self, answers: Sequence[str | None]) -> int:
        """Samples to draw next for a question with these answers so far; 0 = stop."""
        n, top, second = answer_counts(answers, count_invalid=self.count_invalid)
        return self.more_counts(drawn=n, top=top, second=second)

    def more_counts(self, *, drawn: int, top: int, second: int) -> int:
        """The same decision from the counts: O(1)."""
        if drawn >= self.max_n:
            return 0
        if not 0 <= second <= top or top + second > drawn:
            raise InputError(f"impossible counts: drawn={drawn}, top={top}, second={second} "
                             "(need 0 <= second <= top and top + second <= drawn)")
        return int(self._table[drawn, top, second])

    def next(self, drawn: Drawn) -> tuple[int, ...]:
        """What to draw next for a question (the stop-rule interface, `StopPolicy`): over one
        member, the rule's lossless batch k, at most the budget left; over several, the rule
        reads the pooled votes and, while it goes on, asks for a round: one more vote from
        every member with budget left. All zeros: stop."""
        left = drawn.left()
        n, top, second = drawn.top_two(count_invalid=self.count_invalid)
        k = self.more_counts(drawn=n, top=top, second=second)
        if len(left) == 1:
            return (min(k, left[0]),)
        return tuple(1 if k > 0 and m > 0 else 0 for m in left)

    def fit_pilots(self, pilots: Sequence[Drawn | None]) -> StoppingRule:
        """The rule, given the pilots its prior was fitted on (None: a question whose pilot
        failed): a rule that reads more of them than their counts (the token-aware bayes
        rule: their mean tokens per sample) returns itself completed; the others, itself."""
        return self

    @classmethod
    def table_only(cls) -> bool:
        """Whether the rule decides from its table alone (the counts of one question's two
        leading answers): then a replay may look its decisions up, vectorised
        (`ensemble.evals.adaptive`). A subclass that overrides `next` reads more of a question
        (soft evidence, tokens) and is replayed through `next`."""
        return cls.next is StoppingRule.next

    def stops(self, *, drawn: int, top: int, second: int) -> bool:
        """Whether the rule stops in this state."""
        return self.more_counts(drawn=drawn, top=top, second=second) == 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_n={self.max_n})"

    @classmethod
    def from_spec(cls, spec: Any, prior: Any = None) -> StoppingRule:
        """The rule a `StopSpec` asks for: `cls(max_n=spec.max_n, **its params)`. A rule that
        needs a prior receives `prior` (or the spec's own) as `prior=`."""
        kw = spec.params_for(cls.params)
        if cls.needs_prior:
            pr = prior if prior is not None else getattr(spec, "prior", None)
            if pr is None:
                raise InputError(f"the {cls.name} rule needs a prior: give prior=, or fit it "
                                 "from the pilot with spec.rule(pilot_answers)")
            kw["prior"] = pr
        return cls(max_n=spec.max_n, **kw)


def validate_max_n(max_n: Any) -> int:
    if isinstance(max_n, bool) or not isinstance(max_n, (int, np.integer)) or max_n < 1:
        raise InputError(f"max_n must be an integer >= 1, got {max_n!r}")
    if max_n > MAX_N_LIMIT:
        raise InputError(f"max_n must be at most {MAX_N_LIMIT} (the rules' tables grow as "
                         f"max_n³), got {max_n}")
    return int(max_n)


def lookahead(stop: NDArray[np.bool_]) -> NDArray[np.int16]:
    """k[n, a, b] from a stop table S[n, A, B] (True at n = max_n): 0 where S stops, else the
    smallest j ≥ 1 such that some state reachable in j draws stops.

    One draw raises the leader's count a, the runner-up's count b, or neither (another answer,
    an invalid one); a third answer overtaking the runner-up raises b by at most one per draw.
    Allowing both to rise in one step gives a superset of the reachable states, which can only
    make k smaller, so k stays lossless: k(n, a, b) = 1 + min over (a or a + 1, b or b + 1) of
    k(n + 1, ·, ·), computed backwards from n = max_n.
    """
    M = stop.shape[0] - 1
    k = np.zeros((M + 1, M + 1, M + 1), dtype=np.int16)
    up = np.minimum(np.arange(M + 1) + 1, M)
    for n in range(M - 1, -1, -1):
        nxt = k[n + 1]
        best = np.minimum(np.minimum(nxt, nxt[up]), np.minimum(nxt[:, up], nxt[up][:, up]))
        k[n] = np.where(stop[n], 0, best + 1)
    return k

