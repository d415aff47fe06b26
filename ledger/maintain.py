"""Maintenance that removes the physical residue of erased text.

An erasure deletes the body and clears the items at once; what stays depends on the backend:

* **SQLite**: nothing, once the erasure is applied. Every connection deletes securely
  (``PRAGMA secure_delete``: freed cells and pages are zeroed), and the projection that
  applies an erasure merges the full-text index into one segment and checkpoints the WAL
  into the main file, truncating it (:meth:`ledger.memory.projection.Projection.scrub`).
  :func:`scrub_erased` does the same again, plus ``VACUUM``, for an operator who wants to.
* **PostgreSQL**: a deleted or updated row stays in its page as a dead tuple until VACUUM,
  and a plain VACUUM marks it reusable without overwriting it. :func:`scrub_erased` rewrites
  every table that can hold memory text, and its indexes (the full-text GIN index among
  them), with ``VACUUM FULL``: the old files are unlinked. It takes an exclusive lock on
  each table while it runs (writes and recalls wait); run it in a quiet moment
  (``engram maintain --scrub-erased``; docs/privacy.md gives its time).

What no command here can reach: the server's own write-ahead log and its archive, base
backups, replicas, file-system snapshots, and the blocks a disk remapped (docs/privacy.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from ledger.storage.db import checkpoint_wal

__all__ = ["TEXT_TABLES", "ScrubReport", "scrub_erased"]

#: The tables that can hold memory text (bodies, items, sessions) or derive from it.
TEXT_TABLES = ("bodies", "mem_items", "mem_sessions", "mem_vectors")


@dataclass(frozen=True, slots=True)
class ScrubReport:
    backend: str
    tables: tuple[str, ...]
    seconds: float
    complete: bool


def scrub_erased(engine: Engine) -> ScrubReport:
    """Rewrite the storage so that no byte of erased text is left in the live files."""
    t0 = time.monotonic()
    if engine.dialect.name == "postgresql":
        raw = engine.raw_connection()
        try:
            driver: Any = raw.driver_connection
            driver.autocommit = True  # VACUUM cannot run inside a transaction
            for table in TEXT_TABLES:
                driver.execute(f"VACUUM FULL {table}")  # tables are this module's constants
            driver.execute("CHECKPOINT")
            # VACUUM FULL copies the dead rows that a snapshot still open anywhere in the
            # cluster may see (the horizon is the cluster's): if one is open now, the scrub
            # may be incomplete and is to be run again (best effort: a snapshot that opened
            # and closed while it ran is not seen here).
            held = driver.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                "AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)"
            ).fetchone()[0]
        finally:
            raw.close()
        return ScrubReport("postgresql", TEXT_TABLES, time.monotonic() - t0, held == 0)
    raw = engine.raw_connection()
    try:
        lite: Any = raw.driver_connection
        lite.execute("PRAGMA secure_delete=ON")
        lite.execute("INSERT INTO mem_fts(mem_fts) VALUES ('optimize')")
        lite.execute("VACUUM")
    finally:
        raw.close()
    done = checkpoint_wal(engine)
    return ScrubReport("sqlite", (*TEXT_TABLES, "mem_fts"), time.monotonic() - t0, done)
