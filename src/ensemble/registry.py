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
registered yet is registered under the entry point's name. Every consumer asks the registry; an
unknown name is refused in one line listing the known ones (`InputError`).

A plug-in is isolated: one that fails to import, or claims a name a built-in owns, costs one
warning line naming its distribution and entry point (the logger `ensemble.plugins`, so an
application can route it; without logging configured Python prints the line on stderr) and is
left out; every other name works. A name it would have served is refused in one line saying why.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from .errors import InputError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["Registry", "plugin_skipped"]

log = logging.getLogger("ensemble.plugins")

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
        self._builtins_loaded = False
        self._loaded = False
        self._loading = False
        self._modules: dict[str, str] = {}  # name -> the module that defines its object
        self._plugin: EntryPoint | None = None  # the entry point being loaded
        # entry point name -> why its plug-in was left out (the warning it cost)
        self.skipped: dict[str, str] = {}

    def add(self, name: str, obj: T, *, replace: bool = False, module: str | None = None) -> T:
        """Register `obj` as `name`; a name already taken by another object needs
        `replace=True`, and a built-in's name is never taken by an object from outside the
        package (the built-ins are imported first, so the order of imports cannot decide).
        `module`: where the object is defined (default its `__module__`), which says whether
        it is a built-in; a plug-in being loaded from its entry point never replaces one."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(f"a {self.kind} name is a word such as 'mine' (letters, digits, "
                             f"'_', '.', '-'), got {name!r}")
        self.load_builtins()
        with self._lock:
            old = self._items.get(name)
            where = module or getattr(obj, "__module__", None) or ""
            if old is not None and old is not obj and old != obj and not _same(old, obj):
                if (_builtin(self._modules[name]) and not _builtin(where)
                        and (self._plugin is not None or not replace)):
                    raise InputError(f"{name!r} is the name of a built-in {self.kind}; "
                                     "register yours under another name")
                if not replace:
                    raise InputError(f"the {self.kind} {name!r} is already registered; pass "
                                     "replace=True to register another under that name")
            self._items[name] = obj
            self._modules[name] = where
        return obj

    def is_builtin(self, name: str) -> bool:
        """Whether `name` is registered by this package itself."""
        with self._lock:
            return name in self._modules and _builtin(self._modules[name])

    def remove(self, name: str) -> None:
        """Forget `name` (tests, or a plug-in withdrawing one)."""
        with self._lock:
            self._items.pop(name, None)
            self._modules.pop(name, None)

    def load_builtins(self) -> None:
        """Import the built-ins (the modules named by `builtins`, then `discover`), once.
        Built-ins are imported by name, as the entry points are: the modules that register
        into a registry import it, never the other way round."""
        with self._lock:
            if self._builtins_loaded:
                return
            self._builtins_loaded = True
            for module in self._builtins:
                importlib.import_module(module)
            if self._discover is not None:
                self._discover()

    def load(self) -> None:
        """The built-ins, then the entry points of the group, once."""
        with self._lock:
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                self.load_builtins()
                self._load_entry_points()
                self._loaded = True
            finally:
                self._loading = False

    def _load_entry_points(self) -> None:
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group):
            before = set(self._items)
            self._plugin = ep
            try:
                obj = ep.load()
                if ":" in ep.value:  # an object, registered under the entry point's name
                    self._adopt(ep.name, obj, before)
            except Exception as exc:  # a plug-in's failure is its own: one line, then go on
                for name in set(self._items) - before:  # what it registered before failing
                    if not self.is_builtin(name):
                        self.remove(name)
                self.skipped[ep.name] = plugin_skipped(ep, self.group, exc)
            finally:
                self._plugin = None

    def _adopt(self, name: str, obj: T, before: set[str]) -> None:
        """An entry point's object: registered as `name` unless its own import did so."""
        with self._lock:
            if name in before and self._modules[name] != getattr(obj, "__module__", None):
                if self.is_builtin(name):
                    raise InputError(f"{name!r} is the name of a built-in {self.kind}")
                raise InputError(f"the {self.kind} {name!r} is already registered by "
                                 f"{self._modules[name]}")
            if name not in self._items:
                self.add(name, obj)

    def get(self, name: str) -> T:
        """The object registered as `name`; unknown: one line listing the known names."""
        self.load()
        with self._lock:
            obj = self._items.get(name)
        if obj is None:
            why = self.skipped.get(name)
            raise InputError(f"unknown {self.kind} {name!r}; choose from "
                             f"{', '.join(self.names())}"
                             + (f" (a plug-in named {name!r} was left out: {why})" if why
                                else ""))
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


def _builtin(module: str) -> bool:
    return module == "ensemble" or module.startswith("ensemble.")


def plugin_skipped(ep: EntryPoint, group: str, exc: BaseException) -> str:
    """Warn, in one line on the logger `ensemble.plugins`, that the plug-in behind entry point
    `ep` of `group` is left out because of `exc`; return the reason."""
    why = " ".join(str(exc).split()) or type(exc).__name__
    dist = getattr(ep, "dist", None)
    who = (f"{dist.name} {dist.version}" if dist is not None else "a distribution")
    log.warning("ensemble: warning: skipped the plug-in of %s (entry point %s: %s = %s): %s; "
                "fix or uninstall it", who, group, ep.name, ep.value, why)
    return f"{why} ({who})"
