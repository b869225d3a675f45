"""The state one run shares between its two ways to reach the provider (online requests and
the Batch API): the stats and notes, the status line and the progress bar, the store with its
holder and leases (and the heartbeat that keeps them), the answer parser, what the provider
was seen to do with `n`, and the stop. Sample building and accounting are written here, once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import EnsembleError, InputError, RunStopped, StoreError
from ..providers.base import Choice
from .logprobs import compact as compact_logprobs
from .parsing import extract_answer
from .results import SampleFailure
from .store import SampleStore
from .types import JobStats, Parser, Sample, SampleRequest

__all__ = ["BUSY_POLL", "IN_FLIGHT_GRACE", "LEASE_TTL", "STATUS_EVERY_ENV", "RunContext",
           "contiguous", "default_parser", "request_meta", "status_interval"]

LEASE_TTL = 60.0  # seconds a lease lives without renewal (renewed every TTL / 3)
BUSY_POLL = 0.5  # seconds between checks for samples another process is drawing
OWN_POLL = 0.02  # seconds between checks for samples another request of this run is drawing
# seconds an interrupted run waits for the replies of its requests in flight (paid for
# already) to store them; a second Ctrl-C ends the wait
IN_FLIGHT_GRACE = 15.0
log = logging.getLogger("ensemble.sampling")

_SECRET_NAME = re.compile(r"(^|_)(api_?key|key|secret|password|authorization|access_token|"
                          r"auth_token|bearer)$", re.IGNORECASE)


def default_parser(text: str) -> str | None:
    return extract_answer(text)


def request_meta(model: str, req: SampleRequest, endpoint: str | None = None
                 ) -> dict[str, Any]:
    """What the store keeps of a request: endpoint, model, messages and parameters, never
    credentials (an endpoint identity carries none: see `normalise_api_base`)."""
    params = {k: v for k, v in req.params.as_dict().items() if not _SECRET_NAME.search(k)}
    meta: dict[str, Any] = {"model": model, "messages": list(req.messages), "params": params}
    if endpoint is not None:
        meta["endpoint"] = endpoint
    return meta


def contiguous(indices: Iterable[int]) -> list[list[int]]:
    """Sorted indices as runs of consecutive ones: [0, 1, 2, 5] -> [[0, 1, 2], [5]]."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


class RunContext:
    """One sampler's shared run state (see the module docstring). `cooldown` tells the
    progress bar how long the endpoint cools down after a 429 (0: not at all)."""

    def __init__(self, *, model: str, store: SampleStore | None, holder: str,
                 n_ok: bool | None, on_status: Callable[[str], None] | None,
                 status_every: float, progress: bool,
                 cooldown: Callable[[], float] | None = None) -> None:
        self.model = model
        self.store = store
        self.holder = holder
        self.stats = JobStats()
        self.n_ok = n_ok  # does the provider honour n? None: not known yet
        self.on_status = on_status
        self.status_every = status_every
        self.progress = progress
        self.cooldown = cooldown or (lambda: 0.0)
        self.parse: Parser = default_parser
        self.parsers: dict[str, Parser] = {}  # a request's own parser, by its store key
        self.stop: RunStopped | None = None
        self.last_progress = time.monotonic()
        # replies the store could not take (a full disk), kept to write again: (samples,
        # model, request metadata); the store's error; samples written or tried
        self.unstored: list[tuple[Sequence[Sample], str, dict[str, Any]]] = []
        self.store_error: StoreError | None = None
        self.put_samples = 0
        self._bar: Any = None
        self._task_id: Any = None
        self._t_start = 0.0
        self._done_start = 0
        self._bar_at = 0.0
        self._reading = False

    # -- words ---------------------------------------------------------------------------------
    def note(self, msg: str) -> None:
        """A note for the run's summary, once."""
        if msg not in self.stats.notes:
            self.stats.notes.append(msg)

    def say(self, line: str) -> None:
        """A status line, now (to `on_status`, else the "ensemble.sampling" logger)."""
        from ..secrets import redact

        line = redact(line)
        if self.on_status is not None:
            self.on_status(line)
        else:
            log.info("%s", line)

    def parser_for(self, key: str | None) -> Parser:
        """The parser of the request whose store key is `key`: its own (`Sampler.run`'s
        `parsers`: a file mixing kinds of question), else the run's."""
        return self.parsers.get(key, self.parse) if key is not None else self.parse

    def answer(self, text: str | None, key: str | None = None) -> str | None:
        if not text:
            return None
        try:
            return self.parser_for(key)(text)
        except Exception as exc:  # noqa: BLE001 - a parser bug makes an invalid answer, not a crash
            self.note(f"the answer parser raised {type(exc).__name__}; answer counted invalid")
            return None

    def stop_for(self, message: str, cause: BaseException | None = None) -> None:
        """Stop new requests (the first reason wins)."""
        if self.stop is None:
            self.stop = RunStopped(message, cause=cause) if cause is not None \
                else RunStopped(message)

    async def settle(self, tasks: Sequence[asyncio.Task[Any]], *, sent: int, why: str) -> None:
        """Before the sampler closes its provider and store: its requests whose callers are
        gone (the run was interrupted; `tasks`, each storing its reply) are paid for once
        sent (`sent` of them are), so wait a little (`IN_FLIGHT_GRACE` s) for their replies
        rather than throw them away (a rerun would pay for them again), and say how many
        there were. The others (waiting to be sent) end at once: the run is stopped. A second
        interruption ends the wait."""
        if not tasks:
            return
        if sent:
            self.stop_progress()
            self.say(f"{why}: waiting up to {IN_FLIGHT_GRACE:g} s for the {_requests(sent)} "
                     "in flight, to store their replies ("
                     + ("SIGTERM or " if "SIGTERM" in why else "") + "Ctrl-C again to drop them)")
        try:
            done, pending = await asyncio.wait(tasks, timeout=IN_FLIGHT_GRACE)
        except asyncio.CancelledError:
            left = min(sent, sum(not t.done() for t in tasks))
            if left:
                self.say(f"dropped {_requests(left)} of the {sent} in flight: a rerun asks "
                         f"for {'it' if left == 1 else 'them'} again")
            raise
        for t in pending:
            t.cancel()
        lost_before = self.lost
        self.flush()
        if not sent:
            return
        came = min(sent, sum(not t.cancelled() and t.exception() is None
                             and t.result() is not None for t in done))
        unstored = max(0, self.lost - lost_before)
        if came == sent and not unstored:
            self.say(f"stored the replies of all {_requests(sent)} in flight")
            return
        late = sent - came
        self.say(f"{came} of the {_requests(sent)} in flight returned within "
                 f"{IN_FLIGHT_GRACE:g} s" + (f", {unstored} of their samples could not be stored "
                                              f"({self.store_error})" if unstored else "")
                 + ": a rerun asks for " + ("those again" if late or unstored else "none"))

    # -- the store ---------------------------------------------------------------------------
    def put(self, samples: Sequence[Sample], *, model: str, request: dict[str, Any]) -> None:
        """Store one reply's samples (dropping this run's leases on them). A store that cannot
        be written (a full disk) stops new requests at once; what it could not take is kept
        here and written again with the next reply and before the sampler closes (`flush`)."""
        self.put_samples += len(samples)
        self.unstored.append((samples, model, request))
        self.flush()

    def flush(self) -> None:
        """Write the replies the store could not take yet, oldest first."""
        while self.unstored and self.store is not None:
            samples, model, request = self.unstored[0]
            try:
                self.store.put_many(samples, model=model, request=request, holder=self.holder)
            except StoreError as exc:
                self.store_failed(exc)
                return
            self.unstored.pop(0)

    def store_failed(self, exc: StoreError) -> None:
        """The store cannot be written: stop drawing (every new reply would be lost too)."""
        if self.store_error is None:
            self.store_error = exc
            self.stop_for(f"{exc}; stopped new requests", cause=exc)

    @property
    def lost(self) -> int:
        """Samples drawn (paid for) that the store could not take."""
        return sum(len(s) for s, _, _ in self.unstored)

    def store_outcome(self) -> None:
        """At the end of a run stopped by its store: the stop says how many samples drawn
        could not be stored, after one more try."""
        self.flush()
        self.stats.unstored = self.lost
        if self.store_error is None or self.stop is None or self.stop.cause is not \
                self.store_error:
            return
        what = (f"{self.lost} of {self.put_samples} samples drawn could not be stored (paid "
                "for: a rerun asks for them again)" if self.lost
                else "every sample drawn was stored")
        self.stop = RunStopped(f"{self.store_error}; stopped new requests: {what}",
                               cause=self.store_error)

    # -- samples ---------------------------------------------------------------------------------
    def account(self, prompt_tokens: int | None, completion_tokens: int | None,
                cost: float | None, *, recorded: bool = False) -> None:
        """One reply paid for (an online request or a batch line); `recorded`: served from a
        recording (a replay), which paid nothing now: its cost is kept apart, as recorded.
        A count the reply did not report is unknown, not 0."""
        st = self.stats
        if recorded:
            st.recorded_replies += 1
            st.recorded_cost_usd = (None if cost is None or st.recorded_cost_usd is None
                                    else st.recorded_cost_usd + cost)
            return
        st.prompt_tokens += prompt_tokens or 0
        st.completion_tokens += completion_tokens or 0
        st.prompt_tokens_unknown += prompt_tokens is None
        st.completion_tokens_unknown += completion_tokens is None
        if cost is None:
            st.cost_unknown_requests += 1
            st.cost_usd = None
        elif st.cost_usd is not None:
            st.cost_usd += cost

    def samples(self, key: str, start: int, choices: Sequence[Choice], *,
                prompt_tokens: int | None, completion_tokens: int | None, cost: float | None,
                latency: float | None, source: str = "online") -> list[Sample]:
        """The samples of one reply's choices, indices start.., usage and cost shared out."""
        share = max(1, len(choices))
        # the reply's completion tokens split over its choices so that they sum to the reply's:
        # each choice's own count where the provider gave them all and they add up (a replay's
        # recorded counts), else evenly
        each, extra = divmod(completion_tokens or 0, share)
        own = [ch.tokens for ch in choices]
        split = ([int(x) for x in own if x is not None]
                 if completion_tokens is not None and None not in own
                 and sum(x or 0 for x in own) == completion_tokens
                 else [each + (j < extra) for j in range(share)])
        answers = [self.answer(ch.text, key) for ch in choices]
        return [Sample(key=key, index=start + j, text=ch.text, answer=answers[j],
                       finish_reason=ch.finish_reason,
                       prompt_tokens=prompt_tokens if j == 0 else 0,
                       completion_tokens=(None if completion_tokens is None else split[j]),
                       cost_usd=None if cost is None else cost / share, latency_s=latency,
                       logprobs=ch.logprobs, source=source,
                       answer_lp=ch.answer_lp if ch.answer_lp is not None
                       else None if ch.logprobs is None
                       else compact_logprobs(ch.logprobs, answers[j], self.parser_for(key)))
                for j, ch in enumerate(choices)]

    def took(self, n: int, invalid: int, *, cached: int = 0, shared: int = 0) -> None:
        """`n` samples arrived (`invalid` of them without an answer)."""
        st = self.stats
        st.samples_done += n
        st.samples_cached += cached
        st.samples_shared += shared
        st.invalid += invalid
        if n:
            self.last_progress = time.monotonic()
            self.advance(n)

    def fill(self, row: list[Sample | None], got: Mapping[int, Sample], *,
             cached: bool = False, shared: bool = False) -> int:
        """Put samples read from the store into a row's empty slots; how many were new."""
        new = invalid = 0
        for i, s in got.items():
            if i < len(row) and row[i] is None:
                row[i] = s
                new += 1
                invalid += not s.valid
        self.took(new, invalid, cached=new if cached else 0, shared=new if shared else 0)
        return new

    def release(self, holder: str | None = None,
                keys: Sequence[tuple[str, int]] | None = None) -> None:
        """Drop leases (all of the holder's, or those on `keys`); a store gone bad is no
        reason to fail a run that is ending anyway."""
        if self.store is None:
            return
        try:
            self.store.release(holder or self.holder, keys)
        except EnsembleError:
            pass

    async def heartbeat(self, holders: Callable[[], Iterable[str]] = tuple) -> None:
        """Renew this run's leases (and `holders()`'s) every LEASE_TTL / 3, until cancelled."""
        while self.store is not None:
            await asyncio.sleep(LEASE_TTL / 3)
            try:
                self.store.renew(self.holder, LEASE_TTL)
                for h in holders():
                    self.store.renew(h, LEASE_TTL)
            except EnsembleError as exc:  # pragma: no cover - a store gone bad
                log.warning("%s", exc)

    def check_complete(self, rows: Sequence[Sequence[Sample | None]],
                       failures: Sequence[SampleFailure], what: str) -> None:
        """Never fewer samples than asked, silently: a row with a gap has a failure, or the
        run was stopped."""
        if self.stop is not None:
            return
        failed = {f.request for f in failures}
        for ri, row in enumerate(rows):
            if ri not in failed and any(s is None for s in row):
                raise EnsembleError(f"{self.model}: {what} got fewer samples than asked; this "
                                    "is a bug, please report it")

    # -- progress ------------------------------------------------------------------------------
    def start_progress(self) -> None:
        # a progress bar is for people: none when stderr is a pipe or a file
        if not self.progress or self._bar is not None or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        # the bar itself takes what the numbers leave (bar_width None, expand): at 80 columns
        # a fixed 40-cell bar cut the counts and the time left ("1200…", "0:00:…")
        # started before the store is read (a rerun's read of 80000 samples took 2-3 s of
        # silence): the stored samples fill the bar, under "stored", then "sampling" (`drawing`)
        self._bar = Progress(
            TextColumn("[bold]{task.fields[phase]}[/]"), BarColumn(bar_width=None),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TextColumn("{task.fields[info]}"),
            TimeRemainingColumn(), console=Console(stderr=True), transient=False, expand=True)
        self._bar.start()
        self._reading = self.store is not None  # no rate while stored samples fill the bar
        self._task_id = self._bar.add_task("sampling", total=self.stats.samples_total,
                                           completed=self.stats.samples_done, rate="",
                                           info="", phase="stored" if self._reading else
                                           "sampling")
        self._t_start = time.perf_counter()
        self._done_start = self.stats.samples_done
        self._bar_at = 0.0

    def drawing(self) -> None:
        """The store is read: the bar now counts samples drawn (their rate from here on)."""
        if self._bar is None:
            return
        self._reading = False
        self._bar.update(self._task_id, phase="sampling", rate="", info="")
        self._t_start = time.perf_counter()
        self._done_start = self.stats.samples_done
        self._bar_at = 0.0

    def advance(self, k: int) -> None:
        if self._bar is None:
            return
        now = time.perf_counter()
        self._bar.update(self._task_id, advance=k)
        # the text fields are costly: refresh them 5 times a second (none while reading)
        if self._reading or now - self._bar_at < 0.2:
            return
        self._bar_at = now
        s = self.stats
        el = max(1e-9, now - self._t_start)
        cool = self.cooldown()
        # only what happened, most telling first, and only what fits beside the counts and the
        # time left: a row of zeros ("retries 0 rate-limited 0 ... cost ?") cut the numbers
        # at 80 columns ("1200…", "0:00:…")
        info = [f"{n} {what}" for n, what in ((s.invalid, "invalid"),
                                              (s.rate_limited, "rate-limited"),
                                              (s.retries, "retries")) if n]
        if cool > 0:
            info.insert(0, f"cooling {cool:.0f}s")
        if s.cost_usd is not None:
            info.insert(0, f"${s.cost_usd:.4f}")
        rate = f"{(s.samples_done - self._done_start) / el:.1f}/s"
        # "sampling", a bar of at least 10, "M/N", the time left and the spaces between
        room = self._bar.console.width - (9 + 11 + 2 * len(str(s.samples_total)) + 2 + 8)
        kept: list[str] = []
        for part in [*info, rate]:
            if sum(len(x) + 1 for x in kept) + len(part) + 1 <= room:
                kept.append(part)
        self._bar.update(self._task_id, rate=rate if rate in kept else "",
                         info=" ".join(x for x in kept if x is not rate))

    def stop_progress(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _requests(n: int) -> str:
    return f"{n} request{'' if n == 1 else 's'}"


STATUS_EVERY_ENV = "ENSEMBLE_STATUS_EVERY"  # seconds between "waiting: ..." lines (default 10)


def status_interval(value: float | None) -> float:
    """Seconds between "waiting: ..." lines: `value`, else ENSEMBLE_STATUS_EVERY, else 10."""
    where = "status_every"
    if value is None:
        text = os.environ.get(STATUS_EVERY_ENV, "").strip()
        if not text:
            return 10.0
        where = STATUS_EVERY_ENV
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{STATUS_EVERY_ENV} must be a number of seconds > 0, got "
                             f"{text!r}") from None
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise InputError(f"{where} must be > 0 seconds, got {value!r}")
    return float(value)
