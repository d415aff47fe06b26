"""Web UI sessions signed out before they expired (issue 40, finding 9).

The owner's session cookie is stateless (api/ui/session.py): before this table, "Sign out"
only deleted the browser's cookie, and a copy of it opened the memory view until it
expired. Signing out now records the session's random id here until the cookie would have
expired, and every worker sharing the database refuses it; expired rows are pruned as they
are for ``request_nonces``. Not part of the log and never exported.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ui_revoked_sessions",
        sa.Column("session", sa.String(length=32), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("expires_s", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session", name=op.f("pk_ui_revoked_sessions")),
    )
    op.create_index(
        op.f("ix_ui_revoked_sessions_expires_s"), "ui_revoked_sessions", ["expires_s"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_ui_revoked_sessions_expires_s"), table_name="ui_revoked_sessions")
    op.drop_table("ui_revoked_sessions")
