"""Access logging off the reader's path: recalls enqueue uses, a writer appends them in batches.

Every recall that returns items records a ``memory.accessed`` policy entry (uses count for
decay and promotion, never for relevance). Appending one per recall made each reader wait
for a signature, a transaction and an fsync. Here a recall only enqueues; one background
thread per service drains the queue, merges what was queued for the same agent (up to the
schema's 100 items per entry) and appends each agent's entries in one batch (one transaction,
one fsync), still signed by the ledger's policy key and one durable log entry per use record.
Recall does not wait for the writer to apply its own entries to the projection
(``MemoryService._sync_for_recall``), and applying one is a single UPDATE.

**No raw query is signed**: a recall's query is what the user typed, secrets and
all, and an access entry cannot be erased with the turn it came from. An entry carries
``query_digest`` instead: HMAC-SHA256 of the normalised query under a key derived from the
ledger's policy key (:func:`query_key`), so an operator holding that key can tell that two
uses answered the same query, and nobody can read or guess-and-check a query without it.

Uses are advisory data: if the process dies before the queue drains, the uses of the last
moments are lost, which only makes decay slightly more eager; nothing acknowledged to a
writer is. Anything that decides on uses (compaction, planning, session end) calls
:meth:`AccessLog.flush` first, so a decision never misses a use recorded before it.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from engram.protocol.schemas import MAX_ACCESSED

__all__ = ["AccessLog", "Use", "query_digest", "query_key"]

_KEY_DOMAIN = b"engram/access-query-key/v1"
_DIGEST_DOMAIN = b"engram/access-query/v1\x00"


def query_key(policy_key: Ed25519PrivateKey) -> bytes:
    """The secret the access entries' query digests are keyed with, derived from the
    ledger's policy key (domain-separated; every host holding that key derives the same)."""
    raw = policy_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return hmac.new(raw, _KEY_DOMAIN, hashlib.sha256).digest()


def query_digest(key: bytes, agent: str, query: str) -> str:
    """HMAC-SHA256 of one agent's query, case-folded with whitespace collapsed."""
    norm = " ".join(query.casefold().split())
    msg = _DIGEST_DOMAIN + agent.encode() + b"\x00" + norm.encode("utf-8", "surrogatepass")
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


log = logging.getLogger(__name__)

#: How long the writer waits for more uses before appending what it has (seconds). Each
#: append holds the interpreter for some milliseconds, which readers running beside it feel;
#: a second of lingering makes it about one append a second however busy recall is (at 50 ms
#: a closed loop of recalls at 10^5 memories ran at p50 27-30 ms instead of 17 ms).
LINGER_S = 1.0


@dataclass(frozen=True, slots=True)
class Use:
    agent: str
    refs: tuple[str, ...]
    query: str
    session: str | None


class AccessLog:
    """Queues uses and appends them as ``memory.accessed`` entries in a background thread."""

    def __init__(
        self, append: Callable[[str, Sequence[Mapping[str, Any]]], object], *, key: bytes | None = None
    ) -> None:
        """``append(agent, bodies)`` appends one agent's ``memory.accessed`` bodies in one batch;
        ``key`` keys the query digests (:func:`query_key`; none: no digest is written)."""
        self._append = append
        self._key = key
        self._queue: queue.Queue[Use | threading.Event] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.failures = 0

    def record(self, use: Use) -> None:
        self._ensure_thread()
        self._queue.put(use)

    def flush(self, timeout: float | None = 60.0) -> None:
        """Return once every use queued before this call is appended (or failed)."""
        if self._thread is None:
            return
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="engram-access-log", daemon=True)
                self._thread.start()
                atexit.register(self.flush, 10.0)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            batch: list[Use | threading.Event] = [first]
            # Linger briefly to gather uses that follow (a burst of recalls becomes a few
            # entries), unless someone is waiting on a flush.
            deadline = time.monotonic() + (0.0 if isinstance(first, threading.Event) else LINGER_S)
            while True:
                try:
                    batch.append(self._queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
                if isinstance(batch[-1], threading.Event):
                    deadline = 0.0
            uses = [u for u in batch if isinstance(u, Use)]
            per_agent: dict[str, list[dict[str, Any]]] = {}
            for body_agent, body in _bodies(uses, self._key):
                per_agent.setdefault(body_agent, []).append(body)
            for body_agent, agent_bodies in per_agent.items():
                try:
                    self._append(body_agent, agent_bodies)  # one batch: one transaction and fsync
                except Exception:  # an advisory record must never kill the writer thread
                    self.failures += 1
                    log.exception("could not record a memory use for %s", body_agent)
            for ev in batch:
                if isinstance(ev, threading.Event):
                    ev.set()


def _bodies(uses: list[Use], key: bytes | None) -> list[tuple[str, dict[str, Any]]]:
    """Merge queued uses: consecutive uses of one agent in one session share an entry (the
    query digest kept is the first one's), up to the schema's item limit."""
    out: list[tuple[str, dict[str, Any]]] = []
    for u in uses:
        last = out[-1] if out else None
        if (
            last is not None
            and last[0] == u.agent
            and last[1].get("session") == u.session
            and len(last[1]["items"]) + len(u.refs) <= MAX_ACCESSED
        ):
            items = last[1]["items"]
            items += [r for r in u.refs if r not in items]
            continue
        body: dict[str, Any] = {"items": list(dict.fromkeys(u.refs))[:MAX_ACCESSED]}
        if u.query.strip() and key is not None:
            body["query_digest"] = query_digest(key, u.agent, u.query)
        if u.session:
            body["session"] = u.session
        out.append((u.agent, body))
    return out
