"""The :class:`~ledger.memory.state.MemoryState` port over the projection tables: row by row
(:class:`SqlState`) and with a write-back overlay for one chunk of entries (:class:`BatchState`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection

from engram.protocol.kinds import KINDS
from ledger.memory.projection_rows import (
    ITEM_COLS,
    SESSION_COLS,
    clone_item,
    clone_session,
    item_from_values,
    item_row,
    norm_hash,
    quoted_cols,
    session_from_values,
    session_row,
)
from ledger.memory.state import Item, LoggedEvent, Session, ref_key
from ledger.storage.dbapi import Db

__all__ = ["BatchState", "SqlState"]


@lru_cache(maxsize=4)
def _state_sql(ph: str) -> dict[str, str]:
    """The projector's statements, written once per paramstyle and run on the driver's
    connection (SQLAlchemy expression building was most of the projection's time).
    Identifiers are the schema's column names, quoted; values are always parameters (the
    LIKE patterns too: no literal ``%`` for psycopg to read as a placeholder)."""

    def upsert(table: str, cols: Sequence[str], key: Sequence[str]) -> str:
        updates = ", ".join(f'"{c}" = excluded."{c}"' for c in cols if c not in key)
        return (
            f"INSERT INTO {table} ({quoted_cols(cols)}) VALUES ({', '.join([ph] * len(cols))}) "  # noqa: S608
            f"ON CONFLICT ({quoted_cols(key)}) DO UPDATE SET {updates}"
        )

    items, sessions = quoted_cols(ITEM_COLS), quoted_cols(SESSION_COLS)
    return {
        "put_item": upsert("mem_items", ITEM_COLS, ("agent", "ref")),
        "put_session": upsert("mem_sessions", SESSION_COLS, ("agent", "session")),
        "item": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND ref = {ph}",  # noqa: S608
        "session": f'SELECT {sessions} FROM mem_sessions WHERE agent = {ph} AND "session" = {ph}',  # noqa: S608
        "duplicates": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND tier = {ph} "  # noqa: S608
        f"AND status = 'active' AND norm_hash = {ph} ORDER BY idx, pos",
        "duplicates_any": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND tier = {ph} "  # noqa: S608
        f"AND norm_hash = {ph}",
        "sessions": f'SELECT {sessions} FROM mem_sessions WHERE agent = {ph} ORDER BY "session"',  # noqa: S608
        "hot": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND tier = 'HOT' "  # noqa: S608
        "AND status = 'active' ORDER BY idx, pos",
        "fileable_warm": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND tier = 'WARM' "  # noqa: S608
        f"AND status = 'active' AND (category = 'COMMITMENT' OR tags LIKE {ph} OR tags LIKE {ph} "
        f"OR tags LIKE {ph}) ORDER BY idx, pos",
        "changed_facts": f"SELECT {items} FROM mem_items WHERE agent = {ph} AND status = 'active' "  # noqa: S608
        f"AND fact_key IN (SELECT fact_key FROM mem_items WHERE agent = {ph} AND status = 'active' "
        "AND fact_key IS NOT NULL GROUP BY fact_key HAVING COUNT(*) > 1) ORDER BY idx, pos",
        "bump_generation": "UPDATE mem_cursor SET vec_generation = vec_generation + 1 WHERE id = 1",
    }


#: The tags that make a WARM memory fileable, as LIKE patterns over the JSON tag list.
_FILEABLE_TAGS = ('%"task"%', '%"decision"%', '%"blocker"%')


@lru_cache(maxsize=256)
def _in_sql(ph: str, head: str, n: int) -> str:
    """``head`` followed by an IN list of ``n`` placeholders (closed by a parenthesis)."""
    return f"{head} ({', '.join([ph] * n)})"


def _delete_vectors(db: Db, agent: str, refs: Sequence[str]) -> int:
    """Delete the vectors of ``agent``'s ``refs`` (an erasure: derived data forgets the text
    too); return how many went."""
    gone = 0
    for i in range(0, len(refs), _IN_LIMIT):
        part = refs[i : i + _IN_LIMIT]
        head = f"DELETE FROM mem_vectors WHERE agent = {db.ph} AND ref IN"  # noqa: S608
        gone += db.execute(_in_sql(db.ph, head, len(part)), (agent, *part))
    return gone


class SqlState:
    """The :class:`~ledger.memory.state.MemoryState` port over the projection tables, on the
    driver's connection (``conn``: a :class:`Db`, or a SQLAlchemy connection whose driver
    connection is used)."""

    def __init__(self, conn: Db | Connection) -> None:
        self.db = conn if isinstance(conn, Db) else Db.of(conn)
        self._sql = _state_sql(self.db.ph)

    def _items(self, sql: str, params: Sequence[Any]) -> list[Item]:
        return [item_from_values(r) for r in self.db.rows(self._sql[sql], params)]

    def item(self, agent: str, ref: str) -> Item | None:
        r = self.db.one_or_none(self._sql["item"], (agent, ref))
        return None if r is None else item_from_values(r)

    def put_item(self, item: Item) -> None:
        # Derived data forgets erased text too: the vector goes, and readers' caches reload.
        if item.status == "erased" and _delete_vectors(self.db, item.agent, [item.ref]):
            self.db.execute(self._sql["bump_generation"])
        row = item_row(item)
        self.db.execute(self._sql["put_item"], tuple(row[c] for c in ITEM_COLS))

    def record_uses(self, agent: str, refs: Iterable[str], at_us: int) -> None:
        # One statement for the whole entry: access logging is the projection's most frequent
        # update, and an item-by-item read and upsert of 100 uses held the writer for long.
        distinct = list(dict.fromkeys(refs))
        ph = self.db.ph
        head = f"UPDATE mem_items SET access_count = access_count + 1, last_access_us = {ph} WHERE agent = {ph} AND ref IN"  # noqa: S608
        for i in range(0, len(distinct), _IN_LIMIT):
            part = distinct[i : i + _IN_LIMIT]
            self.db.execute(_in_sql(ph, head, len(part)), (at_us, agent, *part))

    def session(self, agent: str, session: str) -> Session | None:
        r = self.db.one_or_none(self._sql["session"], (agent, session))
        return None if r is None else session_from_values(r)

    def put_session(self, session: Session) -> None:
        row = session_row(session)
        self.db.execute(self._sql["put_session"], tuple(row[c] for c in SESSION_COLS))

    def find_duplicate(self, agent: str, tier: str, norm: str) -> Item | None:
        for it in self._items("duplicates", (agent, tier, hashlib.sha256(norm.encode()).hexdigest())):
            if it.norm == norm:  # the hash narrows; the text decides
                return it
        return None

    def agent_sessions(self, agent: str) -> list[Session]:
        return [session_from_values(r) for r in self.db.rows(self._sql["sessions"], (agent,))]

    def fileable_warm(self, agent: str) -> list[Item]:
        return self._items("fileable_warm", (agent, *_FILEABLE_TAGS))

    def hot_items(self, agent: str) -> list[Item]:
        return self._items("hot", (agent,))

    def changed_facts(self, agent: str) -> list[Item]:
        """The agent's active memories that state a fact another active memory also states
        (the same ``fact_key``): where a newer value may replace an older one."""
        return self._items("changed_facts", (agent, agent))


#: Parameters per IN list of a prefetch (well under SQLite's 32,766 and PostgreSQL's limits).
_IN_LIMIT = 500
#: The tiers a duplicate is looked for in (records and tombstones never take part in dedup).
_DEDUP_TIERS = ("HOT", "WARM", "COLD")


_ITEM_SELECT = ", ".join(f't."{c}"' for c in ITEM_COLS)
_AGENT, _REF = ITEM_COLS.index("agent"), ITEM_COLS.index("ref")
_SESSION_SELECT = ", ".join(f't."{c}"' for c in SESSION_COLS)


class _Named:
    """What the bodies of a chunk of entries name, in first-seen order: items (agent, ref),
    sessions (agent, session) and duplicate candidates (agent, tier, normalized hash)."""

    def __init__(self) -> None:
        self.refs: dict[tuple[str, str], None] = {}
        self.sessions: dict[tuple[str, str], None] = {}
        self.norms: dict[tuple[str, str, str], None] = {}

    def add(self, ev: LoggedEvent) -> None:
        b = ev.body
        if b is None:
            return
        if ev.kind in _NAMES_ITEM:
            self.refs.update(dict.fromkeys((ev.agent, b[k]) for k in ("item", "confirms", "by") if b.get(k)))
        elif ev.kind == "memory.accessed":
            self.refs.update(dict.fromkeys((ev.agent, r) for r in b["items"]))
        if ev.kind in _NAMES_SESSION:
            self.sessions[(ev.agent, b["session"])] = None
        if ev.kind == "memory.written":
            self._duplicates_of(ev.agent, b["content"])
        elif ev.kind == "memory.distilled":
            for entry in b["entries"]:
                self._duplicates_of(ev.agent, entry["content"])

    def _duplicates_of(self, agent: str, content: str) -> None:
        h = norm_hash(content)
        self.norms.update(dict.fromkeys((agent, t, h) for t in _DEDUP_TIERS))


class BatchState:
    """The state port over the projection tables with a write-back overlay for one chunk of
    entries: evolve reads and writes items and sessions in memory, and
    :meth:`flush` writes what changed with one executemany per table.

    The overlay is authoritative for every row it holds (loaded from the table or written by
    evolve), the table for every other row, so each read is the union of the two with the
    overlay winning: the same answers :class:`SqlState` gives after each entry, which the
    projection contract test (incremental = rebuilt = in memory) checks. :meth:`prefetch`
    loads what a chunk's bodies name (items, sessions, duplicate candidates by normalized
    hash) in a few IN queries instead of one query per event; anything else is read through.
    Duplicates are found through a hash map of the overlay, once the table's candidates for
    that (agent, tier, hash) are in it. Memory holds one chunk's rows, never the log's."""

    def __init__(self, conn: Db | Connection) -> None:
        self.db = SqlState(conn)
        self._db = self.db.db
        self._sql = self.db._sql
        self._ph = self._db.ph
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
        self._by_norm.setdefault((it.agent, norm_hash(it.content)), set()).add(it.ref)

    def _load_rows(self, rows: Iterable[Sequence[Any]]) -> None:
        for r in rows:
            if (r[_AGENT], r[_REF]) not in self._items:  # what the overlay holds is newer
                self._hold(item_from_values(r))

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
            yield from self._db.rows(sql, tuple(x for key in part for x in key))

    def prefetch(self, events: Sequence[LoggedEvent]) -> None:
        """Load, in a few queries, the rows the bodies of ``events`` name."""
        named = _Named()
        for ev in events:
            named.add(ev)
        self._prefetch_items(list(named.refs))
        self._prefetch_sessions(list(named.sessions))
        self._prefetch_duplicates(list(named.norms))

    def _prefetch_items(self, keys: Sequence[tuple[str, str]]) -> None:
        todo = [k for k in keys if k not in self._items and k not in self._absent]
        self._load_rows(self._select_keys("mem_items", _ITEM_SELECT, ("agent", "ref"), todo))
        self._absent.update(k for k in todo if k not in self._items)

    def _prefetch_sessions(self, keys: Sequence[tuple[str, str]]) -> None:
        todo = [k for k in keys if k not in self._sessions]
        for r in self._select_keys("mem_sessions", _SESSION_SELECT, ("agent", "session"), todo):
            s = session_from_values(r)
            self._sessions[(s.agent, s.session)] = s
        for k in todo:
            self._sessions.setdefault(k, None)

    def _prefetch_duplicates(self, keys: Sequence[tuple[str, str, str]]) -> None:
        todo = [k for k in keys if k not in self._norm_loaded]
        self._load_rows(self._select_keys("mem_items", _ITEM_SELECT, ("agent", "tier", "norm_hash"), todo))
        self._norm_loaded.update(todo)

    def flush(self) -> None:
        """Write every changed item and session (one executemany per table)."""
        if self._erased:
            bumped = False
            for agent, refs in self._erased.items():
                bumped |= bool(_delete_vectors(self._db, agent, refs))
            if bumped:
                self._db.execute(self._sql["bump_generation"])
        if self._dirty_items:
            rows = [item_row(self._items[k]) for k in self._dirty_items]
            self._db.executemany(self._sql["put_item"], [tuple(r[c] for c in ITEM_COLS) for r in rows])
        if self._dirty_sessions:
            srows = []
            for k in self._dirty_sessions:
                s = self._sessions[k]
                assert s is not None
                row = session_row(s)
                srows.append(tuple(row[c] for c in SESSION_COLS))
            self._db.executemany(self._sql["put_session"], srows)
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
        return clone_item(it)

    def put_item(self, item: Item) -> None:
        if item.status == "erased":
            self._erased.setdefault(item.agent, []).append(item.ref)
        self._hold(clone_item(item))
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
        return None if s is None else clone_session(s)

    def put_session(self, session: Session) -> None:
        key = (session.agent, session.session)
        self._sessions[key] = clone_session(session)
        self._dirty_sessions[key] = None

    def find_duplicate(self, agent: str, tier: str, norm: str) -> Item | None:
        h = hashlib.sha256(norm.encode()).hexdigest()
        if (agent, tier, h) not in self._norm_loaded:
            self._load_rows(self._db.rows(self._sql["duplicates_any"], (agent, tier, h)))
            self._norm_loaded.add((agent, tier, h))
        best: Item | None = None
        for ref in self._by_norm.get((agent, h), ()):
            it = self._items[(agent, ref)]
            same = it.status == "active" and it.tier == tier and it.norm == norm  # the text decides
            if same and (best is None or ref_key(it.ref) < ref_key(best.ref)):
                best = it
        return None if best is None else clone_item(best)

    def _merged(self, agent: str, from_table: list[Item], keep: Callable[[Item], bool]) -> list[Item]:
        out = {it.ref: it for it in from_table if (agent, it.ref) not in self._items}
        for ref in self._by_agent.get(agent, ()):
            it = self._items[(agent, ref)]
            if keep(it):
                out[ref] = clone_item(it)
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
                    out[name] = clone_session(s)
        return [out[n] for n in sorted(out)]


def _fileable(it: Item) -> bool:
    return (
        it.status == "active"
        and it.tier == "WARM"
        and (it.category == "COMMITMENT" or bool({"task", "decision", "blocker"} & set(it.tags)))
    )


#: Kinds whose body names an item (``item``; ``confirms`` for a tier change), from the kinds'
#: registry.
_NAMES_ITEM = frozenset(spec.name for spec in KINDS.values() if spec.names_item)
#: Kinds whose body names a session.
_NAMES_SESSION = frozenset(("session.turn", "session.closed", "memory.distilled"))
