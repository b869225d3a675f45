"""The stopping rules by name: each is a `StoppingRule` subclass registered with
`@register_stop_rule`, declaring its `name`, a one-line `about`, the `params` it takes from a
`StopSpec` and whether it fits a prior from a pilot (`needs_prior`). A rule that chooses among
an ensemble's members instead (the cost rule) is registered by its spec class, declaring
`over_members = True` and `default_spec()`, the spec `Ensemble(stop=name)` runs.

    from ensemble.stopping import StoppingRule, register_stop_rule, lookahead

    @register_stop_rule
    class Unanimous(StoppingRule):
        name = "unanimous"
        about = "stop once the first `agree` answers agree"
        params = ("agree",)

        def __init__(self, *, max_n: int, agree: int = 3) -> None:
            ...

Plug-ins register through the entry-point group `ensemble.stop_rules` (read on the first
look-up, like the built-in modules; an installed plug-in's rule is named `package/name`,
`ensemble.registry`). The Python API (`Ensemble(stop=...)`, `StopSpec`), `ensemble eval --adaptive`,
`ensemble serve --stop` and the evals' spec files all ask this registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..registry import Names, Registry, own_name, registration

if TYPE_CHECKING:
    from .table import StoppingRule

__all__ = ["get_stopping_rule", "is_over_members", "register_stop_rule", "stop_rule_names",
           "stop_rules"]

R = TypeVar("R", bound=type)


# the built-in rules register when their modules are imported (on the first look-up)
stop_rules: Registry[type[Any]] = Registry(
    "stopping rule", "ensemble.stop_rules",
    builtins=("ensemble.stopping.rules", "ensemble.stopping.bayes", "ensemble.stopping.tokens",
              "ensemble.stopping.soft", "ensemble.cost.spec"),
    adopt=lambda name, obj: register_stop_rule(name, obj))


@overload
def register_stop_rule(cls: R, /) -> R: ...
@overload
def register_stop_rule(name: str, cls: R, /, *, replace: bool = ...) -> R: ...
@overload
def register_stop_rule(name: str | None = None, /, *,
                       replace: bool = ...) -> Callable[[R], R]: ...
def register_stop_rule(*args: Any, name: str | None = None, replace: bool = False) -> Any:
    """Register a stopping rule: a `StoppingRule` subclass (or a plan class of the stop-rule
    interface, `ensemble.stopping.plan`, declaring `default_plan(max_n=..., **options)`, e.g.
    the cost rule's spec), known by its `name` attribute or the name given. The one shape of
    every registering function (`ensemble.registry`): `@register_stop_rule`,
    `@register_stop_rule("mine")` or `register_stop_rule("mine", cls)`. An installed
    plug-in's rule is named `package/name`."""
    from ..errors import InputError
    from .table import StoppingRule

    def add(cls: Any, given: str | None) -> Any:
        if not (isinstance(cls, type) and (issubclass(cls, StoppingRule)
                                           or callable(getattr(cls, "default_plan", None)))):
            raise InputError(f"register_stop_rule takes a StoppingRule subclass or a plan "
                             f"class with default_plan, got {cls!r}")
        stop_rules.add(own_name(cls, given, what="register_stop_rule"), cls, replace=replace)
        return cls

    return registration(args, name, add, what="register_stop_rule")


def stop_rule_names(*, over_members: bool | None = None) -> Names:
    """Every registered stopping rule's name (only the rules over members, or only the others,
    with `over_members`; `in` finds a plug-in's rule by its short name too)."""
    return Names([n for n, cls in stop_rules.items()
                  if over_members is None
                  or bool(getattr(cls, "over_members", False)) == over_members],
                 stop_rules.resolve)


def is_over_members(name: str) -> bool:
    """Whether the registered rule `name` chooses among an ensemble's members (the cost rule)
    rather than deciding per question when to stop (unknown: one line listing the rules)."""
    return bool(getattr(stop_rules.get(name), "over_members", False))


def get_stopping_rule(name: str, *, max_n: int, **options: Any) -> StoppingRule:
    """Build a rule by name with its options, e.g. beta with threshold=0.9, bayes with
    prior=..., cost=... or target_loss=..., pilot=...."""
    return stop_rules.get(name)(max_n=max_n, **options)
