"""One redaction for every string that leaves the process: API keys never reach a terminal, a
log, a report, a store or an error message, whatever their prefix.

Every key the process uses is registered here (explicit `api_key=` values and the provider keys
read from the environment); `redact(text)` replaces each registered key, and anything shaped
like a well-known key or bearer token, with `***`. Errors, the CLI's error line, JSON documents,
reports and progress lines all pass through it.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading

__all__ = ["fingerprint", "redact", "redact_known", "register", "register_env_keys"]

_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None

# shapes that are keys whatever the registry holds: OpenAI/Anthropic-style prefixes, bearer
# tokens, and "api_key=..." pairs in URLs or debug dumps
_SHAPES = re.compile(
    r"(?P<p>\b(?:sk|pk|rk|key|api|xai|gsk|hf)[-_](?:[A-Za-z]+[-_])?)[A-Za-z0-9_\-]{12,}"
    r"|(?P<b>\bBearer\s+)[A-Za-z0-9_\-\.=]{8,}"
    r"|(?P<q>\b(?:api[_-]?key|access[_-]?token|key|token|secret)=)[^&\s\"']{6,}",
    re.IGNORECASE)

# environment variables that hold provider keys (litellm's conventions)
_ENV_SUFFIXES = ("_API_KEY", "_API_TOKEN", "_ACCESS_KEY", "_SECRET_KEY", "_SECRET_ACCESS_KEY",
                 "_AUTH_TOKEN")

# shorter strings are not treated as secrets: redacting "abc" everywhere would mangle output
_MIN_LEN = 6


def register(secret: str | None) -> None:
    """Add a key to the redaction set (no-op for None or very short strings)."""
    global _pattern
    if not secret or len(secret) < _MIN_LEN:
        return
    with _lock:
        if secret in _secrets:
            return
        _secrets.add(secret)
        # longest first, so a key that contains another is replaced whole
        alts = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in alts))


def register_env_keys() -> None:
    """Register every provider key found in the environment (OPENAI_API_KEY, ...)."""
    for name, value in os.environ.items():
        if name.upper().endswith(_ENV_SUFFIXES):
            register(value)


def redact_known(text: str) -> str:
    """`text` with every registered key replaced by `***` (for data: model replies and prompts
    keep everything else, even strings that merely look like keys)."""
    pat = _pattern
    if not text or pat is None:
        return text
    return pat.sub("***", text)


def redact(text: str) -> str:
    """`text` with every registered key and every key-shaped token replaced by `***` (for
    messages: errors, logs, progress and status lines)."""
    if not text:
        return text
    text = redact_known(text)

    def keep_prefix(m: re.Match[str]) -> str:
        prefix = m.group("p")
        if prefix is not None and not _looks_random(m.group(0)[len(prefix):]):
            return m.group(0)  # "api-comparison-gpt4o" is a name, not a key
        return (prefix or m.group("b") or m.group("q") or "") + "***"

    return _SHAPES.sub(keep_prefix, text)


def _looks_random(body: str) -> bool:
    """Whether the part of a token after a key prefix ("sk-", "api-") is key material: a run of
    at least 16 characters between separators with a digit or a capital in it. Words joined by
    hyphens or underscores ("comparison-gpt4o", "rotation_experiment_2024") are not."""
    return any(len(part) >= 16 and (not part.islower() or any(c.isdigit() for c in part))
               for part in re.split(r"[-_]", body))


def fingerprint(secret: str | None) -> str:
    """A short, one-way fingerprint of a key: tells keys apart without revealing them."""
    if not secret:
        return "-"
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()[:12]
