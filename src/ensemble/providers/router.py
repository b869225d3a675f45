"""Online sampling past one provider account: litellm's Router behind the provider seam.

    ensemble eval mathqa --model gpt-4o-mini --router router.yaml --t 0.7 --n 5
    Sampler("gpt-4o-mini", provider=RouterProvider.from_config("router.yaml",
                                                               model="gpt-4o-mini"))
    Sampler("gpt-4o-mini", provider=litellm.Router(model_list=[...]))   # wrapped for you

The config is litellm's (the proxy's `model_list`, optional `router_settings`); `--model` names
the model group, whose deployments (keys, accounts, regions, servers) share the work:

    model_list:
      - model_name: gpt-4o-mini
        litellm_params:
          model: openai/gpt-4o-mini
          api_key: os.environ/OPENAI_KEY_A      # read from the environment, never written
          rpm: 500                              # this deployment's requests per minute
          tpm: 200000                           # and tokens per minute
          max_parallel_requests: 8              # its requests in flight
      - model_name: gpt-4o-mini
        litellm_params: {model: openai/gpt-4o-mini, api_key: os.environ/OPENAI_KEY_B}

How the limits combine (docs/batch.md):
- **Each deployment is an endpoint of the process-wide limiter** (`limiter.py`, keyed by its
  provider, api_base and key fingerprint, as a direct `--api-base` run on it would be): its
  `max_parallel_requests`, `rpm` and `tpm` are that limiter's limits (default concurrency:
  `max_concurrency`), with the adaptive concurrency, the learned rate and the shared cool-down
  after its 429s. A Sampler using the same deployment directly in the same process shares them.
- **The Router holds the deployments and makes the calls; the choice is ours**: each request
  goes to the deployment with the most room (not cooling down, fewest in flight for its
  limit) and waits for a slot there. litellm's own routing does not wait for capacity: with
  every slot of the deployment it picked in use it raises a 429 (measured), which the sampler
  would take for the provider's backpressure.
- A deployment's 429 cools that deployment down and the request moves to another one at once;
  only when every deployment answers 429 does the sampler see backpressure.
- **The group** is one more endpoint of the limiter (key: "router", the group, a fingerprint of
  its deployments): at most `max_concurrency` requests in flight in all (capped by the sum of
  the deployments' concurrency); `--rpm` / `--tpm` bound the group's total.

Cost: each reply at `price_per_1k` (`--price-per-1k-tokens`) when given, whichever deployment
served it, as every provider prices (`CostPolicy.cost`); else at litellm's price table for the
serving deployment's model (None where it has none).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, ProviderError
from .base import Capabilities, Completion, provider_of
from .endpoints import endpoint_key, normalise_api_base
from .limiter import limiter_for
from .litellm import LITELLM_COUNTER, litellm, litellm_price, litellm_request
from .options import ProviderOptions

if TYPE_CHECKING:
    from .params import SamplingParams

__all__ = ["RouterProvider", "as_provider", "is_router", "sampler_mode"]


def is_router(obj: Any) -> bool:
    """A litellm Router (duck-typed: litellm is imported lazily)."""
    return (type(obj).__name__ == "Router" and hasattr(obj, "acompletion")
            and hasattr(obj, "get_model_list"))


def as_provider(obj: Any, *, model: str, options: ProviderOptions | None = None) -> Any:
    """`obj` as a provider: a litellm Router is wrapped in a `RouterProvider` for `model`."""
    if obj is not None and is_router(obj):
        return RouterProvider(obj, model=model, options=options)
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


class _Deployment:
    """One deployment of the group: its Router id and its endpoint's process-wide limiter."""

    def __init__(self, id_: str, model: str, limiter: Any, limits: tuple[int, Any, Any]
                 ) -> None:
        self.id = id_
        self.model = model
        self.limiter = limiter
        self.limits = limits  # (max_concurrency, rpm, tpm) this group asks of the endpoint
        self.token = 0
        self.latency = 0.0  # mean seconds per reply (an exponential average)


class RouterProvider:
    """A provider (see `ensemble.providers.base`) that spreads requests for one model group
    over its deployments through litellm's Router, each deployment within its own limits (see
    the module docstring). The caller owns the Router. Declares: at most the sum of its
    deployments' concurrency, `n` to be found out, no Batch API."""

    name = "router"

    def __init__(self, router: Any, *, model: str, options: ProviderOptions | None = None
                 ) -> None:
        from ..secrets import fingerprint, register, register_env_keys

        if not is_router(router):
            raise InputError(f"RouterProvider needs a litellm Router, got {type(router).__name__}")
        registry = router.registry()  # litellm's public view of its deployments
        deployments = registry.deployments(model_name=model) or []
        if not deployments:
            names = sorted({str(d.get("model_name")) for d in (registry.deployments() or [])})
            raise InputError(f"the router has no deployment for the model {model!r}; its model "
                             f"groups are: {', '.join(names) or 'none'} (--model names a group)")
        o = options or ProviderOptions()
        register_env_keys()
        parts = []
        self._deps: list[_Deployment] = []
        for d in deployments:
            lp = dict(d.get("litellm_params") or {})
            key = _env_value(lp.get("api_key"))
            if isinstance(key, str):
                register(key)
            target = str(lp.get("model"))
            base = lp.get("api_base")
            parts.append(f"{target}@{base or ''}#{fingerprint(key)}")
            cap = lp.get("max_parallel_requests")
            cap = int(cap) if isinstance(cap, int) and cap > 0 else o.limits.max_concurrency
            limits = (cap, _positive(lp.get("rpm")), _positive(lp.get("tpm")))
            ekey = endpoint_key(provider_of(target), base, key if isinstance(key, str) else None)
            lim = limiter_for(ekey, max_concurrency=cap, rpm=limits[1], tpm=limits[2])
            self._deps.append(_Deployment(str((d.get("model_info") or {}).get("id")), target,
                                          lim, limits))
        self.router = router
        self.model = model
        self.options = o
        self.api_base: str | None = None
        self.deployments = len(deployments)
        self.target = self._deps[0].model
        self.endpoint = endpoint_key("router", f"router:{model}", "|".join(sorted(parts)))
        bases = [(d.get("litellm_params") or {}).get("api_base") for d in deployments]
        self.identity: str | None = "router:" + "|".join(sorted(
            f"{dep.model}@{normalise_api_base(b) if b else ''}"
            for dep, b in zip(self._deps, bases, strict=True)))
        self.capabilities = Capabilities(
            max_concurrency=int(sum(dep.limits[0] for dep in self._deps)), supports_n=None,
            batch_api=None, tokenizer=LITELLM_COUNTER)
        self._turn = 0
        self._started = False

    def __repr__(self) -> str:  # never shows a key
        return f"RouterProvider(model={self.model!r}, deployments={self.deployments})"

    @classmethod
    def from_config(cls, path: str | os.PathLike[str], *, model: str,
                    options: ProviderOptions | None = None) -> RouterProvider:
        """A Router from a litellm config file (`model_list`, optional `router_settings`)."""
        import yaml

        p = Path(path)
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"cannot read the router config {p}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise InputError(f"the router config {p} is not UTF-8 text (a binary file?); give "
                             "litellm's YAML config (model_list)") from None
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
        # one retry policy, the sampler's: the Router makes one attempt per call
        settings.setdefault("num_retries", 0)
        if options is not None:
            settings.setdefault("timeout", options.retry.timeout)
        ll = litellm()
        try:
            router = ll.Router(model_list=doc["model_list"], **settings)
        except TypeError as exc:
            raise InputError(f"the router config {p}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - litellm's own validation errors
            raise InputError(f"the router config {p} is not a valid litellm Router config: "
                             f"{' '.join(str(exc).split())[:200]}") from None
        return cls(router, model=model, options=options)

    async def start(self) -> None:
        """Impose each deployment's limits on its endpoint's limiter (until `aclose`); learn
        from litellm whether every deployment returns token logprobs (a request may go to
        any: one that cannot makes the group unable)."""
        if self._started:
            return
        self.capabilities = replace(self.capabilities, **self._logprobs())
        for dep in self._deps:
            cap, rpm, tpm = dep.limits
            dep.token = dep.limiter.attach(max_concurrency=cap, rpm=rpm, tpm=tpm)
        self._started = True

    def _logprobs(self) -> dict[str, Any]:
        from .litellm import litellm_logprobs
        from .litellm_lib import litellm

        said: list[tuple[bool | None, int | None, str]] = []
        for dep in self._deps:
            try:
                name, prov, _, _ = litellm().get_llm_provider(dep.model)
            except Exception:  # noqa: BLE001 - a deployment litellm cannot place: unknown
                said.append((None, None, "litellm"))
                continue
            said.append(litellm_logprobs(str(name), str(prov)))
        lps = [lp for lp, _, _ in said]
        tops = [top for _, top, _ in said if top is not None]
        lp = False if False in lps else (True if all(lps) else None)
        top = min(tops) if len(tops) == len(said) else None
        return {"logprobs": lp, "top_logprobs": top,
                "logprobs_source": "litellm's supported parameters for its deployments"}

    async def aclose(self) -> None:
        if not self._started:
            return
        for dep in self._deps:
            dep.limiter.detach(dep.token)
        self._started = False

    def _order(self) -> list[_Deployment]:
        """Deployments, the soonest to serve a new request first: the longest of its
        cool-down, its pacing (rpm, tpm, a learned rate) and its queue for a slot (requests
        ahead per slot x its mean latency); ties taken in turn."""
        self._turn += 1
        n = len(self._deps)

        def wait(i: int) -> tuple[float, int]:
            dep = self._deps[i]
            st = dep.limiter.status()
            ahead = st.in_flight + st.waiting
            pacing = (st.waiting + 1) / st.rate if st.rate else 0.0
            queue = (ahead + 1) / max(1, st.limit) * dep.latency if ahead >= st.limit else 0.0
            return (max(st.cooldown_s, pacing, queue), (i - self._turn) % n)

        return [self._deps[i] for i in sorted(range(n), key=wait)]

    @property
    def max_concurrency(self) -> int:
        """Requests the group serves at once: the sum of its deployments' concurrency."""
        return self.capabilities.max_concurrency or 0

    def price(self, prompt_tokens: int, completion_tokens: int, *,
              batch: bool = False) -> float | None:
        """USD at `price_per_1k` if given (`CostPolicy.cost`, as every provider prices), else at
        litellm's rates for the first deployment's model (the group serves one model)."""
        given = self.options.cost.cost(prompt_tokens, completion_tokens)
        if given is not None:
            return given
        return litellm_price(self.target, prompt_tokens, completion_tokens, batch=batch)

    def count_tokens(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        try:
            return int(litellm().token_counter(model=self.target, messages=list(messages)))
        except Exception:  # noqa: BLE001 - a model litellm cannot tokenise
            return None

    async def complete(self, messages: Sequence[Mapping[str, str]], params: SamplingParams, *,
                       n: int = 1, first_index: int = 0,
                       headers: Mapping[str, str] | None = None,
                       timeout: float = 60.0) -> Completion:
        await self.start()
        where = f"router:{self.model}"
        last: ProviderError | None = None
        for dep in self._order():
            if last is not None and dep.limiter.status().cooldown_s > 0:
                continue  # after a 429, only deployments that are not cooling down
            ticket = await dep.limiter.acquire()
            t0 = time.perf_counter()
            try:
                comp = await litellm_request(
                    self.router.acompletion, model=self.model, target=dep.id, where=where,
                    messages=messages, params=params, n=n, first_index=first_index,
                    headers=headers, timeout=timeout, price=self.options.cost.price_per_1k,
                    priced_as=dep.model, num_retries=0)
            except ProviderError as err:
                dep.limiter.release(ticket, outcome="backpressure" if err.backpressure
                                    else "error", retry_after=err.retry_after)
                if not err.backpressure:
                    raise
                last = err  # this deployment cools down; try one that does not
                continue
            except BaseException:
                dep.limiter.release(ticket, outcome="error")
                raise
            took = time.perf_counter() - t0
            dep.latency = took if not dep.latency else 0.9 * dep.latency + 0.1 * took
            tokens = (comp.prompt_tokens or 0) + (comp.completion_tokens or 0)
            dep.limiter.release(ticket, outcome="ok", tokens=tokens or None)
            return comp
        assert last is not None
        raise last  # every deployment is at its limit: backpressure for the group


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None
