"""The explorer's reads (ledger.explore pages them): bounded walks of indexes the schema has.

Each read is one transaction through an index the schema already has (the leaves' primary
key, the unique (agent, kind, version) index, the agent index of ``agent_keys``) and returns
at most the rows it is asked for, as frozen values. Nothing here writes.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, select

from ledger.storage.base import StoreBase
from ledger.storage.schema import agent_keys, bodies, leaves, stream_heads

__all__ = ["AgentRow", "BrowseReads", "EntryRow"]

_AGENT_MAX = "\U0010ffff"


@dataclass(frozen=True, slots=True)
class EntryRow:
    """One log entry as the explorer lists it (its leaf's columns, no body)."""

    index: int
    agent: str
    kind: str
    version: int
    key_id: str
    timestamp_us: int
    leaf_hash: bytes


@dataclass(frozen=True, slots=True)
class AgentRow:
    agent: str
    keys: int
    #: Index of the agent's first key entry (its registration).
    registered_at: int


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


class BrowseReads(StoreBase):
    """Pages of entries and agents, sampled timestamps and a stream's latest bodies."""

    def entries_of_agent(self, agent: str, kind: str | None, top: int, limit: int) -> list[EntryRow]:
        """The agent's entries (of ``kind``, or of every stream it has) below index ``top``,
        newest first, at most ``limit``: one walk of the (agent, kind, version) index per
        stream, newest first (a stream's versions follow its indices), merged."""
        with self.read() as conn:
            kinds = (
                [kind]
                if kind is not None
                else [
                    r[0]
                    for r in conn.execute(select(stream_heads.c.kind).where(stream_heads.c.agent == agent))
                ]
            )
            per_stream = []
            for k in kinds:
                q = (
                    select(*_COLS)
                    .where(and_(leaves.c.agent == agent, leaves.c.kind == k, leaves.c.idx < top))
                    .order_by(leaves.c.version.desc())
                    .limit(limit)
                )
                per_stream.append([_row(r) for r in conn.execute(q)])
        return list(heapq.merge(*per_stream, key=lambda e: -e.index))[:limit]

    def entries_below(
        self, top: int, limit: int, *, kind: str | None = None, floor: int = 0
    ) -> list[EntryRow]:
        """Entries with ``floor`` <= index < ``top`` (of ``kind`` if given), newest first, at
        most ``limit``: a walk of the leaves' primary key."""
        cond = [leaves.c.idx < top]
        if floor > 0:
            cond.append(leaves.c.idx >= floor)
        if kind is not None:
            cond.append(leaves.c.kind == kind)
        q = select(*_COLS).where(and_(*cond)).order_by(leaves.c.idx.desc()).limit(limit)
        with self.read() as conn:
            return [_row(r) for r in conn.execute(q)]

    def entry_row(self, index: int) -> EntryRow | None:
        with self.read() as conn:
            r = conn.execute(select(*_COLS).where(leaves.c.idx == index)).one_or_none()
        return None if r is None else _row(r)

    def agent_rows(self, prefix: str, after: str | None, limit: int) -> list[AgentRow]:
        """Up to ``limit`` agents whose id starts with ``prefix``, in id order, after ``after``:
        one range walk of the agent index."""
        cond = [agent_keys.c.agent >= prefix, agent_keys.c.agent < prefix + _AGENT_MAX]
        if after is not None:
            cond.append(agent_keys.c.agent > after)
        q = (
            select(agent_keys.c.agent, func.count(), func.min(agent_keys.c.added_at))
            .where(and_(*cond))
            .group_by(agent_keys.c.agent)
            .order_by(agent_keys.c.agent)
            .limit(limit)
        )
        with self.read() as conn:
            return [AgentRow(agent=r[0], keys=int(r[1]), registered_at=int(r[2])) for r in conn.execute(q)]

    def timestamps_at(self, indices: Sequence[int]) -> list[tuple[int, int]]:
        """``(index, timestamp_us)`` of the given entries, in index order: primary-key lookups."""
        with self.read() as conn:
            rows = conn.execute(
                select(leaves.c.idx, leaves.c.timestamp_us)
                .where(leaves.c.idx.in_(list(indices)))
                .order_by(leaves.c.idx)
            ).all()
        return [(int(r.idx), int(r.timestamp_us)) for r in rows]

    def stream_tail(
        self, agent: str, kind: str, size: int, limit: int
    ) -> tuple[list[tuple[int, bytes | None]], int]:
        """The latest ``limit`` entries of a stream below ``size``: (timestamp, body or None
        where erased), oldest first, and how many older ones were left out."""
        where = and_(leaves.c.agent == agent, leaves.c.kind == kind, leaves.c.idx < size)
        with self.read() as conn:
            total = conn.execute(select(func.count()).where(where)).scalar_one()
            q = (
                select(leaves.c.timestamp_us, bodies.c.body)
                .select_from(leaves.outerjoin(bodies, bodies.c.idx == leaves.c.idx))
                .where(where)
                .order_by(leaves.c.version.desc())
                .limit(limit)
            )
            rows = [(int(r[0]), None if r[1] is None else bytes(r[1])) for r in conn.execute(q)]
        rows.reverse()
        return rows, int(total) - len(rows)
