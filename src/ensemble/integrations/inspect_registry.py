"""The entry point inspect_ai loads (`[project.entry-points.inspect_ai] ensemble = ...`): it
registers the `ensemble` model API and imports nothing heavy; the API itself is imported when
a `--model ensemble/...` is first used (inspect's own indirection, as its providers do)."""

from __future__ import annotations

from typing import Any

from inspect_ai.model import modelapi

__all__ = ["ensemble"]


@modelapi(name="ensemble")
def ensemble() -> Any:
    from .inspect_model import EnsembleModelAPI

    return EnsembleModelAPI
