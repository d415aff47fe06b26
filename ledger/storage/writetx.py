"""The serialized append transaction (ledger.storage.store explains the lock): reads under
the writer lock and the one batch write of leaves, bodies, nodes, heads, keys and the new
signed checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, delete, insert, select, update

from engram.protocol.errors import ConfigError, StorageError
from ledger.storage.caches import CheckpointCheck, KeyStreams
from ledger.storage.rows import LogState, StoredCheckpoint, StreamHead, checkpoint_row, key_record
from ledger.storage.schema import agent_keys, bodies, checkpoints
from ledger.storage.sql import IN_CHUNK, fetch_nodes, marks, placeholder, stream_head_row
from verifier.keys import KeyRecord

__all__ = ["WriteTx"]

_log = logging.getLogger("ledger.storage.store")

_LOCK_STATE_SQL = (
    "SELECT origin, log_vkey, size, last_timestamp_us, (SELECT max(size) FROM checkpoints) "
    "FROM log_state WHERE id = 1"
)


def _write_sql(ph: str) -> dict[str, str]:
    def ins(table: str, cols: str) -> str:
        n = cols.count(",") + 1
        return f"INSERT INTO {table} ({cols}) VALUES ({', '.join([ph] * n)})"  # noqa: S608 - constants

    return {
        "leaves": ins("leaves", "idx, leaf_hash, agent, kind, version, key_id, timestamp_us, leaf"),
        "bodies": ins("bodies", "idx, salt, body"),
        "nodes": ins("nodes", "level, idx, hash"),
        "heads": ins("stream_heads", "agent, kind, version, leaf_hash, idx")
        + " ON CONFLICT (agent, kind) DO UPDATE SET version = excluded.version,"
        " leaf_hash = excluded.leaf_hash, idx = excluded.idx",
        "state": f"UPDATE log_state SET size = {ph}, last_timestamp_us = {ph} WHERE id = 1",  # noqa: S608
        "checkpoint": ins("checkpoints", "size, root, note, signed_at_us, prev_size"),
    }


#: The append's statements, written once per paramstyle: the hot path executes them
#: directly (executemany) instead of building SQLAlchemy expressions per call.
_WRITE_SQL = {ph: _write_sql(ph) for ph in ("?", "%s")}


class WriteTx:
    """Operations available inside the serialized append transaction."""

    def __init__(
        self, conn: Connection, check: CheckpointCheck | None = None, key_streams: KeyStreams | None = None
    ) -> None:
        self._conn = conn
        self._check = check
        self._key_streams = key_streams or KeyStreams()
        self._checkpoint_max: int | None = None

    @property
    def connection(self) -> Connection:
        """The transaction's connection, for the commit hook that writes in this same
        transaction (ledger.append, ``on_commit_tx``)."""
        return self._conn

    def derive_keys(
        self, agents: Iterable[str], below: int
    ) -> tuple[dict[str, KeyRecord], dict[str, str | None]]:
        """Key state of ``agents`` from their key entries below ``below`` (KeyStreams)."""
        return self._key_streams.derive(self._conn, agents, below)

    def lock_state(self) -> LogState:
        if self._conn.dialect.name == "postgresql":
            # Durability of the acknowledgement must not depend on the server's default.
            self._conn.exec_driver_sql("SET LOCAL synchronous_commit = on")
            sql = _LOCK_STATE_SQL + " FOR UPDATE"
        else:
            sql = _LOCK_STATE_SQL
        row = self._conn.exec_driver_sql(sql).one_or_none()
        if row is None:
            raise ConfigError("the log is not initialised; run `engram init`")
        self._checkpoint_max = None if row[4] is None else int(row[4])
        return LogState(origin=row[0], log_vkey=row[1], size=int(row[2]), last_timestamp_us=int(row[3]))

    def stream_head(self, agent: str, kind: str) -> StreamHead | None:
        return stream_head_row(self._conn, agent, kind)

    def checkpoint_root(self, size: int) -> bytes | None:
        """The root of the checkpoint signed at ``size``; None if there is none, or if the
        row is not signed by the log key."""
        row = self._conn.exec_driver_sql(
            f"SELECT size, root, note, signed_at_us FROM checkpoints WHERE size = {placeholder(self._conn)}",  # noqa: S608
            (size,),
        ).one_or_none()
        if row is None:
            return None
        cp = checkpoint_row(row)
        if self._check is not None and not self._check.valid(cp):
            self._check.refused(cp)
            return None
        return cp.root

    def key(self, key_id: str) -> KeyRecord | None:
        row = self._conn.execute(select(agent_keys).where(agent_keys.c.key_id == key_id)).one_or_none()
        return None if row is None else key_record(row)

    def active_key(self, agent: str) -> str | None:
        row = self._conn.execute(
            select(agent_keys.c.key_id).where(
                and_(agent_keys.c.agent == agent, agent_keys.c.retired_at.is_(None))
            )
        ).one_or_none()
        return None if row is None else str(row.key_id)

    def nodes(self, coords: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        return fetch_nodes(self._conn, coords) if coords else {}

    def leaf(self, index: int) -> bytes | None:
        row = self._conn.exec_driver_sql(
            f"SELECT leaf FROM leaves WHERE idx = {placeholder(self._conn)}",  # noqa: S608
            (index,),
        ).one_or_none()
        return None if row is None else bytes(row[0])

    # Bulk reads for one batch: three queries instead of three per event.

    def load_heads(self, streams: Iterable[tuple[str, str]]) -> dict[tuple[str, str], StreamHead]:
        by_agent: dict[str, set[str]] = {}
        for agent, kind in streams:
            by_agent.setdefault(agent, set()).add(kind)
        out: dict[tuple[str, str], StreamHead] = {}
        agents = sorted(by_agent)
        ph = placeholder(self._conn)
        for i in range(0, len(agents), IN_CHUNK):
            # Per-agent IN lists, not a row-value IN: see nodes_query.
            chunk = agents[i : i + IN_CHUNK]
            terms = " OR ".join(f"(agent = {ph} AND kind IN ({marks(ph, len(by_agent[a]))}))" for a in chunk)
            params: list[str] = []
            for a in chunk:
                params.append(a)
                params.extend(sorted(by_agent[a]))
            rows = self._conn.exec_driver_sql(
                f"SELECT agent, kind, version, leaf_hash, idx FROM stream_heads WHERE {terms}",  # noqa: S608
                tuple(params),
            )
            for agent, kind, version, lh, idx in rows:
                out[(agent, kind)] = StreamHead(
                    agent=agent, kind=kind, version=int(version), leaf_hash=bytes(lh), index=int(idx)
                )
        return out

    def load_key_state(
        self, key_ids: Iterable[str], agents: Iterable[str]
    ) -> tuple[dict[str, KeyRecord], dict[str, str | None]]:
        """In one query per chunk: the records of ``key_ids`` and of each agent's active key,
        and each of ``agents``' active key id (None: no active key)."""
        ids = sorted(set(key_ids))
        names = sorted(set(agents))
        keys: dict[str, KeyRecord] = {}
        active: dict[str, str | None] = dict.fromkeys(names)
        ph = placeholder(self._conn)
        for i in range(0, max(len(ids), len(names), 1), IN_CHUNK):
            some_ids, some_names = ids[i : i + IN_CHUNK], names[i : i + IN_CHUNK]
            terms = []
            if some_ids:
                terms.append(f"key_id IN ({marks(ph, len(some_ids))})")
            if some_names:
                terms.append(f"(agent IN ({marks(ph, len(some_names))}) AND retired_at IS NULL)")
            if not terms:
                break
            rows = self._conn.exec_driver_sql(
                f"SELECT key_id, agent, public_key, added_at, retired_at, retired_how FROM agent_keys WHERE {' OR '.join(terms)}",  # noqa: S608
                (*some_ids, *some_names),
            )
            for key_id, agent, public_key, added_at, retired_at, retired_how in rows:
                rec = KeyRecord(
                    key_id=key_id,
                    agent=agent,
                    public_key=bytes(public_key),
                    added_at=int(added_at),
                    retired_at=None if retired_at is None else int(retired_at),
                    retired_how=retired_how,
                )
                keys[key_id] = rec
                if retired_at is None and agent in active:
                    active[agent] = key_id
        return keys, active

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
        prev_size: int,
        erase_bodies: Sequence[int] = (),
    ) -> None:
        c = self._conn
        sql = _WRITE_SQL[placeholder(c)]
        # A row at the size this batch reaches was not signed by this log (the writer lock is
        # held; a checkpoint is only signed at the size the log reaches): a forged row
        # INSERTed ahead, which reads already skip. It is deleted before the leaves are
        # written (migration 0010 lets a row ahead of the leaves go) and this batch's
        # checkpoint takes its place: not a permanent stop. Rows
        # further ahead stay, skipped, and `engram audit` names them.
        # Only when the lock row showed a row at or above this size (the usual append issues
        # no statement for it, and no DELETE: a service role without DELETE on checkpoints
        # appends as before; docs/tour.md, PostgreSQL roles).
        ahead = self._checkpoint_max is not None and self._checkpoint_max >= checkpoint.size
        if (
            ahead
            and c.execute(select(checkpoints.c.size).where(checkpoints.c.size == checkpoint.size)).first()
        ):
            c.execute(delete(checkpoints).where(checkpoints.c.size == checkpoint.size))
            _log.error("replaced a checkpoints row at size %d that the log had not signed", checkpoint.size)
        c.exec_driver_sql(
            sql["leaves"],
            [
                (
                    r["idx"],
                    r["leaf_hash"],
                    r["agent"],
                    r["kind"],
                    r["version"],
                    r["key_id"],
                    r["timestamp_us"],
                    r["leaf"],
                )
                for r in leaf_rows
            ],
        )
        if body_rows:
            c.exec_driver_sql(sql["bodies"], [(r["idx"], r["salt"], r["body"]) for r in body_rows])
        if erase_bodies:
            c.execute(bodies.delete().where(bodies.c.idx.in_(sorted(set(erase_bodies)))))
        c.exec_driver_sql(sql["nodes"], [(r["level"], r["idx"], r["hash"]) for r in node_rows])
        if heads:
            c.exec_driver_sql(
                sql["heads"], [(h.agent, h.kind, h.version, h.leaf_hash, h.index) for h in heads.values()]
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
        c.exec_driver_sql(sql["state"], (new_size, last_timestamp_us))
        c.exec_driver_sql(
            sql["checkpoint"],
            (checkpoint.size, checkpoint.root, checkpoint.note, checkpoint.signed_at_us, prev_size),
        )
