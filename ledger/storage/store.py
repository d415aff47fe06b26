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

import hmac
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Engine, Select, and_, delete, func, insert, or_, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from engram.protocol.errors import ConfigError, LogIntegrityError, StorageError
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
    ui_revoked_sessions,
)
from verifier.errors import VerificationError
from verifier.event import Leaf, agent_key_id
from verifier.keys import KeyRecord
from verifier.note import VerifierKey, verify_checkpoint

__all__ = ["LogState", "ProofCache", "SqlStore", "StoredCheckpoint", "StreamHead", "WriteTx", "nodes_query"]

_IN_CHUNK = 400  # bound the size of one IN (...) list
_log = logging.getLogger(__name__)

#: Merkle nodes one process keeps in memory (LRU): a proof's upper levels are shared by
#: every proof, so a warm cache answers most of a proof without the database. ~10 MiB.
NODE_CACHE_ENTRIES = 1 << 16
#: Checkpoints (and sizes known to have none) one process keeps in memory (LRU).
CHECKPOINT_CACHE_ENTRIES = 4096


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


class ProofCache:
    """What one process keeps of the log's immutable, committed proof material.

    Why caching is sound: a Merkle node ``(level, idx)`` and the checkpoint signed at a size
    never change once committed (append-only tables, specs/storage.md), and only committed
    values enter the cache (read in a committed read transaction, or written by this
    process's own append after its commit returned). "No checkpoint at size s" is
    permanent once the log is larger than s (checkpoints are only signed at the size a
    commit reaches), so it is cached too, but only below the latest size seen. The
    latest size seen only grows; a size beyond it is always looked up. Several processes
    each keep their own cache; none can be stale, because nothing cached can change.

    Someone who rewrites the tables behind the service's back is not served by the cache
    (the process keeps proving the tree it committed); ``engram audit`` is what compares
    the tables with the leaves.
    """

    def __init__(self, nodes: int = NODE_CACHE_ENTRIES, checkpoints: int = CHECKPOINT_CACHE_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._nodes: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self._cps: OrderedDict[int, StoredCheckpoint | None] = OrderedDict()
        self._max_nodes = nodes
        self._max_cps = checkpoints
        #: the largest checkpoint size known to be committed
        self.latest = -1

    def nodes(
        self, coords: Iterable[tuple[int, int]]
    ) -> tuple[dict[tuple[int, int], bytes], list[tuple[int, int]]]:
        """(the cached nodes among ``coords``, the coordinates not cached)."""
        got: dict[tuple[int, int], bytes] = {}
        missing: list[tuple[int, int]] = []
        with self._lock:
            for c in coords:
                h = self._nodes.get(c)
                if h is None:
                    missing.append(c)
                else:
                    self._nodes.move_to_end(c)
                    got[c] = h
        return got, missing

    def add_nodes(self, items: Iterable[tuple[tuple[int, int], bytes]]) -> None:
        with self._lock:
            for c, h in items:
                self._nodes[c] = h
                self._nodes.move_to_end(c)
            while len(self._nodes) > self._max_nodes:
                self._nodes.popitem(last=False)

    def checkpoints(self, sizes: Iterable[int]) -> tuple[dict[int, StoredCheckpoint], list[int]]:
        """(the cached checkpoints among ``sizes``, the sizes not known); a size known to
        have no checkpoint is in neither."""
        got: dict[int, StoredCheckpoint] = {}
        unknown: list[int] = []
        with self._lock:
            for size in sizes:
                if size not in self._cps:
                    unknown.append(size)
                    continue
                self._cps.move_to_end(size)
                cp = self._cps[size]
                if cp is not None:
                    got[size] = cp
        return got, unknown

    def add_checkpoints(
        self, found: Mapping[int, StoredCheckpoint], looked_up: Iterable[int], latest: int
    ) -> None:
        """Record ``found`` and, for sizes looked up below ``latest`` without one, that there is none."""
        with self._lock:
            self.latest = max(self.latest, latest)
            for size in looked_up:
                if size in found:
                    self._cps[size] = found[size]
                elif size < latest:
                    self._cps[size] = None
                else:
                    continue
                self._cps.move_to_end(size)
            while len(self._cps) > self._max_cps:
                self._cps.popitem(last=False)

    def committed(
        self,
        node_rows: Iterable[Mapping[str, Any]],
        checkpoint: StoredCheckpoint,
        border: Iterable[tuple[tuple[int, int], bytes]] = (),
    ) -> None:
        """What this process's own append committed (called after the commit returned): the
        nodes it wrote, the border it extended (read in its transaction) and its checkpoint."""
        self.add_nodes(border)
        self.add_nodes(((r["level"], r["idx"]), r["hash"]) for r in node_rows)
        self.add_checkpoints({checkpoint.size: checkpoint}, [checkpoint.size], checkpoint.size)


#: How many of the newest checkpoint rows are looked at for one whose signature verifies.
LATEST_CANDIDATES = 8
#: Verified checkpoint notes one process remembers (a dict lookup instead of a signature).
VERIFIED_NOTES = 4096


class CheckpointCheck:
    """Accepts a checkpoint row only if its note is signed by the log key and names the
    row's own size and root (issue 15: a row INSERTed past the end, with any bytes, must
    not become what the service serves). Verified notes are remembered (bounded): a note
    that verified once always will."""

    def __init__(self, log_key: VerifierKey) -> None:
        self.log_key = log_key
        self._lock = threading.Lock()
        self._ok: OrderedDict[bytes, tuple[int, bytes]] = OrderedDict()

    def valid(self, cp: StoredCheckpoint) -> bool:
        with self._lock:
            known = self._ok.get(cp.note)
        if known is None:
            try:
                v = verify_checkpoint(cp.note, self.log_key)
            except VerificationError:
                return False
            known = (v.size, v.root)
            with self._lock:
                self._ok[cp.note] = known
                while len(self._ok) > VERIFIED_NOTES:
                    self._ok.popitem(last=False)
        return known[0] == cp.size and hmac.compare_digest(known[1], cp.root)

    def refused(self, cp: StoredCheckpoint) -> None:
        _log.error(
            "checkpoints row of size %d is not a checkpoint signed by this log's key (note or "
            "columns changed, or a row inserted): ignored; run `engram audit`",
            cp.size,
        )


#: The kinds whose entries change an agent's key state (verifier.keys).
KEY_KINDS = ("key.registered", "key.rotated", "key.revoked")
#: Parsed key entries one process remembers, by leaf bytes (an entry never changes).
KEY_ENTRIES_CACHED = 65_536


class KeyStreams:
    """Key state derived from the log's own key entries (issue 15).

    ``agent_keys`` is a table the append path must be able to UPDATE (a rotation retires a
    key), so whoever can write to it could bring a revoked, stolen key back with one
    ``UPDATE agent_keys SET retired_at = NULL``. The decisions that matter (which key may
    sign an event at an index, which key authenticates a request) therefore come from the
    ``key.*`` entries of the agents concerned, replayed in log order: each agent has a
    handful, read with one indexed query, and parsed once per process (cached by their
    exact bytes, the validation tag: a changed row is a different key). Leaves are
    append-only (UPDATE and DELETE are refused by triggers, and a row inserted past the
    end is not below the signed size these reads are bounded by); ``engram audit`` checks
    the rest (every leaf against the tree, every column against its leaf)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parsed: OrderedDict[bytes, tuple[int, str, str, str | None, bytes | None]] = OrderedDict()

    def _parse(self, raw: bytes) -> tuple[int, str, str, str | None, bytes | None]:
        with self._lock:
            hit = self._parsed.get(raw)
        if hit is not None:
            return hit
        leaf = Leaf.from_bytes(raw)
        self._keep(leaf)
        return self._fields(leaf)

    @staticmethod
    def _fields(leaf: Leaf) -> tuple[int, str, str, str | None, bytes | None]:
        env = leaf.envelope
        nk = env.new_key
        return (
            leaf.index,
            env.agent,
            env.kind,
            None if nk is None else nk.key_id,
            None if nk is None else nk.public_key,
        )

    def _keep(self, leaf: Leaf) -> None:
        with self._lock:
            self._parsed[leaf.raw] = self._fields(leaf)
            while len(self._parsed) > KEY_ENTRIES_CACHED:
                self._parsed.popitem(last=False)

    def appended(self, leaves: Iterable[Leaf]) -> None:
        """The key entries among ``leaves``, which this process built and the log committed:
        their parse is known (a leaf's fields are what it was built from; ``Leaf.build``
        and ``Leaf.from_bytes`` are inverse, verifier tests), so a later derivation that
        reads the same bytes back does not parse them again (issue 28: a fresh agent's
        registration leaf costs a key check and a proof-of-possession verify to parse)."""
        for leaf in leaves:
            if leaf.envelope.kind in KEY_KINDS:
                self._keep(leaf)

    def derive(
        self, conn: Connection, agents: Iterable[str], below: int
    ) -> tuple[dict[str, KeyRecord], dict[str, str | None]]:
        """(every key of ``agents`` with its span, each agent's active key id or None), from
        their key entries below index ``below``.

        Raises:
            LogIntegrityError: a key entry's row disagrees with its bytes, or the entries do
                not replay (check ``state.leaves``).
        """
        names = sorted(set(agents))
        keys: dict[str, KeyRecord] = {}
        active: dict[str, str | None] = dict.fromkeys(names)
        ph = _placeholder(conn)
        rows: list[tuple[int, bytes]] = []
        for i in range(0, len(names), _IN_CHUNK):
            chunk = names[i : i + _IN_CHUNK]
            rows += [
                (int(r[0]), blob(r[1], "leaves", r[0], "leaf"))
                for r in conn.exec_driver_sql(
                    f"SELECT idx, leaf FROM leaves WHERE agent IN ({_marks(ph, len(chunk))}) "  # noqa: S608
                    f"AND kind IN ({_marks(ph, len(KEY_KINDS))}) AND idx < {ph}",
                    (*chunk, *KEY_KINDS, below),
                )
            ]
        rows.sort()
        for idx, raw in rows:
            try:
                index, agent, kind, new_id, new_pk = self._parse(raw)
            except VerificationError as e:
                raise LogIntegrityError(
                    f"leaves row {idx} does not parse as a leaf: {e}", check="state.leaves"
                ) from e
            if index != idx or agent not in active or kind not in KEY_KINDS:
                raise LogIntegrityError(
                    f"leaves row {idx}: its index, agent or kind columns disagree with its bytes "
                    f"(index {index}, agent {agent!r}, kind {kind!r})",
                    check="state.leaves",
                )
            old = active[agent]
            if kind != "key.registered":
                if old is None:
                    raise LogIntegrityError(
                        f"leaves row {idx}: {kind} of {agent} without an active key", check="state.leaves"
                    )
                how = "rotated" if kind == "key.rotated" else "revoked"
                rec = keys[old]
                keys[old] = KeyRecord(
                    key_id=rec.key_id,
                    agent=agent,
                    public_key=rec.public_key,
                    added_at=rec.added_at,
                    retired_at=idx,
                    retired_how=how,
                )
                active[agent] = None
            if kind != "key.revoked":
                if new_id is None or new_pk is None:
                    raise LogIntegrityError(
                        f"leaves row {idx}: {kind} without a new key", check="state.leaves"
                    )
                keys[new_id] = KeyRecord(key_id=new_id, agent=agent, public_key=new_pk, added_at=idx)
                active[agent] = new_id
        return keys, active


def cross_check_keys(
    table: Mapping[str, KeyRecord],
    table_active: Mapping[str, str | None],
    log: Mapping[str, KeyRecord],
    log_active: Mapping[str, str | None],
) -> None:
    """Refuse (LogIntegrityError, check ``state.agent_keys``) when the ``agent_keys`` rows
    read for a batch disagree with the key state its log entries give, naming the row and
    column: the log never extends a database whose key table was changed behind it."""
    problems: list[str] = []
    for key_id, row in sorted(table.items()):
        want = log.get(key_id)
        if want is None:
            problems.append(f"agent_keys row {key_id}: no key entry of agent {row.agent!r} registers it")
            continue
        for col in ("agent", "public_key", "added_at", "retired_at", "retired_how"):
            got, exp = getattr(row, col), getattr(want, col)
            if got != exp:
                problems.append(f"agent_keys row {key_id}: {col} is {got!r}, the log says {exp!r}")
    for agent, active_id in sorted(table_active.items()):
        if agent in log_active and log_active[agent] != active_id:
            problems.append(
                f"agent_keys: the active key of {agent!r} is {active_id!r}, the log says {log_active[agent]!r}"
            )
    for key_id, want in sorted(log.items()):
        if key_id not in table and (want.agent in table_active) and log_active.get(want.agent) == key_id:
            problems.append(f"agent_keys row {key_id} (active key of {want.agent!r}) is missing")
    if problems:
        raise LogIntegrityError(
            "the key table disagrees with the log's key entries; refusing to append (run `engram audit`): "
            + "; ".join(problems[:8]),
            check="state.agent_keys",
        )


def blob(value: object, table: str, row: object, column: str) -> bytes:
    """A binary column's value, or :class:`LogIntegrityError` naming table, row and column
    (issue 25, finding 10: a body rewritten as TEXT, as the sqlite3 shell's ``replace()``
    stores it, raised an untyped ``TypeError`` from ``bytes()`` in the audit, the rebuild,
    recall and writes)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise LogIntegrityError(
        f"{table} row {row}: column {column} holds {type(value).__name__}, not bytes (run `engram audit`)",
        check=f"state.{table}",
    )


def _cp_row(r: Any) -> StoredCheckpoint:
    return StoredCheckpoint(
        size=int(r[0]),
        root=blob(r[1], "checkpoints", r[0], "root"),
        note=blob(r[2], "checkpoints", r[0], "note"),
        signed_at_us=int(r[3]),
    )


def _latest_checkpoint(conn: Connection, check: CheckpointCheck | None) -> StoredCheckpoint:
    """The newest checkpoint row whose signature verifies (the newest row without a check)."""
    # Only rows at sizes the log has reached are candidates: rows INSERTed ahead of it never
    # are (issue 25, finding 10: eight of them stopped the ledger from opening).
    rows = conn.exec_driver_sql(
        "SELECT size, root, note, signed_at_us FROM checkpoints "  # noqa: S608 - constants only
        "WHERE size <= (SELECT coalesce(max(idx) + 1, 0) FROM leaves) "
        f"ORDER BY size DESC LIMIT {LATEST_CANDIDATES}"
    ).all()
    if not rows:
        raise ConfigError("the log has no checkpoint; run `engram init`")
    for r in rows:
        cp = _cp_row(r)
        if check is None or check.valid(cp):
            return cp
        check.refused(cp)
    raise LogIntegrityError(
        f"none of the {len(rows)} newest checkpoint rows carries this log's signature; run `engram audit`",
        check="state.checkpoints",
    )


def _placeholder(conn: Connection) -> str:
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


@lru_cache(maxsize=512)
def _nodes_sql(ph: str, shape: tuple[int, ...]) -> str:
    """SELECT of nodes as ``level = ? AND idx IN (?, ...)`` terms, one per level (see
    :func:`nodes_query`), for a shape of per-level counts; built once per shape."""
    terms = " OR ".join(f"(level = {ph} AND idx IN ({', '.join([ph] * n)}))" for n in shape)
    return f"SELECT level, idx, hash FROM nodes WHERE {terms}"  # noqa: S608 - placeholders only


def _marks(ph: str, n: int) -> str:
    return ", ".join([ph] * n)


# The highest checkpoint row rides along with the lock row: a row above the log's size was
# never signed by it (issue 25, finding 10), and knowing it costs the append no statement.
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
        return _stream_head(self._conn, agent, kind)

    def checkpoint_root(self, size: int) -> bytes | None:
        """The root of the checkpoint signed at ``size``; None if there is none, or if the
        row is not signed by the log key."""
        row = self._conn.exec_driver_sql(
            f"SELECT size, root, note, signed_at_us FROM checkpoints WHERE size = {_placeholder(self._conn)}",  # noqa: S608
            (size,),
        ).one_or_none()
        if row is None:
            return None
        cp = _cp_row(row)
        if self._check is not None and not self._check.valid(cp):
            self._check.refused(cp)
            return None
        return cp.root

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
        return _fetch_nodes(self._conn, coords) if coords else {}

    def leaf(self, index: int) -> bytes | None:
        row = self._conn.exec_driver_sql(
            f"SELECT leaf FROM leaves WHERE idx = {_placeholder(self._conn)}",  # noqa: S608
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
        ph = _placeholder(self._conn)
        for i in range(0, len(agents), _IN_CHUNK):
            # Per-agent IN lists, not a row-value IN: see nodes_query.
            chunk = agents[i : i + _IN_CHUNK]
            terms = " OR ".join(f"(agent = {ph} AND kind IN ({_marks(ph, len(by_agent[a]))}))" for a in chunk)
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
        ph = _placeholder(self._conn)
        for i in range(0, max(len(ids), len(names), 1), _IN_CHUNK):
            some_ids, some_names = ids[i : i + _IN_CHUNK], names[i : i + _IN_CHUNK]
            terms = []
            if some_ids:
                terms.append(f"key_id IN ({_marks(ph, len(some_ids))})")
            if some_names:
                terms.append(f"(agent IN ({_marks(ph, len(some_names))}) AND retired_at IS NULL)")
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
        sql = _WRITE_SQL[_placeholder(c)]
        # A row at the size this batch reaches was not signed by this log (the writer lock is
        # held; a checkpoint is only signed at the size the log reaches): a forged row
        # INSERTed ahead, which reads already skip. It is deleted before the leaves are
        # written (migration 0010 lets a row ahead of the leaves go) and this batch's
        # checkpoint takes its place: not a permanent stop (issue 25, finding 10). Rows
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
    ph = _placeholder(conn)
    for i in range(0, len(wanted), _IN_CHUNK):
        by_level: dict[int, list[int]] = {}
        for level, idx in wanted[i : i + _IN_CHUNK]:
            by_level.setdefault(level, []).append(idx)
        params: list[int] = []
        for level, ids in by_level.items():
            params.append(level)
            params.extend(ids)
        sql = _nodes_sql(ph, tuple(len(ids) for ids in by_level.values()))
        for level, idx, h in conn.exec_driver_sql(sql, tuple(params)):
            out[(level, idx)] = bytes(h)
    missing = [c for c in wanted if c not in out]
    if missing:
        raise StorageError(f"stored Merkle nodes are missing: {missing[:5]}")
    return out


class SqlStore:
    """Reads and the write transaction over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
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
                    yield WriteTx(conn, self.checkpoint_check, self.key_streams)
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
        """The agent's active key id, from its key entries in the signed log (KeyStreams),
        never from the mutable ``agent_keys`` table."""
        return self._log_keys(agent)[1]

    def _log_keys(self, agent: str) -> tuple[list[KeyRecord], str | None]:
        with self.read() as conn:
            below = _latest_checkpoint(conn, self.checkpoint_check).size
            keys, active = self.key_streams.derive(conn, [agent], below)
        return sorted(keys.values(), key=lambda k: k.added_at), active[agent]

    def public_key(self, key_id: str) -> tuple[str, bytes] | None:
        """(agent, public key) of a key id registered in this log (a key id is a hash of its
        key, registered once: the answer never changes)."""
        with self.read() as conn:
            row = conn.exec_driver_sql(
                f"SELECT agent, public_key FROM agent_keys WHERE key_id = {_placeholder(conn)}",  # noqa: S608
                (key_id,),
            ).one_or_none()
        if row is None or agent_key_id(bytes(row[1])) != key_id:
            return None  # a key id is the hash of its key: a row that says otherwise is not it
        return str(row[0]), bytes(row[1])

    def keys_of(self, agent: str) -> list[KeyRecord]:
        """Every key of ``agent`` with its span, in registration order, from its key entries
        in the signed log (KeyStreams)."""
        return self._log_keys(agent)[0]

    # -- checkpoints ------------------------------------------------------------------

    def latest_checkpoint(self) -> StoredCheckpoint:
        with self.read() as conn:
            return _latest_checkpoint(conn, self.checkpoint_check)

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
            with self.read() as conn:
                fetched = _fetch_nodes(conn, missing)
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
        with self.read() as conn:
            latest = _latest_checkpoint(conn, self.checkpoint_check).size
            if wanted and wanted[-1] > latest:
                return latest, {}, {}  # the caller reports the size as out of range
            fetched = _fetch_nodes(conn, missing) if missing else {}
            found: dict[int, StoredCheckpoint] = {}
            if unknown:
                ph = _placeholder(conn)
                rows = conn.exec_driver_sql(
                    f"SELECT size, root, note, signed_at_us FROM checkpoints WHERE size IN ({', '.join([ph] * len(unknown))})",  # noqa: S608
                    tuple(unknown),
                )
                found = {cp.size: cp for cp in map(_cp_row, rows) if self._valid(cp)}
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
        with self.read() as conn:
            rows = conn.execute(
                select(leaves.c.idx, bodies.c.body)
                .select_from(leaves.outerjoin(bodies, bodies.c.idx == leaves.c.idx))
                .where(and_(leaves.c.agent == agent, leaves.c.kind == kind, leaves.c.idx < size))
                .order_by(leaves.c.version)
            ).all()
        return [
            (int(r.idx), None if r.body is None else blob(r.body, "bodies", int(r.idx), "body")) for r in rows
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
            res = tx._conn.execute(bodies.delete().where(bodies.c.idx == index))
            self.bodies_deleted += 1
            return bool(res.rowcount)

    def entries_of_kinds(
        self, kinds: Sequence[str], start: int, end: int
    ) -> list[tuple[int, str, str, bytes | None]]:
        """``(index, agent, kind, body or None where erased)`` of the entries in
        ``[start, end)`` whose kind is one of ``kinds``, in index order: one range read of the
        leaves appended since a reader last looked (ledger.mesh.MeshCache)."""
        with self.read() as conn:
            rows = conn.execute(
                select(leaves.c.idx, leaves.c.agent, leaves.c.kind, bodies.c.body)
                .select_from(leaves.outerjoin(bodies, bodies.c.idx == leaves.c.idx))
                .where(and_(leaves.c.idx >= start, leaves.c.idx < end, leaves.c.kind.in_(list(kinds))))
                .order_by(leaves.c.idx)
            ).all()
        return [
            (
                int(r.idx),
                str(r.agent),
                str(r.kind),
                None if r.body is None else blob(r.body, "bodies", int(r.idx), "body"),
            )
            for r in rows
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

    # -- witness cosignatures -------------------------------------------------------------

    def latest_cosigned(self) -> tuple[StoredCheckpoint, list[str]]:
        """The latest checkpoint and the witness cosignature lines stored for it (by
        witness), in one read transaction of two indexed lookups (``GET /checkpoint``)."""
        with self.read() as conn:
            cp = _latest_checkpoint(conn, self.checkpoint_check)
            lines = conn.exec_driver_sql(
                f"SELECT line FROM cosignatures WHERE size = {_placeholder(conn)} ORDER BY witness",  # noqa: S608
                (cp.size,),
            )
            return cp, [r[0] for r in lines]

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

    def revoke_ui_session(
        self, session: str, agent: str, *, now_s: int, expires_s: int, grace_s: int = 300
    ) -> None:
        """Record that the web UI session ``session`` of ``agent`` was signed out; it stays
        refused by every worker sharing this database until ``expires_s`` (when its cookie
        expires anyway). Rows expired for more than ``grace_s`` are pruned in the same
        transaction (the grace covers a worker whose clock runs behind, as for nonces).
        Durable when it returns; a session signed out twice is recorded once."""
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(**{WRITE_OPTION: True})
                with conn.begin():
                    conn.execute(
                        ui_revoked_sessions.delete().where(ui_revoked_sessions.c.expires_s < now_s - grace_s)
                    )
                    conn.execute(
                        insert(ui_revoked_sessions).values(session=session, agent=agent, expires_s=expires_s)
                    )
        except IntegrityError:
            return  # signed out already
        except DBAPIError as e:
            raise StorageError(f"database error: {e.orig!r}") from e

    def ui_session_revoked(self, session: str) -> bool:
        """Whether web UI session ``session`` was signed out (read on every owner request)."""
        with self.read() as conn:
            row = conn.execute(
                select(ui_revoked_sessions.c.session).where(ui_revoked_sessions.c.session == session)
            ).first()
        return row is not None

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
