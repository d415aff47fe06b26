"""The memory projection in SQL: catch-up, rebuild, digest, and the queries recall needs.

The projection tables are a function of the log. ``sync`` applies every leaf past the
cursor with :func:`ledger.memory.state.evolve` through :class:`SqlState`, advancing the
cursor in the same transaction, so the tables and the cursor always agree. One projector
at a time: the cursor row is locked (``FOR UPDATE`` on PostgreSQL, which also runs the
projection at SERIALIZABLE and retries serialization failures; ``BEGIN IMMEDIATE`` on
SQLite). ``rebuild`` empties the tables and replays from index 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, func, or_, select, text, update
from sqlalchemy.exc import DBAPIError, OperationalError

from engram.protocol.erasure import ErasurePlan, plan_erasure
from engram.protocol.errors import StorageError
from ledger.memory.projection_events import event_rows, read_events
from ledger.memory.projection_rows import (
    ITEM_COLS,
    SESSION_COLS,
    item_from_row,
    quoted_cols,
    session_from_row,
)
from ledger.memory.projection_state import BatchState, SqlState
from ledger.memory.state import (
    RECORD,
    Item,
    Session,
    digest_sorted,
    evolve,
)
from ledger.memory.terms import content_terms
from ledger.memory.vectors import BUMP_GENERATION
from ledger.storage.db import WRITE_OPTION, checkpoint_wal
from ledger.storage.schema import leaves, mem_cursor, mem_items, mem_sessions, mem_vectors
from ledger.storage.store import SqlStore

__all__ = ["BatchState", "Projection", "SqlState"]

_CHUNK = 500


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
        #: entries this process's catch-up (sync) applied; the append pass's are counted by
        #: ledger.memory.in_pass
        self.synced = 0

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

    def embedded_size(self) -> int:
        """The applied size the vector index has embedded up to (``mem_cursor``)."""
        with self.engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT embedded_size FROM mem_cursor WHERE id = 1").scalar_one())

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
        or its WAL. Every connection deletes securely (zeroed cells and
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
                events = read_events(conn, applied, end)
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
            self.synced += end - applied
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
        for ev in event_rows(conn, and_(leaves.c.agent == agent, leaves.c.idx < end)):
            evolve(state, ev)
        # Derived vectors follow: those of items gone or changed go, and the embed step goes
        # back to the first item left without one.
        if conn.execute(_DROP_STALE_VECTORS, {"a": agent}).rowcount:
            conn.execute(BUMP_GENERATION)
        first = conn.execute(_FIRST_UNEMBEDDED, {"a": agent}).scalar()
        if first is not None:
            conn.execute(_REWIND_EMBEDDED, {"at": int(first)})

    def check_replayable(
        self, end: int | None = None, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Read and decode every entry below ``end`` (default: the latest checkpoint) the way a
        replay does, in read transactions of :data:`_CHUNK` entries, writing nothing; return
        the size checked. A row a replay would stop on (a leaf or body that is not bytes, a
        body its leaf did not commit to, a body that does not parse, a missing leaf) raises
        its typed error naming the row."""
        target = self.store.latest_checkpoint().size if end is None else end
        start = 0
        while start < target:
            stop = min(target, start + _CHUNK)
            try:
                with self.engine.connect() as conn:
                    read_events(conn, start, stop)
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
        and the error names the row (one bad body took memory down for
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
        items = f"SELECT {quoted_cols(ITEM_COLS)} FROM mem_items ORDER BY agent{order}, ref{order}"  # noqa: S608
        sessions = (
            f'SELECT {quoted_cols(SESSION_COLS)} FROM mem_sessions ORDER BY agent{order}, "session"{order}'  # noqa: S608
        )

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
                        rows(conn, items, item_from_row), rows(conn, sessions, session_from_row), applied
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
