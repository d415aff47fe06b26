"""The follower: keeps the memory projection in step with the log.

In process every operation syncs past its own appends (:meth:`Follower.sync`); while the
background follower runs (``engram serve``, :meth:`Follower.follow`), writes answer on
durability and a reader names the entry it must see (``Engram-Min-Index``,
:meth:`Follower.sync_through`). The follower folds and embeds; what it decides after a round
(the HOT caps) is handed to it by the memory service (:attr:`Follower.hold_caps`), so this
room imports no policy.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from engram.protocol.errors import RejectedEventError
from ledger.log import Ledger
from ledger.memory.projection import Projection
from ledger.memory.vectors import VectorIndex

__all__ = ["EMBED_LAG", "FOLLOWER_WAIT_S", "MAX_LAG", "Follower"]

_log = logging.getLogger("engram.memory")

#: How long a caller waits for the background follower's round before it applies the log
#: itself (Follower.sync): a few rounds under load; a stalled follower costs this once.
FOLLOWER_WAIT_S = 2.0
#: The most entries the door leaves unapplied in process (:meth:`Follower.defer`) before it
#: applies them itself: the next reader never pays for more than this many at once.
MAX_LAG = 256
#: A write's sync leaves the embedding of what it applied to a later batch until this many
#: applied entries wait for vectors (:meth:`Follower.sync` with ``embed=False``); a reader's
#: sync embeds everything first, so recall ranks every item it can see with its vector.
EMBED_LAG = 128


class Follower:
    """The projection's one applier per process, and the background round that runs it."""

    def __init__(self, ledger: Ledger, projection: Projection, vectors: VectorIndex | None) -> None:
        self.ledger = ledger
        self.projection = projection
        self.vectors = vectors
        #: What a round does for each agent whose HOT changed (the service wires the caps).
        self.hold_caps: Callable[[str], object] = lambda agent: None
        #: Log indices of this service's own access records appended but not yet applied to
        #: the projection: recall does not queue behind the writer applying them (uses never
        #: change what recall returns).
        self._unapplied_uses: set[int] = set()
        self._uses_lock = threading.Lock()
        #: held while this process applies the log to the projection (see sync)
        self._projector = threading.Lock()
        #: held while this process embeds new items; never held with the projector
        self._embedding = threading.Lock()
        #: Set while :meth:`follow` runs: the door then answers on durability and leaves the
        #: projection and the HOT caps to the follower.
        self._following = False
        #: wakes the follower when the door appended something it folds
        self._wake = threading.Event()
        #: agents whose HOT changed since the follower last held their caps
        self._caps_due: set[str] = set()
        self._due_lock = threading.Lock()
        #: The follower's thread, and the size its last round applied, announced on
        #: ``_applied_cv``: while it runs, a caller that needs the projection at a size waits
        #: for a round instead of applying the log itself.
        self._follower: int | None = None
        self._follower_applied = 0
        self._applied_cv = threading.Condition()
        #: The first entry the door deferred (:meth:`defer`) since the last sync, or None.
        self._deferred_from: int | None = None

    @property
    def following(self) -> bool:
        """Whether the background follower runs (writes then answer on durability)."""
        return self._following

    def due(self, agents: Iterable[str]) -> None:
        """The door appended entries the follower folds: wake it, and hold these agents'
        HOT caps in its next round."""
        with self._due_lock:
            self._caps_due.update(agents)
        self._wake.set()

    def defer(self, size: int) -> None:
        """The door appended entries up to ``size`` whose answer needs nothing from the
        projection (``ledger.memory.door.DEFERRED_KINDS``): leave them to the next sync (every
        read syncs before it reads), which applies and embeds them with the others in one
        transaction and one embedder batch, instead of one of each per write. Once
        :data:`MAX_LAG` entries wait, sync now."""
        with self._due_lock:
            first = self._deferred_from
            if first is None:
                self._deferred_from = first = size - 1
        if size - first >= MAX_LAG:
            self.sync(size, embed=False)

    def sync(self, min_size: int | None = None, *, embed: bool = True) -> int:
        """Bring the projection to at least ``min_size`` (default: the latest checkpoint),
        then embed what it added (an embedder failure never fails the caller). With
        ``embed=False`` (the writes' own syncs: a close, a decision), the embedding waits
        until :data:`EMBED_LAG` applied entries lack vectors, then goes in one batch; every
        reader's sync (recall, the queries) embeds what is pending before it reads.

        Concurrent callers of one process share the work: one at a time holds the
        projector, and it applies everything committed so far, so the callers queued behind
        it (whose entries were committed before it read the log's size) find their entries
        applied and return after one read. One projection transaction per group of writes
        instead of one per write; across processes the cursor row is the lock.

        While the background follower runs (:meth:`follow`), a caller other than the
        follower waits for the follower's round to reach the size it needs (at most
        ``FOLLOWER_WAIT_S``; then it applies the log itself): a read under load then takes no
        projection write transaction, which would queue on the writer lock the appends hold,
        and the appends wait for no reader."""
        if self._following and threading.get_ident() != self._follower:
            applied = self._by_follower(min_size)
            if applied is not None:
                self._embed_after(applied, embed)
                return applied
        with self._projector:
            applied = self.projection.sync()
            if min_size is not None and applied < min_size:
                applied = self.projection.sync(min_size)
            with self._due_lock:
                if self._deferred_from is not None and self._deferred_from < applied:
                    self._deferred_from = None
        self._embed_after(applied, embed)
        return applied

    def _embed_after(self, applied: int, embed: bool) -> None:
        if embed or (self.vectors is not None and applied - self.projection.embedded_size() >= EMBED_LAG):
            self.embed_pending()

    def _by_follower(self, min_size: int | None) -> int | None:
        """The applied size once the projection holds ``min_size`` entries (default: the
        latest checkpoint), applied by the follower; None if it did not within
        ``FOLLOWER_WAIT_S`` or stopped."""
        target = self.ledger.store.latest_checkpoint().size if min_size is None else min_size
        applied = self.projection.applied_size()
        if applied >= target:
            return applied
        deadline = time.monotonic() + FOLLOWER_WAIT_S
        self._wake.set()
        with self._applied_cv:
            while self._follower_applied < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._following:
                    return None
                self._applied_cv.wait(left)
            return self._follower_applied

    def applied_in_pass(self, size: int) -> None:
        """The append pass applied the projection through ``size`` and committed
        (ledger.memory.in_pass): the readers waiting for a round that reaches it go on, and
        what the door deferred below it is applied."""
        with self._due_lock:
            if self._deferred_from is not None and self._deferred_from < size:
                self._deferred_from = None
        self._applied(size)

    def _applied(self, size: int) -> None:
        with self._applied_cv:
            self._follower_applied = max(self._follower_applied, size)
            self._applied_cv.notify_all()

    def embed_pending(self) -> None:
        """Embed what the projection added, outside the projector lock (an embedder call
        inside it made every write and recall of the process wait on a slow endpoint). One
        thread embeds at a time; another finding it busy does not wait (recall ranks the few
        items not embedded yet without vectors, and says so)."""
        if self.vectors is None or not self._embedding.acquire(blocking=False):
            return
        try:
            self.vectors.embed_pending()
        finally:
            self._embedding.release()

    def follow(self, stop: threading.Event, interval_s: float = 0.5) -> None:
        """The service's background projector until ``stop`` is set.

        While it runs, the door answers a write as soon as its entry is durable in the log
        and wakes it (:meth:`due`); each round applies everything committed since the last
        one in one projection transaction, then holds the HOT caps of the agents whose HOT
        the door changed. At start-up it catches up a lagging projection and holds every
        agent's caps once: a process that died between a write and its caps leaves nothing
        undone (the caps are a function of the log, decided again from it). A round
        otherwise wakes every ``interval_s`` (other processes' writes). A failing round is
        logged and retried; a reader that must see a write names it (``Engram-Min-Index``)
        and syncs through it itself, so no read depends on this thread's progress."""
        self._follower = threading.get_ident()
        self._following = True
        try:
            self._round(everyone=True)
            while not stop.is_set():
                woken = self._wake.wait(interval_s)
                self._wake.clear()
                if not stop.is_set():
                    self._round(embed=not woken)  # a quiet interval: embed what is pending
        finally:
            self._following = False
            with self._applied_cv:
                self._applied_cv.notify_all()  # whoever waits for a round applies the log itself
            self._round(embed=True)  # what was acknowledged while following gets its caps now
            self._follower = None

    def _round(self, *, everyone: bool = False, embed: bool = False) -> None:
        """One round: apply the log, embed, hold the caps due. A round under load (it applied
        new entries) leaves the embedding to a batch of :data:`EMBED_LAG` entries, as a
        write's sync does: one embedder call and one vector write per batch, not per round
        (each round of each worker embedded its few entries, and two workers raced for the
        same range, the loser's vectors thrown away). A round after a quiet interval (no write
        of this process woke it: :meth:`follow`), the first and the last embed everything
        pending; a reader's sync embeds first (:meth:`sync`), so recall never ranks what it
        can see without its vector."""
        try:
            with self._projector:
                applied = self.projection.sync()
            self._applied(applied)  # the callers waiting for this round go on
            self._embed_after(applied, embed or everyone)
            with self._due_lock:
                due, self._caps_due = self._caps_due, set()
            for agent in self.projection.agents() if everyone else sorted(due):
                self.hold_caps(agent)
        except Exception:  # the follower must never die; requests still sync themselves
            _log.exception("the projection follower's round failed")

    def sync_through(self, index: int | None) -> int:
        """Read-your-writes for a reader that names the last entry it must see (its own
        latest write): return at once if the projection already holds entry ``index``
        (the background follower usually has applied it), else apply up to it. With None,
        :meth:`sync` to the latest checkpoint. Returns the applied size."""
        if index is None:
            return self.sync()
        applied = self.projection.applied_size()
        if applied > index:
            return applied
        size = self.ledger.size()
        if index >= size:
            raise RejectedEventError(
                f"entry {index} is not in the log (its size is {size})", check="request.min_index"
            )
        return self.sync(index + 1)

    def sync_for_recall(self) -> int:
        """:meth:`sync`, except when the only entries the projection lacks are this service's
        own access records, which the access writer is applying at that moment: then recall
        reads as of the applied size instead of waiting for the writer's transaction."""
        target = self.ledger.store.latest_checkpoint().size
        applied = self.projection.applied_size()
        if applied < target:
            with self._uses_lock:
                own = all(i in self._unapplied_uses for i in range(applied, target))
            if not own:
                return self.sync(target)
        self.embed_pending()
        return applied

    @contextmanager
    def applying_uses(self, indices: Iterable[int]) -> Iterator[None]:
        """While the access writer applies its own records ``indices``, recall does not wait
        for them (:meth:`sync_for_recall`)."""
        own = set(indices)
        with self._uses_lock:
            self._unapplied_uses |= own
        try:
            yield
        finally:
            with self._uses_lock:
                self._unapplied_uses -= own
