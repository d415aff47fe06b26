"""The memory projection in SQL: catch-up, rebuild, digest, and the queries recall needs.

The projection tables are a function of the log. ``sync`` applies every leaf past the
cursor with :func:`ledger.memory.state.evolve` through :class:`SqlState`, advancing the
cursor in the same transaction, so the tables and the cursor always agree. One projector
at a time: the cursor row is locked (``FOR UPDATE`` on PostgreSQL, which also runs the
projection at SERIALIZABLE and retries serialization failures; ``BEGIN IMMEDIATE`` on
SQLite). ``rebuild`` empties the tables and replays from index 0.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, func, or_, select, text, update
from sqlalchemy.exc import DBAPIError, OperationalError

from engram.protocol.erasure import ErasurePlan, plan_erasure
from engram.protocol.errors import LogIntegrityError, StorageError
from engram.protocol.gate import normalize_text
from ledger.memory.facts import fact_of
from ledger.memory.state import (
    RECORD,
    STANDS_IN_KINDS,
    Item,
    LoggedEvent,
    Session,
    digest_sorted,
    evolve,
    ref_key,
    stand_in,
    stand_ins,
)
from ledger.memory.terms import content_terms
from ledger.memory.vectors import BUMP_GENERATION, DELETE_VECTOR
from ledger.storage.db import WRITE_OPTION, checkpoint_wal
from ledger.storage.schema import bodies, leaves, mem_cursor, mem_items, mem_sessions, mem_vectors
from ledger.storage.store import SqlStore, blob
from verifier.errors import MalformedError, VerificationError
from verifier.event import Leaf, commitment_of
from verifier.jcs import parse_strict

__all__ = ["BatchState", "Projection", "SqlState"]

_CHUNK = 500


def _norm_hash(content: str) -> str:
    return hashlib.sha256(normalize_text(content).encode()).hexdigest()


def _item_row(it: Item) -> dict[str, Any]:
    return {
        "agent": it.agent,
        "ref": it.ref,
        "idx": it.index,
        "pos": int(it.ref.split(".")[1]),
        "source_kind": it.source_kind,
        "tier": it.tier,
        "status": it.status,
        "category": it.category,
        "content": it.content,
        "norm_hash": _norm_hash(it.content),
        "tags": json.dumps(it.tags),
        "confidence": it.confidence,
        "confirmations": it.confirmations,
        "access_count": it.access_count,
        "last_access_us": it.last_access_us,
        "created_us": it.created_us,
        "decay_exempt": it.decay_exempt,
        "linked_action": it.linked_action,
        "provenance": json.dumps(it.provenance),
        "tier_history": json.dumps(it.tier_history),
        "session": it.session,
        "superseded_by": it.superseded_by,
        "supersedes": it.supersedes,
        "valid_from_us": it.valid_from_us or None,
        "valid_until_us": it.valid_until_us,
        "replaced_by": it.replaced_by,
        "replaces": it.replaces,
        "fact_key": _fact_key(it),
        "copies": json.dumps(it.copies),
    }


def _fact_key(it: Item) -> str | None:
    if it.tier in (RECORD, "NONE") or it.status == "erased":
        return None
    fact = fact_of(it.content)
    return None if fact is None else fact.key


def item_from_row(r: Any) -> Item:
    return Item(
        agent=r.agent,
        ref=r.ref,
        index=r.idx,
        source_kind=r.source_kind,
        tier=r.tier,
        status=r.status,
        category=r.category,
        content=r.content,
        tags=json.loads(r.tags),
        confidence=r.confidence,
        confirmations=r.confirmations,
        access_count=r.access_count,
        last_access_us=r.last_access_us,
        created_us=r.created_us,
        decay_exempt=bool(r.decay_exempt),
        linked_action=bool(r.linked_action),
        provenance=json.loads(r.provenance),
        tier_history=json.loads(r.tier_history),
        session=r.session,
        superseded_by=r.superseded_by,
        supersedes=r.supersedes,
        valid_from_us=r.valid_from_us or 0,
        valid_until_us=r.valid_until_us,
        replaced_by=r.replaced_by,
        replaces=r.replaces,
        copies=json.loads(r.copies),
    )


def _session_from_row(r: Any) -> Session:
    return Session(
        agent=r.agent,
        session=r.session,
        opened_index=r.opened_index,
        opened_us=r.opened_us,
        status=r.status,
        title=r.title,
        closed_index=r.closed_index,
        turns=r.turns,
        last_index=r.last_index,
        distilled=bool(r.distilled),
        hot_snapshot=json.loads(r.hot_snapshot),
    )


_ITEM_COLS = tuple(c.name for c in mem_items.columns)
_SESSION_COLS = tuple(c.name for c in mem_sessions.columns)


def _cols(names: Sequence[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


@lru_cache(maxsize=4)
def _state_sql(ph: str) -> dict[str, str]:
    """The projector's statements, written once per paramstyle (issue 14: SQLAlchemy
    expression building was most of the projection's time). Identifiers are the schema's
    column names, quoted; values are always parameters."""

    def upsert(table: str, cols: Sequence[str], key: Sequence[str]) -> str:
        updates = ", ".join(f'"{c}" = excluded."{c}"' for c in cols if c not in key)
        return (
            f"INSERT INTO {table} ({_cols(cols)}) VALUES ({', '.join([ph] * len(cols))}) "  # noqa: S608
            f"ON CONFLICT ({_cols(key)}) DO UPDATE SET {updates}"
        )

    items, sessions = _cols(_ITEM_COLS), _cols(_SESSION_COLS)
    return {
        "put_item": upsert("mem_items", _ITEM_COLS, ("agent", "ref")),
        "put_session": upsert("mem_sessions", _SESSION_COLS, ("agent", "session")),
        "item": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND ref = {ph}",  # noqa: S608
        "session": f'SELECT {sessions} FROM mem_sessions WHERE agent = {ph} AND "session" = {ph}',  # noqa: S608
        "duplicates": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND tier = {ph} "  # noqa: S608
        f"AND status = 'active' AND norm_hash = {ph} ORDER BY idx, pos",
        "duplicates_any": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND tier = {ph} "  # noqa: S608
        f"AND norm_hash = {ph}",
        "sessions": f'SELECT {sessions} FROM mem_sessions WHERE agent = {ph} ORDER BY "session"',  # noqa: S608
        "hot": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND tier = 'HOT' "  # noqa: S608
        "AND status = 'active' ORDER BY idx, pos",
    }


class SqlState:
    """The :class:`~ledger.memory.state.MemoryState` port over the projection tables."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._sql = _state_sql("?" if conn.dialect.paramstyle == "qmark" else "%s")

    def item(self, agent: str, ref: str) -> Item | None:
        r = self.conn.exec_driver_sql(self._sql["item"], (agent, ref)).one_or_none()
        return None if r is None else item_from_row(r)

    def put_item(self, item: Item) -> None:
        # Derived data forgets erased text too: the vector goes, and readers' caches reload.
        if (
            item.status == "erased"
            and self.conn.execute(DELETE_VECTOR, {"agent": item.agent, "refs": [item.ref]}).rowcount
        ):
            self.conn.execute(BUMP_GENERATION)
        row = _item_row(item)
        self.conn.exec_driver_sql(self._sql["put_item"], tuple(row[c] for c in _ITEM_COLS))

    def record_uses(self, agent: str, refs: Iterable[str], at_us: int) -> None:
        # One statement for the whole entry: access logging is the projection's most frequent
        # update, and an item-by-item read and upsert of 100 uses held the writer for long.
        distinct = list(dict.fromkeys(refs))
        if distinct:
            self.conn.execute(_RECORD_USES, {"a": agent, "refs": distinct, "at": at_us})

    def session(self, agent: str, session: str) -> Session | None:
        r = self.conn.exec_driver_sql(self._sql["session"], (agent, session)).one_or_none()
        return None if r is None else _session_from_row(r)

    def put_session(self, session: Session) -> None:
        row = {**session.to_json(), "hot_snapshot": json.dumps(session.hot_snapshot)}
        self.conn.exec_driver_sql(self._sql["put_session"], tuple(row[c] for c in _SESSION_COLS))

    def find_duplicate(self, agent: str, tier: str, norm: str) -> Item | None:
        rows = self.conn.exec_driver_sql(
            self._sql["duplicates"], (agent, tier, hashlib.sha256(norm.encode()).hexdigest())
        )
        for r in rows:
            it = item_from_row(r)
            if it.norm == norm:  # the hash narrows; the text decides
                return it
        return None

    def agent_sessions(self, agent: str) -> list[Session]:
        return [_session_from_row(r) for r in self.conn.exec_driver_sql(self._sql["sessions"], (agent,))]

    def fileable_warm(self, agent: str) -> list[Item]:
        rows = self.conn.execute(_FILEABLE_WARM, {"a": agent})
        return [item_from_row(r) for r in rows]

    def hot_items(self, agent: str) -> list[Item]:
        return [item_from_row(r) for r in self.conn.exec_driver_sql(self._sql["hot"], (agent,))]

    def changed_facts(self, agent: str) -> list[Item]:
        """The agent's active memories that state a fact another active memory also states
        (the same ``fact_key``): where a newer value may replace an older one."""
        return [item_from_row(r) for r in self.conn.execute(_CHANGED_FACTS, {"a": agent})]


def _clone_item(it: Item) -> Item:
    return replace(
        it,
        tags=list(it.tags),
        provenance=[dict(p) for p in it.provenance],
        tier_history=[dict(h) for h in it.tier_history],
    )


def _clone_session(s: Session) -> Session:
    return replace(s, hot_snapshot=[{**h, "tags": list(h.get("tags") or [])} for h in s.hot_snapshot])


#: Parameters per IN list of a prefetch (well under SQLite's 32,766 and PostgreSQL's limits).
_IN_LIMIT = 500
#: The tiers a duplicate is looked for in (records and tombstones never take part in dedup).
_DEDUP_TIERS = ("HOT", "WARM", "COLD")


class BatchState:
    """The state port over the projection tables with a write-back overlay for one chunk of
    entries (issue 14, Deliver 6): evolve reads and writes items and sessions in memory, and
    :meth:`flush` writes what changed with one executemany per table.

    The overlay is authoritative for every row it holds (loaded from the table or written by
    evolve), the table for every other row, so each read is the union of the two with the
    overlay winning: the same answers :class:`SqlState` gives after each entry, which the
    projection contract test (incremental = rebuilt = in memory) checks. :meth:`prefetch`
    loads what a chunk's bodies name (items, sessions, duplicate candidates by normalized
    hash) in a few IN queries instead of one query per event; anything else is read through.
    Duplicates are found through a hash map of the overlay, once the table's candidates for
    that (agent, tier, hash) are in it. Memory holds one chunk's rows, never the log's."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.db = SqlState(conn)
        self._sql = self.db._sql
        self._ph = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        self._items: dict[tuple[str, str], Item] = {}
        self._absent: set[tuple[str, str]] = set()
        self._dirty_items: dict[tuple[str, str], None] = {}
        self._by_agent: dict[str, set[str]] = {}
        self._by_norm: dict[tuple[str, str], set[str]] = {}  # (agent, norm hash) -> refs
        self._norm_loaded: set[tuple[str, str, str]] = set()  # (agent, tier, norm hash)
        self._sessions: dict[tuple[str, str], Session | None] = {}
        self._dirty_sessions: dict[tuple[str, str], None] = {}
        self._erased: dict[str, list[str]] = {}

    # -- the overlay ----------------------------------------------------------------------

    def _hold(self, it: Item) -> None:
        key = (it.agent, it.ref)
        self._items[key] = it
        self._absent.discard(key)
        self._by_agent.setdefault(it.agent, set()).add(it.ref)
        self._by_norm.setdefault((it.agent, _norm_hash(it.content)), set()).add(it.ref)

    def _load_rows(self, rows: Iterable[Any]) -> None:
        for r in rows:
            if (r.agent, r.ref) not in self._items:  # what the overlay holds is newer
                self._hold(item_from_row(r))

    def _select_keys(
        self, table: str, cols: str, keys: Sequence[str], wanted: Sequence[tuple[str, ...]]
    ) -> Iterator[Any]:
        """Rows of ``table`` whose ``keys`` equal one of the ``wanted`` tuples: a join with a
        VALUES list, which both backends answer with one index lookup per tuple (a row-value
        IN list scans the table on SQLite)."""
        on = " AND ".join(f't."{k}" = v.column{n + 1}' for n, k in enumerate(keys))
        one = "(" + ", ".join([self._ph] * len(keys)) + ")"
        step = max(1, _IN_LIMIT // len(keys))
        for start in range(0, len(wanted), step):
            part = wanted[start : start + step]
            sql = f"SELECT {cols} FROM (VALUES {', '.join([one] * len(part))}) AS v JOIN {table} t ON {on}"  # noqa: S608
            yield from self.conn.exec_driver_sql(sql, tuple(x for key in part for x in key))

    def prefetch(self, events: Sequence[LoggedEvent]) -> None:
        """Load, in a few queries, the rows the bodies of ``events`` name."""
        refs: dict[tuple[str, str], None] = {}
        sessions: dict[tuple[str, str], None] = {}
        norms: dict[tuple[str, str, str], None] = {}
        for ev in events:
            b = ev.body
            if b is None:
                continue
            kind, agent = ev.kind, ev.agent
            if kind in _NAMES_ITEM:
                refs[(agent, b["item"])] = None
                for other in ("confirms", "by"):
                    if b.get(other):
                        refs[(agent, b[other])] = None
            elif kind == "memory.accessed":
                refs.update(dict.fromkeys((agent, r) for r in b["items"]))
            if kind in _NAMES_SESSION:
                sessions[(agent, b["session"])] = None
            if kind == "memory.written":
                h = _norm_hash(b["content"])
                norms.update(dict.fromkeys((agent, t, h) for t in _DEDUP_TIERS))
            elif kind == "memory.distilled":
                for entry in b["entries"]:
                    h = _norm_hash(entry["content"])
                    norms.update(dict.fromkeys((agent, t, h) for t in _DEDUP_TIERS))
        items = ", ".join(f't."{c}"' for c in _ITEM_COLS)
        todo = [k for k in refs if k not in self._items and k not in self._absent]
        self._load_rows(self._select_keys("mem_items", items, ("agent", "ref"), todo))
        self._absent.update(k for k in todo if k not in self._items)
        todo = [k for k in sessions if k not in self._sessions]
        sess = ", ".join(f't."{c}"' for c in _SESSION_COLS)
        for r in self._select_keys("mem_sessions", sess, ("agent", "session"), todo):
            self._sessions[(r.agent, r.session)] = _session_from_row(r)
        for k in todo:
            self._sessions.setdefault(k, None)
        todo3 = [k for k in norms if k not in self._norm_loaded]
        self._load_rows(self._select_keys("mem_items", items, ("agent", "tier", "norm_hash"), todo3))
        self._norm_loaded.update(todo3)

    def flush(self) -> None:
        """Write every changed item and session (one executemany per table)."""
        if self._erased:
            bumped = False
            for agent, refs in self._erased.items():
                bumped |= bool(self.conn.execute(DELETE_VECTOR, {"agent": agent, "refs": refs}).rowcount)
            if bumped:
                self.conn.execute(BUMP_GENERATION)
        if self._dirty_items:
            rows = [_item_row(self._items[k]) for k in self._dirty_items]
            self.conn.exec_driver_sql(self._sql["put_item"], [tuple(r[c] for c in _ITEM_COLS) for r in rows])
        if self._dirty_sessions:
            srows = []
            for k in self._dirty_sessions:
                s = self._sessions[k]
                assert s is not None
                row = {**s.to_json(), "hot_snapshot": json.dumps(s.hot_snapshot)}
                srows.append(tuple(row[c] for c in _SESSION_COLS))
            self.conn.exec_driver_sql(self._sql["put_session"], srows)
        self._erased, self._dirty_items, self._dirty_sessions = {}, {}, {}

    # -- the MemoryState port -------------------------------------------------------------

    def item(self, agent: str, ref: str) -> Item | None:
        key = (agent, ref)
        it = self._items.get(key)
        if it is None:
            if key in self._absent:
                return None
            it = self.db.item(agent, ref)
            if it is None:
                self._absent.add(key)
                return None
            self._hold(it)
        return _clone_item(it)

    def put_item(self, item: Item) -> None:
        if item.status == "erased":
            self._erased.setdefault(item.agent, []).append(item.ref)
        self._hold(_clone_item(item))
        self._dirty_items[(item.agent, item.ref)] = None

    def record_uses(self, agent: str, refs: Iterable[str], at_us: int) -> None:
        for ref in dict.fromkeys(refs):
            if self.item(agent, ref) is not None:  # only items that exist, as the UPDATE does
                it = self._items[(agent, ref)]
                it.access_count += 1
                it.last_access_us = at_us
                self._dirty_items[(agent, ref)] = None

    def session(self, agent: str, session: str) -> Session | None:
        key = (agent, session)
        if key not in self._sessions:
            self._sessions[key] = self.db.session(agent, session)
        s = self._sessions[key]
        return None if s is None else _clone_session(s)

    def put_session(self, session: Session) -> None:
        key = (session.agent, session.session)
        self._sessions[key] = _clone_session(session)
        self._dirty_sessions[key] = None

    def find_duplicate(self, agent: str, tier: str, norm: str) -> Item | None:
        h = hashlib.sha256(norm.encode()).hexdigest()
        if (agent, tier, h) not in self._norm_loaded:
            rows = self.conn.exec_driver_sql(self._sql["duplicates_any"], (agent, tier, h))
            self._load_rows(rows)
            self._norm_loaded.add((agent, tier, h))
        best: Item | None = None
        for ref in self._by_norm.get((agent, h), ()):
            it = self._items[(agent, ref)]
            same = it.status == "active" and it.tier == tier and it.norm == norm  # the text decides
            if same and (best is None or ref_key(it.ref) < ref_key(best.ref)):
                best = it
        return None if best is None else _clone_item(best)

    def _merged(self, agent: str, from_table: list[Item], keep: Callable[[Item], bool]) -> list[Item]:
        out = {it.ref: it for it in from_table if (agent, it.ref) not in self._items}
        for ref in self._by_agent.get(agent, ()):
            it = self._items[(agent, ref)]
            if keep(it):
                out[ref] = _clone_item(it)
        return [out[r] for r in sorted(out, key=ref_key)]

    def hot_items(self, agent: str) -> list[Item]:
        return self._merged(
            agent, self.db.hot_items(agent), lambda i: i.status == "active" and i.tier == "HOT"
        )

    def fileable_warm(self, agent: str) -> list[Item]:
        return self._merged(agent, self.db.fileable_warm(agent), _fileable)

    def agent_sessions(self, agent: str) -> list[Session]:
        out = {s.session: s for s in self.db.agent_sessions(agent)}
        for (a, name), s in self._sessions.items():
            if a == agent:
                if s is None:
                    out.pop(name, None)
                else:
                    out[name] = _clone_session(s)
        return [out[n] for n in sorted(out)]


def _fileable(it: Item) -> bool:
    return (
        it.status == "active"
        and it.tier == "WARM"
        and (it.category == "COMMITMENT" or bool({"task", "decision", "blocker"} & set(it.tags)))
    )


#: Kinds whose body names an item (``item``; ``confirms`` for a tier change).
_NAMES_ITEM = frozenset(
    (
        "memory.superseded",
        "memory.decay_exempted",
        "memory.archived",
        "memory.tier_changed",
        "memory.replaced",
    )
)
#: Kinds whose body names a session.
_NAMES_SESSION = frozenset(("session.turn", "session.closed", "memory.distilled"))


#: Documents a full-text query may match before its most common terms are left out (SQLite):
#: bm25 costs about 2 us per matching document.
FTS_DOC_BUDGET = 4000


def _fts_terms(query: str) -> list[str]:
    # Content words only (stop words neither match nor filter), word characters only (any
    # script): no quote, operator or parenthesis can reach the FTS5 MATCH expression or
    # to_tsquery.
    return content_terms(query)


_FTS_SQLITE = text(
    "SELECT i.ref FROM mem_fts JOIN mem_items i ON i.rowid = mem_fts.rowid "
    "WHERE mem_fts MATCH :q AND i.agent = :a AND i.status = 'active' AND i.tier IN :tiers "
    "ORDER BY bm25(mem_fts), i.idx, i.pos LIMIT :lim"
).bindparams(bindparam("tiers", expanding=True))
_FTS_POSTGRES = text(
    "SELECT ref FROM mem_items WHERE agent = :a AND status = 'active' AND tier IN :tiers "
    "AND to_tsvector('english'::regconfig, content || ' ' || tags) @@ to_tsquery('english', :q) "
    "ORDER BY ts_rank(to_tsvector('english'::regconfig, content || ' ' || tags), to_tsquery('english', :q)) DESC, "
    "idx, pos LIMIT :lim"
).bindparams(bindparam("tiers", expanding=True))


class Projection:
    """Keeps the memory tables in step with the log and answers recall's queries."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.engine = store.engine
        #: term -> (documents matching it, projection size when counted); see search_fulltext.
        self._df_cache: dict[str, tuple[int, int]] = {}
        #: set by the sync that applied an erasure: the file is scrubbed after it (scrub)
        self._erasure_applied = False
        #: called with the applied size after each committed chunk (a rebuild's progress)
        self._on_chunk: Callable[[int], None] | None = None

    # -- applying the log -------------------------------------------------------------

    @contextmanager
    def _projector(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            opts: dict[str, Any] = {WRITE_OPTION: True}
            if conn.dialect.name == "postgresql":
                opts["isolation_level"] = "SERIALIZABLE"
            conn = conn.execution_options(**opts)
            with conn.begin():
                yield conn

    def applied_size(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT applied_size FROM mem_cursor WHERE id = 1").scalar_one())

    def sync(self, upto: int | None = None) -> int:
        """Apply the log up to ``upto`` (default: the whole log); return the applied size."""
        target = self.store.latest_checkpoint().size if upto is None else upto
        applied = self.applied_size()
        if applied >= target:
            return applied  # up to date: no write transaction (it would queue behind writers)
        return self._retrying(lambda: self._sync(target))

    @staticmethod
    def _retrying(work: Callable[[], int]) -> int:
        for attempt in range(20):
            try:
                return work()
            except OperationalError as e:  # serialization failure / deadlock: retry from the cursor
                if getattr(e.orig, "sqlstate", None) not in ("40001", "40P01") or attempt == 19:
                    raise StorageError(f"projection update failed: {e.orig!r}") from e
            except DBAPIError as e:
                raise StorageError(f"projection update failed: {e.orig!r}") from e
        raise AssertionError("unreachable")  # pragma: no cover

    def _sync(self, target: int) -> int:
        self._erasure_applied = False
        end = self._sync_chunks(target)
        if self._erasure_applied:
            self.scrub()
        return end

    def scrub(self) -> None:
        """After an erasure was applied: leave no byte of the erased text in the SQLite file
        or its WAL (issue 25, finding 3). Every connection deletes securely (zeroed cells and
        pages, ledger.storage.db); here the full-text index is merged into one segment, so
        the segments that held the erased words are freed (and zeroed), and the WAL is
        checkpointed into the main file and truncated, so no earlier version of a page is
        left in it. PostgreSQL keeps dead tuples until VACUUM: ``engram maintain
        --scrub-erased`` (docs/privacy.md)."""
        if self.engine.dialect.name != "sqlite":
            return
        with self._projector() as conn:
            conn.exec_driver_sql("INSERT INTO mem_fts(mem_fts) VALUES ('optimize')")
        checkpoint_wal(self.engine)

    def _sync_chunks(self, target: int) -> int:
        while True:
            with self._projector() as conn:
                stmt = select(mem_cursor.c.applied_size, mem_cursor.c.fts_deferred).where(
                    mem_cursor.c.id == 1
                )
                if conn.dialect.name == "postgresql":
                    stmt = stmt.with_for_update()
                row = conn.execute(stmt).one()
                applied, fts_deferred = int(row[0]), bool(row[1])
                if applied >= target:
                    if fts_deferred:
                        self._rebuild_fulltext(conn)
                    return applied
                end = min(target, applied + _CHUNK)
                events = self._events(conn, applied, end)
                state = BatchState(conn)
                state.prefetch(events)
                for ev in events:
                    if ev.kind == "memory.erased" and ev.body is not None:
                        self._erasure_applied = True
                        state.flush()  # the refold reads and rewrites the agent's rows
                        self._refold(conn, ev.agent, ev.index + 1)
                        state = BatchState(conn)
                    else:
                        evolve(state, ev)
                state.flush()
                if fts_deferred and end >= target:
                    self._rebuild_fulltext(conn)
                conn.execute(update(mem_cursor).where(mem_cursor.c.id == 1).values(applied_size=end))
            if self._on_chunk is not None:
                self._on_chunk(end)
            if end >= target:
                return end

    @staticmethod
    def _rebuild_fulltext(conn: Connection) -> None:
        """The catch-up after a rebuild reached the log: index every item's text in bulk
        (FTS5 ``'rebuild'``), and turn the row-by-row triggers back on, in the projector's
        transaction (see migration 0008)."""
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("INSERT INTO mem_fts(mem_fts) VALUES ('rebuild')")
        conn.exec_driver_sql("UPDATE mem_cursor SET fts_deferred = 0 WHERE id = 1")

    def _refold(self, conn: Connection, agent: str, end: int) -> None:
        """Recompute ``agent``'s projection from its entries below ``end`` as they are stored
        now: what an erasure removed never happened, and the projection is the one a rebuild
        gives (an erased memory confirmed by a later duplicate, superseded, or distilled from a
        session, otherwise projects differently once its body is gone). Erasures are rare;
        this costs one replay of the agent's entries."""
        conn.execute(delete(mem_items).where(mem_items.c.agent == agent))
        conn.execute(delete(mem_sessions).where(mem_sessions.c.agent == agent))
        state = SqlState(conn)
        for ev in self._event_rows(conn, and_(leaves.c.agent == agent, leaves.c.idx < end)):
            evolve(state, ev)
        # Derived vectors follow: those of items gone or changed go, and the embed step goes
        # back to the first item left without one.
        if conn.execute(_DROP_STALE_VECTORS, {"a": agent}).rowcount:
            conn.execute(BUMP_GENERATION)
        first = conn.execute(_FIRST_UNEMBEDDED, {"a": agent}).scalar()
        if first is not None:
            conn.execute(_REWIND_EMBEDDED, {"at": int(first)})

    @classmethod
    def _events(cls, conn: Connection, start: int, end: int) -> list[LoggedEvent]:
        out = cls._event_rows(conn, and_(leaves.c.idx >= start, leaves.c.idx < end))
        if [ev.index for ev in out] != list(range(start, end)):
            raise StorageError(f"leaves {start}..{end} are not all present")
        return out

    @staticmethod
    def _event_rows(conn: Connection, where: Any) -> list[LoggedEvent]:
        rows = conn.execute(
            select(leaves.c.idx, leaves.c.leaf, bodies.c.salt, bodies.c.body)
            .select_from(leaves.outerjoin(bodies, bodies.c.idx == leaves.c.idx))
            .where(where)
            .order_by(leaves.c.idx)
        ).all()
        out = []
        for r in rows:
            try:
                leaf = Leaf.from_bytes(blob(r.leaf, "leaves", r.idx, "leaf"))
            except MalformedError as e:
                raise LogIntegrityError(
                    f"leaves row {r.idx}: the stored leaf does not parse ({e}); run `engram audit`",
                    check="state.leaves",
                ) from e
            body = None
            if r.body is not None:
                # The projection folds in only what the entry signed (issue 15): a body
                # changed in the table is named, not projected into recall.
                raw = blob(r.body, "bodies", r.idx, "body")
                try:
                    opened = hmac.compare_digest(
                        commitment_of(leaf.envelope.kind, blob(r.salt, "bodies", r.idx, "salt"), raw),
                        leaf.envelope.body_commitment,
                    )
                except VerificationError:
                    opened = False  # a per-entry distilled body that does not parse or has no form
                if not opened:
                    raise LogIntegrityError(
                        f"bodies row {r.idx}: the stored body is not the one entry {r.idx} committed to; "
                        "not projected (run `engram audit`)",
                        check="state.bodies",
                    )
                try:
                    body = parse_strict(raw, max_bytes=1 << 24)
                except MalformedError as e:  # committed to, so signed that way: still named
                    raise LogIntegrityError(
                        f"bodies row {r.idx}: the stored body does not parse ({e}); run `engram audit`",
                        check="state.bodies",
                    ) from e
            out.append(
                LoggedEvent(
                    index=leaf.index,
                    timestamp_us=leaf.timestamp_us,
                    agent=leaf.envelope.agent,
                    kind=leaf.envelope.kind,
                    body=body,
                )
            )
        erased = {ev.agent for ev in out if ev.body is None and ev.kind in STANDS_IN_KINDS}
        if not erased:
            return out
        replays = stand_ins(
            parse_strict(blob(r.body, "bodies", r.idx, "body"), max_bytes=1 << 24)
            for r in conn.execute(
                select(bodies.c.idx, bodies.c.body)
                .select_from(leaves.join(bodies, bodies.c.idx == leaves.c.idx))
                .where(and_(leaves.c.agent.in_(sorted(erased)), leaves.c.kind == "memory.erased"))
            )
        )
        return [stand_in(ev, replays) for ev in out]

    def check_replayable(
        self, end: int | None = None, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Read and decode every entry below ``end`` (default: the latest checkpoint) the way a
        replay does, in read transactions of :data:`_CHUNK` entries, writing nothing; return
        the size checked. A row a replay would stop on (a leaf or body that is not bytes, a
        body its leaf did not commit to, a body that does not parse, a missing leaf) raises
        its typed error naming the row (issue 25, finding 10)."""
        target = self.store.latest_checkpoint().size if end is None else end
        start = 0
        while start < target:
            stop = min(target, start + _CHUNK)
            try:
                with self.engine.connect() as conn:
                    self._events(conn, start, stop)
            except DBAPIError as e:
                raise StorageError(f"database error: {e.orig!r}") from e
            start = stop
            if progress is not None:
                progress(start, 2 * target)  # the first half of a rebuild
        return target

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Replay the log from index 0 into an emptied projection, once every entry up to the
        latest checkpoint has been read and decoded (:meth:`check_replayable`): a bad row
        stops the rebuild before anything is dropped, the projection in place keeps serving,
        and the error names the row (issue 25, finding 10: one bad body took memory down for
        every agent). ``progress(done, total)``: entries read, then entries replayed."""
        target = self.check_replayable(progress=progress)

        def reset() -> int:
            with self._projector() as conn:
                stmt = select(mem_cursor.c.applied_size).where(mem_cursor.c.id == 1)
                if conn.dialect.name == "postgresql":
                    stmt = stmt.with_for_update()
                conn.execute(stmt)
                if conn.dialect.name == "sqlite":  # full text in bulk once caught up (migration 0008)
                    conn.exec_driver_sql("UPDATE mem_cursor SET fts_deferred = 1 WHERE id = 1")
                    conn.exec_driver_sql("INSERT INTO mem_fts(mem_fts) VALUES ('delete-all')")
                conn.execute(delete(mem_items))
                conn.execute(delete(mem_sessions))
                conn.execute(delete(mem_vectors))
                conn.execute(
                    update(mem_cursor)
                    .where(mem_cursor.c.id == 1)
                    .values(applied_size=0, embedded_size=0, vec_generation=mem_cursor.c.vec_generation + 1)
                )
            return 0

        self._retrying(reset)
        if progress is not None:
            self._on_chunk = lambda end: progress(target + min(end, target), 2 * target)
        try:
            return self.sync()
        finally:
            self._on_chunk = None

    def digest(self) -> tuple[int, str]:
        """(applied size, projection digest) read in one transaction, streaming the rows in
        the digest's order (memory holds one row at a time, not the projection)."""
        order = ' COLLATE "C"' if self.engine.dialect.name == "postgresql" else ""  # code-point order
        items = f"SELECT {_cols(_ITEM_COLS)} FROM mem_items ORDER BY agent{order}, ref{order}"  # noqa: S608
        sessions = f'SELECT {_cols(_SESSION_COLS)} FROM mem_sessions ORDER BY agent{order}, "session"{order}'  # noqa: S608

        def rows(conn: Connection, sql: str, build: Callable[[Any], Any]) -> Iterator[Any]:
            # Lazily: one cursor open at a time, each fetched a thousand rows at a time.
            for r in conn.execution_options(stream_results=True, yield_per=1000).exec_driver_sql(sql):
                yield build(r)

        try:
            with self.engine.connect() as conn:
                if conn.dialect.name == "postgresql":  # one snapshot for the three reads
                    conn = conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    applied = int(
                        conn.exec_driver_sql("SELECT applied_size FROM mem_cursor WHERE id = 1").scalar_one()
                    )
                    return applied, digest_sorted(
                        rows(conn, items, item_from_row), rows(conn, sessions, _session_from_row), applied
                    )
        except DBAPIError as e:
            raise StorageError(f"database error: {e.orig!r}") from e

    # -- queries ----------------------------------------------------------------------

    def items(
        self,
        agent: str,
        *,
        tiers: Sequence[str] | None = None,
        status: str | None = "active",
        source_kinds: Sequence[str] | None = None,
        after: tuple[int, int] | None = None,
        limit: int | None = None,
    ) -> list[Item]:
        """Items in log order; ``after`` (index, position) and ``limit`` page through them.
        Without ``tiers``: every tier but the records tier (:data:`RECORD`)."""
        cond = [mem_items.c.agent == agent]
        if tiers is not None:
            cond.append(mem_items.c.tier.in_(list(tiers)))
        else:  # the memory tiers (and tombstones); session-turn records only when asked for
            cond.append(mem_items.c.tier != RECORD)
        if status is not None:
            cond.append(mem_items.c.status == status)
        if source_kinds is not None:
            cond.append(mem_items.c.source_kind.in_(list(source_kinds)))
        if after is not None:
            cond.append(
                or_(mem_items.c.idx > after[0], and_(mem_items.c.idx == after[0], mem_items.c.pos > after[1]))
            )
        query = select(mem_items).where(and_(*cond)).order_by(mem_items.c.idx, mem_items.c.pos)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [item_from_row(r) for r in conn.execute(query)]

    def erasure_plan(self, agent: str, index: int) -> ErasurePlan:
        """What erasing ``agent``'s entry ``index`` takes with it, from the agent's items of
        every tier and status (session-turn records included) and its sessions
        (engram.protocol.erasure: the plan the client computes too)."""
        items = [*self.items(agent, status=None), *self.items(agent, tiers=[RECORD], status=None)]
        return plan_erasure(index, items, self.sessions(agent))

    def item_counts(self, agent: str) -> dict[tuple[str, str], int]:
        """How many items ``agent`` has per (tier, status), records tier excluded: one
        grouped count, not the rows."""
        query = (
            select(mem_items.c.tier, mem_items.c.status, func.count())
            .where(and_(mem_items.c.agent == agent, mem_items.c.tier != RECORD))
            .group_by(mem_items.c.tier, mem_items.c.status)
        )
        with self.engine.connect() as conn:
            return {(r[0], r[1]): int(r[2]) for r in conn.execute(query)}

    def item(self, agent: str, ref: str) -> Item | None:
        with self.engine.connect() as conn:
            return SqlState(conn).item(agent, ref)

    def session(self, agent: str, session: str) -> Session | None:
        with self.engine.connect() as conn:
            return SqlState(conn).session(agent, session)

    def sessions(self, agent: str) -> list[Session]:
        with self.engine.connect() as conn:
            return SqlState(conn).agent_sessions(agent)

    def agents(self) -> list[str]:
        """Every agent with a memory item or a session."""
        with self.engine.connect() as conn:
            names = {r[0] for r in conn.execute(select(mem_items.c.agent).distinct())}
            names |= {r[0] for r in conn.execute(select(mem_sessions.c.agent).distinct())}
        return sorted(names)

    def count(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(mem_items)).scalar_one())

    def fulltext(self, agent: str, query: str, tiers: Sequence[str], limit: int = 50) -> list[str]:
        """Refs of active items in ``tiers`` matching ``query``, best first (FTS5 / tsvector)."""
        terms = _fts_terms(query)
        if not terms:
            return []
        with self.engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                match = " OR ".join(f'"{t}"' for t in terms)  # quoted terms: no FTS5 syntax from users
                sql = _FTS_SQLITE
            else:
                match = " | ".join(terms)  # terms are [a-z0-9] only: safe for to_tsquery
                sql = _FTS_POSTGRES
            params: dict[str, Any] = {"q": match, "a": agent, "lim": limit, "tiers": list(tiers)}
            return [r[0] for r in conn.execute(sql, params)]

    # -- recall's candidate queries (each bounded; recall never loads every item) ---------

    def search_fulltext(
        self, agent: str, query: str, *, tiers: Sequence[str], statuses: Sequence[str], limit: int
    ) -> list[Item]:
        """Items matching any content word of ``query``, best first (FTS5 bm25 / ts_rank).

        On SQLite the cost of ranking is bounded: bm25 is computed for every document that
        matches a term, so when the query's terms together match more than
        :data:`FTS_DOC_BUDGET` documents, the most common terms are left out of the MATCH
        (rarest first, at least one term kept). A term that common adds little to bm25
        (its inverse document frequency is low), and the embedding ranking still sees the
        whole query.
        """
        terms = _fts_terms(query)
        if not terms:
            return []
        params: dict[str, Any] = {
            "a": agent,
            "lim": limit,
            "tiers": list(tiers),
            "statuses": list(statuses),
        }
        with self.engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                terms = self._affordable_terms(conn, terms)
                params["q"] = " OR ".join(f'"{t}"' for t in terms)  # quoted: no FTS5 syntax from users
                sql = _SEARCH_SQLITE
            else:
                params["q"] = " | ".join(terms)  # word characters only: safe for to_tsquery
                sql = _SEARCH_POSTGRES
            return [item_from_row(r) for r in conn.execute(sql, params)]

    def _affordable_terms(self, conn: Connection, terms: Sequence[str]) -> list[str]:
        """The rarest terms whose documents together stay within :data:`FTS_DOC_BUDGET`
        (document counts are cached and refreshed when the index has grown by a quarter)."""
        size = self._fts_rows(conn)
        counted = []
        for t in dict.fromkeys(terms):
            hit = self._df_cache.get(t)
            if hit is None or size > hit[1] * 1.25 + 64:
                df = int(conn.execute(_FTS_COUNT, {"q": f'"{t}"'}).scalar_one())
                if len(self._df_cache) > 50_000:
                    self._df_cache.clear()
                self._df_cache[t] = hit = (df, size)
            counted.append((hit[0], t))
        if sum(df for df, _ in counted) <= FTS_DOC_BUDGET:
            return list(dict.fromkeys(terms))
        keep: set[str] = set()
        spent = 0
        for df, t in sorted(counted):
            if keep and spent + df > FTS_DOC_BUDGET:
                break
            keep.add(t)
            spent += df
        return [t for t in dict.fromkeys(terms) if t in keep]

    def _fts_rows(self, conn: Connection) -> int:
        # The projection's size is a cheap stand-in for the index's size.
        return int(conn.execute(select(mem_cursor.c.applied_size).where(mem_cursor.c.id == 1)).scalar_one())

    def items_by_refs(
        self, agent: str, refs: Sequence[str], *, tiers: Sequence[str], statuses: Sequence[str]
    ) -> dict[str, Item]:
        """The items among ``refs`` that are in ``tiers`` with one of ``statuses``.

        Looked up by primary key only (tier and status are checked here): given the tier and
        status too, SQLite's planner prefers the (agent, tier, status) index and scans every
        item of the agent (65 ms at 10^5 items)."""
        if not refs:
            return {}
        tier_set, status_set = set(tiers), set(statuses)
        with self.engine.connect() as conn:
            rows = conn.execute(_BY_REFS, {"a": agent, "refs": list(refs)})
            return {r.ref: item_from_row(r) for r in rows if r.tier in tier_set and r.status in status_set}

    def search_facets(
        self,
        agent: str,
        *,
        categories: Sequence[str],
        words: Sequence[str],
        tiers: Sequence[str],
        statuses: Sequence[str],
        limit: int,
    ) -> list[Item]:
        """Items whose category, session or a provenance reference the query names, newest
        first. Categories and sessions use indexes; provenance references are looked for only
        for words that look like references (a digit, or a ``-``/``_``/``.`` inside)."""
        refs_like = [w for w in words if len(w) >= 2 and any(c.isdigit() or c in "-_." for c in w)]
        if not categories and not words:
            return []
        conds = []
        params: dict[str, Any] = {"a": agent, "lim": limit, "tiers": list(tiers), "statuses": list(statuses)}
        if categories:
            conds.append("category IN :cats")
            params["cats"] = list(categories)
        if words:
            conds.append("session IN :words")
            params["words"] = list(words)
        for n, w in enumerate(refs_like[:8]):
            conds.append(f"provenance LIKE :p{n} ESCAPE '!'")
            escaped = w.replace("!", "!!").replace("%", "!%").replace("_", "!_")
            params[f"p{n}"] = '%"source_ref": "' + escaped + '"%'
        where = " OR ".join(conds)  # constant fragments only; every value is a bound parameter
        sql = text(_FACETS.format(where=where)).bindparams(
            *(bindparam(k, expanding=True) for k in ("tiers", "statuses", "cats", "words") if k in params)
        )
        with self.engine.connect() as conn:
            return [item_from_row(r) for r in conn.execute(sql, params)]

    def search_facts(
        self, agent: str, keys: Sequence[str], *, tiers: Sequence[str], statuses: Sequence[str], limit: int
    ) -> list[Item]:
        """Memories that state one of the facts ``keys`` names ("<subject>|<attribute>"),
        most recently true first (the fact-key index)."""
        if not keys:
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(
                _FACTS,
                {
                    "a": agent,
                    "keys": list(keys),
                    "tiers": list(tiers),
                    "statuses": list(statuses),
                    "lim": limit,
                },
            )
            return [item_from_row(r) for r in rows]

    def current_facts(self, agent: str, *, limit: int) -> list[Item]:
        """The agent's active memories that state a changeable fact, most recent first."""
        with self.engine.connect() as conn:
            return [item_from_row(r) for r in conn.execute(_CURRENT_FACTS, {"a": agent, "lim": limit})]

    def newest(self, agent: str, *, tiers: Sequence[str], statuses: Sequence[str], limit: int) -> list[Item]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                _NEWEST, {"a": agent, "tiers": list(tiers), "statuses": list(statuses), "lim": limit}
            )
            return [item_from_row(r) for r in rows]


_SEARCH_SQLITE = text(
    "SELECT i.* FROM mem_fts JOIN mem_items i ON i.rowid = mem_fts.rowid "
    "WHERE mem_fts MATCH :q AND i.agent = :a AND i.status IN :statuses AND i.tier IN :tiers "
    "ORDER BY bm25(mem_fts), i.idx, i.pos LIMIT :lim"
).bindparams(bindparam("tiers", expanding=True), bindparam("statuses", expanding=True))
_SEARCH_POSTGRES = text(
    "SELECT * FROM mem_items WHERE agent = :a AND status IN :statuses AND tier IN :tiers "
    "AND to_tsvector('english'::regconfig, content || ' ' || tags) @@ to_tsquery('english', :q) "
    "ORDER BY ts_rank(to_tsvector('english'::regconfig, content || ' ' || tags), to_tsquery('english', :q)) DESC, "
    "idx, pos LIMIT :lim"
).bindparams(bindparam("tiers", expanding=True), bindparam("statuses", expanding=True))
_DROP_STALE_VECTORS = text(
    "DELETE FROM mem_vectors WHERE agent = :a AND NOT EXISTS (SELECT 1 FROM mem_items i "
    "WHERE i.agent = mem_vectors.agent AND i.ref = mem_vectors.ref AND i.norm_hash = mem_vectors.norm_hash "
    "AND i.status != 'erased' AND i.content != '')"
)
_FIRST_UNEMBEDDED = text(
    "SELECT min(i.idx) FROM mem_items i WHERE i.agent = :a AND i.status != 'erased' AND i.content != '' "
    "AND NOT EXISTS (SELECT 1 FROM mem_vectors v WHERE v.agent = i.agent AND v.ref = i.ref "
    "AND v.norm_hash = i.norm_hash)"
)
_REWIND_EMBEDDED = text("UPDATE mem_cursor SET embedded_size = :at WHERE id = 1 AND embedded_size > :at")
_FILEABLE_WARM = text(
    "SELECT * FROM mem_items WHERE agent = :a AND tier = 'WARM' AND status = 'active' AND "
    "(category = 'COMMITMENT' OR tags LIKE '%\"task\"%' OR tags LIKE '%\"decision\"%' "
    "OR tags LIKE '%\"blocker\"%') ORDER BY idx, pos"
)
_CHANGED_FACTS = text(
    "SELECT * FROM mem_items WHERE agent = :a AND status = 'active' AND fact_key IN ("
    "SELECT fact_key FROM mem_items WHERE agent = :a AND status = 'active' AND fact_key IS NOT NULL "
    "GROUP BY fact_key HAVING COUNT(*) > 1) ORDER BY idx, pos"
)
_RECORD_USES = text(
    "UPDATE mem_items SET access_count = access_count + 1, last_access_us = :at "
    "WHERE agent = :a AND ref IN :refs"
).bindparams(bindparam("refs", expanding=True))
_BY_REFS = text("SELECT * FROM mem_items WHERE agent = :a AND ref IN :refs").bindparams(
    bindparam("refs", expanding=True)
)
_FTS_COUNT = text("SELECT count(*) FROM mem_fts WHERE mem_fts MATCH :q")
_FACETS = (
    "SELECT * FROM mem_items WHERE agent = :a AND tier IN :tiers AND status IN :statuses AND ({where}) "
    "ORDER BY created_us DESC, idx DESC, pos DESC LIMIT :lim"
)
_FACTS = text(
    "SELECT * FROM mem_items WHERE agent = :a AND fact_key IN :keys AND tier IN :tiers "
    "AND status IN :statuses ORDER BY COALESCE(valid_from_us, created_us) DESC, idx DESC, pos DESC LIMIT :lim"
).bindparams(
    bindparam("keys", expanding=True),
    bindparam("tiers", expanding=True),
    bindparam("statuses", expanding=True),
)
_CURRENT_FACTS = text(
    "SELECT * FROM mem_items WHERE agent = :a AND status = 'active' AND fact_key IS NOT NULL "
    "ORDER BY idx DESC, pos DESC LIMIT :lim"
)
_NEWEST = text(
    "SELECT * FROM mem_items WHERE agent = :a AND tier IN :tiers AND status IN :statuses "
    "ORDER BY created_us DESC, idx DESC, pos DESC LIMIT :lim"
).bindparams(bindparam("tiers", expanding=True), bindparam("statuses", expanding=True))
