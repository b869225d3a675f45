"""Named registries: every rule, stopping rule, task and provider is one registered object.

One convention for the four kinds. A `Registry` maps names to the objects that declare
themselves (a rule's `RuleInfo`, a stopping rule's class, a task's factory, a provider's
factory), and each kind has one registering function of one shape:

    @register_rule                           # named by the object's own `name` attribute
    @register_rule(name="mine", **declared)  # or register_rule("mine", **declared)
    register_provider("mine", factory)       # the call, for an object defined elsewhere

(`register_rule`, `register_stop_rule`, `register_task`, `register_provider`.) Every consumer
asks the registry; an unknown name is refused in one line listing the known ones.

Discovery is lazy and the same for all: a registry's built-ins are the modules it names,
imported on its first look-up (they register with the decorator), and so are its plug-ins,
the entry points of its group (`ensemble.rules`, `ensemble.stop_rules`, `ensemble.tasks`,
`ensemble.providers`), read once on that first look-up:

    # pyproject.toml of a package that adds a rule
    [project.entry-points."ensemble.rules"]
    trimmed = "mypackage.rules"          # a module whose import registers it
    coin = "mypackage.rules:CoinRule"    # or an object, registered under the entry point's name

Names. Built-ins, and what the user's own code registers (a script, a notebook, a module of a
package that is no installed plug-in), are called by their name. An installed plug-in's (a
package named by an entry point of an `ensemble.*` group) are namespaced by their package,
as inspect_ai does: `mypackage/trimmed`. A short name finds the plug-in's when nothing else
has it and exactly one plug-in does (two: one line naming both); so a plug-in may reuse a
built-in's name, and a new built-in never breaks an installed plug-in: its full name keeps
working. A registry without namespaces (providers: a model string's prefix) refuses a name
two plug-ins claim, in one line naming both.

A plug-in is isolated: one that fails to import, or claims a name a built-in owns, costs one
warning line naming its distribution and entry point (the logger `ensemble.plugins`, so an
application can route it; without logging configured Python prints the line on stderr) and is
left out; every other name works. A name it would have served is refused in one line saying why.
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import InputError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["Choices", "Names", "Registry", "entry_points_of", "own_name", "plugin_package",
           "plugin_skipped", "registration", "GROUPS"]

log = logging.getLogger("ensemble.plugins")

T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
PACKAGE = __name__.rpartition(".")[0]  # "ensemble": what is defined under it is built in


class Names(list[str]):
    """A registry's names (canonical, sorted); `in` also finds a plug-in's short name, as a
    look-up does."""

    def __init__(self, names: Iterable[str], resolve: Callable[[str], str | None]) -> None:
        super().__init__(names)
        self._resolve = resolve

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            key = self._resolve(name)
        except InputError:  # ambiguous: not one of them
            return False
        return key is not None and list.__contains__(self, key)


class Choices(Sequence[str]):
    """A command-line flag's choices from a registry, read when first asked for (a value is
    checked, or the help is printed), so building the parser loads no registry: give the
    argument a `metavar` and write `%(choices)s` in its help."""

    def __init__(self, names: Callable[[], Names]) -> None:
        self._names = names
        self._got: Names | None = None

    def _list(self) -> Names:
        if self._got is None:
            self._got = self._names()
        return self._got

    def __contains__(self, name: object) -> bool:
        return name in self._list()

    def __iter__(self) -> Iterator[str]:
        return iter(self._list())

    def __len__(self) -> int:
        return len(self._list())

    def __getitem__(self, i: Any) -> Any:
        return self._list()[i]

    def __repr__(self) -> str:
        return "Choices(...)" if self._got is None else f"Choices({list(self._got)!r})"


class Registry(Generic[T]):
    """Names of one kind (`kind`, e.g. "aggregator") -> their objects.

    builtins: the modules that register the built-ins (or a function listing them), imported
        on the first look-up. group: the entry-point group read then, once. adopt(name, obj):
        how an entry point naming an object that did not register itself is registered (the
        kind's registering function; default `add`). namespaced: an installed plug-in's names
        take its package's namespace (False for providers' prefixes).
    """

    def __init__(self, kind: str, group: str, *,
                 builtins: Sequence[str] | Callable[[], Iterable[str]] = (),
                 adopt: Callable[[str, Any], Any] | None = None,
                 namespaced: bool = True) -> None:
        self.kind = kind
        self.group = group
        self.namespaced = namespaced
        self._builtins = builtins
        self._adopt_fn = adopt
        self._items: dict[str, T] = {}
        self._modules: dict[str, str] = {}  # key -> the module that defines its object
        self._owners: dict[str, str] = {}  # key -> the plug-in that registered it
        self._claims: dict[str, list[str]] = {}  # key -> the plug-ins that each claimed it
        self._lock = threading.RLock()
        self._builtins_loaded = False
        self._loaded = False
        self._loading = False
        self._plugin: EntryPoint | None = None  # the entry point being loaded
        # entry point name -> why its plug-in was left out (the warning it cost)
        self.skipped: dict[str, str] = {}

    # -- registering -----------------------------------------------------------------------
    def key(self, name: str, module: str | None) -> str:
        """What `name`, registered by code in `module`, is known by: `package/name` for an
        installed plug-in's package (namespaced registries), else `name`."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise InputError(f"a {self.kind} {'name' if self.namespaced else 'prefix'} is a "
                             f"word such as 'mine' (letters, digits, '_', '.', '-'), got "
                             f"{name!r}")
        ns = plugin_package(module or "", self.group) if self.namespaced else None
        return f"{ns}/{name}" if ns else name

    def add(self, name: str, obj: T, *, replace: bool = False,
            module: str | None = None) -> str:
        """Register `obj` as `name` and return the key it is known by (`key`). A key already
        taken by another object needs `replace=True`; a built-in's is never taken by an
        object from outside the package unless its code asks with `replace=True` (a plug-in
        being loaded never can), and the built-ins are imported first, so the order of
        imports cannot decide. `module`: where the object is defined (default its
        `__module__`): whether it is built in, and its namespace."""
        where = module or getattr(obj, "__module__", None) or ""
        key = self.key(name, where)
        if not _builtin(where):  # (a built-in registering is one of them, being imported)
            self.load_builtins()
        with self._lock:
            old = self._items.get(key)
            if old is not None and old is not obj and old != obj and not _same(old, obj):
                mine = self._modules[key]
                if _builtin(mine) and not _builtin(where) and (self._plugin is not None
                                                               or not replace):
                    raise InputError(f"{key!r} is the name of a built-in {self.kind}; "
                                     "register yours under another name")
                if self._plugin is not None:
                    first = self._owners.get(key, mine)
                    raise _Clash(key, first, f"the {self.kind} {key!r} is also claimed by "
                                 f"{first}")
                if not replace:
                    raise InputError(f"the {self.kind} {key!r} is already registered; pass "
                                     "replace=True to register another under that name")
            self._items[key] = obj
            self._modules[key] = where
            if self._plugin is not None:
                self._owners[key] = f"{self._plugin.value} ({_who(self._plugin)})"
        return key

    def remove(self, name: str) -> None:
        """Forget `name` (tests, or a plug-in withdrawing one)."""
        with self._lock:
            self._items.pop(name, None)
            self._modules.pop(name, None)
            self._owners.pop(name, None)

    def is_builtin(self, name: str) -> bool:
        """Whether `name` (a key) is registered by this package itself."""
        with self._lock:
            return name in self._modules and _builtin(self._modules[name])

    # -- loading ---------------------------------------------------------------------------
    def load_builtins(self) -> None:
        """Import the modules that register the built-ins, once. They are named, as entry
        points are: the modules that register into a registry import it, never the other
        way round."""
        with self._lock:
            if self._builtins_loaded:
                return
            self._builtins_loaded = True
            modules = self._builtins() if callable(self._builtins) else self._builtins
            for module in modules:
                importlib.import_module(module)

    def load(self) -> None:
        """The built-ins, then the entry points of the group, once."""
        with self._lock:
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                self.load_builtins()
                for ep in entry_points_of(self.group):
                    self._load_plugin(ep)
                self._loaded = True
            finally:
                self._loading = False

    def _load_plugin(self, ep: EntryPoint) -> None:
        """One entry point, isolated: what fails costs one warning line and is rolled back."""
        before = set(self._items)
        self._plugin = ep
        try:
            obj = ep.load()
            if ":" in ep.value:  # an object: registered under the entry point's name
                where = getattr(obj, "__module__", None)
                key = self.key(ep.name, where)
                if not (key in self._items and self._modules[key] == where):
                    (self._adopt_fn or self.add)(ep.name, obj)
        except Exception as exc:  # a plug-in's failure is its own: one line, then go on
            for key in set(self._items) - before:  # what it registered before failing
                if not self.is_builtin(key):
                    self.remove(key)
            if isinstance(exc, _Clash):  # two plug-ins, one name: neither serves it
                self._claims[exc.key] = [exc.first, f"{ep.value} ({_who(ep)})"]
                self.remove(exc.key)
            self.skipped[ep.name] = plugin_skipped(ep, self.group, exc)
        finally:
            self._plugin = None

    # -- looking up ------------------------------------------------------------------------
    def resolve(self, name: str) -> str | None:
        """The key `name` is known by (itself, or the one plug-in's `package/name` for a short
        name nothing else has), None when unknown; ambiguous or claimed twice: one line."""
        self.load()
        with self._lock:
            if name in self._claims:
                raise InputError(f"the {self.kind} {name!r} is claimed by two plug-ins, "
                                 f"{' and '.join(self._claims[name])}: uninstall one")
            if name in self._items:
                return name
            if not isinstance(name, str) or "/" in name:
                return None
            hits = sorted(k for k in self._items if k.rpartition("/")[2] == name)
        if len(hits) > 1:
            raise InputError(f"the {self.kind} {name!r} is ambiguous: {' or '.join(hits)}; "
                             "give the full name")
        return hits[0] if hits else None

    def canonical(self, name: str) -> str:
        """The key of `name`; unknown: one line listing the known names."""
        key = self.resolve(name)
        if key is None:
            why = self.skipped.get(name.rpartition("/")[2]) if isinstance(name, str) else None
            raise InputError(f"unknown {self.kind} {name!r}; choose from "
                             f"{', '.join(self.names())}"
                             + (f" (a plug-in named {name!r} was left out: {why})" if why
                                else ""))
        return key

    def get(self, name: str) -> T:
        """The object registered as `name` (see `resolve`); unknown: one line listing the
        known names."""
        key = self.canonical(name)
        with self._lock:
            return self._items[key]

    def names(self) -> Names:
        """The registered names (keys), sorted."""
        self.load()
        with self._lock:
            return Names(sorted(self._items), self.resolve)

    def items(self) -> list[tuple[str, T]]:
        self.load()
        with self._lock:
            return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return self.resolve(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


class _Clash(InputError):
    """A name a plug-in claims that another plug-in already has (registries without
    namespaces): neither serves it."""

    def __init__(self, key: str, first: str, message: str) -> None:
        super().__init__(message)
        self.key, self.first = key, first


def registration(args: tuple[Any, ...], name: str | None, add: Callable[[Any, str | None], Any],
                 *, what: str) -> Any:
    """The one shape of every registering function (`add(obj, name)` registers obj, named
    `name` or, when None, by its own `name` attribute, and returns it):

        @register_x                        named by the object's own `name`
        @register_x("mine") / @register_x(name="mine")
        register_x("mine", obj) / register_x(obj)
    """
    if args and isinstance(args[0], str):
        if name is not None and name != args[0]:
            raise InputError(f"{what}: two names, {args[0]!r} and name={name!r}")
        name, args = args[0], args[1:]
    if len(args) > 1:
        raise InputError(f"{what} takes a name and the object to register, got "
                         f"{len(args) + (name is not None)} arguments")
    if args:
        return add(args[0], name)
    return lambda obj: add(obj, name)


def own_name(obj: Any, name: str | None, *, what: str) -> str:
    """`name`, else the object's own `name` attribute (one line when it has none)."""
    key = name if name is not None else getattr(obj, "name", None)
    if not isinstance(key, str) or not key:
        raise InputError(f"{what}: {obj!r} has no name (give it a `name` attribute, or "
                         f"{what}(\"name\", ...))")
    return key


def _same(a: object, b: object) -> bool:
    """The same definition registered twice (a module imported under two names, a class
    re-created on reload): same qualified name in the same module."""
    def where(x: object) -> tuple[Any, ...]:
        code = getattr(x, "__code__", None)  # two lambdas of one function differ by line
        return (getattr(x, "__module__", None), getattr(x, "__qualname__", None),
                getattr(code, "co_firstlineno", None))

    return getattr(a, "__qualname__", None) is not None and where(a) == where(b)


def _builtin(module: str) -> bool:
    return module == PACKAGE or module.startswith(f"{PACKAGE}.")


# -- entry points ----------------------------------------------------------------------------
# the entry-point groups of plug-ins: the four registries' and the command line's
GROUPS = ("ensemble.rules", "ensemble.stop_rules", "ensemble.tasks", "ensemble.providers",
          "ensemble.commands")


@functools.lru_cache(maxsize=64)
def _entry_points(group: str, path: tuple[str, ...]) -> tuple[EntryPoint, ...]:
    from importlib.metadata import entry_points

    return tuple(entry_points(group=group))


def entry_points_of(group: str) -> tuple[EntryPoint, ...]:
    """The installed entry points of `group`, read once per sys.path."""
    return _entry_points(group, tuple(sys.path))


def plugin_package(module: str, *groups: str) -> str | None:
    """The installed plug-in package `module` belongs to (the top-level package an entry
    point of one of the `GROUPS`, or of `groups`, names), else None: built-ins and the
    user's own code."""
    top = module.partition(".")[0]
    if not top or top == PACKAGE:
        return None
    packages = {ep.value.partition(":")[0].partition(".")[0].strip()
                for group in {*GROUPS, *groups} for ep in entry_points_of(group)}
    return top if top in packages else None


def _who(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "a distribution"


def plugin_skipped(ep: EntryPoint, group: str, exc: BaseException) -> str:
    """Warn, in one line on the logger `ensemble.plugins`, that the plug-in behind entry point
    `ep` of `group` is left out because of `exc`; return the reason."""
    why = " ".join(str(exc).split()) or type(exc).__name__
    who = _who(ep)
    log.warning("ensemble: warning: skipped the plug-in of %s (entry point %s: %s = %s): %s; "
                "fix or uninstall it", who, group, ep.name, ep.value, why)
    return f"{why} ({who})"
