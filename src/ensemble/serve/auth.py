"""The endpoint's own key: clients send it as `Authorization: Bearer KEY` (OpenAI's form).

The key comes from `--api-key` or the environment (`ENSEMBLE_SERVE_API_KEY`, or the variable the
config names); it is registered for redaction, compared in constant time, and a refused key is
never echoed back. Upstream keys are a different matter: they live in the served ensembles'
options and never leave the server.
"""

from __future__ import annotations

import hmac
import os

from ..errors import InputError
from ..secrets import register

__all__ = ["authorized", "server_key"]


def server_key(explicit: str | None, env_name: str | None) -> str | None:
    """The key clients must send: `explicit`, else the named environment variable, else None
    (no key: anyone who can reach the port may use it; it binds to loopback by default)."""
    key = explicit
    if key is None and env_name:
        key = os.environ.get(env_name) or None
    if key is not None:
        if not key.strip() or len(key) < 8:
            raise InputError("the endpoint's API key must be at least 8 characters; give "
                             "--api-key or set ENSEMBLE_SERVE_API_KEY")
        register(key)
    return key


def authorized(header: str | None, key: str | None) -> bool:
    """Whether an Authorization header carries the key (always, when there is no key)."""
    if key is None:
        return True
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8"), key.encode("utf-8"))
