"""``mem_items.confirmations`` counts sightings: the first write is 1.

The projection is derived from the log, so its meaning can change without touching a signed
byte: a rebuild gives the new counts. This migration brings an existing projection to the
same numbers without a rebuild (every item, tombstones included, gains the first sighting).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE mem_items SET confirmations = confirmations + 1")


def downgrade() -> None:
    op.execute("UPDATE mem_items SET confirmations = confirmations - 1")
