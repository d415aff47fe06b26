"""What every table family of the store shares: the engine and a read transaction.

A read runs in one transaction of its own and translates the driver's errors into
:class:`StorageError` once, here (the house's one exception tree).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from engram.protocol.errors import StorageError
from ledger.storage.dbapi import Db, driver_error, storage_error, transaction

__all__ = ["StoreBase"]


class StoreBase:
    """One SQLAlchemy engine and its read transactions."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        #: what the driver raises (the hot paths run on it directly, ledger.storage.dbapi)
        self.driver_error = driver_error(engine)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn, conn.begin():
                yield conn
        except DBAPIError as e:
            raise StorageError(f"database error: {e.orig!r}") from e

    @contextmanager
    def fast_read(self) -> Iterator[Db]:
        """A read transaction on the driver's connection (ledger.storage.dbapi): the hot
        reads' statements skip SQLAlchemy's statement handling."""
        try:
            with transaction(self.engine) as db:
                yield db
        except (DBAPIError, self.driver_error) as e:
            raise storage_error("database error", e) from e
