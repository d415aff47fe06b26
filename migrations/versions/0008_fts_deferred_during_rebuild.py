"""Full-text index rebuilt in bulk after a projection rebuild (SQLite).

A projection rebuild replays the whole log into ``mem_items``, and the FTS5 triggers
tokenised every item as it was written: 80% of a rebuild's write time (issue 14, Deliver 6).
``mem_cursor.fts_deferred`` lets the rebuild switch the triggers off: the rebuild sets it in
the transaction that empties the tables, and the projection step that catches up with the
log runs FTS5's own ``'rebuild'`` command (about 30x faster than row by row) and clears it
in the same transaction, so the flag survives a crash and the next catch-up finishes the
job. PostgreSQL's expression index needs no trigger; the column exists there too (one
schema) and stays 0.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_LIVE = "(SELECT fts_deferred FROM mem_cursor WHERE id = 1) = 0"
_INSERT = "INSERT INTO mem_fts(rowid, content, tags) VALUES (new.rowid, new.content, new.tags); END"
_DELETE = (
    "INSERT INTO mem_fts(mem_fts, rowid, content, tags) VALUES ('delete', old.rowid, old.content, old.tags); "
)
_TEXT_CHANGED = "(old.content IS NOT new.content OR old.tags IS NOT new.tags)"


def _triggers(when_live: bool) -> None:
    live = f"{_LIVE} AND " if when_live else ""
    for name in ("mem_items_fts_ai", "mem_items_fts_ad", "mem_items_fts_au"):
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute(
        "CREATE TRIGGER mem_items_fts_ai AFTER INSERT ON mem_items "
        + (f"WHEN {_LIVE} " if when_live else "")
        + "BEGIN "
        + _INSERT
    )
    op.execute(
        "CREATE TRIGGER mem_items_fts_ad AFTER DELETE ON mem_items "
        + (f"WHEN {_LIVE} " if when_live else "")
        + "BEGIN "
        + _DELETE
        + "END"
    )
    op.execute(
        f"CREATE TRIGGER mem_items_fts_au AFTER UPDATE ON mem_items WHEN {live}{_TEXT_CHANGED} BEGIN "
        + _DELETE
        + _INSERT
    )


def upgrade() -> None:
    op.add_column(
        "mem_cursor",
        sa.Column("fts_deferred", sa.SmallInteger(), nullable=False, server_default=sa.text("0")),
    )
    if op.get_bind().dialect.name == "sqlite":
        _triggers(when_live=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _triggers(when_live=False)
        op.execute("INSERT INTO mem_fts(mem_fts) VALUES ('rebuild')")  # whatever a deferral skipped
    with op.batch_alter_table("mem_cursor") as batch:
        batch.drop_column("fts_deferred")
