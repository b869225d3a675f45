"""The idempotent vote cache: a request with an `Idempotency-Key` is decided once, fleet-wide.

A load balancer that retries a request on another replica (a timeout, a replica killed
mid-vote) must not pay for the vote twice. The first replica to see a key claims it (a pending
entry, renewed by that replica's heartbeat while it decides); a retry that arrives meanwhile
waits for the answer; once decided, the reply as sent (its content type and bytes) is kept for
`ttl` seconds and every retry gets it back, marked `Idempotent-Replayed: true`, with the
headers the first reply carried (the vote's `x-ensemble-*`). A claim whose
replica died expires `lease_ttl` seconds after its last renewal, and the retry then decides it.
A reply that is not a vote (an error) is not kept: the claim is dropped and a retry decides
again. The same key with another body is refused (the client reused a key by mistake).

With Redis: a hash per key (state, the body's fingerprint, the owner, the reply, its headers),
changed by Lua scripts. The headers are a field of their own, so replicas of an older version
(which kept only the body) and this one read each other's entries during a rolling upgrade.
Without Redis, or while it is down: the same semantics inside this replica only.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import time
from dataclasses import dataclass

from .connection import FleetConnection, FleetDown

__all__ = ["Claim", "KeyReused", "Reply", "VoteCache"]

_CLAIM = """
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  redis.call('HSET', KEYS[1], 'state', 'pending', 'fp', ARGV[1], 'owner', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  return {'new', ''}
end
if redis.call('HGET', KEYS[1], 'fp') ~= ARGV[1] then return {'conflict', ''} end
if state == 'done' then
  return {'done', redis.call('HGET', KEYS[1], 'reply'),
          redis.call('HGET', KEYS[1], 'headers') or ''}
end
return {'pending', ''}
"""

_DONE = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'reply', ARGV[2], 'headers', ARGV[4])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"""

_DROP = """
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1]
   and redis.call('HGET', KEYS[1], 'state') == 'pending' then
  redis.call('DEL', KEYS[1])
end
return 1
"""

_RENEW = """
for i = 1, #KEYS do
  if redis.call('HGET', KEYS[i], 'owner') == ARGV[1]
     and redis.call('HGET', KEYS[i], 'state') == 'pending' then
    redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2]))
  end
end
return 1
"""

_POLL = 0.05  # seconds between looks at a claim another replica holds


class KeyReused(Exception):
    """The idempotency key was used before with another request body."""


@dataclass(frozen=True)
class Reply:
    """A reply as it was sent: its content type, body bytes and the headers a retry gets too
    (the vote's `x-ensemble-*`; not the transport's)."""

    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Claim:
    """What `VoteCache.claim` found: a reply to send again (`reply`), or this replica's turn
    to decide (`key`, to `keep` or `drop` when done)."""

    key: str
    reply: Reply | None = None  # the reply kept
    shared: bool = False  # claimed in Redis (else in this replica)


class VoteCache:
    """Replies by idempotency key (see the module's docstring); `conn` None: this replica."""

    def __init__(self, conn: FleetConnection | None, *, ttl: float = 86400.0,
                 lease_ttl: float = 15.0) -> None:
        self.conn = conn
        self.ttl = float(ttl)
        self.lease_ttl = float(lease_ttl)
        self.replays = 0
        self._local: dict[str, tuple[str, str, Reply | None, float]] = {}
        self._pending: set[str] = set()
        if conn is not None:
            conn.on_beat(self._renew)

    def _key(self, scope: str, key: str) -> str:
        h = hashlib.sha256(f"{scope}\x1f{key}".encode()).hexdigest()[:32]
        if self.conn is None:
            return h
        return self.conn.key("idem", h, tag="idem")  # one slot: a beat renews them at once

    async def claim(self, scope: str, key: str, body: bytes, *, timeout: float) -> Claim:
        """The reply kept for (scope, key), waiting up to `timeout` seconds while another
        replica decides it; else a claim to decide it here. `KeyReused` if the key came with
        another body; `asyncio.TimeoutError` if the other replica neither answers nor dies
        in time."""
        fp = hashlib.sha256(body).hexdigest()
        k = self._key(scope, key)
        deadline = time.monotonic() + timeout
        while True:
            got = await self._try(k, fp)
            if got is not None:
                return got
            if time.monotonic() >= deadline:
                raise asyncio.TimeoutError
            await asyncio.sleep(_POLL)

    async def _try(self, k: str, fp: str) -> Claim | None:
        if self.conn is not None and self.conn.usable():
            with contextlib.suppress(FleetDown):
                state, reply, *headers = await self.conn.run(
                    _CLAIM, [k], [fp, self.conn.replica_id, int(self.lease_ttl * 1000)])
                if state == "conflict":
                    raise KeyReused(k)
                if state == "done":
                    self.replays += 1
                    return Claim(k, reply=_unpack(reply, headers[0] if headers else ""),
                                 shared=True)
                if state == "new":
                    self._pending.add(k)
                    return Claim(k, shared=True)
                return None
        return self._try_local(k, fp)

    def _try_local(self, k: str, fp: str) -> Claim | None:
        now = time.monotonic()
        for old in [x for x, v in self._local.items() if v[3] <= now]:
            del self._local[old]
        cur = self._local.get(k)
        if cur is None:
            self._local[k] = ("pending", fp, None, now + self.ttl)
            return Claim(k)
        if cur[1] != fp:
            raise KeyReused(k)
        if cur[0] == "done":
            self.replays += 1
            return Claim(k, reply=cur[2])
        return None

    async def keep(self, claim: Claim, reply: Reply) -> None:
        """The reply of a decided claim, for every retry of its key."""
        self._pending.discard(claim.key)
        if claim.shared and self.conn is not None and self.conn.usable():
            with contextlib.suppress(FleetDown):
                await self.conn.run(_DONE, [claim.key], [
                    self.conn.replica_id, _pack(reply.content_type, reply.body),
                    int(self.ttl * 1000), json.dumps(dict(reply.headers))])
                return
        cur = self._local.get(claim.key)
        fp = cur[1] if cur is not None else ""
        self._local[claim.key] = ("done", fp, reply, time.monotonic() + self.ttl)

    async def drop(self, claim: Claim) -> None:
        """The claim ends without a reply to keep (an error): a retry decides again."""
        self._pending.discard(claim.key)
        if claim.shared and self.conn is not None and self.conn.usable():
            with contextlib.suppress(FleetDown):
                await self.conn.run(_DROP, [claim.key], [self.conn.replica_id])
        cur = self._local.get(claim.key)
        if cur is not None and cur[0] == "pending":
            del self._local[claim.key]

    async def _renew(self) -> None:
        if self._pending and self.conn is not None:
            await self.conn.run(_RENEW, sorted(self._pending),
                                [self.conn.replica_id, int(self.lease_ttl * 1000)])


def _pack(content_type: str, body: bytes) -> str:
    return content_type + "\n" + base64.b64encode(body).decode("ascii")


def _unpack(stored: str, headers: str) -> Reply:
    content_type, _, data = stored.partition("\n")
    # an entry kept by a replica of an older version has no headers: the body alone
    kept = json.loads(headers) if headers else {}
    return Reply(content_type, base64.b64decode(data), tuple(sorted(kept.items())))
