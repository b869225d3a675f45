"""Online sampling past one provider account: litellm's Router behind the provider seam.

    ensemble eval mathqa --model gpt-4o-mini --router router.yaml --t 0.7 --n 5
    Sampler("gpt-4o-mini", provider=RouterProvider.from_config("router.yaml",
                                                               model="gpt-4o-mini"))
    Sampler("gpt-4o-mini", provider=litellm.Router(model_list=[...]))   # wrapped for you

The config is litellm's (the proxy's `model_list` and `router_settings`); `--model` names the
model group, whose deployments (keys, accounts, regions, servers) share the work:

    model_list:
      - model_name: gpt-4o-mini
        litellm_params:
          model: openai/gpt-4o-mini
          api_key: os.environ/OPENAI_KEY_A      # read from the environment, never written
          rpm: 500                              # this deployment's requests per minute
          max_parallel_requests: 8              # its requests in flight
      - model_name: gpt-4o-mini
        litellm_params: {model: openai/gpt-4o-mini, api_key: os.environ/OPENAI_KEY_B, rpm: 500}
    router_settings:
      routing_strategy: usage-based-routing-v2

How the limits combine (docs/batch.md):
- **Per deployment**, the Router enforces each deployment's own `rpm`, `tpm` and
  `max_parallel_requests`, routes around a deployment at its limit, and cools a deployment down
  after its 429s, retrying the request on another (`num_retries`, default 2).
- **Per process**, the group is one endpoint of the process-wide limiter (key: "router", the
  group, a fingerprint of its deployments' endpoints and keys): at most `max_concurrency`
  requests in flight in all, capped by the sum of the deployments' `max_parallel_requests` when
  every deployment sets one; `--rpm` / `--tpm` bound the group's total. When every deployment is
  cooling down the Router's 429 reaches the sampler as backpressure: the group waits it out.
- A deployment used directly (`--api-base`) and through a Router in the same process has the
  two sets of limits side by side; give each its share.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError, ProviderTimeoutError
from .options import ProviderOptions
from .provider import Completion
from .types import SamplingParams

__all__ = ["RouterProvider", "as_provider", "is_router", "sampler_mode"]


def is_router(obj: Any) -> bool:
    """A litellm Router (duck-typed: litellm is imported lazily)."""
    return (type(obj).__name__ == "Router" and hasattr(obj, "acompletion")
            and hasattr(obj, "get_model_list"))


def as_provider(obj: Any, *, model: str) -> Any:
    """`obj` as a provider: a litellm Router is wrapped in a `RouterProvider` for `model`."""
    if obj is not None and is_router(obj):
        return RouterProvider(obj, model=model)
    return obj


def sampler_mode(*, model: str, options: ProviderOptions, batch: Any = None,
                 router: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The `Sampler` keywords of a run's mode: `mode`/`batch` for batch mode (`batch`: its
    `BatchOptions`, None: online), and `provider` for a Router config file."""
    out: dict[str, Any] = {"mode": "batch" if batch is not None else "online", "batch": batch}
    if router is not None:
        out["provider"] = RouterProvider.from_config(router, model=model, options=options)
    return out


def _env_value(value: Any) -> Any:
    """litellm's `os.environ/NAME` convention, resolved (for redaction and fingerprints)."""
    if isinstance(value, str) and value.startswith("os.environ/"):
        return os.environ.get(value[len("os.environ/"):])
    return value


class RouterProvider:
    """A provider (see `ensemble.sampling.provider`) that spreads requests for one model group
    over its deployments with litellm's Router. The caller owns the Router."""

    supports_n: bool | None = None

    def __init__(self, router: Any, *, model: str) -> None:
        from ..secrets import fingerprint, register, register_env_keys
        from .limiter import endpoint_key

        if not is_router(router):
            raise InputError(f"RouterProvider needs a litellm Router, got {type(router).__name__}")
        deployments = router.get_model_list(model_name=model) or []
        if not deployments:
            names = sorted({str(d.get("model_name")) for d in (router.get_model_list() or [])})
            raise InputError(f"the router has no deployment for the model {model!r}; its model "
                             f"groups are: {', '.join(names) or 'none'} (--model names a group)")
        register_env_keys()
        parts = []
        caps: list[Any] = []
        for d in deployments:
            lp = dict(d.get("litellm_params") or {})
            key = _env_value(lp.get("api_key"))
            if isinstance(key, str):
                register(key)
            parts.append(f"{lp.get('model')}@{lp.get('api_base') or ''}#{fingerprint(key)}")
            caps.append(lp.get("max_parallel_requests"))
        self.router = router
        self.model = model
        self.api_base: str | None = None
        self.deployments = len(deployments)
        self.target = str((deployments[0].get("litellm_params") or {}).get("model") or model)
        self.endpoint = endpoint_key("router", f"router:{model}", "|".join(sorted(parts)))
        if caps and all(isinstance(c, int) and c > 0 for c in caps):
            self.max_concurrency = int(sum(caps))

    def __repr__(self) -> str:  # never shows a key
        return f"RouterProvider(model={self.model!r}, deployments={self.deployments})"

    @classmethod
    def from_config(cls, path: str | os.PathLike[str], *, model: str,
                    options: ProviderOptions | None = None) -> RouterProvider:
        """A Router from a litellm config file (`model_list`, optional `router_settings`)."""
        import yaml

        from .client import litellm

        p = Path(path)
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"cannot read the router config {p}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise InputError(f"the router config {p} is not valid YAML: "
                             f"{' '.join(str(exc).split())[:200]}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("model_list"), list) \
                or not doc["model_list"]:
            raise InputError(f"the router config {p} needs a `model_list` of deployments "
                             "(litellm's format: model_name, litellm_params)")
        for i, d in enumerate(doc["model_list"]):
            if not (isinstance(d, dict) and isinstance(d.get("model_name"), str)
                    and isinstance(d.get("litellm_params"), dict)
                    and d["litellm_params"].get("model")):
                raise InputError(f"the router config {p}: deployment {i + 1} needs model_name "
                                 "and litellm_params with a model")
        settings = doc.get("router_settings") or {}
        if not isinstance(settings, dict):
            raise InputError(f"the router config {p}: router_settings must be a mapping")
        settings = dict(settings)
        settings.setdefault("num_retries", 2)
        settings.setdefault("retry_after", 0)
        if any(d["litellm_params"].get(k) for d in doc["model_list"] for k in ("rpm", "tpm")):
            # per-deployment rpm/tpm are limits only under usage-based routing
            settings.setdefault("routing_strategy", "usage-based-routing-v2")
        if options is not None:
            settings.setdefault("timeout", options.timeout)
        ll = litellm()
        try:
            router = ll.Router(model_list=doc["model_list"], **settings)
        except TypeError as exc:
            raise InputError(f"the router config {p}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - litellm's own validation errors
            raise InputError(f"the router config {p} is not a valid litellm Router config: "
                             f"{' '.join(str(exc).split())[:200]}") from None
        return cls(router, model=model)

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        from .client import _completion, litellm, translate_error

        ll = litellm()
        kwargs: dict[str, Any] = dict(params.as_dict())
        if n > 1:
            kwargs["n"] = n
        if headers:
            kwargs["extra_headers"] = dict(headers)
        where = f"router:{self.model}"
        tries = int(getattr(self.router, "num_retries", 0) or 0) + 1
        t0 = time.perf_counter()
        try:
            resp = await asyncio.wait_for(
                self.router.acompletion(model=self.model, messages=list(messages),
                                        timeout=timeout, **kwargs),
                timeout * 1.5 * tries + 1.0)
        except asyncio.TimeoutError:
            raise ProviderTimeoutError(f"no reply from the deployments of {where} within "
                                       f"{timeout:g} s (--timeout)", model=self.model,
                                       provider="router", reason="timeout") from None
        except Exception as exc:  # noqa: BLE001 - translated in one place
            raise translate_error(exc, model=self.model, api_base=where, n=n,
                                  timeout=timeout) from None
        return _completion(ll, resp, model=self.model, target=self.target, api_base=where,
                           latency=time.perf_counter() - t0)
