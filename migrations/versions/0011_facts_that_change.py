"""Facts that change (issue 29): validity and replacement links on ``mem_items``.

``valid_from_us`` (when the memory's fact became true, else NULL: its entry's time),
``valid_until_us`` (set when a ``memory.replaced`` entry named a newer value),
``replaced_by``/``replaces`` (those links) and ``fact_key`` ("<subject>|<attribute>" of the
one changeable fact the text states, derived) with an index to find the memories a new value
replaces. All derived from the log: an existing projection gains them by ``engram rebuild``
(the columns start NULL: no memory is replaced until then).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mem_items") as batch:
        batch.add_column(sa.Column("valid_from_us", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("valid_until_us", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("replaced_by", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("replaces", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("fact_key", sa.String(length=160), nullable=True))
    op.create_index(op.f("ix_mem_items_agent_fact_key"), "mem_items", ["agent", "fact_key"])


def downgrade() -> None:
    op.drop_index(op.f("ix_mem_items_agent_fact_key"), table_name="mem_items")
    with op.batch_alter_table("mem_items") as batch:
        batch.drop_column("fact_key")
        batch.drop_column("replaces")
        batch.drop_column("replaced_by")
        batch.drop_column("valid_until_us")
        batch.drop_column("valid_from_us")
