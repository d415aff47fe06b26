"""The database schema (SQLAlchemy Core). Alembic migrations in ``migrations/`` own it.

Log tables (append-only; database triggers reject UPDATE, DELETE and TRUNCATE):

* ``leaves``: one row per log entry, the exact leaf bytes verbatim plus columns copied from
  them for lookups. ``idx`` is dense from 0 (serialized appends, see store.py).
* ``nodes``: the hash of every *complete* perfect subtree, ``(level, idx)`` covering leaves
  ``[idx * 2**level, (idx + 1) * 2**level)``. A complete subtree never changes, so rows are
  immutable; level 8L rows are exactly the C2SP tile hashes of tile level L.
* ``checkpoints``: every signed checkpoint note, by tree size.
* ``cosignatures``: witness cosignature lines collected for a checkpoint (migration 0004).

Mutable state, always written in the same transaction as the leaves it summarises:

* ``log_state``: the single row that appenders lock; size, last timestamp, origin, key.
* ``stream_heads``: the current head of every (agent, kind) stream.
* ``agent_keys``: agent keys with their valid span (retired_at set by rotation/revocation).
* ``bodies``: salt and body bytes beside each leaf; erasable without touching the log.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

__all__ = [
    "APPEND_ONLY_TABLES",
    "FTS_OBJECTS",
    "agent_keys",
    "bodies",
    "checkpoints",
    "leaves",
    "log_state",
    "mem_cursor",
    "mem_items",
    "mem_sessions",
    "mem_vectors",
    "metadata",
    "nodes",
    "stream_heads",
    "ui_revoked_sessions",
]

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

log_state = Table(
    "log_state",
    metadata,
    Column("id", SmallInteger, primary_key=True, autoincrement=False),
    Column("origin", String(255), nullable=False),
    Column("log_vkey", Text, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("last_timestamp_us", BigInteger, nullable=False),
    CheckConstraint("id = 1", name="single_row"),
    CheckConstraint("size >= 0", name="size_nonneg"),
)

leaves = Table(
    "leaves",
    metadata,
    Column("idx", BigInteger, primary_key=True, autoincrement=False),
    Column("leaf_hash", LargeBinary(32), nullable=False),
    Column("agent", String(64), nullable=False),
    Column("kind", String(128), nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("key_id", String(32), nullable=False),
    Column("timestamp_us", BigInteger, nullable=False),
    Column("leaf", LargeBinary, nullable=False),
    UniqueConstraint("agent", "kind", "version"),
    UniqueConstraint("leaf_hash"),
    UniqueConstraint("timestamp_us"),
    CheckConstraint("idx >= 0", name="idx_nonneg"),
    CheckConstraint("version >= 0", name="version_nonneg"),
)

bodies = Table(
    "bodies",
    metadata,
    Column("idx", BigInteger, ForeignKey("leaves.idx"), primary_key=True, autoincrement=False),
    Column("salt", LargeBinary(16), nullable=False),
    Column("body", LargeBinary, nullable=False),
)

nodes = Table(
    "nodes",
    metadata,
    Column("level", SmallInteger, nullable=False),
    Column("idx", BigInteger, nullable=False),
    Column("hash", LargeBinary(32), nullable=False),
    PrimaryKeyConstraint("level", "idx"),
    CheckConstraint("level >= 0 AND level < 64", name="level_range"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("size", BigInteger, primary_key=True, autoincrement=False),
    Column("root", LargeBinary(32), nullable=False),
    Column("note", LargeBinary, nullable=False),
    Column("signed_at_us", BigInteger, nullable=False),
    #: The size of the checkpoint this one extends (the batch's start; NULL for size 0 and
    #: rows older than migration 0009): the rows form a chain, so a deleted row is named.
    Column("prev_size", BigInteger, nullable=True),
)

#: Witness cosignatures (c2sp.org/tlog-cosignature) collected for a checkpoint: one note
#: line per (checkpoint size, witness key), kept as the witness returned it.
cosignatures = Table(
    "cosignatures",
    metadata,
    Column("size", BigInteger, nullable=False),
    Column("witness", String(300), nullable=False),
    Column("line", String(2048), nullable=False),
    Column("received_at_us", BigInteger, nullable=False),
    PrimaryKeyConstraint("size", "witness"),
)

stream_heads = Table(
    "stream_heads",
    metadata,
    Column("agent", String(64), nullable=False),
    Column("kind", String(128), nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("leaf_hash", LargeBinary(32), nullable=False),
    Column("idx", BigInteger, nullable=False),
    PrimaryKeyConstraint("agent", "kind"),
)

agent_keys = Table(
    "agent_keys",
    metadata,
    Column("key_id", String(32), primary_key=True),
    Column("agent", String(64), nullable=False),
    Column("public_key", LargeBinary(32), nullable=False),
    Column("added_at", BigInteger, nullable=False),
    Column("retired_at", BigInteger, nullable=True),
    Column("retired_how", String(16), nullable=True),
    Index(None, "agent"),
    # At most one active key per agent, enforced by the database as well as by the rules.
    Index(
        "uq_agent_keys_one_active",
        "agent",
        unique=True,
        sqlite_where=text("retired_at IS NULL"),
        postgresql_where=text("retired_at IS NULL"),
    ),
)

# -- memory projections (derived; dropped and rebuilt from the log by `engram memory rebuild`) --

mem_cursor = Table(
    "mem_cursor",
    metadata,
    Column("id", SmallInteger, primary_key=True, autoincrement=False),
    Column("applied_size", BigInteger, nullable=False),
    #: Bumped whenever vector rows are deleted (rebuild, erasure, a model change): readers'
    #: caches reload. Items of entries below ``embedded_size`` have vectors of
    #: ``embedded_model`` (or failed to embed and are listed nowhere: see Projection.embed).
    Column("vec_generation", BigInteger, nullable=False, server_default=text("0")),
    Column("embedded_size", BigInteger, nullable=False, server_default=text("0")),
    Column("embedded_model", String(160), nullable=True),
    #: 1 while a rebuild replays with the SQLite full-text triggers off; the catch-up that
    #: reaches the log's end rebuilds the index in bulk and sets it back to 0 (migration 0008).
    Column("fts_deferred", SmallInteger, nullable=False, server_default=text("0")),
    CheckConstraint("id = 1", name="single_row"),
)

mem_items = Table(
    "mem_items",
    metadata,
    Column("agent", String(64), nullable=False),
    Column("ref", String(32), nullable=False),
    Column("idx", BigInteger, nullable=False),
    Column("pos", SmallInteger, nullable=False),
    Column("source_kind", String(64), nullable=False),
    Column("tier", String(8), nullable=False),
    Column("status", String(16), nullable=False),
    Column("category", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("norm_hash", String(64), nullable=False),
    Column("tags", Text, nullable=False),
    Column("confidence", SmallInteger, nullable=False),
    Column("confirmations", Integer, nullable=False),
    Column("access_count", Integer, nullable=False),
    Column("last_access_us", BigInteger, nullable=True),
    Column("created_us", BigInteger, nullable=False),
    Column("decay_exempt", Boolean, nullable=False),
    Column("linked_action", Boolean, nullable=False),
    Column("provenance", Text, nullable=False),
    Column("tier_history", Text, nullable=False),
    Column("session", String(64), nullable=True),
    Column("superseded_by", String(32), nullable=True),
    Column("supersedes", String(32), nullable=True),
    Column("valid_from_us", BigInteger, nullable=True),
    Column("valid_until_us", BigInteger, nullable=True),
    Column("replaced_by", String(32), nullable=True),
    Column("replaces", String(32), nullable=True),
    #: "<subject>|<attribute>" of the one changeable fact the memory states (derived from its
    #: text, ledger.memory.facts), for finding the memories a new value replaces.
    Column("fact_key", String(160), nullable=True),
    #: The version 1 memory.replaced entries that still copy the memory's value (JSON list of
    #: {index, item, by}): what an erasure of the memory takes with it.
    Column("copies", Text, nullable=False, server_default=text("'[]'")),
    PrimaryKeyConstraint("agent", "ref"),
    Index(None, "agent", "tier", "status"),
    Index(None, "agent", "tier", "norm_hash"),
    Index(None, "agent", "category", "created_us"),
    Index(None, "agent", "session"),
    Index(None, "idx"),
    Index(None, "agent", "fact_key"),
)

#: Embedding vectors of items (derived, never signed): float32 little-endian, unit norm,
#: tagged with the model that made them and the item text's norm_hash they were made from
#: (a row whose hash no longer matches its item is stale and ignored). ``seq`` is the
#: projection size when the row was written: readers load new rows incrementally.
mem_vectors = Table(
    "mem_vectors",
    metadata,
    Column("agent", String(64), nullable=False),
    Column("ref", String(32), nullable=False),
    Column("record", Boolean, nullable=False),
    Column("model", String(160), nullable=False),
    Column("norm_hash", String(64), nullable=False),
    Column("vec", LargeBinary, nullable=False),
    Column("seq", BigInteger, nullable=False),
    PrimaryKeyConstraint("agent", "ref"),
    Index(None, "agent", "model", "seq"),
)

mem_sessions = Table(
    "mem_sessions",
    metadata,
    Column("agent", String(64), nullable=False),
    Column("session", String(64), nullable=False),
    Column("opened_index", BigInteger, nullable=False),
    Column("opened_us", BigInteger, nullable=False),
    Column("status", String(8), nullable=False),
    Column("title", Text, nullable=True),
    Column("closed_index", BigInteger, nullable=True),
    Column("turns", Integer, nullable=False),
    Column("last_index", BigInteger, nullable=False),
    Column("distilled", Boolean, nullable=False),
    Column("hot_snapshot", Text, nullable=False),
    PrimaryKeyConstraint("agent", "session"),
)

#: Full-text search objects made by the migration per backend, not by the models:
#: SQLite's FTS5 table (and its shadow tables) and PostgreSQL's expression GIN index.
FTS_OBJECTS = ("mem_fts", "ix_mem_items_fts")

#: Tables whose rows, once written, never change (enforced by triggers in the migration).
APPEND_ONLY_TABLES = ("leaves", "nodes", "checkpoints")

# -- HTTP request replay protection (ordinary mutable table; rows expire) ---------------------

request_nonces = Table(
    "request_nonces",
    metadata,
    Column("signer", String(80), nullable=False),
    Column("nonce", String(64), nullable=False),
    Column("expires_s", BigInteger, nullable=False),
    PrimaryKeyConstraint("signer", "nonce"),
    Index(None, "expires_s"),
)

# -- Web UI owner sessions signed out before they expired (ordinary mutable table; rows expire)

#: A session cookie is stateless (api/ui/session.py); signing out records its random id here,
#: shared by every worker, until the cookie would have expired (then the row is pruned).
ui_revoked_sessions = Table(
    "ui_revoked_sessions",
    metadata,
    Column("session", String(32), nullable=False),
    Column("agent", String(64), nullable=False),
    Column("expires_s", BigInteger, nullable=False),
    PrimaryKeyConstraint("session"),
    Index(None, "expires_s"),
)
