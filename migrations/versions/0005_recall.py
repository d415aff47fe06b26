"""Recall at scale: embedding vectors beside the projection, facet indexes, a vector generation.

``mem_vectors`` holds one embedding per item (memories and the records tier of session
turns), derived from the item's text and never signed; ``mem_cursor.vec_generation`` is
bumped when vector rows are deleted so that readers' in-process caches reload, and
``embedded_size``/``embedded_model`` say how far the log's items have been embedded and by
which model (a model change re-embeds). The two
indexes let recall narrow candidates by category and by session in SQL.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mem_vectors",
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("ref", sa.String(length=32), nullable=False),
        sa.Column("record", sa.Boolean(), nullable=False),
        sa.Column("model", sa.String(length=160), nullable=False),
        sa.Column("norm_hash", sa.String(length=64), nullable=False),
        sa.Column("vec", sa.LargeBinary(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("agent", "ref", name=op.f("pk_mem_vectors")),
    )
    op.create_index(op.f("ix_mem_vectors_agent_model_seq"), "mem_vectors", ["agent", "model", "seq"])
    op.create_index(
        op.f("ix_mem_items_agent_category_created_us"), "mem_items", ["agent", "category", "created_us"]
    )
    op.create_index(op.f("ix_mem_items_agent_session"), "mem_items", ["agent", "session"])
    op.create_index(op.f("ix_mem_items_idx"), "mem_items", ["idx"])
    with op.batch_alter_table("mem_cursor") as batch:
        batch.add_column(
            sa.Column("vec_generation", sa.BigInteger(), server_default=sa.text("0"), nullable=False)
        )
        batch.add_column(
            sa.Column("embedded_size", sa.BigInteger(), server_default=sa.text("0"), nullable=False)
        )
        batch.add_column(sa.Column("embedded_model", sa.String(length=160), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("mem_cursor") as batch:
        batch.drop_column("embedded_model")
        batch.drop_column("embedded_size")
        batch.drop_column("vec_generation")
    op.drop_index(op.f("ix_mem_items_idx"), table_name="mem_items")
    op.drop_index(op.f("ix_mem_items_agent_session"), table_name="mem_items")
    op.drop_index(op.f("ix_mem_items_agent_category_created_us"), table_name="mem_items")
    op.drop_index(op.f("ix_mem_vectors_agent_model_seq"), table_name="mem_vectors")
    op.drop_table("mem_vectors")
