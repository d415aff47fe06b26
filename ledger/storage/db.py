"""Engine construction and migrations for SQLite (embedded default) and PostgreSQL.

SQLite is opened in WAL mode with ``synchronous=FULL`` so that a committed (acknowledged)
append is on disk before the commit returns, and with the driver's implicit transaction
handling turned off so that this module decides how each transaction begins: write
transactions begin with ``BEGIN IMMEDIATE``, taking SQLite's single writer lock up front
(see store.py for why appends must serialize). PostgreSQL runs at READ COMMITTED with the
default ``synchronous_commit=on``.
"""

from __future__ import annotations

import fcntl
import functools
import os
import re
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url

from engram.protocol.errors import ConfigError, StorageError

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["alembic_config", "current_revision", "head_revision", "make_engine", "migrate"]

WRITE_OPTION = "engram_write"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Create an engine with Engram's durability and locking settings."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            # The database holds memory bodies: owner-only, like the keys beside it.
            # SQLite gives its -wal and -shm files the main file's permissions.
            db_path = Path(parsed.database)
            db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not db_path.exists():
                os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT, 0o600))
        engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False}, **kwargs)
        lock_path = None
        if parsed.database and parsed.database != ":memory:":
            lock_path = Path(parsed.database).with_name(Path(parsed.database).name + "-writer.lock")
        locks: dict[int, int] = {}  # id(DBAPI connection) -> its lock file descriptor

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            if lock_path is not None:
                locks[id(dbapi_conn)] = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            # Erased text must not survive in the file: freed cells and
            # pages are overwritten with zeros, not left for a forensic read.
            cur.execute("PRAGMA secure_delete=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.close()

        @event.listens_for(engine, "close")
        def _on_close(dbapi_conn: Any, _record: Any) -> None:
            fd = locks.pop(id(dbapi_conn), None)
            if fd is not None:
                os.close(fd)  # releases the lock if held

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            write = bool(conn.get_execution_options().get(WRITE_OPTION))
            fd = locks.get(id(conn.connection.dbapi_connection)) if write else None
            if fd is not None:
                _writer_lock(fd)
            try:
                # On the driver's connection: SQLAlchemy's statement handling cost more
                # than the BEGIN itself on every transaction (ledger.storage.dbapi).
                conn.connection.driver_connection.execute(f"BEGIN {'IMMEDIATE' if write else 'DEFERRED'}")
            except BaseException:
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                raise

        # The host's writer lock is released once the transaction ended (after COMMIT or
        # ROLLBACK returned: SQLAlchemy's commit event fires before the COMMIT).
        dialect = engine.dialect
        commit, rollback = dialect.do_commit, dialect.do_rollback

        def _release(dbapi_conn: Any) -> None:  # given the pool's proxy: find the driver's
            fd = locks.get(id(getattr(dbapi_conn, "dbapi_connection", dbapi_conn)))
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)  # a no-op when not held

        def _commit(dbapi_conn: Any) -> None:
            try:
                commit(dbapi_conn)
            finally:
                _release(dbapi_conn)

        def _rollback(dbapi_conn: Any) -> None:
            try:
                rollback(dbapi_conn)
            finally:
                _release(dbapi_conn)

        dialect.do_commit = _commit  # type: ignore[method-assign, assignment]
        dialect.do_rollback = _rollback  # type: ignore[method-assign, assignment]
        return engine
    if parsed.get_backend_name() == "postgresql":
        return create_engine(url, pool_pre_ping=True, isolation_level="READ COMMITTED", **kwargs)
    raise ValueError(f"unsupported database backend {parsed.get_backend_name()!r}")


#: How long a write transaction waits for the host's writer lock (as SQLite's busy_timeout).
WRITER_LOCK_TIMEOUT_S = 60.0


def _writer_lock(fd: int) -> None:
    """Take the host's writer lock of a SQLite database: every write transaction
    of every process and thread of the host takes it before ``BEGIN IMMEDIATE``, so SQLite's
    own lock is never contended between them. A writer waiting on SQLite's lock sleeps in
    its busy handler's steps (up to 100 ms each) while other writers commit batch after
    batch; waiting here, it is woken within a millisecond of the release. Processes that do
    not take it (another program) still meet SQLite's lock, as before."""
    deadline = time.monotonic() + WRITER_LOCK_TIMEOUT_S
    pause = 0.0002
    while not _try_lock(fd):
        if time.monotonic() > deadline:
            raise StorageError(
                f"the database is locked: another writer of this host held its writer lock "
                f"for {WRITER_LOCK_TIMEOUT_S:g} s"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.001)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def alembic_config() -> Config:
    from alembic.config import Config  # only migrations need alembic (its import is 0.2 s)

    script_location = str(resources.files("migrations"))
    cfg = Config()
    cfg.set_main_option("script_location", script_location)
    return cfg


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (idempotent)."""
    from alembic import command

    cfg = alembic_config()
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True})
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        conn.commit()


_REVISION_LINE = re.compile(r'^(revision|down_revision) = (?:"([0-9A-Za-z_]+)"|None)$', re.M)


@functools.lru_cache(maxsize=1)
def head_revision() -> str | None:
    """The newest migration: the one no other names as its ``down_revision``. Read from the
    scripts' two header lines, without importing alembic or the scripts (opening the
    log for one command spent 0.2-0.4 s there); ``tests/unit/test_db_revisions.py`` checks it
    against alembic's own answer."""
    versions = resources.files("migrations") / "versions"
    revisions: set[str] = set()
    downs: set[str] = set()
    for entry in versions.iterdir():
        if not entry.name.endswith(".py") or entry.name.startswith("__"):
            continue
        found = dict((k, v) for k, v in _REVISION_LINE.findall(entry.read_text(encoding="utf-8")))
        if "revision" not in found or not found["revision"]:
            raise ConfigError(f"migration {entry.name} names no revision")
        revisions.add(found["revision"])
        if found.get("down_revision"):
            downs.add(found["down_revision"])
    heads = revisions - downs
    if len(heads) > 1:
        raise ConfigError(f"the migrations have {len(heads)} heads: {sorted(heads)}")
    return next(iter(heads), None)


def current_revision(engine: Engine) -> str | None:
    """The database's schema revision (alembic's ``alembic_version`` row), or None when the
    database holds no schema yet."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    if len(rows) > 1:
        raise ConfigError("the database's alembic_version table holds more than one revision")
    return None if not rows else str(rows[0][0])


def checkpoint_wal(engine: Engine, attempts: int = 50) -> bool:
    """SQLite: copy the WAL into the main file and truncate it to zero bytes, so that no
    earlier version of a page (an erased body, say) stays in the WAL. A reader holding an old
    snapshot blocks a full checkpoint: retried for up to ``attempts`` x 20 ms; returns whether
    it completed. No-op elsewhere."""
    if engine.dialect.name != "sqlite":
        return True
    raw = engine.raw_connection()
    try:
        driver: Any = raw.driver_connection
        for _ in range(attempts):
            busy, _log_frames, _done = driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy == 0:
                return True
            time.sleep(0.02)
        return False
    finally:
        raw.close()
