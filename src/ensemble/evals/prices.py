"""What a member's samples cost, for the rules that weigh dollars (the cost rule): the
member's price (its `price_per_1k`, or the provider's price table), checked before a run that
needs it draws anything, and the dollars of samples stored before a price was given, from
their tokens at the member's price."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ensemble.errors import InputError

__all__ = ["Price", "check_priced", "price_of"]

Price = Callable[[int, int], "float | None"]  # (prompt, completion tokens) -> USD


def price_of(model: str, options: Any) -> Price | None:
    """The member's price, as its provider prices a reply (None: unknown). Nothing is sent:
    the provider is made, asked and dropped, never started."""
    from ensemble.providers.registry import provider_for

    provider = provider_for(model, options)
    pin, pout = provider.price(1_000_000, 0), provider.price(0, 1_000_000)
    if pin is None or pout is None:
        return None
    return provider.price


def check_priced(members: Sequence[Any], *, why: str) -> None:
    """Refuse, before any request, members whose price is unknown (`members`: a run's
    `PlanMember`s; `why`: what needs the price)."""
    for m in members:
        if price_of(m.model, m.options) is None:
            raise InputError(f"{why} weighs each member's dollars, and the price of member "
                             f"{m.label or m.model} ({m.model}) is unknown: give it "
                             "\"price_per_1k\": [IN, OUT] (USD per 1k prompt and completion "
                             "tokens) in the spec, or use a model litellm's price table knows")
