"""The store's hot paths on the driver's own DB-API 2.0 connection, without SQLAlchemy's
statement handling.

Trust role: none of its own; it carries statements the store wrote (constant SQL text,
every value a bound parameter) to the database and rows back. Invariants it keeps:

* Transactions stay SQLAlchemy's: a :class:`Db` is the driver connection of a SQLAlchemy
  ``Connection`` that has begun its transaction, so BEGIN (``BEGIN IMMEDIATE`` and the host's
  writer lock for a write on SQLite, ledger.storage.db), COMMIT, ROLLBACK, isolation levels
  and the pool are what they were; only the statements inside skip SQLAlchemy's compile,
  result and event machinery (about a fifth of the server's CPU under load, issue 43).
* Statements are text written once per paramstyle (``?`` for sqlite3, ``%s`` for psycopg 3);
  psycopg prepares a statement on the server once it has run a few times on a connection,
  and pipelines ``executemany``.
* Observers still see every statement: SQLAlchemy's ``before_cursor_execute`` listeners of
  the engine are called for each one (an ``executemany`` once), as when SQLAlchemy ran it, so
  the statement-count tests and any tracing keep counting what reaches the database. When
  nobody listens this costs one truth test per statement.
* A driver's error becomes :class:`StorageError` in one place (:func:`storage_error`), as
  SQLAlchemy's wrapped errors did.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from engram.protocol.errors import StorageError

__all__ = ["Db", "driver_error", "retryable", "storage_error"]

#: SQLSTATEs after which a transaction may be run again from its start: serialization
#: failure and deadlock (PostgreSQL; SQLite serializes writers up front and raises neither).
RETRYABLE_SQLSTATES = frozenset(("40001", "40P01"))


class Db:
    """One DB-API connection inside a transaction SQLAlchemy began, with its paramstyle.

    Every statement goes through :meth:`_exec` (the statement-count test counts there).
    Results are fetched whole before the next statement runs: no two cursors interleave."""

    __slots__ = ("_conn", "_observers", "backend", "ph", "raw")

    def __init__(self, conn: Connection) -> None:
        """The driver connection under ``conn``, whose transaction has begun."""
        self._conn = conn
        self._observers = conn.dispatch.before_cursor_execute
        #: the driver's connection (sqlite3.Connection or psycopg.Connection)
        self.raw: Any = conn.connection.driver_connection
        #: "sqlite" or "postgresql"
        self.backend = conn.dialect.name
        #: the driver's placeholder
        self.ph = "?" if conn.dialect.paramstyle == "qmark" else "%s"

    @property
    def sa(self) -> Connection:
        """The SQLAlchemy connection underneath, for a cold statement in the same transaction."""
        return self._conn

    @classmethod
    def of(cls, conn: Connection) -> Db:
        """The driver connection under ``conn``, with ``conn``'s transaction begun (as
        SQLAlchemy's autobegin would on its first statement)."""
        if not conn.in_transaction():
            conn.begin()
        return cls(conn)

    def _exec(self, sql: str, params: Any, many: bool) -> Any:
        cur = self.raw.cursor()
        if self._observers:
            if many:
                params = list(params)
            for observe in self._observers:
                observe(self._conn, cur, sql, params, None, many)
        if many:
            cur.executemany(sql, params)
        elif params is None:
            cur.execute(sql)  # no parameters: a literal % is not a placeholder (psycopg)
        else:
            cur.execute(sql, params)
        return cur

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int:
        """Run one statement; return its row count."""
        cur = self._exec(sql, params, False)
        try:
            return int(cur.rowcount)
        finally:
            cur.close()

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement for each of ``rows`` (one round trip per batch on psycopg 3's
        pipeline; a prepared statement stepped per row on sqlite3)."""
        self._exec(sql, rows, True).close()

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        cur = self._exec(sql, params, False)
        try:
            return list(cur.fetchall())
        finally:
            cur.close()

    def one_or_none(self, sql: str, params: Sequence[Any] | None = None) -> tuple[Any, ...] | None:
        got = self.rows(sql, params)
        if len(got) > 1:
            raise StorageError(f"expected at most one row, got {len(got)}: {sql[:60]}")
        return got[0] if got else None

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """The first column of the one row ``sql`` returns."""
        row = self.one_or_none(sql, params)
        if row is None:
            raise StorageError(f"expected one row, got none: {sql[:60]}")
        return row[0]


def driver_error(engine: Engine) -> type[Exception]:
    """The base class of the errors ``engine``'s driver raises (``sqlite3.Error``,
    ``psycopg.Error``): what a statement run through :class:`Db` raises on failure."""
    err: type[Exception] = engine.dialect.loaded_dbapi.Error
    return err


def storage_error(what: str, e: BaseException) -> StorageError:
    """The store's :class:`StorageError` for a driver error (raw, or wrapped by
    SQLAlchemy), naming ``what`` failed; raise it ``from e``."""
    orig = e.orig if isinstance(e, DBAPIError) else e
    return StorageError(f"{what}: {orig!r}")


def retryable(e: BaseException) -> bool:
    """Whether ``e`` (raw, or wrapped by SQLAlchemy) is a serialization failure or deadlock."""
    orig = e.orig if isinstance(e, DBAPIError) else e
    return getattr(orig, "sqlstate", None) in RETRYABLE_SQLSTATES


@contextmanager
def transaction(engine: Engine, **options: Any) -> Iterator[Db]:
    """A :class:`Db` inside one SQLAlchemy transaction on ``engine`` (``options``: its
    execution options, the write flag and isolation level), committed when the block
    returns, rolled back when it raises. Errors pass through untranslated (the caller
    names what failed with :func:`storage_error`)."""
    with engine.connect() as conn:
        if options:
            conn = conn.execution_options(**options)
        with conn.begin():
            yield Db(conn)
