"""The append pass's projector: the memory projection applied, for exactly the entries an
append commits, in the transaction that commits them (the log's commit hook,
``Ledger.on_commit_tx``; the memory service registers it).

Before, each worker's follower re-read what had just been written and applied it in a
write transaction of its own, queued on the writer lock behind the appends (about a fifth
of a server's Python time). Now the committing pass applies it from the batch in memory
(:func:`ledger.memory.projection_events.committed_events`), and the follower only catches
up what the pass left (and embeds, and holds the HOT caps).

When it applies (else it leaves the batch to the follower, whose catch-up is unchanged):

1. the batch erased no body and holds no ``memory.erased`` (an erasure refolds the agent
   from the log as stored after it: the follower's ``_refold``);
2. the projection cursor, locked, equals the batch's first index (the projection holds
   exactly the entries before the batch) and no deferred full-text rebuild is pending.

Correctness (the invariant: the projection tables are the fold of entries
``[0, mem_cursor.applied_size)``, so that catch-up, then digest, equals a rebuild's):

* **Same fold.** The events are what ``read_events`` returns for those indices (checked by
  a property test), folded with :func:`ledger.memory.state.evolve` through the same
  :class:`BatchState`, in index order, from the state of exactly ``[0, start)`` (step 2).
  So the result is the one ``Projection.sync`` writes for them.
* **Atomic with the log.** The rows and the cursor advance are written in the append's
  own transaction, after its leaves: they commit with the entries or not at all. A crash
  (SIGKILL, power) before the commit loses the entries and the projection rows together;
  after it, both are durable. No state has rows without leaves or leaves counted as
  applied without rows.
* **Failure.** The hook runs in a SAVEPOINT (ledger.append): an error rolls back to it
  (rows and cursor untouched), is logged, the entries still commit, and the cursor stays
  at ``start``, so the follower applies them later (the projection is a function of the
  log).
* **Concurrent processes.** Appends are serialized by the log's writer lock (SQLite:
  ``BEGIN IMMEDIATE`` and the host's lock file; PostgreSQL: ``log_state FOR UPDATE``),
  which this runs under, so ``start`` is the committed size and nothing else appends
  meanwhile. Every projection writer (this, ``Projection.sync``, a rebuild's reset) takes
  the cursor row first. On SQLite the write transaction excludes every other writer. On
  PostgreSQL the lock order is ``log_state`` then ``mem_cursor``, and no projector waits
  for ``log_state`` while holding ``mem_cursor``, so no cycle; the cursor is taken with
  ``SKIP LOCKED``: a projector holding it (catching up, SERIALIZABLE) makes this batch
  fall back instead of stalling every append behind it. The append transaction is READ
  COMMITTED: each statement after the cursor lock sees every projection write committed
  before (all of them took that lock and released it at commit), and none can commit while
  it is held. A SERIALIZABLE projector that started before this commit and then locks the
  cursor gets a serialization failure and retries from the new cursor.

Embedding stays off the write transaction (the follower and the embed batches do it), and
the HOT caps stay the follower's round (the door still wakes it: ``Follower.due``). Readers
waiting for the follower see the applied size advance as soon as the append committed
(:meth:`Follower.applied_in_pass`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import Connection

from ledger.append import CommittedBatch
from ledger.memory.follower import Follower
from ledger.memory.projection_events import committed_events
from ledger.memory.projection_state import BatchState
from ledger.memory.state import evolve

__all__ = ["InPassProjector"]

_log = logging.getLogger("engram.memory")

_CURSOR_SQLITE = "SELECT applied_size, fts_deferred FROM mem_cursor WHERE id = 1"
#: The cursor row, or no row while another projector holds it (then: fall back).
_CURSOR_POSTGRES = _CURSOR_SQLITE + " FOR UPDATE SKIP LOCKED"


class InPassProjector:
    """The commit hook that applies the projection for what the append commits (module
    docstring); counts what it applied and what it left to the follower."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower
        self._lock = threading.Lock()
        #: entries applied in the append pass, and entries left to the follower (committed)
        self.applied = 0
        self.left = 0

    def __call__(self, conn: Connection, batch: CommittedBatch) -> Callable[[], None] | None:
        """Apply ``batch`` in ``conn``'s transaction when it can (module docstring, 1-2);
        returns the announcement the log calls once the transaction committed."""
        end = batch.end
        events = committed_events(batch) if self._applies(conn, batch) else None
        if events is None:
            return lambda: self._left(len(batch.leaves))
        state = BatchState(conn)
        state.prefetch(events)
        for ev in events:
            evolve(state, ev)
        state.flush()
        ph = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        conn.exec_driver_sql(f"UPDATE mem_cursor SET applied_size = {ph} WHERE id = 1", (end,))  # noqa: S608 - a placeholder

        def announce() -> None:
            with self._lock:
                self.applied += len(events)
            self.follower.applied_in_pass(end)

        return announce

    def _applies(self, conn: Connection, batch: CommittedBatch) -> bool:
        # 1. nothing an erasure touches
        if batch.erased or any(leaf.envelope.kind == "memory.erased" for leaf in batch.leaves):
            return False
        # 2. the projection holds exactly the entries before the batch (the cursor locked)
        sql = _CURSOR_POSTGRES if conn.dialect.name == "postgresql" else _CURSOR_SQLITE
        row = conn.exec_driver_sql(sql).one_or_none()
        return row is not None and int(row[0]) == batch.start and not bool(row[1])

    def _left(self, entries: int) -> None:
        with self._lock:
            self.left += entries
        self.follower.due(())
