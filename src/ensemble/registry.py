"""Named registries: every rule, stopping rule, task and provider is one registered object.

A `Registry` maps names to the objects that declare themselves (an aggregation rule's
`RuleInfo`, a stopping rule's class, a task's factory, a provider's factory). Built-ins
register when their module is imported; user code registers with the kind's decorator
(`register_rule`, `register_stop_rule`, `register_task`, `register_provider`) or, without an
import, through the kind's entry-point group, loaded lazily, once, on the first look-up:

    # pyproject.toml of a package that adds a rule
    [project.entry-points."ensemble.rules"]
    trimmed = "mypackage.rules"        # a module whose import registers it (the decorator)

An entry point may also name the object itself (`"mypackage.rules:trimmed"`): one that is not
registered yet is registered under the entry point's name. A broken entry point is refused in
one line naming it. Every consumer asks the registry; an unknown name is refused in one line
listing the known ones (`InputError`).
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from .errors import InputError

__all__ = ["Registry"]

T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class Registry(Generic[T]):
    """Names of one kind (`kind`, e.g. "aggregator") -> their objects, with the entry-point
    group `group` read on the first look-up."""

    def __init__(self, kind: str, group: str, *, builtins: Sequence[str] = (),
                 discover: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self.group = group
        self._builtins = tuple(builtins)
        self._discover = discover
        self._items: dict[str, T] = {}
        self._lock = threading.RLock()
        self._loaded = False
        self._loading = False

    def add(self, name: str, obj: T, *, replace: bool = False) -> T:
        """Register `obj` as `name`; a name already taken by another object needs
        `replace=True`."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(f"a {self.kind} name is a word such as 'mine' (letters, digits, "
                             f"'_', '.', '-'), got {name!r}")
        with self._lock:
            old = self._items.get(name)
            if (old is not None and old is not obj and old != obj and not replace
                    and not _same(old, obj)):
                raise InputError(f"the {self.kind} {name!r} is already registered; pass "
                                 "replace=True to register another under that name")
            self._items[name] = obj
        return obj

    def remove(self, name: str) -> None:
        """Forget `name` (tests, or a plug-in withdrawing one)."""
        with self._lock:
            self._items.pop(name, None)

    def load(self) -> None:
        """Import the built-ins (the modules named by `builtins`, then `discover`) and the
        entry points of the group, once. Built-ins are imported by name, as the entry points
        are: the modules that register into a registry import it, never the other way round."""
        with self._lock:
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                for module in self._builtins:
                    importlib.import_module(module)
                if self._discover is not None:
                    self._discover()
                self._load_entry_points()
                self._loaded = True
            finally:
                self._loading = False

    def _load_entry_points(self) -> None:
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group):
            try:
                obj = ep.load()
            except Exception as exc:  # a plug-in's import error, named in one line
                raise InputError(f"the {self.kind} plug-in {ep.name} = {ep.value} (entry point "
                                 f"group {self.group}) failed to load: {exc}") from None
            if ":" in ep.value and ep.name not in self._items:
                self.add(ep.name, obj)

    def get(self, name: str) -> T:
        """The object registered as `name`; unknown: one line listing the known names."""
        self.load()
        with self._lock:
            obj = self._items.get(name)
        if obj is None:
            raise InputError(f"unknown {self.kind} {name!r}; choose from "
                             f"{', '.join(self.names())}")
        return obj

    def names(self) -> list[str]:
        """The registered names, sorted."""
        self.load()
        with self._lock:
            return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        self.load()
        with self._lock:
            return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        self.load()
        with self._lock:
            return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def _same(a: object, b: object) -> bool:
    """The same definition registered twice (a module imported under two names, a class
    re-created on reload): same qualified name in the same module."""
    qa = (getattr(a, "__module__", None), getattr(a, "__qualname__", None))
    return qa[1] is not None and qa == (getattr(b, "__module__", None),
                                        getattr(b, "__qualname__", None))
