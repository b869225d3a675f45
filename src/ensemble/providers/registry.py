"""The provider registry: which provider serves a model string.

    from ensemble.providers import register_provider

    @register_provider("mine")                      # serves "mine/<name>" and "mine:<name>"
    def make_mine(model: str, options: ProviderOptions) -> Provider:
        from mypackage.provider import MyProvider   # imported only when a model asks for it
        return MyProvider(model, options)

(or `register_provider("mine", make_mine)`; a provider class with a `name` attribute may be
registered bare, `@register_provider`: the one shape of every registering function,
`ensemble.registry`.) A model string is served by the factory registered for its prefix (the
part before the first "/" or ":", or the whole string), else by the default, litellm (every
provider litellm knows, and any OpenAI-compatible `api_base`). Built in
(`ensemble.providers.builtin`, imported on the first look-up): `local` (the embedded
llama.cpp model), `openai` (the official openai SDK; `ENSEMBLE_PROVIDER=litellm` sends it to
litellm), `replay` (samples recorded in a file) and `fake` (the in-process planted expert).
Each factory imports its provider module only when called, so neither this module nor the
built-ins import anything concrete and no import cycle can form through them; provider
modules never import it back. Plug-ins register through the entry-point group
`ensemble.providers` too (read on the first look-up): an entry point naming a factory
(`mine = "mypackage.provider:make_mine"`) serves its name as a prefix. Prefixes are not
namespaced (they are what model strings start with): a plug-in claiming a built-in's prefix
is left out with one warning line, and a prefix two plug-ins claim is refused in one line
naming both. A provider declares what it can do in `Capabilities`, its Batch API included
(`capabilities.batch_api`), which `ensemble batches` uses to list and cancel a run's batches
at the provider that made them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..errors import InputError
from ..registry import Names, Registry, own_name, registration
from ..wording import unprintable

if TYPE_CHECKING:
    from .base import Provider
    from .options import ProviderOptions

__all__ = ["ProviderFactory", "provider_for", "provider_registry", "register_provider",
           "registered_providers"]

ProviderFactory = Callable[[str, "ProviderOptions"], "Provider"]
P = TypeVar("P", bound=Callable[..., Any])


def _litellm(model: str, options: ProviderOptions) -> Provider:
    from .litellm import LiteLLMProvider

    return LiteLLMProvider(model, options)


provider_registry: Registry[ProviderFactory] = Registry(
    "provider", "ensemble.providers", builtins=("ensemble.providers.builtin",),
    adopt=lambda name, obj: register_provider(name, obj), namespaced=False)
_default: ProviderFactory = _litellm


@overload
def register_provider(factory: P, /) -> P: ...
@overload
def register_provider(prefix: str, factory: P, /, *, replace: bool = ...) -> P: ...
@overload
def register_provider(prefix: str | None = None, /, *, replace: bool = ...
                      ) -> Callable[[P], P]: ...
def register_provider(*args: Any, name: str | None = None, replace: bool = False) -> Any:
    """Serve model strings `prefix`, `prefix/...` and `prefix:...` with `factory(model,
    options)` (the prefix given, or the factory's own `name` attribute). A prefix already
    registered needs `replace=True`."""

    def add(factory: Any, given: str | None) -> Any:
        prefix = own_name(factory, given, what="register_provider")
        if not callable(factory):
            raise InputError(f"the factory for {prefix!r} must be callable, got "
                             f"{type(factory).__name__}")
        provider_registry.add(prefix, factory, replace=replace)
        return factory

    return registration(args, name, add, what="register_provider")


def registered_providers() -> Names:
    """The registered prefixes (litellm serves every other model string)."""
    return provider_registry.names()


def _prefix(model: str) -> str:
    m = re.match(r"^([^/:]+)[/:]", model)
    return m.group(1) if m else model


def provider_for(model: str, options: ProviderOptions) -> Provider:
    """The provider for a model string (see the module docstring); one InputError line for a
    model string holding a control character (it is shown in tables, logs and folder names)."""
    problem = unprintable(model, "model")
    if problem is not None:
        raise InputError(problem)
    key = provider_registry.resolve(_prefix(model))  # a prefix two plug-ins claim: one line
    factory = provider_registry.get(key) if key is not None else _default
    return factory(model, options)
