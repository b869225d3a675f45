"""The provider registry: which provider serves a model string.

    from ensemble.providers import register_provider

    def make_mine(model: str, options: ProviderOptions) -> Provider:
        from mypackage.provider import MyProvider   # imported only when a model asks for it
        return MyProvider(model, options)

    register_provider("mine", make_mine)            # serves "mine/<name>" and "mine:<name>"

A model string is served by the factory registered for its prefix (the part before the first
"/" or ":", or the whole string), else by the default, litellm (every provider litellm knows,
and any OpenAI-compatible `api_base`). Built in: `local` (the embedded llama.cpp model),
`openai` (the official openai SDK; `ENSEMBLE_PROVIDER=litellm` sends it to litellm) and
`replay` (samples recorded in a file, `providers.replay`).
Each factory imports its provider module only when called, so this module imports nothing
concrete and no import cycle can form through it; provider modules never import it back.
Plug-ins register through the entry-point group `ensemble.providers` too (loaded on the first
look-up): an entry point naming a factory (`mine = "mypackage.provider:make_mine"`) serves
its name as a prefix. A provider declares what it can do in `Capabilities`, its Batch API
included (`capabilities.batch_api`), which `ensemble batches` uses to list and cancel a run's
batches at the provider that made them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from ..errors import InputError
from ..registry import Registry

if TYPE_CHECKING:
    from .base import Provider
    from .options import ProviderOptions

__all__ = ["ProviderFactory", "provider_for", "register_provider", "registered_providers"]

ProviderFactory = Callable[[str, "ProviderOptions"], "Provider"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _litellm(model: str, options: ProviderOptions) -> Provider:
    from .litellm import LiteLLMProvider

    return LiteLLMProvider(model, options)


def _local(model: str, options: ProviderOptions) -> Provider:
    from .local import LocalProvider

    return LocalProvider(model, options)


def _openai(model: str, options: ProviderOptions) -> Provider:
    """`openai/...` through the official SDK (the fast path), unless ENSEMBLE_PROVIDER=litellm
    asks for litellm."""
    from .openai import OpenAIProvider, serves

    if serves(model):
        return OpenAIProvider(model, options)
    return _litellm(model, options)


def _replay(model: str, options: ProviderOptions) -> Provider:
    """`replay/<path>`: the samples recorded in a run folder or a JSONL recording."""
    from .replay import ReplayProvider

    return ReplayProvider(model, options)


_factories: Registry[ProviderFactory] = Registry("provider", "ensemble.providers")
_factories.add("local", _local)
_factories.add("openai", _openai)
_factories.add("replay", _replay)
_default: ProviderFactory = _litellm


@overload
def register_provider(prefix: str, factory: ProviderFactory, *,
                      replace: bool = False) -> ProviderFactory: ...
@overload
def register_provider(prefix: str, factory: None = None, *,
                      replace: bool = False) -> Callable[[ProviderFactory], ProviderFactory]: ...
def register_provider(prefix: str, factory: ProviderFactory | None = None, *,
                      replace: bool = False) -> Any:
    """Serve model strings `prefix`, `prefix/...` and `prefix:...` with `factory(model,
    options)`. A prefix already registered needs `replace=True`. Without `factory`, a
    decorator: `@register_provider("mine")` over the factory."""
    if factory is None:
        return lambda f: register_provider(prefix, f, replace=replace)
    if not isinstance(prefix, str) or not _NAME.match(prefix):
        raise InputError(f"a provider prefix is a name such as 'mine' (letters, digits, '_', "
                         f"'.', '-'), got {prefix!r}")
    if not callable(factory):
        raise InputError(f"the factory for {prefix!r} must be callable, got "
                         f"{type(factory).__name__}")
    if prefix in _factories and not replace and _factories.get(prefix) is not factory:
        raise InputError(f"the provider prefix {prefix!r} is already registered; pass "
                         "replace=True to serve it with another factory")
    return _factories.add(prefix, factory, replace=True)


def registered_providers() -> list[str]:
    """The registered prefixes (litellm serves every other model string)."""
    return _factories.names()


def _prefix(model: str) -> str:
    m = re.match(r"^([^/:]+)[/:]", model)
    return m.group(1) if m else model


def provider_for(model: str, options: ProviderOptions) -> Provider:
    """The provider for a model string (see the module docstring)."""
    prefix = _prefix(model)
    factory = _factories.get(prefix) if prefix in _factories else _default
    return factory(model, options)
