"""The rows the storage adapter answers: frozen values built from validated columns.

A binary column that holds anything but bytes (a row rewritten behind the log) is a
:class:`LogIntegrityError` naming table, row and column (:func:`blob`), never an untyped
error further up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engram.protocol.errors import LogIntegrityError
from verifier.keys import KeyRecord

__all__ = ["LogState", "StoredCheckpoint", "StreamHead", "blob", "checkpoint_row", "key_record"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LogState:
    origin: str
    log_vkey: str
    size: int
    last_timestamp_us: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamHead:
    agent: str
    kind: str
    version: int
    leaf_hash: bytes
    index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCheckpoint:
    size: int
    root: bytes
    note: bytes
    signed_at_us: int


def key_record(row: Any) -> KeyRecord:
    return KeyRecord(
        key_id=row.key_id,
        agent=row.agent,
        public_key=bytes(row.public_key),
        added_at=row.added_at,
        retired_at=row.retired_at,
        retired_how=row.retired_how,
    )


def blob(value: object, table: str, row: object, column: str) -> bytes:
    """A binary column's value, or :class:`LogIntegrityError` naming table, row and column
    (a body rewritten as TEXT, as the sqlite3 shell's ``replace()``
    stores it, raised an untyped ``TypeError`` from ``bytes()`` in the audit, the rebuild,
    recall and writes)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise LogIntegrityError(
        f"{table} row {row}: column {column} holds {type(value).__name__}, not bytes (run `engram audit`)",
        check=f"state.{table}",
    )


def checkpoint_row(r: Any) -> StoredCheckpoint:
    return StoredCheckpoint(
        size=int(r[0]),
        root=blob(r[1], "checkpoints", r[0], "root"),
        note=blob(r[2], "checkpoints", r[0], "note"),
        signed_at_us=int(r[3]),
    )
