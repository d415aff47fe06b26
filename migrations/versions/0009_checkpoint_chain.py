"""Checkpoint rows name the checkpoint they extend (``checkpoints.prev_size``).

Which sizes the log signed is not in the leaves (a batch of appends ends where its commit
ends), so a checkpoint row deleted between two others went unnoticed (issue 15). Each row
now names the size of the checkpoint its batch extended, and ``engram audit`` follows the
chain: a deleted row leaves a successor naming a size with no row. Rows written before this
migration keep NULL and are not chained.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("checkpoints", sa.Column("prev_size", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("prev_size")
