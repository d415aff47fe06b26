"""Log core: leaves, Merkle nodes, checkpoints, stream heads, agent keys, bodies.

Also installs the append-only triggers: UPDATE, DELETE, a replacing INSERT (SQLite's
INSERT OR REPLACE) and TRUNCATE (PostgreSQL) of ``leaves``, ``nodes`` and ``checkpoints``
raise an error inside the database, so neither a bug in this code base nor an ordinary SQL
session of the application's role rewrites the log's history. A role that owns the tables
can still drop the triggers: on PostgreSQL run migrations as the owner and the service as a
role granted only SELECT and INSERT on these tables (README, "PostgreSQL roles"). Whatever
is done to the database, checkpoints already handed out and the consistency checks of
clients and auditors reveal a rewrite.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

APPEND_ONLY = ("leaves", "nodes", "checkpoints")
# Every unique key of each append-only table: a row that would collide with any of them.
REPLACE_KEYS = {
    "leaves": "idx = NEW.idx OR leaf_hash = NEW.leaf_hash OR timestamp_us = NEW.timestamp_us "
    "OR (agent = NEW.agent AND kind = NEW.kind AND version = NEW.version)",
    "nodes": "level = NEW.level AND idx = NEW.idx",
    "checkpoints": "size = NEW.size",
}


def upgrade() -> None:
    op.create_table(
        "log_state",
        sa.Column("id", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("origin", sa.String(length=255), nullable=False),
        sa.Column("log_vkey", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("last_timestamp_us", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_log_state_single_row")),
        sa.CheckConstraint("size >= 0", name=op.f("ck_log_state_size_nonneg")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_state")),
    )
    op.create_table(
        "leaves",
        sa.Column("idx", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("leaf_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=128), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("timestamp_us", sa.BigInteger(), nullable=False),
        sa.Column("leaf", sa.LargeBinary(), nullable=False),
        sa.CheckConstraint("idx >= 0", name=op.f("ck_leaves_idx_nonneg")),
        sa.CheckConstraint("version >= 0", name=op.f("ck_leaves_version_nonneg")),
        sa.PrimaryKeyConstraint("idx", name=op.f("pk_leaves")),
        sa.UniqueConstraint("agent", "kind", "version", name=op.f("uq_leaves_agent_kind_version")),
        sa.UniqueConstraint("leaf_hash", name=op.f("uq_leaves_leaf_hash")),
        sa.UniqueConstraint("timestamp_us", name=op.f("uq_leaves_timestamp_us")),
    )
    op.create_table(
        "bodies",
        sa.Column("idx", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("salt", sa.LargeBinary(length=16), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["idx"], ["leaves.idx"], name=op.f("fk_bodies_idx_leaves")),
        sa.PrimaryKeyConstraint("idx", name=op.f("pk_bodies")),
    )
    op.create_table(
        "nodes",
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(length=32), nullable=False),
        sa.CheckConstraint("level >= 0 AND level < 64", name=op.f("ck_nodes_level_range")),
        sa.PrimaryKeyConstraint("level", "idx", name=op.f("pk_nodes")),
    )
    op.create_table(
        "checkpoints",
        sa.Column("size", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("root", sa.LargeBinary(length=32), nullable=False),
        sa.Column("note", sa.LargeBinary(), nullable=False),
        sa.Column("signed_at_us", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("size", name=op.f("pk_checkpoints")),
    )
    op.create_table(
        "stream_heads",
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=128), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("leaf_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("agent", "kind", name=op.f("pk_stream_heads")),
    )
    op.create_table(
        "agent_keys",
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("public_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("added_at", sa.BigInteger(), nullable=False),
        sa.Column("retired_at", sa.BigInteger(), nullable=True),
        sa.Column("retired_how", sa.String(length=16), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_agent_keys")),
    )
    op.create_index(op.f("ix_agent_keys_agent"), "agent_keys", ["agent"], unique=False)
    op.create_index(
        "uq_agent_keys_one_active",
        "agent_keys",
        ["agent"],
        unique=True,
        sqlite_where=sa.text("retired_at IS NULL"),
        postgresql_where=sa.text("retired_at IS NULL"),
    )

    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute(
            """
            CREATE FUNCTION engram_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION 'engram: % on %.% is forbidden: the log is append-only',
                    TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
                    USING ERRCODE = 'integrity_constraint_violation';
            END;
            $$
            """
        )
        for table in APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION engram_append_only()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION engram_append_only()"
            )
    elif dialect == "sqlite":
        for table in APPEND_ONLY:
            for operation in ("UPDATE", "DELETE"):
                op.execute(
                    f"CREATE TRIGGER {table}_no_{operation.lower()} BEFORE {operation} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, 'engram: {operation} on {table} is forbidden: "
                    "the log is append-only'); END"
                )
            # INSERT OR REPLACE deletes the old row without firing DELETE triggers (unless
            # recursive_triggers is on), so an insert that would replace a row is refused.
            no_replace = (
                f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
                f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {REPLACE_KEYS[table]}) "
                f"BEGIN SELECT RAISE(ABORT, 'engram: replacing a row of {table} is forbidden: "
                "the log is append-only'); END"
            )
            op.execute(no_replace)
    else:  # pragma: no cover - only the two supported backends have migrations
        raise RuntimeError(f"unsupported database dialect {dialect}")


def downgrade() -> None:
    # Downgrading would destroy the log; refuse rather than drop history.
    raise RuntimeError("the log core cannot be downgraded: it would delete the log")
