"""An endpoint's two identities, which every provider computes for itself.

- `normalise_api_base`: where samples come from (a provider's `identity`, part of the store
  key): `http://LOCALHOST:80/v1/` and `http://localhost/v1` are one endpoint.
- `endpoint_key`: whose limits apply (a provider's `endpoint`, the key of its limiter in
  `ensemble.providers.limiter`): (provider, api_base, a fingerprint of the API key, never the
  key itself).
"""

from __future__ import annotations

__all__ = ["endpoint_key", "normalise_api_base"]


def normalise_api_base(url: str) -> str:
    """An endpoint's identity from its base URL: scheme and host lower-cased, credentials,
    query, fragment, a default port and trailing slashes dropped.

    `http://LOCALHOST:80/v1/` and `http://localhost/v1` are one endpoint; another port, host or
    path is another (a restarted local server on a new port may serve other weights).
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    scheme = (parts.scheme or "http").lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # IPv6 keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    return f"{scheme}://{host}{path}"


def endpoint_key(provider: str, api_base: str | None, api_key: str | None) -> tuple[str, str, str]:
    """(provider, api_base, key fingerprint): what identifies an endpoint's limits."""
    from ..secrets import fingerprint

    return (provider, (api_base or "").rstrip("/"), fingerprint(api_key))
