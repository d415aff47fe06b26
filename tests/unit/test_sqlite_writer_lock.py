"""Issue 28: on SQLite, every write transaction of the host takes the host's writer lock
(a lock file beside the database) before BEGIN IMMEDIATE, so writers queue there, woken at
once, instead of sleeping in SQLite's busy handler; a writer that cannot get it within the
timeout fails with a typed error and writes nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from engram.protocol.errors import StorageError
from ledger.storage import db
from ledger.storage.db import WRITE_OPTION, make_engine


def _write(engine, value: int, hold_s: float = 0.0, entered: threading.Event | None = None) -> None:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            if entered is not None:
                entered.set()
            conn.exec_driver_sql("INSERT INTO t VALUES (?)", (value,))
            time.sleep(hold_s)


def _setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'w.db'}"
    first = make_engine(url)
    with first.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    return url, first


def test_writers_of_two_engines_queue_on_the_host_lock(tmp_path: Path) -> None:
    url, first = _setup(tmp_path)
    second = make_engine(url)  # another process's engine: its own connections and lock fds
    assert (tmp_path / "w.db-writer.lock").exists()
    entered = threading.Event()
    holder = threading.Thread(target=_write, args=(first, 1, 0.5, entered))
    holder.start()
    assert entered.wait(10)
    started = time.monotonic()
    _write(second, 2)  # waits for the holder's commit, then writes
    waited = time.monotonic() - started
    holder.join()
    assert waited >= 0.3  # it really waited for the lock
    with second.connect() as conn:
        assert sorted(r[0] for r in conn.exec_driver_sql("SELECT x FROM t")) == [1, 2]


def test_a_writer_past_the_timeout_fails_typed_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, first = _setup(tmp_path)
    second = make_engine(url)
    monkeypatch.setattr(db, "WRITER_LOCK_TIMEOUT_S", 0.2)
    entered = threading.Event()
    holder = threading.Thread(target=_write, args=(first, 1, 1.0, entered))
    holder.start()
    assert entered.wait(10)
    with pytest.raises(StorageError, match="writer lock"):
        _write(second, 2)
    holder.join()
    with second.connect() as conn:
        assert [r[0] for r in conn.exec_driver_sql("SELECT x FROM t")] == [1]
    _write(second, 3)  # the lock is free again, and the failed writer's connection still works
    with second.connect() as conn:
        assert sorted(r[0] for r in conn.exec_driver_sql("SELECT x FROM t")) == [1, 3]


def test_a_rolled_back_write_releases_the_lock(tmp_path: Path) -> None:
    url, first = _setup(tmp_path)
    second = make_engine(url)

    def fail() -> None:
        with first.connect() as conn:
            c = conn.execution_options(**{WRITE_OPTION: True})
            with c.begin():
                c.exec_driver_sql("INSERT INTO t VALUES (9)")
                raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fail()
    done = threading.Event()
    t = threading.Thread(target=lambda: (_write(second, 4), done.set()))
    t.start()
    assert done.wait(5), "the lock was still held after a rollback"
    with second.connect() as conn:
        assert [r[0] for r in conn.exec_driver_sql("SELECT x FROM t")] == [4]
