"""Memory projections: items, sessions, the projection cursor, and full-text search.

These tables are derived from the log and can be dropped and rebuilt at any time
(`engram memory rebuild`); they are therefore ordinary mutable tables.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mem_cursor",
        sa.Column("id", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("applied_size", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_mem_cursor_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mem_cursor")),
    )
    op.execute("INSERT INTO mem_cursor (id, applied_size) VALUES (1, 0)")
    op.create_table(
        "mem_items",
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("ref", sa.String(length=32), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("pos", sa.SmallInteger(), nullable=False),
        sa.Column("source_kind", sa.String(length=64), nullable=False),
        sa.Column("tier", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("category", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("norm_hash", sa.String(length=64), nullable=False),
        sa.Column("tags", sa.Text(), nullable=False),
        sa.Column("confidence", sa.SmallInteger(), nullable=False),
        sa.Column("confirmations", sa.Integer(), nullable=False),
        sa.Column("access_count", sa.Integer(), nullable=False),
        sa.Column("last_access_us", sa.BigInteger(), nullable=True),
        sa.Column("created_us", sa.BigInteger(), nullable=False),
        sa.Column("decay_exempt", sa.Boolean(), nullable=False),
        sa.Column("linked_action", sa.Boolean(), nullable=False),
        sa.Column("provenance", sa.Text(), nullable=False),
        sa.Column("tier_history", sa.Text(), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=True),
        sa.Column("superseded_by", sa.String(length=32), nullable=True),
        sa.Column("supersedes", sa.String(length=32), nullable=True),
        sa.PrimaryKeyConstraint("agent", "ref", name=op.f("pk_mem_items")),
    )
    op.create_index(op.f("ix_mem_items_agent_tier_status"), "mem_items", ["agent", "tier", "status"])
    op.create_index(op.f("ix_mem_items_agent_tier_norm_hash"), "mem_items", ["agent", "tier", "norm_hash"])
    op.create_table(
        "mem_sessions",
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=64), nullable=False),
        sa.Column("opened_index", sa.BigInteger(), nullable=False),
        sa.Column("opened_us", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("closed_index", sa.BigInteger(), nullable=True),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("last_index", sa.BigInteger(), nullable=False),
        sa.Column("distilled", sa.Boolean(), nullable=False),
        sa.Column("hot_snapshot", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("agent", "session", name=op.f("pk_mem_sessions")),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        # External-content FTS5 index over mem_items, kept in step by triggers.
        op.execute(
            "CREATE VIRTUAL TABLE mem_fts USING fts5(content, tags, content='mem_items', "
            "content_rowid='rowid', tokenize='porter unicode61')"
        )
        op.execute(
            "CREATE TRIGGER mem_items_fts_ai AFTER INSERT ON mem_items BEGIN "
            "INSERT INTO mem_fts(rowid, content, tags) VALUES (new.rowid, new.content, new.tags); END"
        )
        op.execute(
            "CREATE TRIGGER mem_items_fts_ad AFTER DELETE ON mem_items BEGIN "
            "INSERT INTO mem_fts(mem_fts, rowid, content, tags) VALUES ('delete', old.rowid, old.content, old.tags); END"
        )
        op.execute(
            "CREATE TRIGGER mem_items_fts_au AFTER UPDATE ON mem_items BEGIN "
            "INSERT INTO mem_fts(mem_fts, rowid, content, tags) VALUES ('delete', old.rowid, old.content, old.tags); "
            "INSERT INTO mem_fts(rowid, content, tags) VALUES (new.rowid, new.content, new.tags); END"
        )
    elif dialect == "postgresql":
        op.execute(
            "CREATE INDEX ix_mem_items_fts ON mem_items USING gin "
            "(to_tsvector('english'::regconfig, content || ' ' || tags))"
        )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for name in ("mem_items_fts_ai", "mem_items_fts_ad", "mem_items_fts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS mem_fts")
    op.drop_table("mem_sessions")
    op.drop_index(op.f("ix_mem_items_agent_tier_norm_hash"), table_name="mem_items")
    op.drop_index(op.f("ix_mem_items_agent_tier_status"), table_name="mem_items")
    op.drop_table("mem_items")
    op.drop_table("mem_cursor")
