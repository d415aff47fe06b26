"""Fair admission: a worker process serves at most ``slots`` requests at once and at most
``per_identity`` of one identity; the requests waiting are admitted round-robin across the
identities asking.

Why: an agent within its own rate limit could send a burst of requests, each
taking a share of the worker's one interpreter, and every other client's request waited
behind the burst (p95 from 24 ms to 2.2 s). Now a burst queues behind its own identity: it
never holds more than ``per_identity`` slots, so another identity is admitted at once while
slots are free, and when they are all held, a freed slot goes to the next identity in turn.
Many different identities (the usual load: each agent its own) still run side by side, so
group commit keeps batching their appends.

The identity is one that **verified** (queueing by the claimed
``Engram-Signer`` let one address with 40 made-up signers take 40 queues and move another
client's median from 20 ms to seconds): a signed request whose signature verifies, here,
under a key of its agent that already authenticated a request or an event in this process
(:class:`KnownKeys`, filled by the request authenticator and the event route after they
verified against the log's key registry), or a ``POST /v1/events`` whose first event's
signature verifies the same way, queues as that agent; everything else, whatever it claims,
queues as the anonymous client of its address. Always together with the client address, so
a replayed signed request from elsewhere waits in its own queue. The check is one Ed25519
verification in the event loop (about 60 us), and no database read.

A slot is held from admission until the response starts (the work of a response is done by
then, except for a streamed export, whose pace is the reader's). The request body is read in
full before the request waits for a slot (bounded by :class:`api.limits.RequestLimits`, which
runs first, and by the server's request timeout), so a slow upload holds no slot.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from api.limits import read_body, replaying
from engram.protocol.errors import EngramError
from engram.protocol.httpsign import NONCE_PATTERN, TIMESTAMP_PATTERN, WINDOW_S, request_signing_input
from ledger.envelopes import parse_envelope
from verifier.event import verify_event_signature

__all__ = ["FairAdmission", "FairScheduler", "KnownKeys", "identity_of"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the claimed identity is only a queue name: bounded, so a huge header costs nothing here
_MAX_IDENTITY = 160


class FairScheduler:
    """At most ``slots`` holders at once, and at most ``per_identity`` of one identity;
    waiters are admitted one per identity in turn.

    Not thread-safe: used from one event loop. ``acquire(identity)`` returns once the caller
    holds a slot; every successful ``acquire`` is followed by exactly one
    ``release(identity)`` of the same identity.

    Invariant: after every call, no waiter is admissible (either every slot is held, or each
    waiting identity holds ``per_identity`` slots), so a new request may go straight in
    whenever it is admissible itself.
    """

    def __init__(self, slots: int, per_identity: int | None = None) -> None:
        if slots < 1 or (per_identity is not None and per_identity < 1):
            raise ValueError("slots must be at least 1")
        self.slots = slots
        self.per_identity = min(slots, per_identity or slots)
        self.active = 0
        self._held: dict[str, int] = {}
        #: identity -> its waiters, oldest first; the dict's order is the round-robin turn
        self._queues: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def held_by(self, identity: str) -> int:
        return self._held.get(identity, 0)

    def _take(self, identity: str) -> None:
        self.active += 1
        self._held[identity] = self._held.get(identity, 0) + 1

    async def acquire(self, identity: str) -> None:
        if self.active < self.slots and self._held.get(identity, 0) < self.per_identity:
            self._take(identity)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._queues.get(identity)
        if queue is None:
            queue = self._queues[identity] = deque()
        queue.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(identity)  # the slot was handed over as we were cancelled: pass it on
            else:
                self._forget(identity, fut)
            raise

    def _forget(self, identity: str, fut: asyncio.Future[None]) -> None:
        queue = self._queues.get(identity)
        if queue is None:
            return
        try:
            queue.remove(fut)
        except ValueError:
            return
        if not queue:
            del self._queues[identity]

    def release(self, identity: str) -> None:
        """Give back ``identity``'s slot, then admit waiters in turn while any is admissible."""
        self.active -= 1
        left = self._held[identity] - 1
        if left:
            self._held[identity] = left
        else:
            del self._held[identity]
        while self.active < self.slots and self._admit_next():
            pass

    def _admit_next(self) -> bool:
        """Admit the first waiter, in turn order, whose identity is under its share."""
        for identity, queue in self._queues.items():
            if self._held.get(identity, 0) >= self.per_identity:
                continue
            fut = queue.popleft()
            if queue:
                self._queues.move_to_end(identity)  # its next waiter goes to the back of the turn
            else:
                del self._queues[identity]
            if not fut.done():  # a cancelled waiter is skipped (it removes itself too)
                self._take(identity)
                fut.set_result(None)
            return True
        return False


#: the first envelope and signature of an events body, looked for in its first bytes only
_FIRST_ENVELOPE = re.compile(rb'"envelope"\s*:\s*"([A-Za-z0-9+/]{1,16384}={0,2})"')
_FIRST_SIGNATURE = re.compile(rb'"signature"\s*:\s*"([A-Za-z0-9+/]{86}==)"')
_SCAN_BYTES = 20_000


class KnownKeys:
    """Public keys that verified a request or an event of their agent in this process, for
    ``ttl_s`` seconds after the last time they did: the only identities fair admission
    trusts. Bounded (least recently verified agents go first); thread-safe (the request
    authenticator runs in worker threads)."""

    def __init__(
        self, *, max_agents: int = 10_000, ttl_s: float = 600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.origin: str | None = None
        #: The log's key registry (key id -> agent and public key; may read the database),
        #: for an event whose agent no request of this process has verified yet: fair
        #: admission then resolves its key in a worker thread, never in the event loop.
        self.lookup: Callable[[str], tuple[str, bytes] | None] | None = None
        #: Told of every event signature fair admission verified (signature, envelope bytes,
        #: public key): the log's append then need not verify it again (Ledger.verified).
        self.verified: Callable[[bytes, bytes, bytes], None] | None = None
        self.max_agents = max_agents
        self.ttl_s = ttl_s
        self._clock = clock
        self._keys: OrderedDict[str, dict[bytes, float]] = OrderedDict()
        self._lock = threading.Lock()

    def learn(self, agent: str, public_key: bytes) -> None:
        with self._lock:
            keys = self._keys.pop(agent, {})
            keys[public_key] = self._clock() + self.ttl_s
            if len(keys) > 4:  # a rotation or two: keep the freshest few
                keys = dict(sorted(keys.items(), key=lambda kv: kv[1])[-4:])
            self._keys[agent] = keys
            while len(self._keys) > self.max_agents:
                self._keys.popitem(last=False)

    def keys_of(self, agent: str) -> tuple[bytes, ...]:
        now = self._clock()
        with self._lock:
            keys = self._keys.get(agent)
            return () if keys is None else tuple(k for k, until in keys.items() if until > now)


def _header(scope: Scope, name: bytes) -> str | None:
    found = [v for k, v in scope.get("headers") or [] if k == name]
    return found[0].decode("latin-1") if len(found) == 1 else None


def _request_agent(scope: Scope, body: bytes, known: KnownKeys, window_s: int, now_s: float) -> str | None:
    """The agent of a signed request whose signature verifies under a known key, or None."""
    signer, ts, nonce, sig = (
        _header(scope, h)
        for h in (b"engram-signer", b"engram-timestamp", b"engram-nonce", b"engram-signature")
    )
    if signer is None or ts is None or nonce is None or sig is None or known.origin is None:
        return None
    if not signer.startswith("agent:") or len(signer) > _MAX_IDENTITY or not TIMESTAMP_PATTERN.fullmatch(ts):
        return None
    keys = known.keys_of(signer[6:])
    if not keys or abs(now_s - int(ts)) > window_s or not NONCE_PATTERN.fullmatch(nonce):
        return None
    try:
        signature = base64.b64decode(sig, validate=True)
        raw: bytes = scope.get("raw_path") or str(scope.get("path", "")).encode()
        query: bytes = scope.get("query_string") or b""
        target = raw.decode("ascii") + ("?" + query.decode("ascii") if query else "")
        msg = request_signing_input(
            origin=known.origin,
            method=str(scope.get("method", "")),
            target=target,
            signer=signer,
            timestamp=int(ts),
            nonce=nonce,
            body=body,
        )
    except (ValueError, binascii.Error, UnicodeDecodeError, EngramError):
        return None
    return signer[6:] if _verifies(keys, signature, msg) else None


def _verifies(keys: tuple[bytes, ...], signature: bytes, msg: bytes) -> bool:
    for key in keys:
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(signature, msg)
        except (InvalidSignature, ValueError):
            continue
        return True
    return False


def _event_agent(body: bytes, known: KnownKeys, *, lookup: bool = False) -> str | None:
    """The agent of the first signed event of a body (``POST /v1/events``, or a route that
    takes one signed event) if that event's signature verifies under a known key of its
    agent, else None. Found without parsing the whole body in the event loop (a batch may be
    a megabyte): the route parses and verifies every event. With ``lookup`` (in a worker
    thread), a key not known yet is looked up in the log's registry (``KnownKeys.lookup``)
    and learned once its signature verifies."""
    env_m = _FIRST_ENVELOPE.search(body, 0, _SCAN_BYTES)
    sig_m = _FIRST_SIGNATURE.search(body, 0, _SCAN_BYTES)
    if env_m is None or sig_m is None:
        return None
    try:
        raw = base64.b64decode(env_m.group(1), validate=True)
        signature = base64.b64decode(sig_m.group(1), validate=True)
        env = parse_envelope(raw)  # the parse the route's prepare edge takes up again (one per request)
    except (ValueError, binascii.Error, RecursionError, EngramError):
        return None
    keys = known.keys_of(env.agent)
    if not keys and lookup and known.lookup is not None:
        try:
            found = known.lookup(env.key_id)
        except EngramError:  # e.g. the database is down: the route answers that
            return None
        if found is None or found[0] != env.agent:
            return None
        keys = (found[1],)
    for key in keys:
        try:
            verify_event_signature(env, signature, key, envelope_jcs=raw)
        except EngramError:
            continue
        if known.verified is not None:
            known.verified(signature, raw, key)
        if lookup:
            known.learn(env.agent, key)
        return env.agent
    return None


def _carries_event(scope: Scope, body: bytes) -> bool:
    """A POST whose body may be a signed event: ``/v1/events`` and the agent routes that take
    one (memories, records, sessions, turns, keys)."""
    if scope.get("method") != "POST" or not body:
        return False
    path = scope.get("raw_path") or str(scope.get("path", "")).encode()
    return path.rstrip(b"/") == b"/v1/events" or path.startswith(b"/v1/agents/")


def identity_of(
    scope: Scope,
    body: bytes,
    known: KnownKeys | None = None,
    *,
    window_s: int = WINDOW_S,
    now_s: float | None = None,
    lookup: bool = False,
) -> str:
    """The queue a request waits in: its verified agent (or ``anonymous``) and its client
    address. Without ``known`` every request is anonymous. ``lookup``: see _event_agent."""
    who: str | None = None
    if known is not None:
        now = time.time() if now_s is None else now_s
        agent = _request_agent(scope, body, known, window_s, now)
        if agent is None and _carries_event(scope, body):
            agent = _event_agent(body, known, lookup=lookup)
        if agent is not None:
            who = "agent:" + agent[:_MAX_IDENTITY]
    client = scope.get("client")
    return f"{who or 'anonymous'}@{client[0] if client else 'unknown'}"


class FairAdmission:
    """ASGI middleware admitting requests through a :class:`FairScheduler`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        slots: int,
        per_identity: int,
        known: KnownKeys | None = None,
        window_s: int = WINDOW_S,
    ) -> None:
        self.app = app
        self.scheduler = FairScheduler(slots, per_identity)
        self.known = known
        self.window_s = window_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body, tail = await read_body(receive)  # a client gone away: the app sees it after the body
        replay = replaying(body, receive, tail)

        identity = identity_of(scope, body, self.known, window_s=self.window_s)
        if (
            identity.startswith("anonymous@")
            and self.known is not None
            and self.known.lookup is not None
            and _carries_event(scope, body)
        ):
            # An event of an agent this process has not verified yet (its first write here,
            # or registered through another worker): resolve its key off the event loop.
            identity = await anyio.to_thread.run_sync(
                functools.partial(identity_of, scope, body, self.known, window_s=self.window_s, lookup=True)
            )
        await self.scheduler.acquire(identity)
        held = True

        async def send_and_release(message: Message) -> None:
            nonlocal held
            if held and message.get("type") == "http.response.start":
                held = False
                self.scheduler.release(identity)
            await send(message)

        try:
            await self.app(scope, replay, send_and_release)
        finally:
            if held:
                self.scheduler.release(identity)
