"""The `@vote` decorator: a function that builds a prompt becomes one that returns the
ensemble's Decision on it (`Voted`, or `AsyncVoted` for an `async def` prompt builder)."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, Protocol, cast, overload

from .api import Ensemble, EnsembleKwargs, ModelT, Prompt
from .decision import AnswerT, Decision

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    from typing_extensions import Unpack

if TYPE_CHECKING:
    from .answers import AnswerKind, Choice, Math, Number, Text, ToolCall

__all__ = ["AsyncVoted", "Voted", "vote"]

P = ParamSpec("P")


class Voted(Protocol[P, AnswerT]):
    """A prompt builder decorated with `@vote`: calling it returns the ensemble's Decision."""

    @property
    def ensemble(self) -> Ensemble[AnswerT]: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Decision[AnswerT]: ...

    def adecide(self, *args: P.args, **kwargs: P.kwargs
                ) -> Coroutine[Any, Any, Decision[AnswerT]]: ...


class AsyncVoted(Protocol[P, AnswerT]):
    """An `async def` prompt builder decorated with `@vote`: awaiting it gives the Decision."""

    @property
    def ensemble(self) -> Ensemble[AnswerT]: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs
                 ) -> Coroutine[Any, Any, Decision[AnswerT]]: ...


class _VoteDecorator(Generic[AnswerT]):
    """What `vote(...)` returns: applied to a prompt builder, a function returning Decisions."""

    def __init__(self, ens: Ensemble[AnswerT]) -> None:
        self.ensemble = ens

    @overload
    def __call__(self, fn: Callable[P, Awaitable[Prompt]]) -> AsyncVoted[P, AnswerT]: ...

    @overload
    def __call__(self, fn: Callable[P, Prompt]) -> Voted[P, AnswerT]: ...

    def __call__(self, fn: Callable[P, Any]) -> AsyncVoted[P, AnswerT] | Voted[P, AnswerT]:
        ens = self.ensemble
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Decision[AnswerT]:
                return await ens.adecide(await fn(*args, **kwargs))

            async_wrapper.ensemble = ens  # type: ignore[attr-defined]
            return cast("AsyncVoted[P, AnswerT]", async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Decision[AnswerT]:
            return ens.decide(fn(*args, **kwargs))

        async def adecide(*args: P.args, **kwargs: P.kwargs) -> Decision[AnswerT]:
            return await ens.adecide(fn(*args, **kwargs))

        wrapper.adecide = adecide  # type: ignore[attr-defined]
        wrapper.ensemble = ens  # type: ignore[attr-defined]
        return cast("Voted[P, AnswerT]", wrapper)


@overload
def vote(model: str | None = None, *,
         answer: Literal["choice", "math", "text"] | Choice | Math | Text | None = None,
         tools: Sequence[dict[str, Any]], **options: Unpack[EnsembleKwargs]
         ) -> _VoteDecorator[str | ToolCall | tuple[ToolCall, ...]]: ...


@overload
def vote(model: str | None = None, *, answer: Any, tools: Sequence[dict[str, Any]],
         **options: Unpack[EnsembleKwargs]) -> _VoteDecorator[Any]: ...


@overload
def vote(model: str | None = None, *, answer: Literal["number"] | Number, tools: None = None,
         **options: Unpack[EnsembleKwargs]) -> _VoteDecorator[float]: ...


@overload
def vote(model: str | None = None, *, answer: type[ModelT], tools: None = None,
         **options: Unpack[EnsembleKwargs]) -> _VoteDecorator[ModelT]: ...


@overload
def vote(model: str | None = None, *,
         answer: Literal["choice", "math", "text"] | Choice | Math | Text | None = None,
         tools: None = None, **options: Unpack[EnsembleKwargs]) -> _VoteDecorator[str]: ...


@overload
def vote(model: str | None = None, *, answer: AnswerKind | Literal["json", "format"],
         tools: None = None, **options: Unpack[EnsembleKwargs]) -> _VoteDecorator[Any]: ...


def vote(model: str | None = None, **options: Any) -> _VoteDecorator[Any]:
    """Decorator: the function builds a prompt; calling it returns the ensemble's Decision.

        @vote("openai/gpt-4o-mini", temperature=0.5, n=5, choices=["positive", "negative"])
        def sentiment(text: str) -> str:
            return f"Is this review positive or negative? {text}"

        sentiment("Great film!").decision
        await sentiment.adecide("Great film!")      # async variant

    Takes what `Ensemble` takes (members=, calibration=, stop=, ...). An `async def` prompt
    builder gives an async function returning the Decision. Type checkers see the decorated
    function's parameters, `Decision` as its result, and its `.adecide` and `.ensemble`
    (`Voted` / `AsyncVoted`), the decision typed by `answer=` as with `Ensemble`.
    """
    return _VoteDecorator(Ensemble(model, **options))
