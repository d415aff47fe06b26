"""SQL shared by the store's reads and its write transaction: the latest signed checkpoint,
Merkle node lookups as primary-key probes, a stream head; placeholders per driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Select, and_, or_, select

from engram.protocol.errors import StorageError
from ledger.storage.dbapi import Db
from ledger.storage.rows import StreamHead
from ledger.storage.schema import nodes

__all__ = ["IN_CHUNK", "fetch_nodes", "marks", "nodes_query", "nodes_sql", "placeholder", "stream_head_row"]

IN_CHUNK = 400  # bound the size of one IN (...) list


def placeholder(conn: Connection | Db) -> str:
    if isinstance(conn, Db):
        return conn.ph
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


@lru_cache(maxsize=512)
def nodes_sql(ph: str, shape: tuple[int, ...]) -> str:
    """SELECT of nodes as ``level = ? AND idx IN (?, ...)`` terms, one per level (see
    :func:`nodes_query`), for a shape of per-level counts; built once per shape."""
    terms = " OR ".join(f"(level = {ph} AND idx IN ({', '.join([ph] * n)}))" for n in shape)
    return f"SELECT level, idx, hash FROM nodes WHERE {terms}"  # noqa: S608 - placeholders only


def marks(ph: str, n: int) -> str:
    return ", ".join([ph] * n)


def stream_head_row(db: Db, agent: str, kind: str) -> StreamHead | None:
    row = db.one_or_none(
        f"SELECT version, leaf_hash, idx FROM stream_heads WHERE agent = {db.ph} AND kind = {db.ph}",  # noqa: S608
        (agent, kind),
    )
    if row is None:
        return None
    return StreamHead(agent=agent, kind=kind, version=int(row[0]), leaf_hash=bytes(row[1]), index=int(row[2]))


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


def fetch_nodes(db: Db, coords: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    wanted = sorted(set(coords))
    out: dict[tuple[int, int], bytes] = {}
    ph = db.ph
    for i in range(0, len(wanted), IN_CHUNK):
        by_level: dict[int, list[int]] = {}
        for level, idx in wanted[i : i + IN_CHUNK]:
            by_level.setdefault(level, []).append(idx)
        params: list[int] = []
        for level, ids in by_level.items():
            params.append(level)
            params.extend(ids)
        sql = nodes_sql(ph, tuple(len(ids) for ids in by_level.values()))
        for level, idx, h in db.rows(sql, tuple(params)):
            out[(level, idx)] = bytes(h)
    missing = [c for c in wanted if c not in out]
    if missing:
        raise StorageError(f"stored Merkle nodes are missing: {missing[:5]}")
    return out
