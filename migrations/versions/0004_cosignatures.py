"""Witness cosignatures collected for checkpoints (c2sp.org/tlog-witness).

One row per (checkpoint size, witness key): the cosignature note line as the witness
returned it, after the log verified it. Rows are only ever added; the checkpoint note
served and put in bundles is the signed note followed by these lines.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cosignatures",
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("witness", sa.String(length=300), nullable=False),
        sa.Column("line", sa.String(length=2048), nullable=False),
        sa.Column("received_at_us", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("size", "witness", name=op.f("pk_cosignatures")),
    )


def downgrade() -> None:
    op.drop_table("cosignatures")
