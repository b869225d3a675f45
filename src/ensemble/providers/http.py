"""How the providers' HTTP clients reach an endpoint: one seam between the clients and the
network, which production and tests share (httpx's transport is the model: its
`MockTransport` runs the production client).

A `Transport` says how a connection is made; everything above it (the request, its timeout,
its errors, the reply) is the client's own code, the same whichever transport is given:

- `connector(limit)`: the aiohttp connector of the openai provider's session (its chat
  completions), holding at most `limit` connections;
- `proxy(url)`: the proxy arguments of an aiohttp request to `url`;
- `httpx_transport(httpx)`: the transport of the openai SDK's httpx client (the Files and
  Batch API; litellm's `client=`), in the httpx flavour the SDK uses; None: the client's own.

`NETWORK` (the default, `Endpoint.transport=None`) connects over TCP and reads the
environment's proxy settings once per provider. `ensemble.testing.InProcessTransport` serves a
`SimulatedServer` in this process, on the caller's event loop, over a Unix socket: the same
aiohttp server code behind the same client code, so a fault it injects reaches the client as
it does over the network.

Why aiohttp for chat completions and not one httpx client for everything: httpx spent 3-5x
the CPU per request of aiohttp here (0.37 vs 1.1-1.5 ms at one request in flight, 0.26 vs
1.3 ms at 32; the SDK's own `post` 1.5-1.7 ms), a third of `ensemble serve`'s budget per
request (docs/sampling.md, "One HTTP seam").
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

__all__ = ["NETWORK", "Network", "Transport", "new_client", "new_session", "transport_of"]


@runtime_checkable
class Transport(Protocol):
    """How the providers' HTTP clients connect (see the module docstring)."""

    def connector(self, limit: int) -> Any:
        """An aiohttp connector of at most `limit` connections, made in the running loop."""
        ...

    def proxy(self, url: str) -> Mapping[str, Any]:
        """The proxy arguments (`proxy`, `proxy_headers`) of an aiohttp request to `url`."""
        ...

    def httpx_transport(self, httpx: ModuleType) -> Any:
        """The transport of an httpx client of module `httpx` (httpx, or the SDK's httpx2);
        None: the client's own (the network's, the environment's proxies included)."""
        ...


class Network:
    """The network: TCP connections, the environment's proxies (HTTP(S)_PROXY, ALL_PROXY,
    NO_PROXY), the httpx clients' own transports."""

    def __repr__(self) -> str:
        return "NETWORK"

    def connector(self, limit: int) -> Any:
        import aiohttp

        return aiohttp.TCPConnector(limit=limit, limit_per_host=limit)

    def proxy(self, url: str) -> Mapping[str, Any]:
        """Read from the environment once per call (a provider calls it once): what aiohttp's
        `trust_env=True` would read on every request, in two hops through the thread pool that
        cost about a third of `ensemble serve`'s CPU per request against a zero-latency
        upstream (tests/bench/bench_serve.py), and a ~/.netrc entry for the upstream's host
        would replace its key with Basic auth."""
        return env_proxy(url)

    def httpx_transport(self, httpx: ModuleType) -> Any:
        return None


NETWORK = Network()


def transport_of(transport: Transport | None) -> Transport:
    """The transport given (`Endpoint.transport`), or the network."""
    return NETWORK if transport is None else transport


def new_session(transport: Transport | None, size: int, key: str | None) -> Any:
    """The openai provider's aiohttp session: `size` connections through `transport`, the key
    in every request's Authorization header. Not `trust_env=True`: with it aiohttp reads the
    environment and ~/.netrc again on every request (the transport's `proxy` reads it once)."""
    import aiohttp

    return aiohttp.ClientSession(
        connector=transport_of(transport).connector(size),
        headers={"Authorization": f"Bearer {key or 'sk-no-key-required'}",
                 "Content-Type": "application/json"})


def new_client(base_url: str, key: str | None, size: int, transport: Transport | None = None
               ) -> Any:
    """An `AsyncOpenAI` client for an endpoint: the SDK's retries off (retries are the
    sampler's), a pool of `size` connections, through `transport`."""
    import importlib

    import openai

    # the SDK's own HTTP client class and its Limits (httpx in openai 1.x-2.x, httpx2 in 3.x,
    # whose pool does not slow down with the number of connections as httpcore's does)
    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=size,
                                                    max_keepalive_connections=size)
    httpx = importlib.import_module(type(limits).__module__.split(".")[0])
    via = transport_of(transport).httpx_transport(httpx)
    http = (openai.DefaultAsyncHttpxClient(limits=limits) if via is None
            else openai.DefaultAsyncHttpxClient(transport=via))
    return openai.AsyncOpenAI(api_key=key or "sk-no-key-required", base_url=base_url,
                              max_retries=0, http_client=http)


def env_proxy(base_url: str) -> dict[str, Any]:
    """The proxy arguments of an aiohttp request to `base_url`, read from the environment
    (`urllib.request.getproxies`: HTTP(S)_PROXY, ALL_PROXY; a proxy's credentials from its
    URL, sent as its Proxy-Authorization header) and NO_PROXY (`bypassed`), as the SDK's httpx
    client reads them."""
    import urllib.parse
    import urllib.request

    import aiohttp

    url = urllib.parse.urlsplit(base_url)
    proxies = {k.lower(): v for k, v in urllib.request.getproxies().items()}
    proxy = proxies.get(url.scheme) or proxies.get("all")
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    if not proxy or bypassed(url.hostname or "", port, proxies.get("no", "")):
        return {}
    p = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if p.username is None:
        return {"proxy": p.geturl()}
    bare = p._replace(netloc=p.netloc.rsplit("@", 1)[1]).geturl()
    # a header, not `proxy_auth=`, which aiohttp 3.14 deprecates
    auth = aiohttp.BasicAuth(urllib.parse.unquote(p.username),
                             urllib.parse.unquote(p.password or ""))
    return {"proxy": bare, "proxy_headers": {"Proxy-Authorization": auth.encode()}}


def bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether NO_PROXY sends `host` direct: `*`; a host name, itself or as a domain suffix
    (`example.com` and `.example.com` both match `api.example.com`); an IP address or CIDR
    range; any of them with `:port`. Written here: the standard library's matcher is not
    public API, nor is aiohttp's."""
    import ipaddress

    host = host.lower().rstrip(".")
    try:
        addr: Any = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        addr = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        name, _, want = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if want and (not want.isdigit() or port is None or int(want) != port):
            continue
        name = name.strip("[]").lstrip(".").rstrip(".")
        if addr is not None:
            try:
                if addr in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if host == name or host.endswith("." + name):
            return True
    return False
