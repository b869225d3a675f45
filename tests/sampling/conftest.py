"""The sampling tests run on both providers of `openai/...` model strings: the official openai
SDK (`ensemble.providers.openai`, the default) and litellm (ENSEMBLE_PROVIDER=litellm).
A test module opts in with `pytestmark = pytest.mark.usefixtures("each_provider")`; the
environment variable reaches the child processes of the kill -9 and Ctrl-C tests too."""

from __future__ import annotations

import pytest

PROVIDERS = ("openai", "litellm")


@pytest.fixture(params=PROVIDERS)
def each_provider(request, monkeypatch):
    monkeypatch.setenv("ENSEMBLE_PROVIDER", request.param)
    return request.param
