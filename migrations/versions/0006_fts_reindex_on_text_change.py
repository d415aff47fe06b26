"""Full-text index: re-index an item only when its text changes (SQLite).

The FTS5 index over ``mem_items`` was kept in step by an AFTER UPDATE trigger that deleted
and re-inserted the item's text on *every* update, and most updates of a memory item are
not about its text: uses (``memory.accessed``), confirmations and tier changes. Each one
re-tokenised the item, which put full-text work on every recall's access logging. The
trigger now fires only when ``content`` or ``tags`` differ. PostgreSQL's expression index
needs no trigger.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_REINDEX = (
    "INSERT INTO mem_fts(mem_fts, rowid, content, tags) VALUES ('delete', old.rowid, old.content, old.tags); "
    "INSERT INTO mem_fts(rowid, content, tags) VALUES (new.rowid, new.content, new.tags); END"
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("DROP TRIGGER IF EXISTS mem_items_fts_au")
    op.execute(
        "CREATE TRIGGER mem_items_fts_au AFTER UPDATE ON mem_items "
        "WHEN old.content IS NOT new.content OR old.tags IS NOT new.tags BEGIN " + _REINDEX
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute("DROP TRIGGER IF EXISTS mem_items_fts_au")
    op.execute("CREATE TRIGGER mem_items_fts_au AFTER UPDATE ON mem_items BEGIN " + _REINDEX)
