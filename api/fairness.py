"""Fair admission: a worker process serves at most ``slots`` requests at once and at most
``per_identity`` of one identity; the requests waiting are admitted round-robin across the
identities asking.

Why (issue 15): an agent within its own rate limit could send a burst of requests, each
taking a share of the worker's one interpreter, and every other client's request waited
behind the burst (p95 from 24 ms to 2.2 s). Now a burst queues behind its own identity: it
never holds more than ``per_identity`` slots, so another identity is admitted at once while
slots are free, and when they are all held, a freed slot goes to the next identity in turn.
Many different identities (the usual load: each agent its own) still run side by side, so
group commit keeps batching their appends.

The identity is what the request claims before authentication (it has not been checked
yet): the ``Engram-Signer`` of a signed request, else the agent of an ``/v1/agents/<id>/``
path, else the agent of the first event of ``POST /v1/events``, else ``anonymous``; always
together with the client address. A request claiming someone else's identity from another
address waits in its own queue, and one that fails authentication is refused quickly.

A slot is held from admission until the response starts (the work of a response is done by
then, except for a streamed export, whose pace is the reader's). The request body is read in
full before the request waits for a slot (bounded by :class:`api.limits.RequestLimits`, which
runs first, and by the server's request timeout), so a slow upload holds no slot.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from api.limits import replaying

__all__ = ["FairAdmission", "FairScheduler", "identity_of"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_AGENT_PATH = re.compile(rb"^/v1/(?:oracle/)?agents/([^/?]{1,128})")
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


#: the first envelope of an events body, looked for in its first bytes only
_FIRST_ENVELOPE = re.compile(rb'"envelope"\s*:\s*"([A-Za-z0-9+/]{1,16384}={0,2})"')
_SCAN_BYTES = 20_000


def _event_agent(body: bytes) -> str | None:
    """The agent named by the first envelope of a ``POST /v1/events`` body, or None. Only a
    queue name, found without parsing the whole body in the event loop (a batch may be a
    megabyte): the events are parsed strictly and verified later by the route."""
    m = _FIRST_ENVELOPE.search(body, 0, _SCAN_BYTES)
    if m is None:
        return None
    try:
        agent = json.loads(base64.b64decode(m.group(1), validate=True)).get("agent")
    except (ValueError, AttributeError, binascii.Error, RecursionError):
        return None
    return agent if isinstance(agent, str) else None


def identity_of(scope: Scope, body: bytes) -> str:
    """The queue a request waits in: its claimed identity and its client address."""
    who: str | None = None
    for name, value in scope.get("headers") or []:
        if name == b"engram-signer":
            who = value[:_MAX_IDENTITY].decode("latin-1")
            break
    if who is None:
        raw = scope.get("raw_path") or scope.get("path", "").encode()
        m = _AGENT_PATH.match(raw)
        if m is not None:
            who = "agent:" + m.group(1).decode("latin-1")
        elif scope.get("method") == "POST" and raw.rstrip(b"/") == b"/v1/events" and body:
            agent = _event_agent(body)
            if agent is not None:
                who = "agent:" + agent[:_MAX_IDENTITY]
    client = scope.get("client")
    return f"{who or 'anonymous'}@{client[0] if client else 'unknown'}"


class FairAdmission:
    """ASGI middleware admitting requests through a :class:`FairScheduler`."""

    def __init__(self, app: ASGIApp, *, slots: int, per_identity: int) -> None:
        self.app = app
        self.scheduler = FairScheduler(slots, per_identity)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        tail: Message | None = None
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                tail = message  # the client went away: the app sees it after the body
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replay = replaying(body, receive, tail)

        identity = identity_of(scope, body)
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
