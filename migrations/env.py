"""Alembic environment: online migrations only, on a connection we are given or make."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from ledger.storage.schema import FTS_OBJECTS, metadata

config = context.config


def _include(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    # Full-text search objects are made per backend by the migrations (FTS5 virtual table
    # and its shadow tables on SQLite, an expression GIN index on PostgreSQL).
    return not (name and name.startswith(FTS_OBJECTS))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection, target_metadata=metadata, compare_type=True, include_object=_include
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    # Command-line use (alembic -c alembic.ini ...): the URL comes from the environment.
    from ledger.config import Settings
    from ledger.storage.db import make_engine

    engine = make_engine(Settings.from_env().database_url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_migrations_online()
