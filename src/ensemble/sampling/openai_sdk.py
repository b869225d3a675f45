"""The openai SDK provider lives in `ensemble.providers.openai`; its names are re-exported here
for code that imports them from their old home."""

from ..providers.openai import OPENAI_API_BASE, PROVIDER_ENV, OpenAIProvider, serves

__all__ = ["OPENAI_API_BASE", "PROVIDER_ENV", "OpenAIProvider", "serves"]
