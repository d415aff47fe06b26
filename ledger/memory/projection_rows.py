"""Rows of the memory projection's tables and the values they hold: one codec each way for
items and sessions, the column lists, and the copies the write-back overlay hands out.

The codecs are the projection's only translation between a row and an
:class:`~ledger.memory.state.Item` / :class:`~ledger.memory.state.Session`: the projector,
the overlay, the audit's comparison and every read go through them, so a column added to the
schema is added here once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from engram.protocol.gate import normalize_text
from ledger.memory.facts import fact_of
from ledger.memory.state import RECORD, Item, Session
from ledger.storage.schema import mem_items, mem_sessions

__all__ = [
    "ITEM_COLS",
    "SESSION_COLS",
    "clone_item",
    "clone_session",
    "item_from_row",
    "item_from_values",
    "item_row",
    "norm_hash",
    "quoted_cols",
    "session_from_row",
    "session_from_values",
    "session_row",
]


def norm_hash(content: str) -> str:
    return hashlib.sha256(normalize_text(content).encode()).hexdigest()


def item_row(it: Item) -> dict[str, Any]:
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
        "norm_hash": norm_hash(it.content),
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
    """An item from a row whose columns are attributes (SQLAlchemy's rows)."""
    return _item(r)


def item_from_values(values: Sequence[Any]) -> Item:
    """An item from a row's values in :data:`ITEM_COLS` order (the driver's tuples)."""
    return _item(_Values(_ITEM_AT, values))


def session_from_values(values: Sequence[Any]) -> Session:
    """A session from a row's values in :data:`SESSION_COLS` order (the driver's tuples)."""
    return session_from_row(_Values(_SESSION_AT, values))


class _Values:
    """A row's columns by name, from its values in a known column order."""

    __slots__ = ("_at", "_v")

    def __init__(self, at: dict[str, int], values: Sequence[Any]) -> None:
        if len(values) != len(at):
            raise ValueError(f"a row of {len(values)} values where {len(at)} columns were selected")
        self._at = at
        self._v = values

    def __getattr__(self, name: str) -> Any:
        return self._v[self._at[name]]


def _item(r: Any) -> Item:
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


def session_from_row(r: Any) -> Session:
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


ITEM_COLS = tuple(c.name for c in mem_items.columns)
SESSION_COLS = tuple(c.name for c in mem_sessions.columns)
_ITEM_AT = {c: n for n, c in enumerate(ITEM_COLS)}
_SESSION_AT = {c: n for n, c in enumerate(SESSION_COLS)}


def quoted_cols(names: Sequence[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def clone_item(it: Item) -> Item:
    return replace(
        it,
        tags=list(it.tags),
        provenance=[dict(p) for p in it.provenance],
        tier_history=[dict(h) for h in it.tier_history],
    )


def clone_session(s: Session) -> Session:
    return replace(s, hot_snapshot=[{**h, "tags": list(h.get("tags") or [])} for h in s.hot_snapshot])


def session_row(s: Session) -> dict[str, Any]:
    return {**s.to_json(), "hot_snapshot": json.dumps(s.hot_snapshot)}
