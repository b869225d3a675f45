"""Prompt tokens of OpenAI models without importing litellm: tiktoken, OpenAI's own tokenizer.

A dry run's estimate and `--max-cost`'s check before the first request count a prompt's
tokens. litellm's counter runs tiktoken underneath, but importing litellm costs ~4-5 s of CPU
(`ensemble eval --dry-run` paid that for `openai/...` models). Here tiktoken is used through
its public API: the model's encoding (`encoding_name_for_model`; for a name tiktoken does not
list, o200k_base, every OpenAI release's since gpt-4o, when it is named like one, else
cl100k_base, as litellm counts a model it does not know, e.g. one an OpenAI-compatible server
serves), and messages counted as OpenAI's cookbook counts them (3 tokens a message, 1 more for
a `name`, 3 priming the reply): litellm's count for these models, token for token.

tiktoken downloads an encoding's file on first use unless it finds it in `TIKTOKEN_CACHE_DIR`.
litellm ships the files (named by tiktoken's cache key) and points that variable at them when
imported; so does this module, when the variable is unset, locating the directory with
`find_spec` without running litellm (as `ensemble.providers.prices` reads its price table).
No encoding (offline with neither): None, and the caller counts ~4 characters a token.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["TIKTOKEN", "tiktoken_count"]

TIKTOKEN = "tiktoken"  # the counter's name, as a dry run reports it
# OpenAI's cookbook ("How to count tokens with tiktoken") for chat models since gpt-3.5-turbo
PER_MESSAGE, PER_NAME, REPLY_PRIMING = 3, 1, 3
# litellm's bundled tiktoken files, inside its package
BUNDLED_DIR = ("litellm_core_utils", "tokenizers")
# a name tiktoken does not list yet, of an OpenAI release (gpt-6.2, o5, chatgpt-...)
OPENAI_RELEASE = re.compile(r"^(?:ft:)?(?:gpt-|chatgpt-|o\d)")

_lock = threading.Lock()
_encodings: dict[str, Any] = {}  # encoding name -> tiktoken Encoding, or None: not available


def encoding_name(model: str) -> str:
    """tiktoken's encoding for an OpenAI model string (`openai/gpt-4o-mini`, `gpt-4`)."""
    import tiktoken

    name = model.split("/", 1)[1] if model.startswith("openai/") else model
    if "gpt-4o" in name:  # every gpt-4o variant, dated or fine-tuned (`ft:gpt-4o-...`)
        return "o200k_base"
    try:
        return tiktoken.encoding_name_for_model(name)
    except KeyError:  # a newer model than tiktoken's table, or another server's model
        return "o200k_base" if OPENAI_RELEASE.match(name) else "cl100k_base"


def _bundled_cache_dir() -> str | None:
    """litellm's directory of tiktoken files, found without importing litellm (None: none)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root).joinpath(*BUNDLED_DIR)
        if path.is_dir():
            return str(path)
    return None


def _encoding(name: str) -> Any:
    with _lock:
        if name not in _encodings:
            import tiktoken

            if "TIKTOKEN_CACHE_DIR" not in os.environ:
                bundled = _bundled_cache_dir()
                if bundled is not None:  # as importing litellm would set it
                    os.environ["TIKTOKEN_CACHE_DIR"] = bundled
            try:
                _encodings[name] = tiktoken.get_encoding(name)
            except Exception:  # noqa: BLE001 - no file and no network, a bad cache: not known
                _encodings[name] = None
        return _encodings[name]


def tiktoken_count(model: str, messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Prompt tokens of chat `messages` for an OpenAI model by tiktoken (None: no encoding, or a
    message whose content is not text)."""
    try:
        enc = _encoding(encoding_name(model))
    except ImportError:
        return None
    if enc is None:
        return None
    total = REPLY_PRIMING if messages else 0
    for message in messages:
        total += PER_MESSAGE
        for key, value in message.items():
            if value is None:
                continue
            if not isinstance(value, str):
                return None  # images, tool calls: litellm's counter knows more of those
            total += len(enc.encode(value, disallowed_special=()))
            if key == "name":
                total += PER_NAME
    return total
