"""Lazy re-exports (PEP 562) for the packages that gather public names from their modules
(`ensemble`, `ensemble.providers`, `ensemble.theory`): a name's module is imported on its first
use, so importing the package imports none of them (`import ensemble` never imports litellm,
numpy or asyncio's machinery by itself)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str], namespace: MutableMapping[str, Any]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module `__getattr__` and `__dir__` of `package`, whose public names are `exports`
    (name -> its module, relative to the package) and whose globals are `namespace`: a name is
    imported once, then kept in the namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
