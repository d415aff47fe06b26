"""Bounded reads for the web explorer (api/ui): pages of entries, agents, a log's growth and
an agent's record series.

Every function here reads a bounded amount whatever the log's size: pages are keyset pages
(``before`` an index, ``after`` an agent id) of at most :data:`MAX_PAGE` rows, each through
an index the schema already has (the leaves' primary key, the unique (agent, kind, version)
index, the agent index of ``agent_keys``); a filter no index serves (a kind across all
agents) scans at most :data:`SCAN_WINDOW` leaves per page and says where it stopped, so the
next page goes on from there. Nothing here writes.

Only entries inside the latest checkpoint are shown: each then has an inclusion proof.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, select

from engram.protocol.errors import MalformedError
from ledger.storage.schema import agent_keys, bodies, leaves, stream_heads
from ledger.storage.store import SqlStore
from verifier.bundle import mean_quality
from verifier.jcs import parse_strict

__all__ = [
    "MAX_PAGE",
    "SCAN_WINDOW",
    "SERIES_LIMIT",
    "AgentRow",
    "AgentSeries",
    "EntryPage",
    "EntryRow",
    "agent_series",
    "agents_page",
    "entries_page",
    "entry_row",
    "growth",
]

MAX_PAGE = 100
#: Leaves one page may read to find entries of a kind across all agents (no index serves it).
SCAN_WINDOW = 20_000
#: Records per kind an agent page plots (the latest ones; the page says when it cut).
SERIES_LIMIT = 5_000
_AGENT_MAX = "\U0010ffff"


@dataclass(frozen=True, slots=True)
class EntryRow:
    index: int
    agent: str
    kind: str
    version: int
    key_id: str
    timestamp_us: int
    leaf_hash: bytes


@dataclass(frozen=True, slots=True)
class EntryPage:
    rows: list[EntryRow]
    #: ``before`` of the next (older) page, or None when nothing older remains.
    next_before: int | None
    #: With a kind filter across all agents: the index the scan stopped at (it read
    #: :data:`SCAN_WINDOW` leaves without filling the page), else None.
    scanned_to: int | None
    size: int


def _row(r: Any) -> EntryRow:
    return EntryRow(
        index=int(r.idx),
        agent=r.agent,
        kind=r.kind,
        version=int(r.version),
        key_id=r.key_id,
        timestamp_us=int(r.timestamp_us),
        leaf_hash=bytes(r.leaf_hash),
    )


_COLS = (
    leaves.c.idx,
    leaves.c.agent,
    leaves.c.kind,
    leaves.c.version,
    leaves.c.key_id,
    leaves.c.timestamp_us,
    leaves.c.leaf_hash,
)


def entries_page(
    store: SqlStore,
    size: int,
    *,
    agent: str | None = None,
    kind: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> EntryPage:
    """Entries of the tree of ``size`` with index < ``before`` (default: all), newest first,
    optionally of one agent and / or one kind: at most ``limit`` (1-:data:`MAX_PAGE`)."""
    if not 1 <= limit <= MAX_PAGE:
        raise MalformedError(f"a page holds 1-{MAX_PAGE} entries", check="request.limit")
    top = size if before is None else max(0, min(before, size))
    rows: list[EntryRow]
    scanned_to = None
    with store.read() as conn:
        if agent is not None:
            kinds = [kind] if kind is not None else _agent_kinds(conn, agent)
            # One walk of the (agent, kind, version) index per stream, newest first (a
            # stream's versions follow its indices), merged: never more than limit rows each.
            per_stream = []
            for k in kinds:
                q = (
                    select(*_COLS)
                    .where(and_(leaves.c.agent == agent, leaves.c.kind == k, leaves.c.idx < top))
                    .order_by(leaves.c.version.desc())
                    .limit(limit)
                )
                per_stream.append([_row(r) for r in conn.execute(q)])
            rows = list(heapq.merge(*per_stream, key=lambda e: -e.index))[:limit]
        elif kind is None:
            q = select(*_COLS).where(leaves.c.idx < top).order_by(leaves.c.idx.desc()).limit(limit)
            rows = [_row(r) for r in conn.execute(q)]
        else:
            floor = max(0, top - SCAN_WINDOW)
            q = (
                select(*_COLS)
                .where(and_(leaves.c.idx < top, leaves.c.idx >= floor, leaves.c.kind == kind))
                .order_by(leaves.c.idx.desc())
                .limit(limit)
            )
            rows = [_row(r) for r in conn.execute(q)]
            if len(rows) < limit and floor > 0:
                scanned_to = floor
    if len(rows) == limit:
        next_before: int | None = rows[-1].index
    elif scanned_to is not None:
        next_before = scanned_to
    else:
        next_before = None
    if next_before == 0:
        next_before = None
    return EntryPage(rows=rows, next_before=next_before, scanned_to=scanned_to, size=size)


def _agent_kinds(conn: Any, agent: str) -> list[str]:
    """The kinds of the agent's streams (its stream heads: one row per stream)."""
    return [r[0] for r in conn.execute(select(stream_heads.c.kind).where(stream_heads.c.agent == agent))]


def entry_row(store: SqlStore, index: int) -> EntryRow | None:
    with store.read() as conn:
        r = conn.execute(select(*_COLS).where(leaves.c.idx == index)).one_or_none()
    return None if r is None else _row(r)


@dataclass(frozen=True, slots=True)
class AgentRow:
    agent: str
    keys: int
    #: Index of the agent's first key entry (its registration).
    registered_at: int


def agents_page(
    store: SqlStore, *, prefix: str = "", after: str | None = None, limit: int = 50
) -> tuple[list[AgentRow], str | None]:
    """Agents whose id starts with ``prefix``, in id order, after ``after``: a page and the
    ``after`` of the next one (None at the end). One range walk of the agent index."""
    if not 1 <= limit <= MAX_PAGE:
        raise MalformedError(f"a page holds 1-{MAX_PAGE} agents", check="request.limit")
    cond = [agent_keys.c.agent >= prefix, agent_keys.c.agent < prefix + _AGENT_MAX]
    if after is not None:
        cond.append(agent_keys.c.agent > after)
    q = (
        select(agent_keys.c.agent, func.count(), func.min(agent_keys.c.added_at))
        .where(and_(*cond))
        .group_by(agent_keys.c.agent)
        .order_by(agent_keys.c.agent)
        .limit(limit + 1)
    )
    with store.read() as conn:
        found = [AgentRow(agent=r[0], keys=int(r[1]), registered_at=int(r[2])) for r in conn.execute(q)]
    page = found[:limit]
    return page, (page[-1].agent if len(found) > limit else None)


def growth(store: SqlStore, size: int, points: int = 48) -> list[tuple[int, int]]:
    """The log's size over time: ``(timestamp_us, size)`` at up to ``points`` evenly spaced
    indices (the entry at index i made the log i + 1 long). ``points`` primary-key lookups."""
    if size <= 0:
        return []
    n = max(2, min(points, size))
    wanted = sorted({round(k * (size - 1) / (n - 1)) for k in range(n)})
    with store.read() as conn:
        rows = conn.execute(
            select(leaves.c.idx, leaves.c.timestamp_us).where(leaves.c.idx.in_(wanted)).order_by(leaves.c.idx)
        ).all()
    return [(int(r.timestamp_us), int(r.idx) + 1) for r in rows]


@dataclass(frozen=True, slots=True)
class AgentSeries:
    """What an agent page plots: quality by month and outcomes by week."""

    #: ``(YYYY-MM, mean pact quality or None, mean eval score or None, records)``
    quality_by_month: list[tuple[str, float | None, float | None, int]] = field(default_factory=list)
    #: ``(week's Monday YYYY-MM-DD, fulfilled, violated, eval passes, eval fails)``
    outcomes_by_week: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    #: Records left out of the plots: older than the latest :data:`SERIES_LIMIT` per kind.
    cut: int = 0
    #: Records whose body was erased (counted nowhere but here).
    erased: int = 0
    #: Mean pact.outcome quality of the plotted records, as bundles state it (or None).
    mean_quality: str | None = None
    #: Records per kind the plots cover at most.
    plotted: int = SERIES_LIMIT


def _stream_tail(
    store: SqlStore, agent: str, kind: str, size: int
) -> tuple[list[tuple[int, bytes | None]], int]:
    """The latest :data:`SERIES_LIMIT` entries of a stream below ``size``: (timestamp, body or
    None where erased), oldest first, and how many older ones were left out."""
    with store.read() as conn:
        total = conn.execute(
            select(func.count()).where(
                and_(leaves.c.agent == agent, leaves.c.kind == kind, leaves.c.idx < size)
            )
        ).scalar_one()
        q = (
            select(leaves.c.timestamp_us, bodies.c.body)
            .select_from(leaves.outerjoin(bodies, bodies.c.idx == leaves.c.idx))
            .where(and_(leaves.c.agent == agent, leaves.c.kind == kind, leaves.c.idx < size))
            .order_by(leaves.c.version.desc())
            .limit(SERIES_LIMIT)
        )
        rows = [(int(r[0]), None if r[1] is None else bytes(r[1])) for r in conn.execute(q)]
    rows.reverse()
    return rows, int(total) - len(rows)


def _month(ts_us: int) -> str:
    return datetime.fromtimestamp(ts_us / 1e6, UTC).strftime("%Y-%m")


def _week(ts_us: int) -> str:
    d = datetime.fromtimestamp(ts_us / 1e6, UTC).date()
    return (d - timedelta(days=d.weekday())).isoformat()


def agent_series(store: SqlStore, agent: str, size: int) -> AgentSeries:
    """Quality by month (pact.outcome quality, eval.outcome score) and outcomes by week, by
    server time, from the agent's latest records in the tree of ``size``."""
    months: dict[str, list[list[int]]] = {}
    weeks: dict[str, list[int]] = {}
    cut = erased = 0
    qualities: list[int] = []
    for kind, field_name, ok, slot in (
        ("pact.outcome", "quality", "fulfilled", 0),
        ("eval.outcome", "score", "pass", 1),
    ):
        rows, left = _stream_tail(store, agent, kind, size)
        cut += left
        for ts, raw in rows:
            if raw is None:
                erased += 1
                continue
            body = parse_strict(raw, max_bytes=1 << 20)
            m = months.setdefault(_month(ts), [[], []])
            m[slot].append(int(body[field_name]))
            if slot == 0:
                qualities.append(int(body[field_name]))
            w = weeks.setdefault(_week(ts), [0, 0, 0, 0])
            w[2 * slot + (0 if body["result"] == ok else 1)] += 1

    def mean(xs: Sequence[int]) -> float | None:
        return round(sum(xs) / len(xs), 2) if xs else None

    return AgentSeries(
        quality_by_month=[
            (k, mean(v[0]), mean(v[1]), len(v[0]) + len(v[1])) for k, v in sorted(months.items())
        ],
        outcomes_by_week=[(k, *v) for k, v in sorted(weeks.items())],  # type: ignore[misc]
        cut=cut,
        erased=erased,
        mean_quality=mean_quality(qualities) if qualities else None,
    )
