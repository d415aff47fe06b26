"""Replay protection for signed HTTP requests: each (signer, nonce) is accepted once.

Rows expire with the request-signature time window and are pruned; the table is not part
of the log and is never exported.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "request_nonces",
        sa.Column("signer", sa.String(length=80), nullable=False),
        sa.Column("nonce", sa.String(length=64), nullable=False),
        sa.Column("expires_s", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("signer", "nonce", name=op.f("pk_request_nonces")),
    )
    op.create_index(op.f("ix_request_nonces_expires_s"), "request_nonces", ["expires_s"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_request_nonces_expires_s"), table_name="request_nonces")
    op.drop_table("request_nonces")
