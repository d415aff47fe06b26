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

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, Select, and_, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from engram.protocol.errors import ConfigError, StorageError
from ledger.storage.db import WRITE_OPTION
from ledger.storage.schema import (
    agent_keys,
    bodies,
    checkpoints,
    cosignatures,
    leaves,
    log_state,
    nodes,
    request_nonces,
    stream_heads,
)
from verifier.keys import KeyRecord

__all__ = ["LogState", "SqlStore", "StoredCheckpoint", "StreamHead", "WriteTx", "nodes_query"]

_IN_CHUNK = 400  # bound the size of one IN (...) list


@dataclass(frozen=True, slots=True, kw_only=True)
class LogState:
    origin: str
    log_vkey: str
    size: int
    last_timestamp_us: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamHead:
    agent: str
    kind: str
    version: int
    leaf_hash: bytes
    index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCheckpoint:
    size: int
    root: bytes
    note: bytes
    signed_at_us: int


def _key_record(row: Any) -> KeyRecord:
    return KeyRecord(
        key_id=row.key_id,
        agent=row.agent,
        public_key=bytes(row.public_key),
        added_at=row.added_at,
        retired_at=row.retired_at,
        retired_how=row.retired_how,
    )


class WriteTx:
    """Operations available inside the serialized append transaction."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def lock_state(self) -> LogState:
        stmt = select(log_state).where(log_state.c.id == 1)
        if self._conn.dialect.name == "postgresql":
            # Durability of the acknowledgement must not depend on the server's default.
            self._conn.exec_driver_sql("SET LOCAL synchronous_commit = on")
            stmt = stmt.with_for_update()
        row = self._conn.execute(stmt).one_or_none()
        if row is None:
            raise ConfigError("the log is not initialised; run `engram init`")
        return LogState(
            origin=row.origin, log_vkey=row.log_vkey, size=row.size, last_timestamp_us=row.last_timestamp_us
        )

    def stream_head(self, agent: str, kind: str) -> StreamHead | None:
        return _stream_head(self._conn, agent, kind)

    def checkpoint_root(self, size: int) -> bytes | None:
        row = self._conn.execute(select(checkpoints.c.root).where(checkpoints.c.size == size)).one_or_none()
        return None if row is None else bytes(row.root)

    def key(self, key_id: str) -> KeyRecord | None:
        row = self._conn.execute(select(agent_keys).where(agent_keys.c.key_id == key_id)).one_or_none()
        return None if row is None else _key_record(row)

    def active_key(self, agent: str) -> str | None:
        row = self._conn.execute(
            select(agent_keys.c.key_id).where(
                and_(agent_keys.c.agent == agent, agent_keys.c.retired_at.is_(None))
            )
        ).one_or_none()
        return None if row is None else str(row.key_id)

    def nodes(self, coords: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        return _fetch_nodes(self._conn, coords)

    # Bulk reads for one batch: three queries instead of three per event.

    def load_heads(self, streams: Iterable[tuple[str, str]]) -> dict[tuple[str, str], StreamHead]:
        by_agent: dict[str, set[str]] = {}
        for agent, kind in streams:
            by_agent.setdefault(agent, set()).add(kind)
        out: dict[tuple[str, str], StreamHead] = {}
        agents = sorted(by_agent)
        for i in range(0, len(agents), _IN_CHUNK):
            # Per-agent IN lists, not a row-value IN: see nodes_query.
            cond = or_(
                *(
                    and_(stream_heads.c.agent == a, stream_heads.c.kind.in_(sorted(by_agent[a])))
                    for a in agents[i : i + _IN_CHUNK]
                )
            )
            for r in self._conn.execute(select(stream_heads).where(cond)):
                out[(r.agent, r.kind)] = StreamHead(
                    agent=r.agent, kind=r.kind, version=r.version, leaf_hash=bytes(r.leaf_hash), index=r.idx
                )
        return out

    def load_keys(self, key_ids: Iterable[str]) -> dict[str, KeyRecord]:
        wanted = sorted(set(key_ids))
        out: dict[str, KeyRecord] = {}
        for i in range(0, len(wanted), _IN_CHUNK):
            for r in self._conn.execute(
                select(agent_keys).where(agent_keys.c.key_id.in_(wanted[i : i + _IN_CHUNK]))
            ):
                out[r.key_id] = _key_record(r)
        return out

    def load_active_keys(self, agents: Iterable[str]) -> dict[str, str | None]:
        wanted = sorted(set(agents))
        out: dict[str, str | None] = dict.fromkeys(wanted)
        for i in range(0, len(wanted), _IN_CHUNK):
            rows = self._conn.execute(
                select(agent_keys.c.agent, agent_keys.c.key_id).where(
                    and_(agent_keys.c.agent.in_(wanted[i : i + _IN_CHUNK]), agent_keys.c.retired_at.is_(None))
                )
            )
            for r in rows:
                out[r.agent] = r.key_id
        return out

    def write_batch(
        self,
        *,
        leaf_rows: list[dict[str, Any]],
        body_rows: list[dict[str, Any]],
        node_rows: list[dict[str, Any]],
        heads: dict[tuple[str, str], StreamHead],
        key_inserts: list[KeyRecord],
        key_retirements: list[KeyRecord],
        new_size: int,
        last_timestamp_us: int,
        checkpoint: StoredCheckpoint,
        erase_bodies: Sequence[int] = (),
    ) -> None:
        c = self._conn
        c.execute(insert(leaves), leaf_rows)
        if body_rows:
            c.execute(insert(bodies), body_rows)
        if erase_bodies:
            c.execute(bodies.delete().where(bodies.c.idx.in_(sorted(set(erase_bodies)))))
        c.execute(insert(nodes), node_rows)
        if heads:
            upsert = (sqlite_insert if c.dialect.name == "sqlite" else pg_insert)(stream_heads)
            c.execute(
                upsert.on_conflict_do_update(
                    index_elements=[stream_heads.c.agent, stream_heads.c.kind],
                    set_={
                        "version": upsert.excluded.version,
                        "leaf_hash": upsert.excluded.leaf_hash,
                        "idx": upsert.excluded.idx,
                    },
                ),
                [
                    {
                        "agent": h.agent,
                        "kind": h.kind,
                        "version": h.version,
                        "leaf_hash": h.leaf_hash,
                        "idx": h.index,
                    }
                    for h in heads.values()
                ],
            )
        for rec in key_retirements:
            res = c.execute(
                update(agent_keys)
                .where(and_(agent_keys.c.key_id == rec.key_id, agent_keys.c.retired_at.is_(None)))
                .values(retired_at=rec.retired_at, retired_how=rec.retired_how)
            )
            if res.rowcount != 1:
                raise StorageError(f"key {rec.key_id} was not active when the batch retired it")
        if key_inserts:
            c.execute(
                insert(agent_keys),
                [
                    {
                        "key_id": r.key_id,
                        "agent": r.agent,
                        "public_key": r.public_key,
                        "added_at": r.added_at,
                        "retired_at": r.retired_at,
                        "retired_how": r.retired_how,
                    }
                    for r in key_inserts
                ],
            )
        c.execute(
            update(log_state)
            .where(log_state.c.id == 1)
            .values(size=new_size, last_timestamp_us=last_timestamp_us)
        )
        c.execute(
            insert(checkpoints).values(
                size=checkpoint.size,
                root=checkpoint.root,
                note=checkpoint.note,
                signed_at_us=checkpoint.signed_at_us,
            )
        )


def _stream_head(conn: Connection, agent: str, kind: str) -> StreamHead | None:
    row = conn.execute(
        select(stream_heads).where(and_(stream_heads.c.agent == agent, stream_heads.c.kind == kind))
    ).one_or_none()
    if row is None:
        return None
    return StreamHead(
        agent=agent, kind=kind, version=row.version, leaf_hash=bytes(row.leaf_hash), index=row.idx
    )


def nodes_query(coords: Sequence[tuple[int, int]]) -> Select[Any]:
    """SELECT of the given ``(level, idx)`` nodes as an OR of per-level ``IN`` lists.

    Written this way (not as a row-value ``(level, idx) IN (...)``) because SQLite answers
    row-value IN lists with a full table scan, while ``level = ? AND idx IN (...)`` terms
    are primary-key lookups on both backends: a proof costs O(log n) index probes.
    """
    by_level: dict[int, list[int]] = {}
    for level, idx in coords:
        by_level.setdefault(level, []).append(idx)
    return select(nodes.c.level, nodes.c.idx, nodes.c.hash).where(
        or_(
            *(and_(nodes.c.level == lv, nodes.c.idx.in_(sorted(ids))) for lv, ids in sorted(by_level.items()))
        )
    )


def _fetch_nodes(conn: Connection, coords: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    wanted = sorted(set(coords))
    out: dict[tuple[int, int], bytes] = {}
    for i in range(0, len(wanted), _IN_CHUNK):
        for r in conn.execute(nodes_query(wanted[i : i + _IN_CHUNK])):
            out[(r.level, r.idx)] = bytes(r.hash)
    missing = [c for c in wanted if c not in out]
    if missing:
        raise StorageError(f"stored Merkle nodes are missing: {missing[:5]}")
    return out


class SqlStore:
    """Reads and the write transaction over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def write(self) -> Iterator[WriteTx]:
        """The serialized append transaction; commits on success, rolls back on any error."""
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    yield WriteTx(conn)
        except DBAPIError as e:
            raise StorageError(f"database error during append: {e.orig!r}") from e
        except SQLAlchemyError as e:
            raise StorageError(f"database error during append: {e}") from e

    @contextmanager
    def read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn, conn.begin():
                yield conn
        except DBAPIError as e:
            raise StorageError(f"database error: {e.orig!r}") from e

    # -- state ------------------------------------------------------------------------

    def initialise(self, *, origin: str, log_vkey: str, checkpoint: StoredCheckpoint) -> None:
        with self.write() as tx:
            conn = tx._conn
            if conn.execute(select(log_state.c.id)).first() is not None:
                raise ConfigError("the database already holds a log")
            conn.execute(
                insert(log_state).values(id=1, origin=origin, log_vkey=log_vkey, size=0, last_timestamp_us=0)
            )
            conn.execute(
                insert(checkpoints).values(
                    size=checkpoint.size,
                    root=checkpoint.root,
                    note=checkpoint.note,
                    signed_at_us=checkpoint.signed_at_us,
                )
            )

    def state(self) -> LogState | None:
        with self.read() as conn:
            row = conn.execute(select(log_state).where(log_state.c.id == 1)).one_or_none()
        if row is None:
            return None
        return LogState(
            origin=row.origin, log_vkey=row.log_vkey, size=row.size, last_timestamp_us=row.last_timestamp_us
        )

    def stream_head(self, agent: str, kind: str) -> StreamHead | None:
        with self.read() as conn:
            return _stream_head(conn, agent, kind)

    def stream_heads(self, agent: str) -> list[StreamHead]:
        with self.read() as conn:
            rows = conn.execute(
                select(stream_heads).where(stream_heads.c.agent == agent).order_by(stream_heads.c.kind)
            )
            return [
                StreamHead(
                    agent=agent, kind=r.kind, version=r.version, leaf_hash=bytes(r.leaf_hash), index=r.idx
                )
                for r in rows
            ]

    def active_key_id(self, agent: str) -> str | None:
        with self.read() as conn:
            row = conn.execute(
                select(agent_keys.c.key_id).where(
                    and_(agent_keys.c.agent == agent, agent_keys.c.retired_at.is_(None))
                )
            ).one_or_none()
        return None if row is None else str(row.key_id)

    def keys_of(self, agent: str) -> list[KeyRecord]:
        with self.read() as conn:
            rows = conn.execute(
                select(agent_keys).where(agent_keys.c.agent == agent).order_by(agent_keys.c.added_at)
            )
            return [_key_record(r) for r in rows]

    # -- checkpoints ------------------------------------------------------------------

    def latest_checkpoint(self) -> StoredCheckpoint:
        with self.read() as conn:
            row = conn.execute(select(checkpoints).order_by(checkpoints.c.size.desc()).limit(1)).one_or_none()
        if row is None:
            raise ConfigError("the log has no checkpoint; run `engram init`")
        return StoredCheckpoint(
            size=row.size, root=bytes(row.root), note=bytes(row.note), signed_at_us=row.signed_at_us
        )

    def checkpoint(self, size: int) -> StoredCheckpoint | None:
        with self.read() as conn:
            row = conn.execute(select(checkpoints).where(checkpoints.c.size == size)).one_or_none()
        if row is None:
            return None
        return StoredCheckpoint(
            size=row.size, root=bytes(row.root), note=bytes(row.note), signed_at_us=row.signed_at_us
        )

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
                yield StoredCheckpoint(
                    size=r.size, root=bytes(r.root), note=bytes(r.note), signed_at_us=r.signed_at_us
                )
            last = rows[-1].size

    def checkpoint_sizes(self) -> list[int]:
        with self.read() as conn:
            return [r[0] for r in conn.execute(select(checkpoints.c.size).order_by(checkpoints.c.size))]

    # -- leaves and nodes -------------------------------------------------------------

    def nodes(self, coords: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        with self.read() as conn:
            return _fetch_nodes(conn, coords)

    def proof_material(
        self, coords: Sequence[tuple[int, int]], sizes: Iterable[int]
    ) -> tuple[int, dict[tuple[int, int], bytes], dict[int, StoredCheckpoint]]:
        """In one read transaction: the latest checkpoint size, the nodes, and the
        checkpoints signed at ``sizes`` (those that exist)."""
        with self.read() as conn:
            latest = conn.execute(select(func.max(checkpoints.c.size))).scalar_one_or_none()
            if latest is None:
                raise ConfigError("the log has no checkpoint; run `engram init`")
            wanted = sorted(set(sizes))
            if wanted and wanted[-1] > latest:
                return int(latest), {}, {}  # the caller reports the size as out of range
            got = _fetch_nodes(conn, coords) if coords else {}
            rows = conn.execute(select(checkpoints).where(checkpoints.c.size.in_(wanted)))
            cps = {
                r.size: StoredCheckpoint(
                    size=r.size, root=bytes(r.root), note=bytes(r.note), signed_at_us=r.signed_at_us
                )
                for r in rows
            }
        return int(latest), got, cps

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
        return None if row is None else bytes(row.leaf)

    def leaves(self, start: int, end: int) -> list[bytes]:
        with self.read() as conn:
            rows = conn.execute(
                select(leaves.c.idx, leaves.c.leaf)
                .where(and_(leaves.c.idx >= start, leaves.c.idx < end))
                .order_by(leaves.c.idx)
            ).all()
        if [r.idx for r in rows] != list(range(start, end)):
            raise StorageError(f"leaves {start}..{end} are not all present")
        return [bytes(r.leaf) for r in rows]

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
                yield int(r.idx), bytes(r.leaf), bytes(r.leaf_hash)

    def index_of_leaf_hash(self, leaf_hash: bytes) -> int | None:
        with self.read() as conn:
            row = conn.execute(select(leaves.c.idx).where(leaves.c.leaf_hash == leaf_hash)).one_or_none()
        return None if row is None else int(row.idx)

    def body(self, index: int) -> tuple[bytes, bytes] | None:
        with self.read() as conn:
            row = conn.execute(
                select(bodies.c.salt, bodies.c.body).where(bodies.c.idx == index)
            ).one_or_none()
        return None if row is None else (bytes(row.salt), bytes(row.body))

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
            res = tx._conn.execute(bodies.delete().where(bodies.c.idx == index))
            return bool(res.rowcount)

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

    # -- witness cosignatures -------------------------------------------------------------

    def cosignature_lines(self, size: int) -> list[str]:
        """The witness cosignature lines stored for the checkpoint of ``size``, by witness."""
        with self.read() as conn:
            rows = conn.execute(
                select(cosignatures.c.line)
                .where(cosignatures.c.size == size)
                .order_by(cosignatures.c.witness)
            )
            return [r[0] for r in rows]

    def witnessed_sizes(self) -> dict[str, int]:
        """For each witness key, the largest checkpoint size it cosigned for this log."""
        with self.read() as conn:
            rows = conn.execute(
                select(cosignatures.c.witness, func.max(cosignatures.c.size)).group_by(cosignatures.c.witness)
            )
            return {r[0]: int(r[1]) for r in rows}

    def add_cosignatures(self, size: int, lines: Mapping[str, str], *, now_us: int) -> None:
        """Store verified cosignature lines (witness key -> line) of checkpoint ``size``;
        a witness already stored for that size keeps its first line."""
        if not lines:
            return
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    have = {
                        r[0]
                        for r in conn.execute(
                            select(cosignatures.c.witness).where(cosignatures.c.size == size)
                        )
                    }
                    rows = [
                        {"size": size, "witness": w, "line": line, "received_at_us": now_us}
                        for w, line in sorted(lines.items())
                        if w not in have
                    ]
                    if rows:
                        conn.execute(insert(cosignatures), rows)
        except DBAPIError as e:
            raise StorageError(f"database error: {e.orig!r}") from e

    # -- HTTP request replay protection ---------------------------------------------------

    def claim_nonce(self, signer: str, nonce: str, *, now_s: int, expires_s: int, grace_s: int = 300) -> bool:
        """Record ``(signer, nonce)`` until ``expires_s``; False if it was already used.

        Rows expired for more than ``grace_s`` are pruned in the same transaction, so the
        table stays bounded by the request rate times the window, and a server whose clock
        runs up to ``grace_s`` ahead of another's cannot delete a row the other still needs.
        """
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    conn.execute(request_nonces.delete().where(request_nonces.c.expires_s < now_s - grace_s))
                    conn.execute(
                        insert(request_nonces).values(signer=signer, nonce=nonce, expires_s=expires_s)
                    )
        except IntegrityError:
            return False
        except DBAPIError as e:
            raise StorageError(f"database error: {e.orig!r}") from e
        return True
