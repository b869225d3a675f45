"""The stop-rule interface: what a run asks for (a plan) and what decides each question (a policy).

Every stopping rule, the per-question ones (`fixed`, `beta`, `bayes`, a plug-in `StoppingRule`)
and the cost rule over members, is used the same way by whoever draws (the Python API's one draw
loop, `ensemble.drawing`; the evals' replays):

1. **The plan** (`StopPlan`: `StopSpec` for the per-question rules, `CostSpec` for the cost rule)
   is what a run asks for. A registered rule's class gives the plan a name stands for
   (`default_plan(max_n=...)`: `Ensemble(stop=NAME)`). For one call it says
   - `budgets(ns)`: each member's most samples per question (one model: the rule's `max_n`;
     members: the rule over the pooled votes and the cost rule give each member its own n);
   - `pilot_draw(i, budgets, memory)`: the samples question i of the call draws from each
     member before the policy is fitted (fixed n: all of them; bayes: its pilot of 2 pooled votes;
     beta: its first lossless batch; the cost rule: every member's pilot on its first
     `pilot_questions` questions, none after);
   - `fit(pilots, memory, context)`: the policy, from the call's pilots (`Drawn`) and what
     `memory` kept of earlier calls (a prior fitted on them, member prices);
   - `remember(memory, pilot, drawn)`: what the memory keeps of each decided question;
   - optionally `requests` (`ensemble.rules.Requests`): what its rule reads from each sample
     beyond the hard answer (the answer-token logprobs of soft evidence), which whoever draws
     asks the provider for (none declared: the hard answer).
2. **The policy** (`StopPolicy`: every `StoppingRule`, `CostRule`) answers `next(drawn)`: how
   many samples to draw next from each member, all zeros meaning stop and decide. It is read
   after every batch that arrives; its answer never asks a member past its budget. It may
   say which prior it decides with (`prior_used`), and a policy that `decides` (the cost rule)
   chooses the answer too (`choose`: the Decision is then the rule's, not a count of votes).

What a policy reads is a `Drawn`: per member, each sample's answer key, weight and shares (soft
evidence), tokens and dollars (`ensemble.stopping.drawn`). So rules on soft votes (issue 37)
and rules that count tokens or dollars (issue 40.3) plug into the same loop: they read the
fields they need, and the loop, the Decision and the evals stay as they are.

`StopMemory` is what an Ensemble keeps between calls for its plan: each plan its own part,
under its name (the bayes rule's pilots, the cost rule's counts, prices and last rule).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ..errors import InputError
from ..rules import HARD
from .drawn import Drawn, Prefixes

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from .priors import PriorUsed

__all__ = ["HISTORY_MAX", "FitContext", "PrefixPolicy", "StopMemory", "StopPlan", "StopPolicy",
           "check_next", "fixed_plan"]

#: The most recent decisions a memory keeps (a long-lived Ensemble, `ensemble serve`, neither
#: grows nor slows without bound).
HISTORY_MAX = 20_000

T = TypeVar("T")


@runtime_checkable
class StopPolicy(Protocol):
    """A fitted stopping rule: after each batch of a question's samples, what to draw next."""

    def next(self, drawn: Drawn) -> tuple[int, ...]:
        """Samples to draw next from each member (all 0: stop and decide)."""
        ...


@runtime_checkable
class PrefixPolicy(Protocol):
    """A policy that can also say, at once, where it stops along many questions' orders of
    samples (one member): what a replay of stored samples asks (`ensemble.evals.adaptive`),
    instead of a `next` call per question, order and step. `stops_along(prefixes)[..., m]` is
    True where `next` would ask for nothing more after the first m samples (and at the
    budget); it must agree with `next` step for step, batches aside (`next` may ask for
    several samples at once only where it cannot stop in between). A rule declares it by
    having it (bayes-soft: its tallies read from arrays); the others replay through `next`.
    """

    def next(self, drawn: Drawn) -> tuple[int, ...]: ...

    def stops_along(self, prefixes: Prefixes) -> NDArray[np.bool_]: ...


@dataclass(frozen=True)
class FitContext:
    """What a plan may need to know of the ensemble to fit its policy: each member's budget
    (`StopPlan.budgets`), its λ (ψ_λ units; None unknown) and whether the answers are two
    fixed choices (a lone answer seen can give way to the other: the cost rule's
    `two_choices`), and `vote_price[g]`: the dollars of one vote of member g on this call's
    prompts given its completion tokens (its prompt tokens counted when asked, its price the
    provider's; None, or a call returning None: its price unknown), which prices a member's
    vote before its first sample (the cost rule with a pilot of 0 votes for it)."""

    budgets: tuple[int, ...]
    lams: tuple[float | None, ...]
    two_choices: bool = False
    vote_price: tuple[Callable[[float], float | None] | None, ...] = ()


@runtime_checkable
class StopPlan(Protocol):
    """What a run asks of a stopping rule (see the module docstring)."""

    @property
    def stop(self) -> str:
        """The rule's name (what a Decision and a run report)."""
        ...

    def budgets(self, ns: Sequence[int]) -> tuple[int, ...]: ...

    def pilot_draw(self, i: int, budgets: Sequence[int], memory: StopMemory) -> tuple[int, ...]: ...

    def fit(self, pilots: Sequence[Drawn | None], memory: StopMemory,
            context: FitContext) -> StopPolicy: ...

    def remember(self, memory: StopMemory, pilot: Drawn, drawn: Drawn) -> None: ...


class StopMemory:
    """What an Ensemble keeps between calls for its stopping rule: each plan its own part under
    its name (`part(name, factory)`), e.g. the bayes rule's pilots (its prior is fitted on them
    too) or the cost rule's counts, prices and last rule."""

    def __init__(self) -> None:
        self._parts: dict[str, Any] = {}

    def part(self, name: str, factory: Callable[[], T]) -> T:
        """The part kept under `name`, made by `factory()` on first use."""
        if name not in self._parts:
            self._parts[name] = factory()
        return self._parts[name]

    def get(self, name: str) -> Any:
        """The part kept under `name`, or None."""
        return self._parts.get(name)


class _Fixed:
    """Every member's whole budget at once, then stop: fixed n (no `stop=`)."""

    stop = "fixed"
    requests = HARD
    at_once = True  # the pilot is the whole draw: the draw loop reads no sample of it
    prior_used: PriorUsed | None = None

    def budgets(self, ns: Sequence[int]) -> tuple[int, ...]:
        return tuple(int(n) for n in ns)

    def pilot_draw(self, i: int, budgets: Sequence[int], memory: StopMemory) -> tuple[int, ...]:
        return tuple(budgets)

    def fit(self, pilots: Sequence[Drawn | None], memory: StopMemory,
            context: FitContext) -> StopPolicy:
        return self

    def remember(self, memory: StopMemory, pilot: Drawn, drawn: Drawn) -> None:
        return None

    def next(self, drawn: Drawn) -> tuple[int, ...]:
        return drawn.left()


def fixed_plan() -> StopPlan:
    """The plan of fixed n: every member's n at once (what an Ensemble without `stop=` draws)."""
    return _Fixed()


def check_next(ask: Sequence[int], drawn: Drawn, rule: str) -> tuple[int, ...]:
    """A policy's answer, checked: one count >= 0 per member, none past its budget."""
    out = tuple(int(k) for k in ask)
    left = drawn.left()
    if len(out) != len(left) or any(k < 0 or k > m for k, m in zip(out, left, strict=True)):
        raise InputError(f"the {rule} rule asked for {list(out)} more samples with "
                         f"{list(left)} left per member: a stopping rule never asks a member "
                         "past its budget")
    return out
