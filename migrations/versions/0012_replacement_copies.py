"""Replacement decisions name memories, not values (issue 40, finding 4): ``mem_items.copies``.

Policy version 1 ``memory.replaced`` bodies copied the values of the two memories they name;
from version 2 they name them by reference and leaf hash only. ``copies`` lists, for each
memory, the version 1 entries whose bodies still copy its value (``[{"index", "item",
"by"}]``, JSON): an erasure of the memory takes them with it (engram.protocol.erasure), and
an erased memory's tombstone keeps the ones an erasure made before this revision left, so
that they can be erased alone.

Derived from the log like every projection column; this migration fills it for the entries
the projection has applied, as a replay would (ledger.memory.state ``_memory_replaced``), so
no rebuild is needed: for each version 1 body still stored, in log order, both items it
names gain the entry.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("mem_items", sa.Column("copies", sa.Text(), nullable=False, server_default=sa.text("'[]'")))
    fill_copies(op.get_bind())


def fill_copies(conn: sa.Connection) -> None:
    """For each version 1 ``memory.replaced`` body the projection has applied, in log order,
    both items it names gain the entry (what ledger.memory.state folds)."""
    applied = conn.execute(sa.text("SELECT applied_size FROM mem_cursor WHERE id = 1")).scalar()
    if not applied:
        return
    rows = conn.execute(
        sa.text(
            "SELECT l.idx, l.agent, b.body FROM leaves l JOIN bodies b ON b.idx = l.idx "
            "WHERE l.kind = 'memory.replaced' AND l.idx < :applied ORDER BY l.idx"
        ),
        {"applied": int(applied)},
    ).all()
    for idx, agent, raw in rows:
        try:
            body = json.loads(bytes(raw))
        except (ValueError, TypeError):
            continue  # not a body a replay folds (engram audit names it)
        if not isinstance(body, dict) or "was" not in body or body.get("item") == body.get("by"):
            continue
        copy = {"index": int(idx), "item": body["item"], "by": body["by"]}
        for ref in (body["item"], body["by"]):
            found = conn.execute(
                sa.text("SELECT copies FROM mem_items WHERE agent = :a AND ref = :r"), {"a": agent, "r": ref}
            ).first()
            if found is None or found[0] is None:
                continue
            conn.execute(
                sa.text("UPDATE mem_items SET copies = :c WHERE agent = :a AND ref = :r"),
                {"c": json.dumps([*json.loads(found[0]), copy]), "a": agent, "r": ref},
            )


def downgrade() -> None:
    with op.batch_alter_table("mem_items") as batch:
        batch.drop_column("copies")
