"""A checkpoint row ahead of the log may be deleted (by the append that reaches its size).

Issue 25, finding 10: a role with INSERT on ``checkpoints`` could add a row at a size the log
had not reached; once the log reached that size, the append could not insert its own
checkpoint there (primary key) nor remove the forged one (append-only triggers), so every
append failed for good. No honest row can be ahead of the log (a checkpoint is only signed at
the size the log reaches, under the writer lock), so the append-only rule now applies to the
rows at sizes the log has reached: a row ahead of the leaves may be deleted, which the append
does for the one at its new size, before it writes its leaves. Every other update or delete
is still refused.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_AHEAD = "(SELECT coalesce(max(idx) + 1, 0) FROM leaves)"


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute(
            f"""
            CREATE FUNCTION engram_checkpoint_delete() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF OLD.size > {_AHEAD} THEN
                    RETURN OLD;  -- a row ahead of the log was never signed by it
                END IF;
                RAISE EXCEPTION 'engram: DELETE on %.% is forbidden: the log is append-only',
                    TG_TABLE_SCHEMA, TG_TABLE_NAME
                    USING ERRCODE = 'integrity_constraint_violation';
            END;
            $$
            """
        )
        op.execute("DROP TRIGGER checkpoints_append_only ON checkpoints")
        op.execute(
            "CREATE TRIGGER checkpoints_append_only BEFORE UPDATE ON checkpoints "
            "FOR EACH ROW EXECUTE FUNCTION engram_append_only()"
        )
        op.execute(
            "CREATE TRIGGER checkpoints_delete_ahead_only BEFORE DELETE ON checkpoints "
            "FOR EACH ROW EXECUTE FUNCTION engram_checkpoint_delete()"
        )
    elif dialect == "sqlite":
        op.execute("DROP TRIGGER checkpoints_no_delete")
        op.execute(
            "CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints "
            f"WHEN old.size <= {_AHEAD} "
            "BEGIN SELECT RAISE(ABORT, 'engram: DELETE on checkpoints is forbidden: "
            "the log is append-only'); END"
        )
    else:  # pragma: no cover - only the two supported backends have migrations
        raise RuntimeError(f"unsupported database dialect {dialect}")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        op.execute("DROP TRIGGER checkpoints_delete_ahead_only ON checkpoints")
        op.execute("DROP TRIGGER checkpoints_append_only ON checkpoints")
        op.execute(
            "CREATE TRIGGER checkpoints_append_only BEFORE UPDATE OR DELETE ON checkpoints "
            "FOR EACH ROW EXECUTE FUNCTION engram_append_only()"
        )
        op.execute("DROP FUNCTION engram_checkpoint_delete()")
    elif dialect == "sqlite":
        op.execute("DROP TRIGGER checkpoints_no_delete")
        op.execute(
            "CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints "
            "BEGIN SELECT RAISE(ABORT, 'engram: DELETE on checkpoints is forbidden: "
            "the log is append-only'); END"
        )
