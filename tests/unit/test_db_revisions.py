"""The schema revisions read without alembic (issue 26: opening the log for one command spent
0.2-0.4 s importing alembic and every migration script) agree with alembic's own answers."""

from __future__ import annotations

from pathlib import Path

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from ledger.storage.db import alembic_config, current_revision, head_revision, make_engine, migrate


def test_head_revision_is_alembics_head() -> None:
    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_current_revision_is_alembics_before_and_after_migrating(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        assert current_revision(engine) is None
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() is None
        migrate(engine)
        with engine.connect() as conn:
            theirs = MigrationContext.configure(conn).get_current_revision()
        assert current_revision(engine) == theirs == head_revision()
    finally:
        engine.dispose()
