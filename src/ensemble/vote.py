"""The `@vote` decorator: a function that builds a prompt becomes one that returns the
ensemble's Decision on it (`Voted`, or `AsyncVoted` for an `async def` prompt builder)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, Protocol, cast, overload

from .api import Ensemble, Prompt
from .decision import Decision

__all__ = ["AsyncVoted", "Voted", "vote"]

P = ParamSpec("P")


class Voted(Protocol[P]):
    """A prompt builder decorated with `@vote`: calling it returns the ensemble's Decision."""

    @property
    def ensemble(self) -> Ensemble: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Decision: ...

    def adecide(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, Decision]: ...


class AsyncVoted(Protocol[P]):
    """An `async def` prompt builder decorated with `@vote`: awaiting it gives the Decision."""

    @property
    def ensemble(self) -> Ensemble: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, Decision]: ...


class _VoteDecorator:
    """What `vote(...)` returns: applied to a prompt builder, a function returning Decisions."""

    def __init__(self, ens: Ensemble) -> None:
        self.ensemble = ens

    @overload
    def __call__(self, fn: Callable[P, Awaitable[Prompt]]) -> AsyncVoted[P]: ...

    @overload
    def __call__(self, fn: Callable[P, Prompt]) -> Voted[P]: ...

    def __call__(self, fn: Callable[P, Any]) -> AsyncVoted[P] | Voted[P]:
        ens = self.ensemble
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Decision:
                return await ens.adecide(await fn(*args, **kwargs))

            async_wrapper.ensemble = ens  # type: ignore[attr-defined]
            return cast("AsyncVoted[P]", async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Decision:
            return ens.decide(fn(*args, **kwargs))

        async def adecide(*args: P.args, **kwargs: P.kwargs) -> Decision:
            return await ens.adecide(fn(*args, **kwargs))

        wrapper.adecide = adecide  # type: ignore[attr-defined]
        wrapper.ensemble = ens  # type: ignore[attr-defined]
        return cast("Voted[P]", wrapper)


def vote(model: str | None = None, **options: Any) -> _VoteDecorator:
    """Decorator: the function builds a prompt; calling it returns the ensemble's Decision.

        @vote("openai/gpt-4o-mini", temperature=0.5, n=5, choices=["positive", "negative"])
        def sentiment(text: str) -> str:
            return f"Is this review positive or negative? {text}"

        sentiment("Great film!").decision
        await sentiment.adecide("Great film!")      # async variant

    Takes what `Ensemble` takes (members=, calibration=, stop=, ...). An `async def` prompt
    builder gives an async function returning the Decision. Type checkers see the decorated
    function's parameters, `Decision` as its result, and its `.adecide` and `.ensemble`
    (`Voted` / `AsyncVoted`).
    """
    return _VoteDecorator(Ensemble(model, **options))
