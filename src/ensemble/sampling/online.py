"""One online request under the run's rules: the endpoint's limiter, the one retry policy
(`ensemble.providers.retry`: backpressure waits within the time budget, transient errors get
bounded attempts with backoff), the cost cap, and the counts a status line reports."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._sync import within
from ..errors import EnsembleError, ProviderError, RetryBudgetExceeded, RunStopped
from ..providers.base import Completion, Provider
from ..providers.limiter import Limiter
from ..providers.options import ProviderOptions
from ..providers.retry import RetryPolicy, Tries
from .replies import checked
from .run import LEASE_TTL, RunContext
from .types import Sample, SampleRequest

__all__ = ["CostCapReached", "OnlineRequests", "RunWasStopped", "StoredMeanwhile", "chars_estimate",
           "prompt_tokens"]


class CostCapReached(RetryBudgetExceeded):
    """The cost cap refused a request (the run's `RunStopped` says why)."""

    systemic = True


class RunWasStopped(Exception):
    """The run was stopped before this request was sent."""


class StoredMeanwhile(Exception):
    """Another run stored (some of) these samples before this request was sent."""

    def __init__(self, samples: dict[int, Sample]) -> None:
        super().__init__(f"{len(samples)} samples stored meanwhile")
        self.samples = samples


def prompt_tokens(provider: Provider, messages: Sequence[Mapping[str, Any]]) -> int:
    """A prompt's tokens by the provider's tokenizer, else about 4 characters a token."""
    counted = provider.count_tokens(messages)
    return chars_estimate(messages) if counted is None else counted


def chars_estimate(messages: Sequence[Mapping[str, Any]]) -> int:
    """A prompt's tokens at about 4 characters a token (a provider without a tokenizer)."""
    return sum(len(str(m.get("content", ""))) for m in messages) // 4 + 4


class OnlineRequests:
    """Sends one sampler's requests: `await online.request(req, n=, start=)`."""

    def __init__(self, ctx: RunContext, provider: Provider, options: ProviderOptions, *,
                 max_cost: float | None, extra_headers: dict[str, str],
                 stored: Callable[[], bool] = lambda: False) -> None:
        self.ctx = ctx
        self.provider = provider
        self.options = options
        self.retry = RetryPolicy(max_attempts=options.retry.max_attempts,
                                 max_retry_time=options.retry.max_retry_time)
        self.max_cost = max_cost
        self.extra_headers = extra_headers
        self.limiter: Limiter | None = None
        self.in_flight = 0
        self.paid = 0  # replies received (priced)
        self.sampled = 0  # samples in those replies (for the completion tokens per sample)
        self.retrying = 0
        self.stored = stored  # whether a store keeps the samples (for the cost cap's words)
        self.bad_usage: str | None = None
        # the cap's stop: (spent by this run then, requests then in flight, why): the end of
        # the run says what was paid in all (`cost_outcome`)
        self.cap_stop: tuple[float, int, str] | None = None

    async def request(self, req: SampleRequest, *, n: int, start: int,
                      recheck: Callable[[], dict[int, Sample]] | None = None) -> Completion:
        """One request for samples start .. start+n-1, retried under the policy; raises the
        translated `ProviderError` when it fails for good. `recheck` reads the samples another
        run stored meanwhile; it is asked before a retry and before a request sent long after
        its lease was taken (a suspended process, a long queue), so nothing stored is paid
        twice (`StoredMeanwhile`)."""
        if self.limiter is None:  # pragma: no cover - the sampler attaches it when it starts
            raise EnsembleError("the sampler was not started; use `async with Sampler(...)`")
        tries = Tries()
        t_enter = time.monotonic()
        try:  # most requests succeed at once: no retry loop for them (ensemble.providers.retry)
            return await self._attempt(req, n, start, tries, recheck, t_enter)
        except ProviderError as exc:
            if not self.retry.retries(exc):
                raise
            tries.handover(exc)
        async for attempt in self.retry.retrying(tries, gave_up=self._gave_up_after,
                                                 limiter_holds=True, sleep=self._sleep,
                                                 before_sleep=self._retrying):
            with attempt:
                tries.raise_pending()
                return await self._attempt(req, n, start, tries, recheck, t_enter)
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def _attempt(self, req: SampleRequest, n: int, start: int, tries: Tries,
                       recheck: Callable[[], dict[int, Sample]] | None,
                       t_enter: float) -> Completion:
        """One attempt: the cost cap, the endpoint's limiter (a retry waits for its cool-down
        within the sample's time budget), the stop and the store rechecked, then the request."""
        limiter = self.limiter
        assert limiter is not None
        stats = self.ctx.stats
        await self._check_cost(req, n)
        if tries.last is None:
            ticket = await limiter.acquire()
        else:
            left = self.options.retry.max_retry_time - tries.elapsed()
            try:
                ticket = await within(limiter.acquire(), max(0.0, left))
            except asyncio.TimeoutError:
                raise self._gave_up_after(tries) from None
        if self.ctx.stop is not None:
            limiter.release(ticket, outcome="unused")
            raise RunWasStopped()
        if recheck is not None and (tries.last is not None
                                    or time.monotonic() - t_enter > LEASE_TTL / 2):
            got = recheck()
            if got:
                limiter.release(ticket, outcome="unused")
                raise StoredMeanwhile(got)
        tries.sent()
        stats.requests += 1
        self.in_flight += 1
        try:
            comp = await self.provider.complete(req.messages, req.params, n=n,
                                                first_index=start, headers=self.extra_headers,
                                                timeout=self.options.retry.timeout)
        except ProviderError as exc:
            self.in_flight -= 1
            stats.errors += 1
            limiter.release(ticket, outcome="backpressure" if exc.backpressure else "error",
                            retry_after=exc.retry_after)
            if exc.backpressure:
                stats.rate_limited += 1
            raise
        except BaseException:
            self.in_flight -= 1
            limiter.release(ticket, outcome="error")
            raise
        self.in_flight -= 1
        raw, comp = comp, checked(comp)  # the one door replies come in by
        if comp.cost_usd is None and raw.cost_usd is not None:
            self.bad_usage = (f"{self.provider.api_base or self.ctx.model} reported token "
                              f"usage that cannot be true ({raw.prompt_tokens} prompt, "
                              f"{raw.completion_tokens} completion tokens, cost "
                              f"{raw.cost_usd!r}); counted as unknown, not as a credit")
            self.ctx.note(self.bad_usage)
        tokens = (comp.prompt_tokens or 0) + (comp.completion_tokens or 0)
        limiter.release(ticket, outcome="ok", tokens=tokens or None)
        self.paid += 1
        self.sampled += n
        self.ctx.account(comp.prompt_tokens, comp.completion_tokens, comp.cost_usd,
                         recorded=comp.recorded)
        return comp

    def _retrying(self, state: object) -> None:
        """Before the wait for a retry (tenacity's `before_sleep`): count it."""
        self.ctx.stats.retries += 1

    async def _sleep(self, seconds: float) -> None:
        """The wait before a retry, counted in `retrying` while it lasts (the status line)."""
        self.retrying += 1
        try:
            if seconds > 0:
                await asyncio.sleep(seconds)
        finally:
            self.retrying -= 1

    def _gave_up_after(self, tries: Tries) -> ProviderError:
        """The error a request ends with when the policy stops its retries."""
        assert tries.last is not None
        return self._gave_up(tries.last, tries.transient, tries.elapsed(), asked=tries.asked)

    def _gave_up(self, exc: ProviderError, attempts: int, elapsed: float, *,
                 asked: float | None = None) -> ProviderError:
        budget = self.options.retry.max_retry_time
        if asked is not None:
            what = (f"{elapsed:.0f} s: the provider asked to wait {asked:g} s (Retry-After), "
                    f"more than the {max(0.0, budget - elapsed):.0f} s left of --max-retry-time "
                    f"{budget:g}; retry later, or raise --max-retry-time to wait it out")
        elif attempts:
            what = f"{attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.0f} s"
        else:
            what = f"{elapsed:.0f} s of rate limiting (--max-retry-time {budget:g})"
        err = RetryBudgetExceeded(f"{exc}; gave up after {what}", model=self.ctx.model,
                                  provider=exc.provider, status=exc.status,
                                  retry_after=exc.retry_after, api_base=exc.api_base,
                                  reason=exc.reason)
        err.systemic = exc.systemic  # an unreachable endpoint stays systemic
        return err

    async def _check_cost(self, req: SampleRequest, n: int) -> None:
        """Stop new requests when spent plus in flight would pass `max_cost`. Until the first
        price is known, one request at a time, so the cap is passed by at most one request;
        and a request whose own estimate (`request_cost`) exceeds what is left is not sent."""
        if self.max_cost is None:
            return
        s = self.ctx.stats
        while self.paid == 0 and self.in_flight > 0:
            await asyncio.sleep(0.01)
        model = self.ctx.model
        if s.cost_usd is None:
            if self.bad_usage is not None:  # a price does not help: the usage is what is wrong
                self._stop_for_cost(f"{self.bad_usage}, so --max-cost cannot be enforced: it "
                                    "counts the usage the endpoint reports; drop --max-cost, "
                                    "or use an endpoint that reports true usage")
            self._stop_for_cost(f"the price of {model} is unknown, so --max-cost cannot be "
                                "enforced; give the price with --price-per-1k-tokens IN,OUT, "
                                "or drop --max-cost")
        per = (s.cost_usd or 0.0) / self.paid if self.paid > 0 else 0.0
        before = self.spent_before
        if s.cost_usd is not None and \
                before + s.cost_usd + per * (self.in_flight + 1) > self.max_cost:
            self._stop_for_cost(self._cost_stop_message(per), spent=s.cost_usd)
        est = self.request_cost(req, n)
        if est is not None and s.cost_usd is not None:
            cost, what = est
            left = self.max_cost - before - s.cost_usd - per * self.in_flight
            if cost > left:
                self._stop_for_cost(
                    f"the next request alone would cost about ${cost:.4f} ({what}), more than "
                    f"the ${max(left, 0.0):.4f} left of the --max-cost ${self.max_cost:g}, so "
                    "it was not sent; raise --max-cost"
                    + (", or lower --max-concurrency" if self.in_flight else ""),
                    spent=s.cost_usd)

    @property
    def spent_before(self) -> float:
        """What this run's samples already in the store cost (an earlier invocation of the
        same run paid it): --max-cost is the run's cap, not each invocation's."""
        return self.ctx.stats.stored_cost_usd or 0.0

    def cap_words(self, spent: float, *, cap: bool = True) -> str:
        """What the cap has been spent on: this invocation's dollars, and the run's before."""
        before = self.spent_before
        return (f"${spent:.4f}" + (f" (and ${before:.4f} already, on this run's samples in the "
                                   "store)" if before else "")
                + (f" of the --max-cost ${self.max_cost:g}" if cap else ""))

    def cost_outcome(self) -> None:
        """At the end of a run the cap stopped: the stop says what was paid in all, the
        replies of the requests in flight at the stop included (the store holds them)."""
        stop = self.ctx.stop
        if self.cap_stop is None or stop is None or not str(stop).startswith("cost cap:"):
            return
        spent, flying, why = self.cap_stop
        paid = self.ctx.stats.cost_usd
        if paid is None:
            return
        late = (f" (${spent:.4f} when it stopped new requests, the rest by the {flying} "
                f"request{'s' if flying != 1 else ''} then in flight)"
                if paid - spent > 5e-5 else "")
        cap = "--max-cost" not in why
        self.ctx.stop = RunStopped(f"cost cap: paid {self.cap_words(paid, cap=cap)}{late}; "
                                   f"{why}", cause=stop.cause)

    def request_cost(self, req: SampleRequest, n: int) -> tuple[float, str] | None:
        """About what one request of `n` samples costs, before it is sent (as a dry run
        counts): its prompt's tokens (the provider's tokenizer, else ~4 characters a token)
        and, once replies came in, their average completion tokens per sample; None when the
        price is unknown."""
        prompt = prompt_tokens(self.provider, req.messages)
        per_sample = (self.ctx.stats.completion_tokens / self.sampled if self.sampled else 0.0)
        completion = round(per_sample * n)
        cost = self.provider.price(prompt, completion)
        if cost is None:
            return None
        what = f"{prompt} prompt tokens" + (f" and ~{completion} completion tokens"
                                            if completion else "")
        return cost, what

    def _cost_stop_message(self, per: float) -> str:
        """Why the cap stopped the run where it did: the estimate and the reserve."""
        flying = self.in_flight
        reserve = per * flying
        again = ("rerun with a higher cap to continue from the store" if self.stored()
                 else "rerun with a higher cap (without --store the samples drawn are not kept)")
        return (f"each request costs "
                f"about ${per:.4f} ("
                + (f"the average of the {self.paid} replies so far" if self.paid != 1
                   else "the cost of the 1 reply so far") + "), "
                f"{flying} request{'s' if flying != 1 else ''} in flight hold ${reserve:.4f} "
                "of the cap, and one more request would pass it, so no new request was sent "
                f"(lower --max-concurrency to reserve less); {again}")

    def _stop_for_cost(self, message: str, *, spent: float | None = None) -> None:
        if spent is not None:  # the cap itself (not an unknown price): say what it was spent on
            if self.ctx.stop is None:
                self.cap_stop = (spent, self.in_flight, message)
            message = f"spent {self.cap_words(spent, cap='--max-cost' not in message)}; {message}"
        self.ctx.stop_for(f"cost cap: {message}")
        raise CostCapReached(message)

    def status_line(self, lim: Any, idle: float | None, *, where: str) -> str:
        """One line on what the run is doing, in the user's terms (`lim`: the endpoint
        limiter's status)."""
        s = self.ctx.stats
        parts = [f"{s.samples_done}/{s.samples_total} samples"]
        if idle is not None:
            parts.append(f"none for {idle:.0f} s")
        if lim is not None and lim.cooldown_s > 0:
            parts.append(f"cooling down {lim.cooldown_s:.1f} s after the provider's rate limit")
        if self.in_flight:
            parts.append(f"{self.in_flight} request{'s' if self.in_flight != 1 else ''} "
                         f"waiting for {where}"
                         f" (timeout {self.options.retry.timeout:g} s)")
        if lim is not None and lim.waiting:
            parts.append(f"{lim.waiting} queued for the endpoint's limit")
        if self.retrying:
            parts.append(f"{self.retrying} retrying")
        if s.rate_limited:
            parts.append(f"{s.rate_limited} rate-limit replies so far")
        return "waiting: " + "; ".join(parts)
