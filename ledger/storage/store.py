"""SQL storage adapter for the log (SQLite and PostgreSQL through SQLAlchemy Core).

Ordering is a storage invariant. Every append runs in one transaction that first takes the
log's single writer lock, then reads the log size, assigns the next indices, and commits
leaves, Merkle nodes, stream heads, key state and the new signed checkpoint together.

Why a single lock and not a sequence: indices must be dense (a leaf index is a position in
the Merkle tree) and must appear in commit order. A database sequence hands out numbers
that a rolled-back transaction never uses (gaps) and lets a later index commit before an
earlier one (a reader would see a hole). Serializing appends on one lock costs little
because an append is a handful of indexed inserts, and it makes "size = number of leaves"
true in every committed state.

* SQLite: ``BEGIN IMMEDIATE`` takes the database's one write lock at the start of the
  transaction (other processes wait up to busy_timeout), see db.py.
* PostgreSQL: ``SELECT ... FROM log_state WHERE id = 1 FOR UPDATE`` locks the single state
  row at READ COMMITTED; a second appender blocks on it, and after the first commits it
  re-reads the row (and every later statement sees the committed leaves), so it continues
  from the new size. Readers never block.

Crash safety: the transaction is atomic, so after a crash the database holds either the
whole batch (leaves + nodes + checkpoint) or none of it; a commit returns only after the
WAL (SQLite ``synchronous=FULL``) or the commit record (PostgreSQL) is on disk, and the
ledger acknowledges an append only after the commit returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Engine, and_, func, select
from sqlalchemy.exc import SQLAlchemyError

from engram.protocol.errors import ConfigError, StorageError
from ledger.storage.base import StoreBase
from ledger.storage.browse import BrowseReads
from ledger.storage.caches import (
    CheckpointCheck,
    KeyStreams,
    ProofCache,
    cross_check_keys,
    latest_checkpoint_row,
)
from ledger.storage.db import WRITE_OPTION
from ledger.storage.dbapi import storage_error, transaction
from ledger.storage.rows import LogState, StoredCheckpoint, StreamHead, blob, checkpoint_row
from ledger.storage.schema import bodies, checkpoints, leaves, nodes
from ledger.storage.service_tables import ServiceTables
from ledger.storage.sql import fetch_nodes, marks, nodes_query, stream_head_row
from ledger.storage.writetx import WriteTx
from verifier.event import agent_key_id
from verifier.keys import KeyRecord
from verifier.note import VerifierKey

__all__ = [
    "KeyStreams",
    "LogState",
    "ProofCache",
    "SqlStore",
    "StoredCheckpoint",
    "StreamHead",
    "WriteTx",
    "blob",
    "cross_check_keys",
    "nodes_query",
]


class SqlStore(ServiceTables, BrowseReads):
    """Reads and the write transaction over one SQLAlchemy engine: the log's tables here,
    the service's own tables (:class:`ServiceTables`) and the explorer's bounded reads
    (:class:`BrowseReads`) beside them."""

    def __init__(self, engine: Engine) -> None:
        StoreBase.__init__(self, engine)
        #: this process's cache of committed nodes and checkpoints (see ProofCache)
        self.cache = ProofCache()
        #: bumped by :meth:`delete_body` (a body deleted without an erasure entry): readers
        #: that cache bodies by log size (ledger.mesh.MeshCache) start over when it moves
        self.bodies_deleted = 0
        #: set by the ledger (:meth:`trust`): checkpoint rows are accepted only if signed
        self.checkpoint_check: CheckpointCheck | None = None
        #: key state from the log's key entries, for every security decision (KeyStreams)
        self.key_streams = KeyStreams()

    def trust(self, log_key: VerifierKey) -> None:
        """Accept checkpoint rows only if ``log_key`` signed them (see CheckpointCheck)."""
        self.checkpoint_check = CheckpointCheck(log_key)

    def _valid(self, cp: StoredCheckpoint) -> bool:
        check = self.checkpoint_check
        if check is None or check.valid(cp):
            return True
        check.refused(cp)
        return False

    @contextmanager
    def write(self) -> Iterator[WriteTx]:
        """The serialized append transaction; commits on success, rolls back on any error.
        Its statements run on the driver's connection (ledger.storage.dbapi); a driver's
        error, raw or wrapped by SQLAlchemy (BEGIN, COMMIT), is a StorageError."""
        try:
            with transaction(self.engine, **{WRITE_OPTION: True}) as db:
                yield WriteTx(db, self.checkpoint_check, self.key_streams)
        except self.driver_error as e:
            raise storage_error("database error during append", e) from e
        except SQLAlchemyError as e:
            raise storage_error("database error during append", e) from e

    # -- state ------------------------------------------------------------------------

    def initialise(self, *, origin: str, log_vkey: str, checkpoint: StoredCheckpoint) -> None:
        with self.write() as tx:
            db = tx._db
            if db.rows("SELECT id FROM log_state"):
                raise ConfigError("the database already holds a log")
            ph = marks(db.ph, 5)
            db.execute(
                f"INSERT INTO log_state (id, origin, log_vkey, size, last_timestamp_us) VALUES ({ph})",  # noqa: S608
                (1, origin, log_vkey, 0, 0),
            )
            ph = marks(db.ph, 4)
            db.execute(
                f"INSERT INTO checkpoints (size, root, note, signed_at_us) VALUES ({ph})",  # noqa: S608
                (checkpoint.size, checkpoint.root, checkpoint.note, checkpoint.signed_at_us),
            )

    def state(self) -> LogState | None:
        with self.fast_read() as db:
            row = db.one_or_none(
                "SELECT origin, log_vkey, size, last_timestamp_us FROM log_state WHERE id = 1"
            )
        if row is None:
            return None
        return LogState(origin=row[0], log_vkey=row[1], size=int(row[2]), last_timestamp_us=int(row[3]))

    def stream_head(self, agent: str, kind: str) -> StreamHead | None:
        with self.fast_read() as db:
            return stream_head_row(db, agent, kind)

    def stream_heads(self, agent: str) -> list[StreamHead]:
        with self.fast_read() as db:
            rows = db.rows(
                f"SELECT kind, version, leaf_hash, idx FROM stream_heads WHERE agent = {db.ph} ORDER BY kind",  # noqa: S608
                (agent,),
            )
        return [
            StreamHead(agent=agent, kind=kind, version=int(v), leaf_hash=bytes(lh), index=int(idx))
            for kind, v, lh, idx in rows
        ]

    def active_key_id(self, agent: str) -> str | None:
        """The agent's active key id, from its key entries in the signed log (KeyStreams),
        never from the mutable ``agent_keys`` table."""
        return self._log_keys(agent)[1]

    def _log_keys(self, agent: str) -> tuple[list[KeyRecord], str | None]:
        with self.fast_read() as db:
            below = latest_checkpoint_row(db, self.checkpoint_check).size
            keys, active = self.key_streams.derive(db, [agent], below)
        return sorted(keys.values(), key=lambda k: k.added_at), active[agent]

    def public_key(self, key_id: str) -> tuple[str, bytes] | None:
        """(agent, public key) of a key id registered in this log (a key id is a hash of its
        key, registered once: the answer never changes)."""
        with self.fast_read() as db:
            row = db.one_or_none(
                f"SELECT agent, public_key FROM agent_keys WHERE key_id = {db.ph}",  # noqa: S608
                (key_id,),
            )
        if row is None or agent_key_id(bytes(row[1])) != key_id:
            return None  # a key id is the hash of its key: a row that says otherwise is not it
        return str(row[0]), bytes(row[1])

    def keys_of(self, agent: str) -> list[KeyRecord]:
        """Every key of ``agent`` with its span, in registration order, from its key entries
        in the signed log (KeyStreams)."""
        return self._log_keys(agent)[0]

    # -- checkpoints ------------------------------------------------------------------

    def latest_checkpoint(self) -> StoredCheckpoint:
        with self.fast_read() as db:
            return latest_checkpoint_row(db, self.checkpoint_check)

    def checkpoint(self, size: int) -> StoredCheckpoint | None:
        with self.read() as conn:
            row = conn.execute(select(checkpoints).where(checkpoints.c.size == size)).one_or_none()
        if row is None:
            return None
        cp = StoredCheckpoint(
            size=row.size,
            root=blob(row.root, "checkpoints", row.size, "root"),
            note=blob(row.note, "checkpoints", row.size, "note"),
            signed_at_us=row.signed_at_us,
        )
        return cp if self._valid(cp) else None

    def checkpoints_upto(self, size: int, batch: int = 2000) -> Iterator[StoredCheckpoint]:
        """Every stored checkpoint with size <= ``size``, in order, read in batches."""
        last = -1
        while True:
            with self.read() as conn:
                rows = conn.execute(
                    select(checkpoints)
                    .where(and_(checkpoints.c.size > last, checkpoints.c.size <= size))
                    .order_by(checkpoints.c.size)
                    .limit(batch)
                ).all()
            if not rows:
                return
            for r in rows:
                cp = StoredCheckpoint(
                    size=r.size,
                    root=blob(r.root, "checkpoints", r.size, "root"),
                    note=blob(r.note, "checkpoints", r.size, "note"),
                    signed_at_us=r.signed_at_us,
                )
                if self._valid(cp):
                    yield cp
            last = rows[-1].size

    def checkpoint_sizes(self) -> list[int]:
        with self.read() as conn:
            return [r[0] for r in conn.execute(select(checkpoints.c.size).order_by(checkpoints.c.size))]

    # -- leaves and nodes -------------------------------------------------------------

    def nodes(self, coords: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        got, missing = self.cache.nodes(coords)
        if missing:
            with self.fast_read() as db:
                fetched = fetch_nodes(db, missing)
            self.cache.add_nodes(fetched.items())
            got.update(fetched)
        return got

    def proof_material(
        self, coords: Sequence[tuple[int, int]], sizes: Iterable[int]
    ) -> tuple[int, dict[tuple[int, int], bytes], dict[int, StoredCheckpoint]]:
        """The latest checkpoint size (at least), the nodes, and the checkpoints signed at
        ``sizes`` (those that exist): from this process's cache where it holds them (all
        immutable, see :class:`ProofCache`), the rest in one read transaction."""
        wanted = sorted(set(sizes))
        got, missing = self.cache.nodes(coords)
        cps, unknown = self.cache.checkpoints(wanted)
        latest = self.cache.latest
        if not missing and not unknown and (not wanted or wanted[-1] <= latest):
            return latest, got, cps
        with self.fast_read() as db:
            latest = latest_checkpoint_row(db, self.checkpoint_check).size
            if wanted and wanted[-1] > latest:
                return latest, {}, {}  # the caller reports the size as out of range
            fetched = fetch_nodes(db, missing) if missing else {}
            found: dict[int, StoredCheckpoint] = {}
            if unknown:
                rows = db.rows(
                    f"SELECT size, root, note, signed_at_us FROM checkpoints WHERE size IN ({marks(db.ph, len(unknown))})",  # noqa: S608
                    tuple(unknown),
                )
                found = {cp.size: cp for cp in map(checkpoint_row, rows) if self._valid(cp)}
        self.cache.add_nodes(fetched.items())
        self.cache.add_checkpoints(found, unknown, latest)
        got.update(fetched)
        cps.update(found)
        return latest, got, cps

    def nodes_at_level(self, level: int, start: int, end: int) -> list[bytes]:
        """Hashes of nodes ``(level, start..end-1)`` in order; all must exist."""
        with self.read() as conn:
            rows = conn.execute(
                select(nodes.c.idx, nodes.c.hash)
                .where(and_(nodes.c.level == level, nodes.c.idx >= start, nodes.c.idx < end))
                .order_by(nodes.c.idx)
            ).all()
        if len(rows) != end - start:
            raise StorageError(f"level {level} nodes {start}..{end} are incomplete")
        return [bytes(r.hash) for r in rows]

    def leaf(self, index: int) -> bytes | None:
        with self.read() as conn:
            row = conn.execute(select(leaves.c.leaf).where(leaves.c.idx == index)).one_or_none()
        return None if row is None else blob(row.leaf, "leaves", index, "leaf")

    def leaves(self, start: int, end: int) -> list[bytes]:
        with self.read() as conn:
            rows = conn.execute(
                select(leaves.c.idx, leaves.c.leaf)
                .where(and_(leaves.c.idx >= start, leaves.c.idx < end))
                .order_by(leaves.c.idx)
            ).all()
        if [r.idx for r in rows] != list(range(start, end)):
            raise StorageError(f"leaves {start}..{end} are not all present")
        return [blob(r.leaf, "leaves", r.idx, "leaf") for r in rows]

    def leaves_with_hashes(
        self, start: int, end: int, batch: int = 1024
    ) -> Iterator[tuple[int, bytes, bytes]]:
        """``(index, leaf, leaf hash)`` for ``[start, end)``, read in batches."""
        for lo in range(start, end, batch):
            with self.read() as conn:
                rows = conn.execute(
                    select(leaves.c.idx, leaves.c.leaf, leaves.c.leaf_hash)
                    .where(and_(leaves.c.idx >= lo, leaves.c.idx < min(end, lo + batch)))
                    .order_by(leaves.c.idx)
                ).all()
            for r in rows:
                yield (
                    int(r.idx),
                    blob(r.leaf, "leaves", r.idx, "leaf"),
                    blob(r.leaf_hash, "leaves", r.idx, "leaf_hash"),
                )

    def index_of_leaf_hash(self, leaf_hash: bytes) -> int | None:
        with self.read() as conn:
            row = conn.execute(select(leaves.c.idx).where(leaves.c.leaf_hash == leaf_hash)).one_or_none()
        return None if row is None else int(row.idx)

    def body(self, index: int) -> tuple[bytes, bytes] | None:
        with self.read() as conn:
            row = conn.execute(
                select(bodies.c.salt, bodies.c.body).where(bodies.c.idx == index)
            ).one_or_none()
        if row is None:
            return None
        return blob(row.salt, "bodies", index, "salt"), blob(row.body, "bodies", index, "body")

    def stream_bodies(self, agent: str, kind: str, size: int) -> list[tuple[int, bytes | None]]:
        """A stream's entries below ``size`` in version order, each with its body, or None
        where it was erased: one read (a body per query cost the trust oracle 2.7 s for an
        agent of 10^4 records)."""
        with self.fast_read() as db:
            rows = db.rows(
                "SELECT l.idx, b.body FROM leaves l LEFT JOIN bodies b ON b.idx = l.idx "  # noqa: S608
                f"WHERE l.agent = {db.ph} AND l.kind = {db.ph} AND l.idx < {db.ph} ORDER BY l.version",
                (agent, kind, size),
            )
        return [
            (int(idx), None if body is None else blob(body, "bodies", int(idx), "body")) for idx, body in rows
        ]

    def heads_at(self, agent: str, size: int) -> list[StreamHead]:
        """Every stream head of ``agent`` in the tree of ``size`` (as of that checkpoint)."""
        with self.read() as conn:
            tops = conn.execute(
                select(leaves.c.kind, func.max(leaves.c.version).label("v"))
                .where(and_(leaves.c.agent == agent, leaves.c.idx < size))
                .group_by(leaves.c.kind)
            ).all()
            out = []
            for kind, version in tops:
                r = conn.execute(
                    select(leaves.c.idx, leaves.c.leaf_hash).where(
                        and_(leaves.c.agent == agent, leaves.c.kind == kind, leaves.c.version == version)
                    )
                ).one()
                out.append(
                    StreamHead(
                        agent=agent, kind=kind, version=version, leaf_hash=bytes(r.leaf_hash), index=r.idx
                    )
                )
        return sorted(out, key=lambda h: h.kind)

    def stream_indices(self, agent: str, kind: str, size: int) -> list[int]:
        """Indices of a stream's entries below ``size``, in version order."""
        with self.read() as conn:
            rows = conn.execute(
                select(leaves.c.idx)
                .where(and_(leaves.c.agent == agent, leaves.c.kind == kind, leaves.c.idx < size))
                .order_by(leaves.c.version)
            )
            return [int(r.idx) for r in rows]

    def delete_body(self, index: int) -> bool:
        """Erase a body and its salt (the leaf, proofs and chains stay valid)."""
        with self.write() as tx:
            gone = tx.erase_bodies([index])
            self.bodies_deleted += 1
            return bool(gone)

    def entries_of_kinds(
        self, kinds: Sequence[str], start: int, end: int
    ) -> list[tuple[int, str, str, bytes | None]]:
        """``(index, agent, kind, body or None where erased)`` of the entries in
        ``[start, end)`` whose kind is one of ``kinds``, in index order: one range read of the
        leaves appended since a reader last looked (ledger.mesh.MeshCache)."""
        if not kinds:
            return []
        with self.fast_read() as db:
            rows = db.rows(
                "SELECT l.idx, l.agent, l.kind, b.body FROM leaves l LEFT JOIN bodies b ON b.idx = l.idx "  # noqa: S608
                f"WHERE l.idx >= {db.ph} AND l.idx < {db.ph} AND l.kind IN ({marks(db.ph, len(kinds))}) "
                "ORDER BY l.idx",
                (start, end, *kinds),
            )
        return [
            (
                int(idx),
                str(agent),
                str(kind),
                None if body is None else blob(body, "bodies", int(idx), "body"),
            )
            for idx, agent, kind, body in rows
        ]

    def counts(self) -> dict[str, int]:
        with self.read() as conn:
            return {
                "leaves": conn.execute(select(func.count()).select_from(leaves)).scalar_one(),
                "nodes": conn.execute(select(func.count()).select_from(nodes)).scalar_one(),
                "checkpoints": conn.execute(select(func.count()).select_from(checkpoints)).scalar_one(),
            }

    def leaves_iter(self, start: int, end: int, batch: int = 1024) -> Iterable[tuple[int, bytes]]:
        for lo in range(start, end, batch):
            hi = min(end, lo + batch)
            for i, leaf in enumerate(self.leaves(lo, hi)):
                yield lo + i, leaf

    def latest_cosigned(self) -> tuple[StoredCheckpoint, list[str]]:
        """The latest checkpoint and the witness cosignature lines stored for it (by
        witness), in one read transaction of two indexed lookups (``GET /checkpoint``)."""
        with self.fast_read() as db:
            cp = latest_checkpoint_row(db, self.checkpoint_check)
            lines = db.rows(
                f"SELECT line FROM cosignatures WHERE size = {db.ph} ORDER BY witness",  # noqa: S608
                (cp.size,),
            )
            return cp, [r[0] for r in lines]
