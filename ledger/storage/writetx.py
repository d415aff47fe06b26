"""The serialized append transaction (ledger.storage.store explains the lock): reads under
the writer lock and the one batch write of leaves, bodies, nodes, heads, keys and the new
signed checkpoint, each a statement written once per paramstyle and run on the driver's
connection (ledger.storage.dbapi).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection

from engram.protocol.errors import ConfigError, StorageError
from ledger.storage.caches import CheckpointCheck, KeyStreams
from ledger.storage.dbapi import Db
from ledger.storage.rows import LogState, StoredCheckpoint, StreamHead, checkpoint_row
from ledger.storage.sql import IN_CHUNK, fetch_nodes, marks, stream_head_row
from verifier.keys import KeyRecord

__all__ = ["WriteTx"]

_log = logging.getLogger("ledger.storage.store")

_LOCK_STATE_SQL = (
    "SELECT origin, log_vkey, size, last_timestamp_us, (SELECT max(size) FROM checkpoints) "
    "FROM log_state WHERE id = 1"
)
_KEY_COLS = "key_id, agent, public_key, added_at, retired_at, retired_how"


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
        "checkpoint_at": f"SELECT size, root, note, signed_at_us FROM checkpoints WHERE size = {ph}",  # noqa: S608
        "checkpoint_delete": f"DELETE FROM checkpoints WHERE size = {ph}",  # noqa: S608
        "leaf": f"SELECT leaf FROM leaves WHERE idx = {ph}",  # noqa: S608
        "key": f"SELECT {_KEY_COLS} FROM agent_keys WHERE key_id = {ph}",  # noqa: S608
        "active_key": f"SELECT key_id FROM agent_keys WHERE agent = {ph} AND retired_at IS NULL",  # noqa: S608
        "key_insert": ins("agent_keys", _KEY_COLS),
        "key_retire": f"UPDATE agent_keys SET retired_at = {ph}, retired_how = {ph} "  # noqa: S608
        f"WHERE key_id = {ph} AND retired_at IS NULL",
    }


#: The append's statements, written once per paramstyle: the hot path executes them
#: directly (executemany) instead of building SQLAlchemy expressions per call.
_WRITE_SQL = {ph: _write_sql(ph) for ph in ("?", "%s")}


@lru_cache(maxsize=64)
def _erase_sql(ph: str, n: int) -> str:
    return f"DELETE FROM bodies WHERE idx IN ({marks(ph, n)})"  # noqa: S608 - placeholders only


def _key_record(row: Sequence[Any]) -> KeyRecord:
    key_id, agent, public_key, added_at, retired_at, retired_how = row
    return KeyRecord(
        key_id=key_id,
        agent=agent,
        public_key=bytes(public_key),
        added_at=int(added_at),
        retired_at=None if retired_at is None else int(retired_at),
        retired_how=retired_how,
    )


class WriteTx:
    """Operations available inside the serialized append transaction."""

    def __init__(
        self, db: Db, check: CheckpointCheck | None = None, key_streams: KeyStreams | None = None
    ) -> None:
        self._db = db
        self._sql = _WRITE_SQL[db.ph]
        self._check = check
        self._key_streams = key_streams or KeyStreams()
        self._checkpoint_max: int | None = None

    @property
    def db(self) -> Db:
        """The transaction's driver connection: what else must commit with the batch (the
        memory projection's BatchState, through the commit hook) runs its statements on it."""
        return self._db

    @property
    def connection(self) -> Connection:
        """The transaction's SQLAlchemy connection, for the commit hook that writes in this
        same transaction (ledger.append, ``on_commit_tx``: its SAVEPOINT)."""
        return self._db.sa

    @property
    def _conn(self) -> Connection:
        """The transaction's SQLAlchemy connection, as before the driver path (callers that
        build a BatchState or SqlState over it keep working: both take either)."""
        return self._db.sa

    def derive_keys(
        self, agents: Iterable[str], below: int
    ) -> tuple[dict[str, KeyRecord], dict[str, str | None]]:
        """Key state of ``agents`` from their key entries below ``below`` (KeyStreams)."""
        return self._key_streams.derive(self._db, agents, below)

    def lock_state(self) -> LogState:
        if self._db.backend == "postgresql":
            # Durability of the acknowledgement must not depend on the server's default.
            self._db.execute("SET LOCAL synchronous_commit = on")
            sql = _LOCK_STATE_SQL + " FOR UPDATE"
        else:
            sql = _LOCK_STATE_SQL
        row = self._db.one_or_none(sql)
        if row is None:
            raise ConfigError("the log is not initialised; run `engram init`")
        self._checkpoint_max = None if row[4] is None else int(row[4])
        return LogState(origin=row[0], log_vkey=row[1], size=int(row[2]), last_timestamp_us=int(row[3]))

    def stream_head(self, agent: str, kind: str) -> StreamHead | None:
        return stream_head_row(self._db, agent, kind)

    def checkpoint_root(self, size: int) -> bytes | None:
        """The root of the checkpoint signed at ``size``; None if there is none, or if the
        row is not signed by the log key."""
        row = self._db.one_or_none(self._sql["checkpoint_at"], (size,))
        if row is None:
            return None
        cp = checkpoint_row(row)
        if self._check is not None and not self._check.valid(cp):
            self._check.refused(cp)
            return None
        return cp.root

    def key(self, key_id: str) -> KeyRecord | None:
        row = self._db.one_or_none(self._sql["key"], (key_id,))
        return None if row is None else _key_record(row)

    def active_key(self, agent: str) -> str | None:
        row = self._db.one_or_none(self._sql["active_key"], (agent,))
        return None if row is None else str(row[0])

    def nodes(self, coords: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        return fetch_nodes(self._db, coords) if coords else {}

    def leaf(self, index: int) -> bytes | None:
        row = self._db.one_or_none(self._sql["leaf"], (index,))
        return None if row is None else bytes(row[0])

    # Bulk reads for one batch: three queries instead of three per event.

    def load_heads(self, streams: Iterable[tuple[str, str]]) -> dict[tuple[str, str], StreamHead]:
        by_agent: dict[str, set[str]] = {}
        for agent, kind in streams:
            by_agent.setdefault(agent, set()).add(kind)
        out: dict[tuple[str, str], StreamHead] = {}
        agents = sorted(by_agent)
        ph = self._db.ph
        for i in range(0, len(agents), IN_CHUNK):
            # Per-agent IN lists, not a row-value IN: see nodes_query.
            chunk = agents[i : i + IN_CHUNK]
            terms = " OR ".join(f"(agent = {ph} AND kind IN ({marks(ph, len(by_agent[a]))}))" for a in chunk)
            params: list[str] = []
            for a in chunk:
                params.append(a)
                params.extend(sorted(by_agent[a]))
            rows = self._db.rows(
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
        ph = self._db.ph
        for i in range(0, max(len(ids), len(names), 1), IN_CHUNK):
            some_ids, some_names = ids[i : i + IN_CHUNK], names[i : i + IN_CHUNK]
            terms = []
            if some_ids:
                terms.append(f"key_id IN ({marks(ph, len(some_ids))})")
            if some_names:
                terms.append(f"(agent IN ({marks(ph, len(some_names))}) AND retired_at IS NULL)")
            if not terms:
                break
            rows = self._db.rows(
                f"SELECT {_KEY_COLS} FROM agent_keys WHERE {' OR '.join(terms)}",  # noqa: S608
                (*some_ids, *some_names),
            )
            for row in rows:
                rec = _key_record(row)
                keys[rec.key_id] = rec
                if rec.retired_at is None and rec.agent in active:
                    active[rec.agent] = rec.key_id
        return keys, active

    def erase_bodies(self, indices: Iterable[int]) -> int:
        """Delete the bodies (and salts) at ``indices``; return how many rows went."""
        wanted = sorted(set(indices))
        gone = 0
        for i in range(0, len(wanted), IN_CHUNK):
            chunk = wanted[i : i + IN_CHUNK]
            gone += self._db.execute(_erase_sql(self._db.ph, len(chunk)), tuple(chunk))
        return gone

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
        db, sql = self._db, self._sql
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
        if ahead and db.one_or_none(sql["checkpoint_at"], (checkpoint.size,)) is not None:
            db.execute(sql["checkpoint_delete"], (checkpoint.size,))
            _log.error("replaced a checkpoints row at size %d that the log had not signed", checkpoint.size)
        db.executemany(
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
            db.executemany(sql["bodies"], [(r["idx"], r["salt"], r["body"]) for r in body_rows])
        if erase_bodies:
            self.erase_bodies(erase_bodies)
        db.executemany(sql["nodes"], [(r["level"], r["idx"], r["hash"]) for r in node_rows])
        if heads:
            db.executemany(
                sql["heads"], [(h.agent, h.kind, h.version, h.leaf_hash, h.index) for h in heads.values()]
            )
        for rec in key_retirements:
            if db.execute(sql["key_retire"], (rec.retired_at, rec.retired_how, rec.key_id)) != 1:
                raise StorageError(f"key {rec.key_id} was not active when the batch retired it")
        if key_inserts:
            db.executemany(
                sql["key_insert"],
                [
                    (r.key_id, r.agent, r.public_key, r.added_at, r.retired_at, r.retired_how)
                    for r in key_inserts
                ],
            )
        db.execute(sql["state"], (new_size, last_timestamp_us))
        db.execute(
            sql["checkpoint"],
            (checkpoint.size, checkpoint.root, checkpoint.note, checkpoint.signed_at_us, prev_size),
        )
