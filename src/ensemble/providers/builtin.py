"""The built-in providers, registered like any other (`register_provider`): each factory
imports its provider only when a model string asks for it, so naming them here costs nothing.
The registry imports this module on its first look-up."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .registry import register_provider

if TYPE_CHECKING:
    from .base import Provider
    from .options import ProviderOptions

__all__ = ["fake", "local", "openai", "replay"]


@register_provider("local")
def local(model: str, options: ProviderOptions) -> Provider:
    """`local`, `local/<path.gguf>`, `local:<name>`: the embedded llama.cpp model."""
    from .local import LocalProvider

    return LocalProvider(model, options)


@register_provider("openai")
def openai(model: str, options: ProviderOptions) -> Provider:
    """`openai/...` through the official SDK (the fast path), unless ENSEMBLE_PROVIDER=litellm
    asks for litellm."""
    from .openai import OpenAIProvider, serves

    if serves(model):
        return OpenAIProvider(model, options)
    from .litellm import LiteLLMProvider

    return LiteLLMProvider(model, options)


@register_provider("replay")
def replay(model: str, options: ProviderOptions) -> Provider:
    """`replay/<path>`: the samples recorded in a run folder or a JSONL recording."""
    from .replay import ReplayProvider

    return ReplayProvider(model, options)


@register_provider("fake")
def fake(model: str, options: ProviderOptions) -> Provider:
    """`fake/<name>`: the in-process planted expert (`ensemble.testing.FakeExpertProvider`)
    with its default options, for a quick look without a server. The testing package stands
    above the providers, so it is named here as an entry point names its module, and imported
    only when a `fake/...` model is asked for."""
    module = importlib.import_module("ensemble.testing.fake")
    provider: Provider = module.FakeExpertProvider(model=model)
    return provider
