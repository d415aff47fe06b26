"""The service's side of the narrow memory port: one query value in, its answer out.

``MemoryTransport.ask`` carries the frozen query values of :mod:`engram.protocol.queries`;
:func:`ask` answers them for both transports (in process, ``ledger.memory.transport``, and
the query route ``POST /v1/agents/{agent}/ask``) from one table, one small handler per
query type calling the service's public methods. A new query is a value there and a row
here; a new recall option is a field of :class:`RecallQuery` and the recall stage that
reads it (the handler hands every field on).

Who asks is the caller's to establish (the route authenticates the request; in process the
caller is the agent): :class:`Asker` names the agent and, for a share token's audience, the
kinds the token opens, which may ask only for items (:data:`READER_QUERIES`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from engram.protocol.answers import EntryProof, ItemPage, ItemProof, ItemRow, MeshRow, Recalled, SessionRow
from engram.protocol.errors import ForbiddenError, NotFoundError, RejectedEventError
from engram.protocol.queries import (
    CheckpointQuery,
    CompactQuery,
    EntryQuery,
    HotBlockQuery,
    ItemQuery,
    ItemsQuery,
    MeshesQuery,
    MeshProofQuery,
    Query,
    RecallQuery,
    SessionQuery,
    SessionsQuery,
    parse_query,
)
from engram.protocol.recall_block import hot_part
from engram.protocol.schemas import parse_ref
from engram.protocol.wire import Receipt
from ledger.memory.service import MemoryService

__all__ = ["HANDLERS", "READER_QUERIES", "Asker", "ask"]

A = TypeVar("A")


@dataclass(frozen=True, slots=True, kw_only=True)
class Asker:
    """Who asks: ``agent`` itself (``kinds`` None), or a share token's audience reading the
    items of ``kinds`` only. ``min_index``: answer once the projection holds this entry (the
    asker's last write) instead of the latest checkpoint."""

    agent: str
    kinds: frozenset[str] | None = None
    min_index: int | None = None


Handler = Callable[[MemoryService, Asker, Any], Any]

#: The queries a share token's audience may ask (the rest are the agent's own).
READER_QUERIES: frozenset[type[Query[Any]]] = frozenset((ItemsQuery, ItemQuery))


def ask(memory: MemoryService, asker: Asker, query: Query[A]) -> A:
    """The answer to ``query`` for ``asker`` (ForbiddenError ``auth.agent`` when a token's
    audience asks what only the agent may).

    The value is bounded again here, as its ``of`` bounds it (RejectedEventError naming the
    ``request.*`` check), before anything is read: a value built by its bare constructor in
    process carries what no ``of`` would take (a limit of 10**9, an index past 2**63)."""
    if type(query) not in HANDLERS:
        raise RejectedEventError(
            f"ask takes a query of engram.protocol.queries, not {type(query).__name__}", check="request.ask"
        )
    try:
        checked = parse_query(query.to_json())
    except (TypeError, ValueError) as e:  # a member of a type no JSON value has
        raise RejectedEventError(
            f"{query.name} has a member of the wrong type", check="request.members"
        ) from e
    if asker.kinds is not None and type(checked) not in READER_QUERIES:
        raise ForbiddenError(
            "a share token allows reading records, not acting as the agent", check="auth.agent"
        )
    answer: A = HANDLERS[type(checked)](memory, asker, checked)
    return answer


def _recall(memory: MemoryService, asker: Asker, q: RecallQuery) -> Recalled:
    return memory.recall(asker.agent, q, min_index=asker.min_index).answer()


def _items(memory: MemoryService, asker: Asker, q: ItemsQuery) -> ItemPage:
    memory.sync_through(asker.min_index)
    items = memory.items(
        asker.agent,
        tiers=None if q.tier is None else [q.tier],
        status=None if q.status == "all" else q.status,
        source_kinds=None if asker.kinds is None else sorted(asker.kinds),
        after=None if q.after is None else parse_ref(q.after),
        limit=q.limit + 1,
    )
    page = items[: q.limit]
    return ItemPage(
        items=[ItemRow.of(dataclasses.asdict(i)) for i in page],
        next=page[-1].ref if len(items) > q.limit else None,
    )


def _item(memory: MemoryService, asker: Asker, q: ItemQuery) -> ItemProof:
    memory.sync_through(asker.min_index)
    kinds = asker.kinds
    return memory.item_proof(asker.agent, q.ref, visible=None if kinds is None else kinds.__contains__)


def _sessions(memory: MemoryService, asker: Asker, q: SessionsQuery) -> list[SessionRow]:
    memory.sync_through(asker.min_index)
    return [SessionRow.of(dataclasses.asdict(s)) for s in memory.sessions(asker.agent)]


def _session(memory: MemoryService, asker: Asker, q: SessionQuery) -> SessionRow:
    memory.sync_through(asker.min_index)
    s = memory.session(asker.agent, q.session)
    if s is None:
        raise NotFoundError(f"no session {q.session} of {asker.agent}", check="memory.session")
    return SessionRow.of(dataclasses.asdict(s))


def _meshes(memory: MemoryService, asker: Asker, q: MeshesQuery) -> list[MeshRow]:
    return [MeshRow.of(m.to_json()) for m in memory.meshes_of(asker.agent)]


def _mesh_proof(memory: MemoryService, asker: Asker, q: MeshProofQuery) -> bytes:
    return memory.mesh_proof(asker.agent, q.mesh, q.ref)


def _hot_block(memory: MemoryService, asker: Asker, q: HotBlockQuery) -> str:
    """The HOT section alone, closed, without recording a use (a hook injects it at every
    session start)."""
    res = memory.recall(
        asker.agent,
        "",
        session=q.session,
        limit=1,
        record_access=False,
        scopes=None if q.scopes is None else sorted(q.scopes),
        min_index=asker.min_index,
    )
    return hot_part(res.render())


def _compact(memory: MemoryService, asker: Asker, q: CompactQuery) -> list[Receipt]:
    return memory.compact(asker.agent)


def _checkpoint(memory: MemoryService, asker: Asker, q: CheckpointQuery) -> bytes:
    return memory.ledger.latest_cosigned_note()


def _entry(memory: MemoryService, asker: Asker, q: EntryQuery) -> EntryProof:
    ledger = memory.ledger
    leaf = ledger.leaf(q.index)
    if leaf is None:
        raise NotFoundError(
            f"the log has no entry {q.index} (its entries are 0 to {ledger.size() - 1})", check="proof.index"
        )
    inc = ledger.prove_inclusion(q.index)
    assert inc.checkpoint is not None  # the latest checkpoint is always published
    return EntryProof(
        index=q.index,
        leaf=leaf,
        leaf_hash=inc.leaf_hash,
        size=inc.size,
        root=inc.root,
        proof=inc.hashes,
        checkpoint=inc.checkpoint,
    )


#: One handler per query type (tests/unit: every query of the protocol has a row).
HANDLERS: dict[type[Query[Any]], Handler] = {
    RecallQuery: _recall,
    ItemsQuery: _items,
    ItemQuery: _item,
    SessionsQuery: _sessions,
    SessionQuery: _session,
    MeshesQuery: _meshes,
    MeshProofQuery: _mesh_proof,
    HotBlockQuery: _hot_block,
    CompactQuery: _compact,
    CheckpointQuery: _checkpoint,
    EntryQuery: _entry,
}
